"""Turn a BMv2 JSON program into Python source, compiled once at load time.

Every parser state, action, conditional, table node, calculation, checksum and the
deparser becomes a plain Python function working on the flat PHV list `F` (see
`program.Layout`), so the per-packet work is straight-line code with constant slot
indexes: no expression tree is walked per packet. `Generator.source()` returns the
source text; `V1Switch` executes it in a namespace holding the runtime objects the code
refers to (tables, extern arrays, hash functions, `phv` helpers).
"""

from __future__ import annotations

import itertools
import struct
from typing import Any

from . import hashes, phv
from .errors import P4AssertionError, ProgramError
from .program import HeaderInfo, Layout
from .tables import lookup_mode

#: Parse states nested inside their predecessor at most this deep (CPython allows at
#: most 100 indentation levels).
MAX_INLINE_DEPTH = 24
#: Control nodes continued inside their predecessor at most this deep: bounds the
#: nesting of fused conditionals and the code a long chain of nodes repeats (each
#: node's function continues into at most this many successors).
MAX_FUSE_DEPTH = 8


def _pieces(nbytes: int) -> list[tuple[str, int]]:
    """`struct` items (code, bytes) covering `nbytes` bytes, widest first."""
    out = []
    for size, code in ((8, "Q"), (4, "I"), (2, "H"), (1, "B")):
        while nbytes >= size:
            out.append((code, size))
            nbytes -= size
    return out


def _pack_args(chunks: list, terms: list[list[tuple[str, int]]]) -> list[str]:
    """`struct.pack` arguments: each chunk's terms (code, bit width) joined into one
    value (left-aligned in the chunk's bytes), then cut into the chunk's items."""
    args = []
    for (pieces, _fields), chunk_terms in zip(chunks, terms):
        total = sum(size for _c, size in pieces) * 8
        shift = total
        parts = []
        for code, width in chunk_terms:
            shift -= width
            parts.append(f"(({code}) << {shift})" if shift else f"({code})")
        chunk = parts[0] if len(parts) == 1 else "(" + " | ".join(parts) + ")"
        if len(pieces) == 1:
            args.append(chunk)
            continue
        shift = total
        for _c, size in pieces:
            shift -= size * 8
            args.append(f"({chunk} >> {shift}) & {hex((1 << size * 8) - 1)}" if shift
                        else f"{chunk} & {hex((1 << size * 8) - 1)}")
    return args


def _ident(name: str) -> str:
    """A Python identifier fragment for a P4 name; injective (every character that is not
    an ASCII letter or digit becomes `_` plus its code), so names never collide."""
    return "".join(c if c.isascii() and c.isalnum() else f"_{ord(c):x}_" for c in name)


