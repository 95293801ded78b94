"""Expressions: BMv2 JSON type-value objects as C expressions of type `v_t`
(__int128) over the PHV `F` -- the C twin of `codegen.expressions`.

Every reference is a constant slot. A field is read as its value (a signed field
sign-extended), computed on in 128 bits with the helpers of native/runtime.h (wrapping
+ - *, Python's shifts, floor division), and truncated (or sign-wrapped) only when
stored, as the Python engine does with its unbounded ints. A header known only at run
time (a stack element ``hs[i]``, ``hs.last``) is a header id looked up in the layout
tables ``p4n_hv``/``p4n_hf`` (`layout.tables`), as the Python engine's ``HV``/``HF``;
an index outside the stack marks the packet's pipeline error (the Python engine raises
IndexError there); a union's members likewise through ``p4n_uh``. Varbit fields are
not here: `layout.check` sends such programs to Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..program import FieldInfo, HeaderInfo, StackInfo, UnionInfo
from .context import CContext

M64 = (1 << 64) - 1


def lit(n: int) -> str:
    """A `v_t` literal for the integer `n` (|n| < 2**127)."""
    if n < 0:
        return f"p4n_neg({lit(-n)})"
    if n <= M64:
        return f"((v_t){hex(n)}ULL)"
    return f"(((v_t){hex(n >> 64)}ULL << 64) | (v_t){hex(n & M64)}ULL)"


@dataclass(frozen=True)
class Slot:
    """A field to read or write: its slot (a constant, or code giving it at run time),
    width and signedness."""

    slot: str
    width: int
    signed: bool

    @staticmethod
    def of(f: FieldInfo) -> "Slot":
        """The slot of a field known at compile time."""
        return Slot(str(f.slot), f.width, f.signed)

    @property
    def mask(self) -> int:
        """All-ones mask of the width."""
        return (1 << self.width) - 1


def read(f: FieldInfo | Slot) -> str:
    """The value of a field (sign-extended when signed)."""
    s = f if isinstance(f, Slot) else Slot.of(f)
    return f"((v_t)(int64_t)F[{s.slot}])" if s.signed else f"((v_t)F[{s.slot}])"


def bits(f: FieldInfo | Slot) -> str:
    """A field as its unsigned bits (what keys and byte images read), a uint64_t."""
    s = f if isinstance(f, Slot) else Slot.of(f)
    return f"(F[{s.slot}] & {hex(s.mask)}ULL)" if s.signed else f"F[{s.slot}]"


def store(slot: int | str, width: int, signed: bool, src: str) -> str:
    """Statement storing `src` into a slot of `width` bits (sign-wrapped when signed)."""
    if signed:
        return f"F[{slot}] = (uint64_t)(int64_t)p4n_sx({src}, {width});"
    return f"F[{slot}] = (uint64_t)(({src}) & {lit((1 << width) - 1)});"


_ARITH = {"+": "p4n_add", "-": "p4n_sub", "*": "p4n_mul", "/": "p4n_div", "%": "p4n_mod",
          ">>": "p4n_shr", "<<": "p4n_shl"}


class CExpressions:
    """C expression code for one program."""

    def __init__(self, ctx: CContext) -> None:
        self.ctx = ctx
        self.L = ctx.layout

    def stack(self, name: str) -> StackInfo:
        """Header stack or union stack by name."""
        st = self.L.stacks.get(name) or self.L.union_stacks.get(name)
        if st is None:
            raise self.ctx.unsupported(f"stack {name!r}")
        return st

    def stack_element(self, st: StackInfo, index: str) -> str:
        """Code giving the header (or union) id of element `index` (code) of stack `st`."""
        return f"p4n_stack_at(S, p4n_stk_{self.ctx.stack_ix[st.name]}, {len(st.header_ids)}, {index})"

    def uref(self, tv: dict) -> tuple[bool, str, UnionInfo]:
        """(is static, code giving the union id, a union of the right type)."""
        t, v = tv["type"], tv["value"]
        if t in ("header_union", "union"):
            u = self.L.unions.get(v)
            if u is None:
                raise self.ctx.unsupported(f"unknown header union {v!r}")
            uid = next(i for i, x in self.L.union_by_id.items() if x.name == v)
            return True, str(uid), u
        if t == "expression" and isinstance(v, dict) and "op" not in v:
            return self.uref(v)
        if t == "expression" and isinstance(v, dict) and v["op"] == "dereference_union_stack":
            st = self.stack(v["left"]["value"])
            return (False, self.stack_element(st, self.expr(v["right"])),
                    self.L.union_by_id[st.header_ids[0]])
        raise self.ctx.unsupported(f"header union reference {_brief(tv)}")

    def href(self, tv: dict) -> tuple[bool, str, HeaderInfo]:
        """(is static, code giving the header id, a header of the right type)."""
        t, v = tv["type"], tv["value"]
        if t in ("header", "regular"):
            h = self.L.header(v)
            return True, str(h.id), h
        if t == "expression" and isinstance(v, dict):
            if "op" not in v:
                return self.href(v)
            if v["op"] in ("dereference_header_stack", "dereference_stack"):
                st = self.stack(v["left"]["value"])
                return (False, self.stack_element(st, self.expr(v["right"])),
                        self.L.by_id[st.header_ids[0]])
            if v["op"] == "access_union_header":
                static, ucode, sample = self.uref(v["left"])
                off = int(v["right"])
                hid = sample.header_ids[off]
                if static:
                    return True, str(self.L.union_by_id[int(ucode)].header_ids[off]), self.L.by_id[hid]
                return False, f"p4n_uh[{ucode}][{off}]", self.L.by_id[hid]
        raise self.ctx.unsupported(f"header reference {_brief(tv)}")

    def header(self, tv: dict) -> HeaderInfo:
        """The header a static header reference names."""
        static, _code, h = self.href(tv)
        if not static:
            raise self.ctx.unsupported(f"a run-time header where a fixed one is needed {_brief(tv)}")
        return h

    def valid_slot(self, tv: dict) -> str:
        """Code giving the validity slot of a header reference."""
        static, code, h = self.href(tv)
        return str(h.valid_slot) if static else f"p4n_hv[{code}]"

    def lvalue(self, tv: dict) -> Slot:
        """The field a field-like destination names."""
        t, v = tv["type"], tv["value"]
        if t == "field":
            f = self.L.field(v[0], v[1])
            if f.varbit:
                raise self.ctx.unsupported(f"varbit field {v[0]}.{v[1]}")
            return Slot.of(f)
        if t == "expression" and isinstance(v, dict):
            if "op" not in v:
                return self.lvalue(v)
            if v["op"] == "access_field":
                static, code, h = self.href(v["left"])
                off = int(v["right"])
                f = h.fields[off]
                if f.varbit:
                    raise self.ctx.unsupported(f"varbit field {f.name!r}")
                if static:
                    return Slot.of(f)
                return Slot(f"p4n_hf[{code}][{off}]", f.width, f.signed)
        if t == "stack_field":
            st = self.stack(v[0])
            h = self.L.by_id[st.header_ids[0]]
            off = [f.name for f in h.fields].index(v[1])
            f = h.fields[off]
            hid = self.stack_element(st, f"(v_t)F[{st.count_slot}] - 1")
            return Slot(f"p4n_hf[{hid}][{off}]", f.width, f.signed)
        raise self.ctx.unsupported(f"field reference {_brief(tv)}")

    def assign(self, dst: dict, src: str) -> str:
        """Statement storing `src` into `dst`."""
        s = self.lvalue(dst)
        return store(s.slot, s.width, s.signed, src)

    def expr(self, tv: Any) -> str:
        """C source (type v_t) for a BMv2 type-value object."""
        if not isinstance(tv, dict):
            raise self.ctx.unsupported(f"expression {_brief(tv)}")
        t, v = tv.get("type"), tv.get("value")
        if t in ("field", "stack_field"):
            return read(self.lvalue(tv))
        if t == "hexstr":
            n = int(v, 16)
            if abs(n) >= 1 << 127:
                raise self.ctx.unsupported(f"constant {v} wider than 127 bits")
            return lit(n)
        if t == "bool":
            return "((v_t)1)" if v else "((v_t)0)"
        if t in ("runtime_data", "local"):
            return f"((v_t)d[{int(v)}])"
        if t == "lookahead":
            if int(v[1]) > 64:
                raise self.ctx.unsupported(f"lookahead of {v[1]} bits")
            return f"((v_t)p4n_bits(data, dlen, (uint64_t)pos * 8 + {int(v[0])}, {int(v[1])}))"
        if t == "expression":
            return self.expr(v) if "op" not in v else self.op(v)
        raise self.ctx.unsupported(f"expression operand type {t!r}")

    def op(self, v: dict) -> str:
        """C source for one expression operator node."""
        op = v["op"]
        left, right = v.get("left"), v.get("right")
        e = self.expr
        if op in _ARITH:
            return f"{_ARITH[op]}({e(left)}, {e(right)})"
        if op in ("&", "|", "^"):
            return f"({e(left)} {op} {e(right)})"
        if op in ("==", "!=") and _kind(left) == "header":
            return self.header_equal(left, right, op == "!=")
        if op in ("==", "!=", "==u", "!=u") and _kind(left) == "union":
            _s, a, _u = self.uref(left)
            _s2, b, _u2 = self.uref(right)
            return f"((v_t)({'!' if op[0] == '!' else ''}p4n_u_equal(F, {a}, {b})))"
        if op == "valid_union":
            return f"((v_t)p4n_u_valid(F, {self.uref(right)[1]}))"
        if op in ("==", "!=", ">", "<", ">=", "<="):
            return f"((v_t)({e(left)} {op} {e(right)}))"
        if op in ("==b", "!=b"):
            return f"((v_t)({e(left)} {op[:2]} {e(right)}))"
        if op in ("==h", "!=h"):
            return self.header_equal(left, right, op == "!=h")
        if op == "and":
            return f"((v_t)({e(left)} && {e(right)}))"
        if op == "or":
            return f"((v_t)({e(left)} || {e(right)}))"
        if op == "not":
            return f"((v_t)!{e(right)})"
        if op == "~":
            return f"(~{e(right)})"
        if op == "valid":
            return f"((v_t)(F[{self.valid_slot(right)}] != 0))"
        if op == "last_stack_index":
            return f"((v_t)F[{self.stack(right['value']).count_slot}] - 1)"
        if op == "size_stack":
            return f"((v_t)F[{self.stack(right['value']).count_slot}])"
        if op == "?":
            return f"(({e(v['cond'])}) ? {e(left)} : {e(right)})"
        if op in ("two_comp_mod", "usat_cast", "sat_cast"):
            width = self._const(right, op)
            fn = {"two_comp_mod": "p4n_sx", "usat_cast": "p4n_usat", "sat_cast": "p4n_sat"}[op]
            return f"{fn}({e(left)}, {width})"
        if op == "d2b":
            return f"((v_t)({e(right)} != 0))"
        if op == "b2d":
            return f"((v_t)({e(right)} ? 1 : 0))"
        if op == "access_field":
            return read(self.lvalue({"type": "expression", "value": v}))
        raise self.ctx.unsupported(f"expression operator {op!r}")

    def _const(self, tv: dict, op: str) -> int:
        if tv.get("type") != "hexstr" or not 0 < int(tv["value"], 16) <= 126:
            raise self.ctx.unsupported(f"{op} with a width that is not a constant of 1..126")
        return int(tv["value"], 16)

    def header_equal(self, left: dict, right: dict, negate: bool) -> str:
        """BMv2 `==h`: both invalid, or both valid with equal fields."""
        _s, a, _h = self.href(left)
        _s2, b, _h2 = self.href(right)
        return f"((v_t)({'!' if negate else ''}p4n_h_equal(F, {a}, {b})))"


def _kind(tv: dict) -> str:
    t, v = tv.get("type"), tv.get("value")
    if t in ("header", "regular"):
        return "header"
    if t == "expression" and isinstance(v, dict):
        if "op" not in v:
            return _kind(v)
        if v["op"] in ("dereference_header_stack", "dereference_stack", "access_union_header"):
            return "header"
        if v["op"] == "dereference_union_stack":
            return "union"
    if t in ("header_union", "union"):
        return "union"
    return "data"


def _brief(tv: Any) -> str:
    text = repr(tv)
    return text if len(text) <= 80 else text[:77] + "..."
