"""The parser in C: ``p4n_parse(p, F, S, data, dlen, &err) -> bytes parsed``, one label
per parse state and gotos between them -- the twin of `codegen.parser`.

Every read of the frame is bounds-checked first (a header longer than what is left
ends the parser with PacketTooShort, as in the Python engine and BMv2). A select key
is built in 128 bits, each field byte-aligned as BMv2 compares them.
"""

from __future__ import annotations

from typing import Any

from ..codegen.walk import dereferences, lookahead_bytes, shift_bits
from ..program import HeaderInfo
from .actions import CActions
from .context import CContext
from .expressions import CExpressions, bits, extract, lit, slot_of


class CParser:
    """The parser of one program."""

    def __init__(self, ctx: CContext, exprs: CExpressions, actions: CActions) -> None:
        self.ctx = ctx
        self.L = ctx.layout
        self.exprs = exprs
        self.actions = actions
        self.errors = self.L.errors

    def fail(self, code: str) -> str:
        """Statement ending the parser with error `code` at the current position."""
        return f"{{ *err = (int)({code}); return pos; }}"

    def emit(self, parser: dict) -> None:
        """Emit `p4n_parse`."""
        ctx = self.ctx
        states = parser.get("parse_states", [])
        self._ids = {st["name"]: i for i, st in enumerate(states)}
        ctx.emit("static uint32_t p4n_parse(p4n_pipeline *p, uint64_t *F, p4n_state *S, "
                 "const uint8_t *data, uint32_t dlen, int *err) {")
        ctx.emit("uint32_t pos = 0;", 1)
        ctx.emit("v_t k = 0;", 1)
        ctx.emit("(void)p; (void)S; (void)k; (void)data;", 1)
        init = parser.get("init_state")
        if init not in self._ids:
            ctx.emit("return 0;", 1)
        else:
            ctx.emit(f"goto ST{self._ids[init]};", 1)
        for st in states:
            with ctx.at(f"parse state {st['name']!r}"):
                ctx.emit(f"ST{self._ids[st['name']]}:", 0)
                self.state_body(st, 1)
        ctx.emit("}")
        ctx.emit("")

    def extract(self, h: HeaderInfo, ind: int) -> None:
        """Statements extracting fixed-size header `h` at `pos` and moving past it."""
        emit = self.ctx.emit
        emit(f"if (dlen - pos < {h.nbytes}) {self.fail(self.errors['PacketTooShort'])}", ind)
        off = 0
        for f in h.fields:
            emit(extract(slot_of(self.ctx, f), f"(uint64_t)pos * 8 + {off}"), ind)
            off += f.width
        self.validate(h, ind)
        emit(f"pos += {h.nbytes};", ind)

    def extract_vl(self, h: HeaderInfo, nbits: str, ind: int) -> None:
        """``extract_VL``: header `h` with a varbit field of `nbits` (code) bits, checked
        as `codegen.parser.Parser.extractor_vl` does (whole bytes, in the frame, within
        the header's max_length); the varbit's value right-aligned in its words and its
        length in its length slot, as the Python engine holds them."""
        emit, errs = self.ctx.emit, self.errors
        if h.fixed_bits % 8:
            raise self.ctx.unsupported(f"varbit header {h.name!r} with {h.fixed_bits} fixed bits "
                                       f"(not whole bytes)")
        emit(f"{{ v_t nb = {nbits};", ind)
        emit("if (nb < 0) { S->err = P4N_ERR_VARBIT; return pos; }", ind + 1)
        emit(f"if (p4n_mod(nb, 8)) {self.fail(errs['ParserInvalidArgument'])}", ind + 1)
        emit(f"v_t n = {h.fixed_bits // 8} + p4n_shr(nb, 3);", ind + 1)
        emit(f"if ((v_t)(dlen - pos) < n) {self.fail(errs['PacketTooShort'])}", ind + 1)
        emit(f"if ({h.max_length} < n) {self.fail(errs['HeaderTooShort'])}", ind + 1)
        emit("uint64_t o = (uint64_t)pos * 8;", ind + 1)
        for f in h.fields:
            words = self.ctx.words(f)
            if f.varbit:
                emit(f"{{ uint64_t w_[{len(words)}]; p4n_get_vl(data, dlen, o, w_, {len(words)}, "
                     f"(uint64_t)nb);", ind + 1)
                emit(" ".join(f"F[{w}] = w_[{i}];" for i, w in enumerate(words))
                     + f" F[{f.len_slot}] = (uint64_t)nb; o += (uint64_t)nb; }}", ind + 2)
            else:
                emit(f"{extract(slot_of(self.ctx, f), 'o')} o += {f.width};", ind + 1)
        self.validate(h, ind + 1)
        emit("pos += (uint32_t)n; }", ind + 1)

    def validate(self, h: HeaderInfo, ind: int) -> None:
        """Make an extracted header valid (and its union siblings invalid)."""
        self.ctx.emit(f"F[{h.valid_slot}] = 1;", ind)
        for sib in h.union_siblings:
            self.ctx.emit(f"F[{self.L.by_id[sib].valid_slot}] = 0;", ind)

    def extract_any(self, h: HeaderInfo, nbits: str | None, ind: int) -> None:
        """`extract` or `extract_vl`, as the header and the parser op say."""
        if nbits is not None and h.has_varbit:
            self.extract_vl(h, nbits, ind)
        elif h.has_varbit or nbits is not None:
            raise self.ctx.unsupported(f"extract{'_VL' if nbits is not None else ''} of header "
                                       f"{h.name!r} ({'with' if h.has_varbit else 'without'} a varbit field)")
        else:
            self.extract(h, ind)

    def parse_extract(self, target: dict, nbits: str | None, ind: int) -> None:
        """Extract into a header, or into the next element of a header stack (with a
        varbit length `nbits`, code, for ``extract_VL``)."""
        t, v = target["type"], target["value"]
        if t == "regular":
            self.extract_any(self.L.header(v), nbits, ind)
            return
        if t == "stack":
            st = self.exprs.stack(v)
            hids = st.header_ids
        elif t == "union_stack":
            st = self.exprs.stack(v[0])
            off = self.L.union_by_id[st.header_ids[0]].member_names.index(v[1])
            hids = [self.L.union_by_id[uid].header_ids[off] for uid in st.header_ids]
        else:
            raise self.ctx.unsupported(f"extract into a {t}")
        emit = self.ctx.emit
        emit(f"if (F[{st.count_slot}] >= {len(st.header_ids)}) "
             f"{self.fail(self.errors['StackOutOfBounds'])}", ind)
        emit(f"switch (F[{st.count_slot}]) {{", ind)
        for i, hid in enumerate(hids):
            emit(f"case {i}: {{", ind)
            self.extract_any(self.L.by_id[hid], nbits, ind + 1)
            emit("break; }", ind + 1)
        emit("}", ind)
        emit(f"F[{st.count_slot}] += 1;", ind)

    def stack_bounds(self, tree: Any, ind: int) -> None:
        """Before a parser op or select key reading a stack element chosen at run time:
        an index past the end stops the parser with StackOutOfBounds (as
        `codegen.parser.Parser.stack_bounds`)."""
        for v in dereferences(tree):
            st = self.exprs.stack(v["left"]["value"])
            self.ctx.emit(f"if ({self.exprs.expr(v['right'])} >= {len(st.header_ids)}) "
                          f"{self.fail(self.errors['StackOutOfBounds'])}", ind)

    def state_body(self, st: dict, ind: int) -> None:
        """Statements of one parse state; every path leaves with a goto or a return."""
        ctx, x, errs = self.ctx, self.exprs, self.errors
        emit = ctx.emit
        pte = errs["PacketTooShort"]
        for i, opd in enumerate(st.get("parser_ops", [])):
            with ctx.at(f"parser_ops[{i}]"):
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
                        emit(f"if (dlen - pos < {nbytes}) {self.fail(pte)}", ind)
                    emit(x.assign(ps[0], x.expr(src)), ind)
                elif op == "verify":
                    emit(f"if (!({x.expr(ps[0])})) {self.fail(x.expr(ps[1]))}", ind)
                elif op in ("advance", "shift"):
                    t = ctx.tmp()
                    if op == "shift":
                        emit(f"{{ v_t {t} = {shift_bits(ps[0])};", ind)
                    else:
                        emit(f"{{ v_t {t} = {x.expr(ps[0])};", ind)
                    emit(f"if (p4n_mod({t}, 8)) {self.fail(errs['ParserInvalidArgument'])}", ind + 1)
                    emit(f"if ((v_t)(dlen - pos) < p4n_shr({t}, 3)) {self.fail(pte)}", ind + 1)
                    emit(f"pos += (uint32_t)p4n_shr({t}, 3); }}", ind + 1)
                elif op == "primitive":
                    self.actions.primitive(ps[0], ind)
                else:
                    raise ctx.unsupported(f"parser op {op!r}")
        self.stack_bounds(st.get("transition_key", []), ind)
        width = self.select_key(st, ind)
        for tr in st.get("transitions", []):
            nxt = tr.get("next_state")
            go = "return pos;" if nxt is None else f"goto ST{self._target(nxt)};"
            ttype = tr.get("type", "hexstr")
            if ttype == "default":
                emit(go, ind)
                return
            mask = tr.get("mask")
            if ttype == "hexstr":
                val = int(tr["value"], 16)
                if mask is not None:
                    m = int(mask, 16)
                    emit(f"if ((k & {lit(m)}) == {lit(val & m)}) {go}", ind)
                else:
                    emit(f"if (k == {lit(val)}) {go}", ind)
            elif ttype == "parse_vset":
                if width > 64:
                    raise ctx.unsupported(f"a value set matched against a {width}-bit key")
                v = ctx.index(ctx.vset_ix, "parse value set", tr["value"])
                if mask is not None:
                    emit(f"if (p4n_vset_match_masked(&p->vsets[{v}], (uint64_t)k, "
                         f"{hex(int(mask, 16) & ((1 << 64) - 1))}ULL)) {go}", ind)
                else:
                    emit(f"if (p4n_vset_match(&p->vsets[{v}], (uint64_t)k)) {go}", ind)
            else:
                raise ctx.unsupported(f"transition of type {ttype!r}")
        emit("return pos;", ind)

    def _target(self, name: str) -> int:
        if name not in self._ids:
            raise self.ctx.unsupported(f"unknown next state {name!r}")
        return self._ids[name]

    def select_key(self, st: dict, ind: int) -> int:
        """Emit ``k = ...`` (fields byte-aligned); return the key's width in bits."""
        key = st.get("transition_key", [])
        if not key:
            return 0
        parts, widths = [], []
        for k in key:
            if k["type"] == "field":
                f = self.L.field(*k["value"])
                if f.varbit:
                    raise self.ctx.unsupported(f"select on varbit field {k['value']}")
                parts.append(f"(v_t){bits(slot_of(self.ctx, f))}")
                widths.append(f.width)
            elif k["type"] == "stack_field":
                slot = self.exprs.lvalue(k)
                parts.append(f"(v_t){bits(slot)}")
                widths.append(slot.width)
            elif k["type"] == "union_stack_field":
                st = self.exprs.stack(k["value"][0])
                u0 = self.L.union_by_id[st.header_ids[0]]
                moff = u0.member_names.index(k["value"][1])
                h0 = self.L.by_id[u0.header_ids[moff]]
                foff = [f.name for f in h0.fields].index(k["value"][2])
                f = h0.fields[foff]
                uid = self.exprs.stack_element(st, f"(v_t)F[{st.count_slot}] - 1")
                parts.append(f"(v_t){bits(self.exprs.hf_slot(f'p4n_uh[{uid}][{moff}]', h0, foff))}")
                widths.append(f.width)
            elif k["type"] == "lookahead":
                parts.append(self.exprs.expr(k))
                widths.append(int(k["value"][1]))
            else:
                raise self.ctx.unsupported(f"select key of type {k['type']!r}")
        total = sum((w + 7) // 8 for w in widths) * 8
        if total > 126:
            raise self.ctx.unsupported(f"a select key of {total} bits")
        terms, shift = [], total
        for code, w in zip(parts, widths):
            shift -= ((w + 7) // 8) * 8
            terms.append(f"p4n_shl({code}, {shift})" if shift else code)
        self.ctx.emit(f"k = {' | '.join(terms)};", ind)
        return total