class Generator:
    """Emit the Python source for one BMv2 JSON program.

    `env` is the namespace the code will run in; the generator adds to it the
    constants it needs (stack tables, hash functions...) and records, for the
    caller, which runtime objects must be bound under which names.
    """

    def __init__(self, js: dict[str, Any], layout: Layout, env: dict[str, Any],
                 hash_factory: Any) -> None:
        self.js = js
        self.L = layout
        self.env = env
        self.hash_factory = hash_factory
        self.out: list[str] = []
        self._tmp = itertools.count()
        self.calcs = {c["name"]: c for c in js.get("calculations", [])}
        self.counters = {c["name"]: c for c in js.get("counter_arrays", [])}
        self.meters = {m["name"]: m for m in js.get("meter_arrays", [])}
        self.registers = {r["name"]: r for r in js.get("register_arrays", [])}
        self.vsets = {v["name"]: v for v in js.get("parse_vsets", [])}
        self.actions = {a["id"]: a for a in js.get("actions", [])}
        self._layouts: dict[str, list] = {}  # struct name -> chunks (see header_layout)
        self._packers: dict[str, str] = {}  # struct format -> name (see packer)
        self.hdr_ops = phv.HeaderOps(layout)
        self.late: list[str] = []          # module-level lines emitted after all functions
        self._states: list[dict] = []      # parse states of the parser being emitted
        self._inline: set[str] = set()     # states emitted inside their predecessor
        self.vset_keys: dict[str, list[int]] = {}   # value set -> key field widths
        env.update(_sx=phv.sx, _usat=phv.usat, _sat=phv.sat, _peek=phv.peek, _rng=phv.rng,
                   _shl=phv.shl, _PE=phv.ParserException, _Exit=phv.ExitPipeline,
                   _HO=self.hdr_ops, _log_msg=phv.log_msg, _AssertFail=P4AssertionError)
        env["HF"] = {h.id: tuple(f.slot for f in h.fields) for h in layout.headers}
        env["HV"] = {h.id: h.valid_slot for h in layout.headers}
        for s in layout.stacks.values():
            env["STK_" + _ident(s.name)] = tuple(s.header_ids)
        env["UH"] = {uid: tuple(u.header_ids) for uid, u in layout.union_by_id.items()}
        union_ids = {u.name: uid for uid, u in layout.union_by_id.items()}
        for s in layout.union_stacks.values():
            env["USTK_" + _ident(s.name)] = tuple(s.header_ids)
        self._union_ids = union_ids
        self.std = {n: layout.find_field("standard_metadata." + n) for n in (
            "egress_spec", "mcast_grp", "parser_error")}
        mcast = layout.find_field("intrinsic_metadata.mcast_grp")
        if mcast is not None:
            self.std["mcast_grp"] = mcast

    # -- small utilities --------------------------------------------------------
    def tmp(self) -> str:
        """A fresh local variable name."""
        return f"_t{next(self._tmp)}"

    def emit(self, line: str, indent: int = 0) -> None:
        """Append one source line at indentation `indent`."""
        self.out.append("    " * indent + line)

    # -- headers ----------------------------------------------------------------
    def href(self, tv: dict) -> tuple[bool, str, HeaderInfo]:
        """(is_static, code giving the header id, a header of the right type)."""
        t, v = tv["type"], tv["value"]
        if t in ("header", "regular"):
            h = self.L.header(v)
            return True, str(h.id), h
        if t == "expression":
            if "op" not in v:
                return self.href(v)
            op = v["op"]
            if op in ("dereference_header_stack", "dereference_stack"):
                stack = self.stack(v["left"]["value"])
                idx = self.expr(v["right"])
                return False, f"STK_{_ident(stack.name)}[{idx}]", self.L.by_id[stack.header_ids[0]]
            if op == "access_union_header":
                ucode, sample = self.uref(v["left"])
                off = int(v["right"])
                hid = sample.header_ids[off]
                if ucode.isdigit():
                    return True, str(hid), self.L.by_id[hid]
                return False, f"UH[{ucode}][{off}]", self.L.by_id[hid]
        raise ProgramError(f"expected a header reference, got {tv!r}")

    def uref(self, tv: dict):
        """(code giving the union id, a union of the right type)."""
        t, v = tv["type"], tv["value"]
        if t in ("header_union", "union"):
            u = self.L.unions.get(v)
            if u is None:
                raise ProgramError(f"unknown header union {v!r}")
            return str(self._union_ids[v]), u
        if t == "expression" and "op" not in v:
            return self.uref(v)
        if t == "expression" and v["op"] == "dereference_union_stack":
            st = self.L.union_stacks[v["left"]["value"]]
            idx = self.expr(v["right"])
            return f"USTK_{_ident(st.name)}[{idx}]", self.L.union_by_id[st.header_ids[0]]
        raise ProgramError(f"expected a header union reference, got {tv!r}")

    def stack(self, name: str):
        """Header stack by name, or ProgramError."""
        try:
            return self.L.stacks[name]
        except KeyError:
            raise ProgramError(f"unknown header stack {name!r}") from None

    def valid_code(self, tv: dict) -> str:
        """Source reading the validity of a header reference."""
        static, code, h = self.href(tv)
        return f"F[{self.L.by_id[int(code)].valid_slot}]" if static else f"F[HV[{code}]]"

    # -- expressions ------------------------------------------------------------
    def lvalue(self, tv: dict) -> tuple[str, int, bool]:
        """(assignable code, width, signed) for a field-like destination."""
        t, v = tv["type"], tv["value"]
        if t == "field":
            f = self.L.field(v[0], v[1])
            return f"F[{f.slot}]", f.width, f.signed
        if t == "expression":
            if "op" not in v:
                return self.lvalue(v)
            if v["op"] == "access_field":
                static, code, h = self.href(v["left"])
                f = h.fields[int(v["right"])]
                if static:
                    return f"F[{self.L.by_id[int(code)].fields[int(v['right'])].slot}]", f.width, f.signed
                return f"F[HF[{code}][{int(v['right'])}]]", f.width, f.signed
        if t == "stack_field":
            st = self.stack(v[0])
            h = self.L.by_id[st.header_ids[0]]
            off = [f.name for f in h.fields].index(v[1])
            f = h.fields[off]
            return (f"F[HF[STK_{_ident(st.name)}[F[{st.count_slot}] - 1]][{off}]]",
                    f.width, f.signed)
        raise ProgramError(f"expected a field destination, got {tv!r}")

    def varbit_ref(self, tv: dict) -> tuple[str, str]:
        """(code for the value, code for the bit length) of a varbit field reference:
        a named field, or a field of a header chosen at run time (``stack[i].f``)."""
        t, v = tv["type"], tv["value"]
        if t == "field":
            f = self.L.field(v[0], v[1])
            if not f.varbit:
                raise ProgramError(f"field {v[0]}.{v[1]} is not a varbit field")
            return f"F[{f.slot}]", f"F[{f.len_slot}]"
        if t == "expression" and "op" not in v:
            return self.varbit_ref(v)
        if t == "expression" and v["op"] == "access_field":
            static, code, h = self.href(v["left"])
            off = int(v["right"])
            if not h.fields[off].varbit:
                raise ProgramError(f"field {off} of header type {h.type_name!r} is not a varbit field")
            if static:
                f = self.L.by_id[int(code)].fields[off]
                return f"F[{f.slot}]", f"F[{f.len_slot}]"
            return f"F[HF[{code}][{off}]]", f"F[HF[{code}][{off}] + 1]"
        raise ProgramError(f"expected a varbit field, got {tv!r}")

    def assign(self, dst: dict, src: str) -> str:
        """Statement storing `src` into `dst`, truncated (or sign-wrapped) to its width."""
        code, width, signed = self.lvalue(dst)
        if signed:
            return f"{code} = _sx({src}, {width})"
        return f"{code} = ({src}) & {hex((1 << width) - 1)}"

    def expr(self, tv: Any) -> str:
        """Python source for a BMv2 type-value object (data or boolean)."""
        if not isinstance(tv, dict):
            raise ProgramError(f"expected an expression object, got {tv!r}")
        t = tv.get("type")
        v = tv.get("value")
        if t == "field":
            return self.lvalue(tv)[0]
        if t == "hexstr":
            n = int(v, 16)
            return f"({n})" if n < 0 else str(n)
        if t == "bool":
            return "True" if v else "False"
        if t in ("runtime_data", "local"):
            return f"d[{int(v)}]"
        if t == "stack_field":
            return self.lvalue(tv)[0]
        if t == "lookahead":
            return f"_peek(data, pos, {int(v[0])}, {int(v[1])})"
        if t == "string":
            return repr(v)
        if t == "register":
            reg = self.register(v[0])
            return f"{reg}[{self.expr(v[1])}]"
        if t == "expression":
            if "op" not in v:
                return self.expr(v)
            return self.op(v)
        raise ProgramError(f"unsupported expression operand type {t!r}")

    def op(self, v: dict) -> str:
        """Source for one expression operator node."""
        op = v["op"]
        left, right = v.get("left"), v.get("right")
        if op == "<<" and right.get("type") != "hexstr":
            return f"_shl({self.expr(left)}, {self.expr(right)})"
        if op in ("+", "-", "*", "<<", ">>", "&", "|", "^"):
            return f"({self.expr(left)} {op} {self.expr(right)})"
        if op == "/":
            return f"({self.expr(left)} // {self.expr(right)})"
        if op == "%":
            return f"({self.expr(left)} % {self.expr(right)})"
        if op in ("==", "!=") and self.operand_kind(left) != "data":
            # BMv2 picks the comparison from the operand type: headers and unions
            # compare validity and fields
            op += "h" if self.operand_kind(left) == "header" else "u"
        if op in ("==", "!=", ">", "<", ">=", "<="):
            return f"({self.expr(left)} {op} {self.expr(right)})"
        if op in ("==b", "!=b"):
            return f"({self.expr(left)} {op[:2]} {self.expr(right)})"
        if op in ("==h", "!=h"):
            _s1, c1, _h1 = self.href(left)
            _s2, c2, _h2 = self.href(right)
            neg = "not " if op == "!=h" else ""
            return f"({neg}_HO.equal(F, {c1}, {c2}))"
        if op in ("==u", "!=u"):
            u1, s1 = self.uref(left)
            u2, _ = self.uref(right)
            n = len(s1.header_ids)
            eq = " and ".join(f"_HO.equal(F, UH[{u1}][{i}], UH[{u2}][{i}])" for i in range(n))
            return f"({'not ' if op == '!=u' else ''}({eq or 'True'}))"
        if op == "and":
            return f"({self.expr(left)} and {self.expr(right)})"
        if op == "or":
            return f"({self.expr(left)} or {self.expr(right)})"
        if op == "not":
            return f"(not {self.expr(right)})"
        if op == "~":
            return f"(~{self.expr(right)})"
        if op == "valid":
            return f"bool({self.valid_code(right)})"
        if op == "valid_union":
            ucode, sample = self.uref(right)
            n = len(sample.header_ids)
            return "(" + " or ".join(f"bool(F[HV[UH[{ucode}][{i}]]])" for i in range(n)) + ")"
        if op == "?":
            return f"({self.expr(left)} if {self.expr(v['cond'])} else {self.expr(right)})"
        if op == "two_comp_mod":
            return f"_sx({self.expr(left)}, {self.expr(right)})"
        if op == "usat_cast":
            return f"_usat({self.expr(left)}, {self.expr(right)})"
        if op == "sat_cast":
            return f"_sat({self.expr(left)}, {self.expr(right)})"
        if op == "d2b":
            return f"({self.expr(right)} != 0)"
        if op == "b2d":
            return f"(1 if {self.expr(right)} else 0)"
        if op == "last_stack_index":
            return f"(F[{self.stack(right['value']).count_slot}] - 1)"
        if op == "size_stack":
            return f"F[{self.stack(right['value']).count_slot}]"
        if op == "access_field":
            return self.lvalue({"type": "expression", "value": v})[0]
        raise ProgramError(f"unsupported expression operator {op!r}")

    @staticmethod
    def operand_kind(tv: dict) -> str:
        """"header", "union" or "data": what an operand of ``==``/``!=`` denotes."""
        t, v = tv.get("type"), tv.get("value")
        if t in ("header", "regular"):
            return "header"
        if t in ("header_union", "union"):
            return "union"
        if t == "expression" and isinstance(v, dict):
            op = v.get("op")
            if op is None:
                return Generator.operand_kind(v)
            if op in ("dereference_header_stack", "dereference_stack", "access_union_header"):
                return "header"
            if op == "dereference_union_stack":
                return "union"
        return "data"

    # -- extern arrays ----------------------------------------------------------
    def register(self, name: str) -> str:
        """Name bound to a register array's cell list."""
        if name not in self.registers:
            raise ProgramError(f"unknown register array {name!r}")
        return "REG_" + _ident(name)

    def calculation(self, name: str) -> str:
        """Name of the generated function computing calculation `name`."""
        if name not in self.calcs:
            raise ProgramError(f"unknown calculation {name!r}")
        return "CALC_" + _ident(name)

    def all_calculations(self) -> None:
        """Emit every named calculation up front (they are called from anywhere)."""
        for name, calc in self.calcs.items():
            self.hash_function("CALC_" + _ident(name), calc["algo"], calc.get("input", []), name)

    def hash_function(self, fname: str, algo: str, inputs: list, name: str) -> None:
        """Emit `fname(F, S) -> int`: BufBuilder serialisation then the hash."""
        hname = "H_" + fname
        self.env[hname] = self.hash_factory(algo, name)
        body: list[str] = ["v = 0", "n = 0"]
        payload = False
        runs: list[list] = []   # [valid slot or None, [(term, width)...]]
        for item in inputs:
            t = item["type"]
            if t == "field":
                hdr = self.L.header(item["value"][0])
                f = self.L.field(item["value"][0], item["value"][1])
                term = f"F[{f.slot}]" + (f" & {hex(f.mask)}" if f.signed else "")
                guard = None if hdr.metadata or item["value"][1] == "$valid$" else hdr.valid_slot
                terms = [(term, f.width)]
            elif t == "hexstr":
                width = int(item["bitwidth"])
                guard, terms = None, [(str(int(item["value"], 16) & ((1 << width) - 1)), width)]
            elif t == "header":
                hdr = self.L.header(item["value"])
                if hdr.has_varbit:
                    raise ProgramError(f"calculation {name!r}: varbit header input unsupported")
                guard = hdr.valid_slot
                terms = [(f"F[{f.slot}]" + (f" & {hex(f.mask)}" if f.signed else ""), f.width)
                         for f in hdr.fields]
            elif t == "payload":
                payload = True
                continue
            else:
                raise ProgramError(f"calculation {name!r}: unsupported input type {t!r}")
            if runs and runs[-1][0] == guard:
                runs[-1][1].extend(terms)
            else:
                runs.append([guard, terms])
        if all(sum(w for _t, w in terms) % 8 == 0 for _g, terms in runs):
            self.hash_function_packed(fname, hname, algo, runs, payload)
            return
        for guard, terms in runs:
            total = sum(w for _t, w in terms)
            parts = [f"(v << {total})"]
            shift = total
            for term, w in terms:
                shift -= w
                parts.append(f"(({term}) << {shift})" if shift else f"({term})")
            step = [f"v = {' | '.join(parts)}", f"n += {total}"]
            if guard is None:
                body += step
            else:
                body.append(f"if F[{guard}]:")
                body += ["    " + line for line in step]
        if algo in ("csum16", "cksum16") and not payload:
            # zero padding to whole 16-bit words, then one modulo (hashes.csum16_int)
            self.env[hname] = hashes.csum16_int
            body.append(f"return {hname}(v << (-n & 15))")
        else:
            body.append("pad = -n & 7")
            body.append("buf = (v << pad).to_bytes((n + pad) >> 3, 'big')")
            if payload:
                body.append("buf += S.payload")
            body.append(f"return {hname}(buf)")
        self.emit_hash_def(fname, body)

    def hash_function_packed(self, fname: str, hname: str, algo: str, runs: list,
                             payload: bool) -> None:
        """`hash_function` when every run of inputs is whole bytes: `struct` packs
        them (much cheaper than shifting one big integer together)."""
        body: list[str] = []
        if len(runs) == 1 and runs[0][0] is None:
            st, args = self.packer(runs[0][1])
            body.append(f"buf = {st}.pack({args})")
        else:
            body.append("parts = []")
            for guard, terms in runs:
                st, args = self.packer(terms)
                line = f"parts.append({st}.pack({args}))"
                if guard is None:
                    body.append(line)
                else:
                    body += [f"if F[{guard}]:", "    " + line]
            body.append("buf = b''.join(parts)")
        if algo in ("csum16", "cksum16") and not payload:
            # zero padding to whole 16-bit words, then one modulo (hashes.csum16_int)
            self.env[hname] = hashes.csum16_int
            body.append("v = int.from_bytes(buf, 'big')")
            body.append(f"return {hname}(v << 8 if len(buf) & 1 else v)")
        else:
            if payload:
                body.append("buf += S.payload")
            body.append(f"return {hname}(buf)")
        self.emit_hash_def(fname, body)

    def emit_hash_def(self, fname: str, body: list[str]) -> None:
        """Emit ``def fname(F, S)`` with ``body`` (the two hash-function builders' tail)."""
        self.emit(f"def {fname}(F, S):")
        for line in body:
            self.emit(line, 1)
        self.emit("")

    # -- primitives ---------------------------------------------------------------
    def primitive(self, p: dict, ind: int) -> None:
        """Emit the statements of one primitive call at indentation `ind`."""
        op = p["op"]
        ps = p.get("parameters", [])
        e = self.expr
        if op in ("assign", "modify_field"):
            self.emit(self.assign(ps[0], e(ps[1])), ind)
        elif op == "assign_VL":
            dst_data, dst_len = self.varbit_ref(ps[0])
            src_data, src_len = self.varbit_ref(ps[1])
            self.emit(f"{dst_data} = {src_data}", ind)
            self.emit(f"{dst_len} = {src_len}", ind)
        elif op in ("assign_header", "copy_header"):
            _s, dcode, _h = self.href(ps[0])
            _s2, scode, _h2 = self.href(ps[1])
            self.emit(f"_HO.copy(F, {dcode}, {scode})", ind)
        elif op == "assign_union":
            d, sample = self.uref(ps[0])
            s, _ = self.uref(ps[1])
            for i in range(len(sample.header_ids)):
                self.emit(f"_HO.copy(F, UH[{d}][{i}], UH[{s}][{i}])", ind)
        elif op == "assign_header_stack":
            dst = self.stack(ps[0]["value"])
            src = self.stack(ps[1]["value"])
            for dh, sh in zip(dst.header_ids, src.header_ids):
                self.emit(f"_HO.copy(F, {dh}, {sh})", ind)
            self.emit(f"F[{dst.count_slot}] = F[{src.count_slot}]", ind)
        elif op == "assign_union_stack":
            dst = self.L.union_stacks[ps[0]["value"]]
            src = self.L.union_stacks[ps[1]["value"]]
            for du, su in zip(dst.header_ids, src.header_ids):
                for dh, sh in zip(self.L.union_by_id[du].header_ids,
                                  self.L.union_by_id[su].header_ids):
                    self.emit(f"_HO.copy(F, {dh}, {sh})", ind)
            self.emit(f"F[{dst.count_slot}] = F[{src.count_slot}]", ind)
        elif op in ("push", "pop"):
            name = ps[0]["value"]
            fn = "push_front" if op == "push" else "pop_front"
            if name in self.L.union_stacks:
                st = self.L.union_stacks[name]
                elements = tuple(tuple(self.L.union_by_id[u].header_ids) for u in st.header_ids)
            else:
                st = self.stack(name)
                elements = tuple((h,) for h in st.header_ids)
            self.emit(f"_HO.{fn}(F, {elements!r}, {st.count_slot}, {e(ps[1])})", ind)
        elif op in ("add_header", "add_header_fast"):
            static, code, _h = self.href(ps[0])
            if op == "add_header_fast":
                self.emit(f"F[HV[{code}]] = True", ind)
            else:
                self.emit(f"_HO.set_valid(F, S, {code})", ind)
        elif op == "remove_header":
            _s, code, _h = self.href(ps[0])
            self.emit(f"_HO.set_invalid(F, S, {code})", ind)
        elif op in ("mark_to_drop", "drop"):
            self.emit(f"F[{self._std('egress_spec').slot}] = 511", ind)
            if self.std.get("mcast_grp") is not None:
                self.emit(f"F[{self.std['mcast_grp'].slot}] = 0", ind)
        elif op == "exit":
            # BMv2 finishes the action, then skips the rest of the pipeline
            self.emit("ex = True", ind)
        elif op == "no_op":
            self.emit("pass", ind)
        elif op == "log_msg":
            values = ps[1]["value"] if len(ps) > 1 else []
            args = "".join(f"{e(v)}, " for v in values)
            self.emit(f"_log_msg({e(ps[0])}, ({args}))", ind)
        elif op in ("assert", "assume"):
            self.emit(f"if not {e(ps[0])}: raise _AssertFail({op!r} + ' failed')", ind)
        elif op == "count":
            name = ps[0]["value"]
            if name not in self.counters:
                raise ProgramError(f"unknown counter array {name!r}")
            t = self.tmp()
            cid = _ident(name)
            self.emit(f"{t} = {e(ps[1])}", ind)
            self.emit(f"if {t} < {int(self.counters[name]['size'])}:", ind)
            self.emit(f"CP_{cid}[{t}] += 1; CB_{cid}[{t}] += S.ilen", ind + 1)
        elif op == "execute_meter":
            name = ps[0]["value"]
            if name not in self.meters:
                raise ProgramError(f"unknown meter array {name!r}")
            t = self.tmp()
            self.emit(f"{t} = MTR_{_ident(name)}.execute({e(ps[1])}, S.ilen)", ind)
            self.emit(f"if {t} is not None:", ind)
            self.emit(self.assign(ps[2], t), ind + 1)
        elif op == "register_read":
            name = ps[1]["value"]
            reg = self.register(name)
            t = self.tmp()
            self.emit(f"{t} = {e(ps[2])}", ind)
            self.emit(f"if {t} < {int(self.registers[name]['size'])}:", ind)
            self.emit(self.assign(ps[0], f"{reg}[{t}]"), ind + 1)
        elif op == "register_write":
            name = ps[0]["value"]
            reg = self.register(name)
            t = self.tmp()
            width = int(self.registers[name]["bitwidth"])
            self.emit(f"{t} = {e(ps[1])}", ind)
            self.emit(f"if {t} < {int(self.registers[name]['size'])}:", ind)
            self.emit(f"{reg}[{t}] = ({e(ps[2])}) & {hex((1 << width) - 1)}", ind + 1)
        elif op == "modify_field_with_hash_based_offset":
            calc = self.calculation(ps[2]["value"])
            t = self.tmp()
            self.emit(f"{t} = {e(ps[3])}", ind)
            self.emit(self.assign(ps[0], f"({calc}(F, S) % ({t} or 1)) + {e(ps[1])}"), ind)
        elif op == "modify_field_rng_uniform":
            self.emit(self.assign(ps[0], f"_rng({e(ps[1])}, {e(ps[2])})"), ind)
        elif op in ("clone_ingress_pkt_to_egress", "clone_egress_pkt_to_egress"):
            fl = e(ps[1]) if len(ps) > 1 else "0"
            self.emit(f"S.clone = ({e(ps[0])}) & 0xFFFF; S.clone_fl = ({fl}) & 0xFFFF", ind)
        elif op in ("resubmit", "resubmit_preserving_field_list"):
            fl = e(ps[0]) if ps else "0"
            self.emit(f"S.resubmit = ({fl}) & 0xFFFF", ind)
        elif op in ("recirculate", "recirculate_preserving_field_list"):
            fl = e(ps[0]) if ps else "0"
            self.emit(f"S.recirc = ({fl}) & 0xFFFF", ind)
        elif op == "generate_digest":
            self.emit(f"S.learn = ({e(ps[1])}) & 0xFFFF", ind)
        elif op == "truncate":
            t = self.tmp()
            self.emit(f"{t} = {e(ps[0])}", ind)
            self.emit(f"S.trunc = {t} if S.trunc is None or {t} < S.trunc else S.trunc", ind)
        elif op in ("add_to_field", "subtract_from_field"):
            sign = "+" if op == "add_to_field" else "-"
            code, _w, _s = self.lvalue(ps[0])
            self.emit(self.assign(ps[0], f"{code} {sign} {e(ps[1])}"), ind)
        elif op in ("add", "subtract", "bit_and", "bit_or", "bit_xor", "shift_left",
                    "shift_right"):
            sym = {"add": "+", "subtract": "-", "bit_and": "&", "bit_or": "|",
                   "bit_xor": "^", "shift_left": "<<", "shift_right": ">>"}[op]
            self.emit(self.assign(ps[0], f"{e(ps[1])} {sym} {e(ps[2])}"), ind)
        else:
            raise ProgramError(f"unsupported primitive {op!r}")

    def _std(self, name: str):
        f = self.std.get(name)
        if f is None:
            raise ProgramError(f"program has no standard_metadata.{name} field")
        return f

    # -- actions ----------------------------------------------------------------
    def action(self, act: dict) -> str:
        """Emit `A_<id>(F, S, d)`; return its name."""
        fname = f"A_{act['id']}"
        prims = act.get("primitives", [])
        self.emit(f"def {fname}(F, S, d):")
        exits = any(p["op"] == "exit" for p in prims)
        if exits:
            self.emit("ex = False", 1)
        if any(p["op"] in ("_jump", "_jump_if_zero") for p in prims):
            self.emit("pc = 0", 1)
            self.emit("while True:", 1)
            for i, p in enumerate(prims):
                self.emit(f"{'if' if i == 0 else 'elif'} pc == {i}:", 2)
                if p["op"] == "_jump":
                    self.emit(f"pc = {self.expr(p['parameters'][0])}", 3)
                    self.emit("continue", 3)
                elif p["op"] == "_jump_if_zero":
                    ps = p["parameters"]
                    self.emit(f"if ({self.expr(ps[0])}) == 0:", 3)
                    self.emit(f"pc = {self.expr(ps[1])}", 4)
                    self.emit("continue", 4)
                else:
                    self.primitive(p, 3)
            self.emit("else:", 2)
            self.emit("break", 3)
            self.emit("pc += 1", 2)
        elif not prims:
            self.emit("pass", 1)
        else:
            for p in prims:
                self.primitive(p, 1)
        if exits:
            self.emit("if ex: raise _Exit()", 1)
        self.emit("")
        return fname

    # -- parser -------------------------------------------------------------------
    def header_layout(self, h: HeaderInfo) -> tuple[str, list[tuple[list[tuple[str, int]], list]]]:
        """How a fixed-size header maps onto one `struct` format: (struct name, chunks).

        A chunk is a run of fields ending on a byte boundary, read as struct items of
        8, 4, 2 and 1 bytes (``pieces``: (code, bytes)); its fields are bits of the
        chunk value. `struct` does the byte work in C, which makes extracting and
        emitting headers several times faster than shifting one big integer.
        """
        name = f"_ST_{h.id}"
        if name in self._layouts:
            return name, self._layouts[name]
        chunks: list[tuple[list[tuple[str, int]], list]] = []
        fields: list = []
        bits = 0
        for k, f in enumerate(h.fields):
            fields.append(f)
            bits += f.width
            if bits % 8 == 0 or k == len(h.fields) - 1:
                # (a header that is not a whole number of bytes ends in padding bits)
                chunks.append((_pieces((bits + 7) // 8), fields))
                fields, bits = [], 0
        fmt = "!" + "".join(code for pieces, _f in chunks for code, _n in pieces)
        self.env[name] = struct.Struct(fmt)
        self._layouts[name] = chunks
        return name, chunks

    def extract_lines(self, h: HeaderInfo, pte: int, ind: int) -> None:
        """Statements extracting fixed-size header `h` at `pos` (not moving `pos`)."""
        n = h.nbytes
        self.emit(f"if dlen - pos < {n}: raise _PE({pte}, pos)", ind)
        st, chunks = self.header_layout(h)
        names = [f"_u{i}" for i in range(sum(len(p) for p, _f in chunks))]
        if names:
            self.emit(f"{', '.join(names)}, = {st}.unpack_from(data, pos)", ind)
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
                self.emit(f"F[{f.slot}] = {val}", ind)
        self.emit(f"F[{h.valid_slot}] = True", ind)
        for sib in h.union_siblings:
            self.emit(f"F[{self.L.by_id[sib].valid_slot}] = False", ind)

    def pack_args(self, h: HeaderInfo) -> tuple[str, str]:
        """(struct name, argument list) packing header `h`'s fields for `struct.pack`."""
        st, chunks = self.header_layout(h)
        terms = [[(f"F[{f.slot}]" + (f" & {hex(f.mask)}" if f.signed else ""), f.width) for f in fields]
                 for _pieces, fields in chunks]
        return st, ", ".join(_pack_args(chunks, terms))

    def packer(self, terms: list[tuple[str, int]]) -> tuple[str, str]:
        """(struct name, argument list) packing `terms` ((code, bit width), a whole
        number of bytes in all) back to back, as the header code does (see
        `header_layout`)."""
        chunks: list[tuple[list[tuple[str, int]], list]] = []
        run: list[tuple[str, int]] = []
        bits = 0
        for term in terms:
            run.append(term)
            bits += term[1]
            if bits % 8 == 0:
                chunks.append((_pieces(bits // 8), run))
                run, bits = [], 0
        if run:
            raise ProgramError("internal: packed terms are not a whole number of bytes")
        fmt = "!" + "".join(code for pieces, _r in chunks for code, _n in pieces)
        name = f"_PK_{len(self._packers)}"
        self._packers[fmt] = self._packers.get(fmt, name)
        name = self._packers[fmt]
        self.env[name] = struct.Struct(fmt)
        return name, ", ".join(_pack_args(chunks, [r for _p, r in chunks]))

    def extractor(self, h: HeaderInfo, pte: int) -> str:
        """Emit `X_<hid>(F, data, pos, dlen) -> pos` (for stack elements)."""
        fname = f"X_{h.id}"
        self.emit(f"def {fname}(F, data, pos, dlen):")
        self.extract_lines(h, pte, 1)
        self.emit(f"return pos + {h.nbytes}", 1)
        self.emit("")
        return fname

    def extractor_vl(self, h: HeaderInfo, pte: int, errs: dict) -> str:
        """Emit `XV_<hid>(F, data, pos, dlen, nbits) -> pos` for a varbit header."""
        fname = f"XV_{h.id}"
        self.emit(f"def {fname}(F, data, pos, dlen, nbits):")
        self.emit(f"if nbits % 8: raise _PE({errs['ParserInvalidArgument']}, pos)", 1)
        self.emit(f"n = {h.fixed_bits // 8} + (nbits >> 3)", 1)
        self.emit(f"if dlen - pos < n: raise _PE({pte}, pos)", 1)
        self.emit(f"if {h.max_length} < n: raise _PE({errs['HeaderTooShort']}, pos)", 1)
        self.emit("v = int.from_bytes(data[pos:pos + n], 'big')", 1)
        self.emit("shift = n * 8", 1)
        for f in h.fields:
            if f.varbit:
                self.emit("shift -= nbits", 1)
                self.emit(f"F[{f.slot}] = (v >> shift) & ((1 << nbits) - 1)", 1)
                self.emit(f"F[{f.len_slot}] = nbits", 1)
            else:
                self.emit(f"shift -= {f.width}", 1)
                val = f"(v >> shift) & {hex(f.mask)}"
                if f.signed:
                    val = f"_sx({val}, {f.width})"
                self.emit(f"F[{f.slot}] = {val}", 1)
        self.emit(f"F[{h.valid_slot}] = True", 1)
        for sib in h.union_siblings:
            self.emit(f"F[{self.L.by_id[sib].valid_slot}] = False", 1)
        self.emit("return pos + n", 1)
        self.emit("")
        return fname

    def parser(self, parser: dict) -> str:
        """Emit the parse states and `PARSE(F, S, data) -> (bytes parsed, error)`."""
        errs = self.L.errors
        pte = errs["PacketTooShort"]
        in_stacks = {hid for st in self.L.stacks.values() for hid in st.header_ids}
        for ust in self.L.union_stacks.values():
            for uid in ust.header_ids:
                in_stacks.update(self.L.union_by_id[uid].header_ids)
        for h in self.L.headers:
            if not h.metadata:
                if h.has_varbit:
                    self.extractor_vl(h, pte, errs)
                elif h.id in in_stacks:
                    self.extractor(h, pte)
        for s in self.L.stacks.values():
            h0 = self.L.by_id[s.header_ids[0]]
            prefix = "XV_" if h0.has_varbit else "X_"
            self.emit(f"XS_{_ident(s.name)} = ({', '.join(prefix + str(i) for i in s.header_ids)},)")
        self.emit("")
        states = {st["name"]: st for st in parser.get("parse_states", [])}
        self._states = parser.get("parse_states", [])
        init = parser.get("init_state")
        self.inline_states(init)
        for st in parser.get("parse_states", []):
            if st["name"] not in self._inline:
                self.parse_state(st, errs)
        start = f"P_{states[init]['id']}" if init in states else "None"
        self.emit("def PARSE(F, S, data):")
        self.emit(f"st = {start}", 1)
        self.emit("pos = 0", 1)
        self.emit("dlen = len(data)", 1)
        self.emit("try:", 1)
        self.emit("while st is not None:", 2)
        self.emit("st, pos = st(F, S, data, pos, dlen)", 3)
        self.emit("except _PE as exc:", 1)
        self.emit("return exc.pos, exc.code", 2)
        self.emit("return pos, 0", 1)
        self.emit("")
        return "PARSE"

    def parse_state(self, st: dict, errs: dict) -> None:
        """Emit `P_<id>` for a state that is not inlined into its only predecessor."""
        self.emit(f"def P_{st['id']}(F, S, data, pos, dlen):")
        self.state_body(st, errs, 1)
        self.emit("")

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

    def state_body(self, st: dict, errs: dict, ind: int) -> None:
        """Statements of one parse state at indentation `ind`; every path returns."""
        pte = errs["PacketTooShort"]
        for opd in st.get("parser_ops", []):
            op = opd["op"]
            ps = opd.get("parameters", [])
            if op == "extract":
                self.parse_extract(ps[0], None, pte, errs, ind)
            elif op == "extract_VL":
                self.parse_extract(ps[0], self.expr(ps[1]), pte, errs, ind)
            elif op == "set":
                src = ps[1]
                if src["type"] == "lookahead":
                    nbytes = (int(src["value"][1]) + 7) // 8
                    self.emit(f"if dlen - pos < {nbytes}: raise _PE({pte}, pos)", ind)
                self.emit(self.assign(ps[0], self.expr(src)), ind)
            elif op == "verify":
                self.emit(f"if not {self.expr(ps[0])}: raise _PE({self.expr(ps[1])}, pos)", ind)
            elif op in ("advance", "shift"):
                t = self.tmp()
                if op == "shift":
                    amount = ps[0]
                    if isinstance(amount, dict):
                        amount = amount["value"]
                    nbytes = int(amount, 16) if isinstance(amount, str) else int(amount)
                    self.emit(f"{t} = {nbytes * 8}", ind)
                else:
                    self.emit(f"{t} = {self.expr(ps[0])}", ind)
                self.emit(f"if {t} % 8: raise _PE({errs['ParserInvalidArgument']}, pos)", ind)
                self.emit(f"if dlen - pos < ({t} >> 3): raise _PE({pte}, pos)", ind)
                self.emit(f"pos += {t} >> 3", ind)
            elif op == "primitive":
                self.primitive(ps[0], ind)
            else:
                raise ProgramError(f"parse state {st['name']!r}: unsupported parser op {op!r}")
        key = st.get("transition_key", [])
        trans = st.get("transitions", [])
        by_name = {x["name"]: x for x in self._states}

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
            if cond is None:
                if inline:
                    self.state_body(nxt, errs, ind)
                else:
                    self.emit(f"return {'None' if nxt is None else 'P_%d' % nxt['id']}, pos", ind)
                return
            if inline:
                self.emit(f"if {cond}:", ind)
                self.state_body(nxt, errs, ind + 1)
            else:
                self.emit(f"if {cond}: return {'None' if nxt is None else 'P_%d' % nxt['id']}, pos",
                          ind)

        if key:
            parts = []
            widths = []
            for k in key:
                if k["type"] == "field":
                    f = self.L.field(*k["value"])
                    code = f"F[{f.slot}]" + (f" & {hex(f.mask)}" if f.signed else "")
                    widths.append(f.width)
                elif k["type"] == "stack_field":
                    code, width, signed = self.lvalue(k)
                    code = f"({code} & {hex((1 << width) - 1)})" if signed else code
                    widths.append(width)
                elif k["type"] == "lookahead":
                    code = self.expr(k)
                    widths.append(int(k["value"][1]))
                elif k["type"] == "union_stack_field":
                    ust = self.L.union_stacks[k["value"][0]]
                    u0 = self.L.union_by_id[ust.header_ids[0]]
                    moff = u0.member_names.index(k["value"][1])
                    h0 = self.L.by_id[u0.header_ids[moff]]
                    foff = [f.name for f in h0.fields].index(k["value"][2])
                    f = h0.fields[foff]
                    code = (f"F[HF[UH[USTK_{_ident(ust.name)}[F[{ust.count_slot}] - 1]][{moff}]]"
                            f"[{foff}]]" + (f" & {hex(f.mask)}" if f.signed else ""))
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
            self.emit(f"k = {' | '.join(terms)}", ind)
        widths = widths if key else []
        for tr in trans:
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
                if vname not in self.vsets:
                    raise ProgramError(f"unknown parse value set {vname!r}")
                obj = "VSET_" + _ident(vname)
                self.vset_keys.setdefault(vname, widths)
                if mask is not None:
                    go(tr, f"{obj}.match_masked(k, {int(mask, 16)})")
                else:
                    go(tr, f"{obj}.match(k)")
            else:
                raise ProgramError(f"parse state {st['name']!r}: unsupported transition {ttype!r}")
        self.emit("return None, pos", ind)

    def parse_extract(self, target: dict, nbits: str | None, pte: int, errs: dict,
                      ind: int) -> None:
        """Extract into a header, a stack or a union stack (fixed or varbit)."""
        t, v = target["type"], target["value"]
        if t == "regular":
            h = self.L.header(v)
            if nbits is None and not h.has_varbit:
                self.extract_lines(h, pte, ind)
                self.emit(f"pos += {h.nbytes}", ind)
            elif nbits is None:
                raise ProgramError(f"header {h.name!r} has a varbit field: use extract_VL")
            else:
                self.emit(f"pos = XV_{h.id}(F, data, pos, dlen, {nbits})", ind)
        elif t == "stack":
            s = self.stack(v)
            self.emit(f"i = F[{s.count_slot}]", ind)
            self.emit(f"if i >= {len(s.header_ids)}: raise _PE({errs['StackOutOfBounds']}, pos)", ind)
            extra = "" if nbits is None else f", {nbits}"
            self.emit(f"pos = XS_{_ident(s.name)}[i](F, data, pos, dlen{extra})", ind)
            self.emit(f"F[{s.count_slot}] = i + 1", ind)
        elif t == "union_stack":
            us = self.L.union_stacks[v[0]]
            u0 = self.L.union_by_id[us.header_ids[0]]
            off = u0.member_names.index(v[1])
            hids = [self.L.union_by_id[uid].header_ids[off] for uid in us.header_ids]
            name = f"XU_{_ident(us.name)}_{off}"
            prefix = "XV_" if self.L.by_id[hids[0]].has_varbit else "X_"
            self.late.append(f"{name} = ({', '.join(prefix + str(h) for h in hids)},)")
            self.emit(f"i = F[{us.count_slot}]", ind)
            self.emit(f"if i >= {len(hids)}: raise _PE({errs['StackOutOfBounds']}, pos)", ind)
            extra = "" if nbits is None else f", {nbits}"
            self.emit(f"pos = {name}[i](F, data, pos, dlen{extra})", ind)
            self.emit(f"F[{us.count_slot}] = i + 1", ind)
        else:
            raise ProgramError(f"unsupported extract target type {t!r}")

    # -- deparser -----------------------------------------------------------------
    def deparser(self, dep: dict) -> str:
        """Emit `DEPARSE(F, S) -> bytes`: valid headers in order (payload added by caller),
        each packed by its `struct` (see `header_layout`)."""
        self.emit("def DEPARSE(F, S):")
        for p in dep.get("primitives", []):
            self.primitive(p, 1)
        self.emit("out = []", 1)
        for name in dep.get("order", []):
            h = self.L.header(name)
            self.emit(f"if F[{h.valid_slot}]:", 1)
            if h.has_varbit:
                self.emit("v = 0", 2)
                self.emit("nb = 0", 2)
                for f in h.fields:
                    if f.varbit:
                        self.emit(f"v = (v << F[{f.len_slot}]) | F[{f.slot}]", 2)
                        self.emit(f"nb += F[{f.len_slot}]", 2)
                    else:
                        self.emit(f"v = (v << {f.width}) | (F[{f.slot}] & {hex(f.mask)})", 2)
                        self.emit(f"nb += {f.width}", 2)
                self.emit("out.append(v.to_bytes(nb >> 3, 'big'))", 2)
                continue
            st, args = self.pack_args(h)
            self.emit(f"out.append({st}.pack({args}))", 2)
        self.emit("return b''.join(out)", 1)
        self.emit("")
        return "DEPARSE"

    # -- checksums ----------------------------------------------------------------
    def checksums(self) -> None:
        """Emit `VERIFY_CKSUM(F, S) -> bool ok` and `UPDATE_CKSUM(F, S)`."""
        cks = self.js.get("checksums", [])
        self.emit("def VERIFY_CKSUM(F, S):")
        self.emit("ok = True", 1)
        for c in cks:
            if not c.get("verify", True):
                continue
            calc = self.calculation(c["calculation"])
            tgt, _w, _s = self.lvalue({"type": "field", "value": c["target"]})
            cond = self.expr(c["if_cond"]) if c.get("if_cond") else "True"
            self.emit(f"if {cond} and {tgt} != {calc}(F, S): ok = False", 1)
        self.emit("return ok", 1)
        self.emit("")
        self.emit("def UPDATE_CKSUM(F, S):")
        self.emit("pass", 1)
        for c in cks:
            if not c.get("update", True):
                continue
            calc = self.calculation(c["calculation"])
            cond = self.expr(c["if_cond"]) if c.get("if_cond") else "True"
            self.emit(f"if {cond}:", 1)
            self.emit(self.assign({"type": "field", "value": c["target"]}, f"{calc}(F, S)"), 2)
        self.emit("")

    # -- controls -----------------------------------------------------------------
    def pipeline(self, p: dict, node_name: Any) -> None:
        """Emit one function per control node of pipeline `p` (`node_name` names them).

        Fusion: when a node's successor is known at compile time (a branch of a
        conditional, an action call, a table miss running a const default entry --
        p4c's key-less ``tbl_act`` tables are always that) and nothing else leads to
        the successor, its code continues inside the node instead of returning it;
        where the two branches of a conditional meet again, the code after the join
        follows the ``if`` (see `join_of`). A run of such nodes then costs one call
        instead of one per node.
        """
        self._tables = {t["name"]: t for t in p.get("tables", [])}
        self._conds = {c["name"]: c for c in p.get("conditionals", [])}
        self._calls = {a["name"]: a for a in p.get("action_calls", [])}
        preds: dict[str | None, set[str]] = {}

        def edge(src: str, dst: str | None) -> None:
            preds.setdefault(dst, set()).add(src)

        edge("<start>", p.get("init_table"))
        for t in self._tables.values():
            for n in list(t.get("next_tables", {}).values()) + [t.get("base_default_next")]:
                edge(t["name"], n)
        for c in self._conds.values():
            edge(c["name"], c.get("true_next"))
            edge(c["name"], c.get("false_next"))
        for a in self._calls.values():
            edge(a["name"], a.get("next_node"))
        self._preds = preds
        self._node_name = node_name
        # A node gets a function only when something refers to it at run time: the
        # pipeline start, a table's next node, or a `return` in generated code.
        self._wanted: list[str] = [n for n in [p.get("init_table")] if n is not None]
        for t in self._tables.values():
            self._wanted += [n for n in list(t.get("next_tables", {}).values()) + [t.get("base_default_next")]
                             if n is not None]
        done: set[str] = set()
        while self._wanted:
            name = self._wanted.pop()
            if name in done:
                continue
            done.add(name)
            self.emit(f"def {node_name(name)}(F, S):")
            self.node_body(name, 1, 0, None, frozenset())
            self.emit("")

    def static_next(self, name: str) -> tuple[bool, str | None]:
        """(True, successor) for a node whose successor is fixed at compile time."""
        if name in self._calls:
            return True, self._calls[name].get("next_node")
        t = self._tables.get(name)
        if t is not None and not t.get("key") and self.fixed_default(t) is not None:
            return True, self.miss_next(t)
        return False, None

    def chain(self, start: str | None) -> list[str | None]:
        """`start` and the nodes its fixed successors lead to, in order."""
        out: list[str | None] = []
        n = start
        while n not in out and len(out) < MAX_FUSE_DEPTH:
            out.append(n)
            if n is None:
                break
            fixed, nxt = self.static_next(n)
            if not fixed:
                break
            n = nxt
        return out

    def join_of(self, t: str | None, f: str | None) -> tuple[str | None, frozenset]:
        """Where the branches of a conditional meet (`t`, `f` successors), if they
        surely do: the first node on `t`'s fixed chain that is on `f`'s; and the nodes
        leading to it from the conditional (its predecessors, if they are all among
        these, let the join's code be inlined after the ``if``)."""
        ct, cf = self.chain(t), self.chain(f)
        for i, n in enumerate(ct):
            if n is not None and n in cf:
                return n, frozenset(ct[:i] + cf[:cf.index(n)])
        return None, frozenset()

    def flow(self, target: str | None, ind: int, depth: int, stop: str | None,
             owned: frozenset) -> None:
        """Continue with node `target`: nothing when it is `stop` (the code after an
        ``if`` follows), its code inline (see `pipeline`), or return it. `owned` are
        the predecessors fused into this function (a node whose predecessors all are
        may be inlined)."""
        if target is not None and target == stop:
            return
        preds = self._preds.get(target, set())
        inline = target is not None and depth < MAX_FUSE_DEPTH and (len(preds) == 1 or preds <= owned)
        if inline:
            self.node_body(target, ind, depth + 1, stop, owned)
        else:
            self.emit(f"return {self._node_name(target)}", ind)
            if target is not None:
                self._wanted.append(target)

    def node_body(self, name: str, ind: int, depth: int, stop: str | None, owned: frozenset) -> None:
        """Statements running control node `name` and continuing after it."""
        owned = owned | {name}
        if name in self._conds:
            c = self._conds[name]
            t, f = c.get("true_next"), c.get("false_next")
            join, via = self.join_of(t, f)
            self.emit(f"if {self.expr(c['expression'])}:", ind)
            mark = len(self.out)
            self.flow(t, ind + 1, depth, join, owned | via)
            if len(self.out) == mark:
                self.emit("pass", ind + 1)
            if join is None:
                self.flow(f, ind, depth, stop, owned)
                return
            if f != join:
                self.emit("else:", ind)
                mark = len(self.out)
                self.flow(f, ind + 1, depth, join, owned | via)
                if len(self.out) == mark:
                    self.emit("pass", ind + 1)
            self.flow(join, ind, depth, stop, owned | via)
        elif name in self._calls:
            a = self._calls[name]
            self.emit(f"A_{a['action_id']}(F, S, ())", ind)
            self.flow(a.get("next_node"), ind, depth, stop, owned)
        else:
            self.table_body(self._tables[name], ind, depth, stop, owned)

    def fixed_default(self, table: dict) -> tuple[dict, list[int]] | None:
        """(action, data) of a table's default entry if no control plane can change it."""
        de = table.get("default_entry")
        if not de or not de.get("action_entry_const") or table.get("type", "simple") != "simple":
            return None
        act = self.actions.get(de["action_id"])
        if act is None:
            raise ProgramError(f"table {table['name']!r}: unknown default action id {de['action_id']}")
        return act, [int(x, 16) for x in de.get("action_data", [])]

    def miss_next(self, table: dict) -> str | None:
        """The node after a miss of a table whose default entry is fixed."""
        nt = table.get("next_tables", {})
        fixed = self.fixed_default(table)
        assert fixed is not None
        if "__HIT__" in nt or "__MISS__" in nt:
            return nt.get("__MISS__")
        return nt.get(fixed[0]["name"], table.get("base_default_next"))

    def run_action(self, act: dict, data: list[int], ind: int) -> None:
        """Run action `act` with constant `data`: its primitives inline when it is
        straight-line code (no jumps, no exit), else a call."""
        prims = act.get("primitives", [])
        if any(p["op"] in ("_jump", "_jump_if_zero", "exit") for p in prims):
            self.emit(f"A_{act['id']}(F, S, {tuple(data)!r})", ind)
            return
        if data:
            self.emit(f"d = {tuple(data)!r}", ind)
        for p in prims:
            self.primitive(p, ind)

    def table_body(self, table: dict, ind: int, depth: int, stop: str | None, owned: frozenset) -> None:
        """Apply `table`: key, lookup, the hit path inline for plain tables (runtime
        object `T_<id>`, exact dict `EX_<id>`), the miss path inline when fixed. The
        hit path always returns, so a fixed miss path may fall through to `stop`."""
        tid = table["id"]
        nt = table.get("next_tables", {})
        hitmiss = "__HIT__" in nt or "__MISS__" in nt
        terms = []
        kinds = []
        for k in table.get("key", []):
            mt = k["match_type"]
            kinds.append(mt)
            target = k["target"]
            if mt == "valid":
                h = self.L.header(target if isinstance(target, str) else target[0])
                terms.append(f"F[{h.valid_slot}]")
                continue
            h = self.L.header(target[0])
            f = self.L.field(target[0], target[1])
            term = f"F[{f.slot}]" + (f" & {hex(f.mask)}" if f.signed else "")
            if k.get("mask") is not None:
                term = f"({term}) & {int(k['mask'], 16)}"
            if not h.metadata and target[1] != "$valid$":
                term = f"(({term}) if F[{h.valid_slot}] else 0)"
            terms.append(term)
        if terms:  # a key-less table always misses
            key = f"({', '.join(terms)},)"
            if lookup_mode(table.get("match_type", "exact"), kinds) == "exact":
                self.emit(f"rec = EX_{tid}.get({key})", ind)
            else:
                self.emit(f"rec = T_{tid}.lookup({key})", ind)
            self.emit("if rec is not None:", ind)
            if table.get("type", "simple") != "simple" or table.get("direct_meters"):
                self.emit(f"return T_{tid}.hit(F, S, rec)", ind + 1)
            else:
                self.emit("ref = rec.ref", ind + 1)
                if table.get("with_counters"):
                    self.emit("c = rec.counter", ind + 1)
                    self.emit("c[0] += 1", ind + 1)
                    self.emit("c[1] += S.ilen", ind + 1)
                self.emit("ref.fn(F, S, ref.args)", ind + 1)
                if hitmiss:
                    self.emit(f"return T_{tid}.hit_next", ind + 1)
                else:
                    self.emit(f"return T_{tid}.next_for[ref.id]", ind + 1)
        fixed = self.fixed_default(table)
        if fixed is None and table.get("type", "simple") != "simple":
            self.emit(f"return T_{tid}.miss(F, S)", ind)
            return
        if fixed is None:  # Table.miss for a plain table, inline: the default the table has now
            self.emit(f"ref = T_{tid}.default", ind)
            if hitmiss:
                self.emit("if ref is not None:", ind)
                self.emit("ref.fn(F, S, ref.args)", ind + 1)
                self.emit(f"return T_{tid}.miss_next", ind)
            else:
                self.emit("if ref is None:", ind)
                self.emit(f"return T_{tid}.base_next", ind + 1)
                self.emit("ref.fn(F, S, ref.args)", ind)
                self.emit(f"return T_{tid}.next_for[ref.id]", ind)
            return
        self.run_action(fixed[0], fixed[1], ind)
        self.flow(self.miss_next(table), ind, depth, stop, owned)

    def source(self) -> str:
        """The complete generated module."""
        return "\n".join(self.out + self.late) + "\n"
