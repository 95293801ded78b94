"""The parser: ``PARSE(F, S, data) -> (bytes parsed, error code)``, the first stage of a
packet's way through the switch (then ingress, egress, the deparser).

Each parse state is a function ``P_<id>`` returning the next state and the position, and
``PARSE`` loops over them until a state returns None; a state entered by only one
transition is emitted inside its predecessor instead (`Parser.inline_states`), so the
usual Ethernet/IP/L4 chain is one call. Fixed-size headers are read with one
`struct.unpack_from` each (see `structs`); headers in stacks and headers with a varbit
field get extractor functions (``X_<id>``, ``XV_<id>``). A parser error raises
`phv.ParserException` with its code; ``PARSE`` returns that code for `parser_error`.
"""

from __future__ import annotations

from typing import Any

from ..errors import ProgramError
from ..program import HeaderInfo
from .actions import Actions
from .context import Context
from .expressions import Expressions, field_bits
from .structs import Structs
from .walk import dereferences, lookahead_bytes, shift_bits

#: Parse states nested inside their predecessor at most this deep (CPython allows at
#: most 100 indentation levels).
MAX_INLINE_DEPTH = 24


class Parser:
    """The parser of one program. `vset_keys` maps each parser value set to the widths
    of the key fields it is matched against (the value set pads values to them)."""

    def __init__(self, ctx: Context, exprs: Expressions, structs: Structs,
                 actions: Actions) -> None:
        self.ctx = ctx
        self.L = ctx.layout
        self.symbols = ctx.symbols
        self.exprs = exprs
        self.structs = structs
        self.actions = actions
        self.errors = self.L.errors
        self.vset_keys: dict[str, list[int]] = {}
        self._states: list[dict] = []      # parse states of the parser being emitted
        self._inline: set[str] = set()     # states emitted inside their predecessor

    def emit(self, parser: dict) -> None:
        """Emit the extractors, the parse states and `PARSE`."""
        ctx, L = self.ctx, self.L
        in_stacks = {hid for st in L.stacks.values() for hid in st.header_ids}
        for ust in L.union_stacks.values():
            for uid in ust.header_ids:
                in_stacks.update(L.union_by_id[uid].header_ids)
        for h in L.headers:
            if not h.metadata:
                if h.has_varbit:
                    self.extractor_vl(h)
                elif h.id in in_stacks:
                    self.extractor(h)
        for s in L.stacks.values():
            extractors = ", ".join(self.symbols.extractor(L.by_id[i]) for i in s.header_ids)
            ctx.emit(f"{self.symbols.stack_extractors(s.name)} = ({extractors},)")
        ctx.emit("")
        states = {st["name"]: st for st in parser.get("parse_states", [])}
        self._states = parser.get("parse_states", [])
        init = parser.get("init_state")
        self.inline_states(init)
        for st in parser.get("parse_states", []):
            if st["name"] not in self._inline:
                self.parse_state(st)
        start = self.symbols.parse_state(states[init]["id"]) if init in states else "None"
        ctx.emit(f"def {self.symbols.PARSE}(F, S, data):")
        ctx.emit(f"st = {start}", 1)
        ctx.emit("pos = 0", 1)
        ctx.emit("dlen = len(data)", 1)
        ctx.emit("try:", 1)
        ctx.emit("while st is not None:", 2)
        ctx.emit("st, pos = st(F, S, data, pos, dlen)", 3)
        ctx.emit("except _PE as exc:", 1)
        ctx.emit("return exc.pos, exc.code", 2)
        ctx.emit("return pos, 0", 1)
        ctx.emit("")

    # -- extracting headers -------------------------------------------------------
    def extract_lines(self, h: HeaderInfo, ind: int) -> None:
        """Statements extracting fixed-size header `h` at `pos` (not moving `pos`)."""
        emit = self.ctx.emit
        n = h.nbytes
        emit(f"if dlen - pos < {n}: raise _PE({self.errors['PacketTooShort']}, pos)", ind)
        st, chunks = self.structs.header_layout(h)
        names = [f"_u{i}" for i in range(sum(len(p) for p, _f in chunks))]
        if names:
            emit(f"{', '.join(names)}, = {st}.unpack_from(data, pos)", ind)
        k = 0
        for pieces, fields in chunks:
            parts = names[k:k + len(pieces)]
            k += len(pieces)
            if len(parts) == 1:
                chunk = parts[0]
            else:
                shift = sum(size for _c, size in pieces) * 8
                terms = []
                for (_c, size), part in zip(pieces, parts):
                    shift -= size * 8
                    terms.append(f"({part} << {shift})" if shift else part)
                chunk = "(" + " | ".join(terms) + ")"
            shift = sum(size for _c, size in pieces) * 8
            for f in fields:
                shift -= f.width
                if len(fields) == 1 and not shift:
                    val = chunk
                else:
                    val = f"({chunk} >> {shift}) & {hex(f.mask)}" if shift else f"{chunk} & {hex(f.mask)}"
                if f.signed:
                    val = f"_sx({val}, {f.width})"
                emit(f"F[{f.slot}] = {val}", ind)
        self.validate(h, ind)

    def validate(self, h: HeaderInfo, ind: int) -> None:
        """Statements marking an extracted `h` valid (and its union siblings invalid)."""
        self.ctx.emit(f"F[{h.valid_slot}] = True", ind)
        for sib in h.union_siblings:
            self.ctx.emit(f"F[{self.L.by_id[sib].valid_slot}] = False", ind)

    def extractor(self, h: HeaderInfo) -> None:
        """Emit `X_<hid>(F, data, pos, dlen) -> pos` (for stack elements)."""
        self.ctx.emit(f"def {self.symbols.extractor(h)}(F, data, pos, dlen):")
        self.extract_lines(h, 1)
        self.ctx.emit(f"return pos + {h.nbytes}", 1)
        self.ctx.emit("")

    def extractor_vl(self, h: HeaderInfo) -> None:
        """Emit `XV_<hid>(F, data, pos, dlen, nbits) -> pos` for a varbit header."""
        emit, errs = self.ctx.emit, self.errors
        emit(f"def {self.symbols.extractor(h)}(F, data, pos, dlen, nbits):")
        emit(f"if nbits % 8: raise _PE({errs['ParserInvalidArgument']}, pos)", 1)
        emit(f"n = {h.fixed_bits // 8} + (nbits >> 3)", 1)
        emit(f"if dlen - pos < n: raise _PE({errs['PacketTooShort']}, pos)", 1)
        emit(f"if {h.max_length} < n: raise _PE({errs['HeaderTooShort']}, pos)", 1)
        emit("v = int.from_bytes(data[pos:pos + n], 'big')", 1)
        emit("shift = n * 8", 1)
        for f in h.fields:
            if f.varbit:
                emit("shift -= nbits", 1)
                emit(f"F[{f.slot}] = (v >> shift) & ((1 << nbits) - 1)", 1)
                emit(f"F[{f.len_slot}] = nbits", 1)
            else:
                emit(f"shift -= {f.width}", 1)
                val = f"(v >> shift) & {hex(f.mask)}"
                if f.signed:
                    val = f"_sx({val}, {f.width})"
                emit(f"F[{f.slot}] = {val}", 1)
        self.validate(h, 1)
        emit("return pos + n", 1)
        emit("")

    def parse_extract(self, target: dict, nbits: str | None, ind: int) -> None:
        """Extract into a header, a stack or a union stack (fixed or varbit)."""
        emit, L, sym = self.ctx.emit, self.L, self.symbols
        t, v = target["type"], target["value"]
        if t == "regular":
            h = L.header(v)
            if nbits is None and not h.has_varbit:
                self.extract_lines(h, ind)
                emit(f"pos += {h.nbytes}", ind)
            elif nbits is None:
                raise ProgramError(f"header {h.name!r} has a varbit field: use extract_VL")
            else:
                emit(f"pos = {sym.extractor(h)}(F, data, pos, dlen, {nbits})", ind)
            return
        if t == "stack":
            s = self.exprs.stack(v)
            count_slot, size, extractors = s.count_slot, len(s.header_ids), sym.stack_extractors(s.name)
        elif t == "union_stack":
            us = L.union_stacks[v[0]]
            u0 = L.union_by_id[us.header_ids[0]]
            off = u0.member_names.index(v[1])
            hids = [L.union_by_id[uid].header_ids[off] for uid in us.header_ids]
            extractors = sym.union_stack_extractors(us.name, off)
            listed = ", ".join(sym.extractor(L.by_id[h]) for h in hids)
            self.ctx.late.append(f"{extractors} = ({listed},)")
            count_slot, size = us.count_slot, len(hids)
        else:
            raise ProgramError(f"unsupported extract target type {t!r}")
        emit(f"i = F[{count_slot}]", ind)
        emit(f"if i >= {size}: raise _PE({self.errors['StackOutOfBounds']}, pos)", ind)
        extra = "" if nbits is None else f", {nbits}"
        emit(f"pos = {extractors}[i](F, data, pos, dlen{extra})", ind)
        emit(f"F[{count_slot}] = i + 1", ind)

    # -- parse states -------------------------------------------------------------
    def parse_state(self, st: dict) -> None:
        """Emit `P_<id>` for a state that is not inlined into its only predecessor."""
        self.ctx.emit(f"def {self.symbols.parse_state(st['id'])}(F, S, data, pos, dlen):")
        self.state_body(st, 1)
        self.ctx.emit("")

    def inline_states(self, init: str | None) -> None:
        """Pick the states emitted inside their predecessor instead of as functions:
        those entered by exactly one transition from another state (outside cycles),
        which saves a call per state on the usual Ethernet/IP/L4 chains."""
        indegree: dict[str, int] = {st["name"]: 0 for st in self._states}
        pred: dict[str, str] = {}
        if init in indegree:
            indegree[init] += 1
        for st in self._states:
            for tr in st.get("transitions", []):
                nxt = tr.get("next_state")
                if nxt in indegree:
                    indegree[nxt] += 1
                    pred[nxt] = st["name"]
        inline = {n for n, d in indegree.items() if d == 1 and n in pred and pred[n] != n}
        for n in list(inline):
            seen, cur = set(), n
            while cur in inline and cur not in seen:
                seen.add(cur)
                cur = pred[cur]
            if cur in seen:           # a cycle made only of inlinable states
                inline -= seen

        def depth(n: str) -> int:
            d = 0
            while n in inline:
                d += 1
                n = pred[n]
            return d
        # every inlined state nests one `if` deeper: stay far below Python's limit
        while True:
            deep = [n for n in inline if depth(n) > MAX_INLINE_DEPTH]
            if not deep:
                break
            inline.discard(min(deep, key=depth))
        self._inline = inline

    def state_body(self, st: dict, ind: int) -> None:
        """Statements of one parse state at indentation `ind`; every path returns."""
        emit, x, errs = self.ctx.emit, self.exprs, self.errors
        pte = errs["PacketTooShort"]
        for opd in st.get("parser_ops", []):
            op = opd["op"]
            ps = opd.get("parameters", [])
            self.stack_bounds(ps, ind)
            if op == "extract":
                self.parse_extract(ps[0], None, ind)
            elif op == "extract_VL":
                self.parse_extract(ps[0], x.expr(ps[1]), ind)
            elif op == "set":
                src = ps[1]
                nbytes = lookahead_bytes(src)
                if nbytes is not None:
                    emit(f"if dlen - pos < {nbytes}: raise _PE({pte}, pos)", ind)
                emit(x.assign(ps[0], x.expr(src)), ind)
            elif op == "verify":
                emit(f"if not {x.expr(ps[0])}: raise _PE({x.expr(ps[1])}, pos)", ind)
            elif op in ("advance", "shift"):
                t = self.ctx.tmp()
                if op == "shift":
                    emit(f"{t} = {shift_bits(ps[0])}", ind)
                else:
                    emit(f"{t} = {x.expr(ps[0])}", ind)
                emit(f"if {t} % 8: raise _PE({errs['ParserInvalidArgument']}, pos)", ind)
                emit(f"if dlen - pos < ({t} >> 3): raise _PE({pte}, pos)", ind)
                emit(f"pos += {t} >> 3", ind)
            elif op == "primitive":
                self.actions.primitive(ps[0], ind)
            else:
                raise ProgramError(f"parse state {st['name']!r}: unsupported parser op {op!r}")
        by_name = {s["name"]: s for s in self._states}

        def target(tr: dict) -> dict | None:
            nxt = tr.get("next_state")
            if nxt is None:
                return None
            if nxt not in by_name:
                raise ProgramError(f"parse state {st['name']!r}: unknown next state {nxt!r}")
            return by_name[nxt]

        def go(tr: dict, cond: str | None) -> None:
            """Transition to `tr`'s state when `cond` holds (always when None)."""
            nxt = target(tr)
            inline = nxt is not None and nxt["name"] in self._inline
            ret = f"return {'None' if nxt is None else self.symbols.parse_state(nxt['id'])}, pos"
            if cond is None:
                if inline:
                    self.state_body(nxt, ind)
                else:
                    emit(ret, ind)
                return
            if inline:
                emit(f"if {cond}:", ind)
                self.state_body(nxt, ind + 1)
            else:
                emit(f"if {cond}: {ret}", ind)

        self.stack_bounds(st.get("transition_key", []), ind)
        widths = self.select_key(st, ind)
        for tr in st.get("transitions", []):
            ttype = tr.get("type", "hexstr")
            if ttype == "default":
                go(tr, None)
                return
            mask = tr.get("mask")
            if ttype == "hexstr":
                val = int(tr["value"], 16)
                if mask is not None:
                    m = int(mask, 16)
                    go(tr, f"(k & {m}) == {val & m}")
                else:
                    go(tr, f"k == {val}")
            elif ttype == "parse_vset":
                vname = tr["value"]
                self.ctx.declared(self.ctx.value_sets, "parse value set", vname)
                obj = self.symbols.value_set(vname)
                self.vset_keys.setdefault(vname, widths)
                if mask is not None:
                    go(tr, f"{obj}.match_masked(k, {int(mask, 16)})")
                else:
                    go(tr, f"{obj}.match(k)")
            else:
                raise ProgramError(f"parse state {st['name']!r}: unsupported transition {ttype!r}")
        emit("return None, pos", ind)

    def stack_bounds(self, tree: Any, ind: int) -> None:
        """Before a parser op or select key that reads a stack element chosen at run
        time (``hs[i]``): an index past the end refers to no element, which core.p4
        names error.StackOutOfBounds, so the parser stops with it (P4-16 leaves such
        an access undefined; BMv2 would index past its vector)."""
        err = self.errors["StackOutOfBounds"]
        for v in dereferences(tree):
            name = v["left"]["value"]
            if v["op"] == "dereference_union_stack":
                size = len(self.L.union_stacks[name].header_ids)
            else:
                size = len(self.exprs.stack(name).header_ids)
            self.ctx.emit(f"if {self.exprs.expr(v['right'])} >= {size}: raise _PE({err}, pos)", ind)

    def select_key(self, st: dict, ind: int) -> list[int]:
        """Emit ``k = ...``, the state's select key (each field byte-aligned, as BMv2
        compares them); return the key fields' widths ([] without a key)."""
        key = st.get("transition_key", [])
        if not key:
            return []
        L = self.L
        parts = []
        widths = []
        for k in key:
            if k["type"] == "field":
                f = L.field(*k["value"])
                code = field_bits(f)
                widths.append(f.width)
            elif k["type"] == "stack_field":
                code, width, signed = self.exprs.lvalue(k)
                code = f"({code} & {hex((1 << width) - 1)})" if signed else code
                widths.append(width)
            elif k["type"] == "lookahead":
                code = self.exprs.expr(k)
                widths.append(int(k["value"][1]))
            elif k["type"] == "union_stack_field":
                ust = L.union_stacks[k["value"][0]]
                u0 = L.union_by_id[ust.header_ids[0]]
                moff = u0.member_names.index(k["value"][1])
                h0 = L.by_id[u0.header_ids[moff]]
                foff = [f.name for f in h0.fields].index(k["value"][2])
                f = h0.fields[foff]
                code = (f"F[HF[UH[{self.symbols.union_stack(ust.name)}[F[{ust.count_slot}] - 1]]"
                        f"[{moff}]][{foff}]]" + (f" & {hex(f.mask)}" if f.signed else ""))
                widths.append(f.width)
            else:
                raise ProgramError(f"parse state {st['name']!r}: unsupported key {k['type']!r}")
            parts.append(code)
        total = sum((w + 7) // 8 for w in widths) * 8
        terms = []
        shift = total
        for code, w in zip(parts, widths):
            shift -= ((w + 7) // 8) * 8
            terms.append(f"({code} << {shift})" if shift else f"({code})")
        self.ctx.emit(f"k = {' | '.join(terms)}", ind)
        return widths
