"""Expressions: BMv2 JSON type-value objects as C expressions of type `v_t`
(__int128) over the PHV `F` -- the C twin of `codegen.expressions`.

Every reference is a constant slot. A field is read as its value (a signed field
sign-extended), computed on in 128 bits with the helpers of native/runtime.h (wrapping
+ - *, Python's shifts, floor division), and truncated (or sign-wrapped) only when
stored, as the Python engine does with its unbounded ints. Header stacks, unions and
varbit fields are not here: the layout check (`layout`) sends such programs to Python.
"""

from __future__ import annotations

from typing import Any

from ..program import FieldInfo
from .context import CContext

M64 = (1 << 64) - 1


def lit(n: int) -> str:
    """A `v_t` literal for the integer `n` (|n| < 2**127)."""
    if n < 0:
        return f"p4n_neg({lit(-n)})"
    if n <= M64:
        return f"((v_t){hex(n)}ULL)"
    return f"(((v_t){hex(n >> 64)}ULL << 64) | (v_t){hex(n & M64)}ULL)"


def read(f: FieldInfo) -> str:
    """The value of field `f` (sign-extended when signed)."""
    return f"((v_t)(int64_t)F[{f.slot}])" if f.signed else f"((v_t)F[{f.slot}])"


def bits(f: FieldInfo) -> str:
    """Field `f` as its unsigned bits (what keys and byte images read), a uint64_t."""
    return f"(F[{f.slot}] & {hex(f.mask)}ULL)" if f.signed else f"F[{f.slot}]"


def store(slot: int, width: int, signed: bool, src: str) -> str:
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

    def header(self, tv: dict) -> Any:
        """The header a static header reference names."""
        t, v = tv["type"], tv["value"]
        if t in ("header", "regular"):
            return self.L.header(v)
        if t == "expression" and isinstance(v, dict) and "op" not in v:
            return self.header(v)
        raise self.ctx.unsupported(f"header reference {_brief(tv)}")

    def lvalue(self, tv: dict) -> FieldInfo:
        """The field a field-like destination names."""
        t, v = tv["type"], tv["value"]
        if t == "field":
            f = self.L.field(v[0], v[1])
            if f.varbit:
                raise self.ctx.unsupported(f"varbit field {v[0]}.{v[1]}")
            return f
        if t == "expression" and isinstance(v, dict):
            if "op" not in v:
                return self.lvalue(v)
            if v["op"] == "access_field":
                h = self.header(v["left"])
                return h.fields[int(v["right"])]
        raise self.ctx.unsupported(f"field reference {_brief(tv)}")

    def assign(self, dst: dict, src: str) -> str:
        """Statement storing `src` into `dst`."""
        f = self.lvalue(dst)
        return store(f.slot, f.width, f.signed, src)

    def expr(self, tv: Any) -> str:
        """C source (type v_t) for a BMv2 type-value object."""
        if not isinstance(tv, dict):
            raise self.ctx.unsupported(f"expression {_brief(tv)}")
        t, v = tv.get("type"), tv.get("value")
        if t == "field":
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
            return f"((v_t)(F[{self.header(right).valid_slot}] != 0))"
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
        a, b = self.header(left), self.header(right)
        fields = " && ".join(f"F[{x.slot}] == F[{y.slot}]" for x, y in zip(a.fields, b.fields))
        eq = (f"((!F[{a.valid_slot}] || !F[{b.valid_slot}]) ? (!F[{a.valid_slot}] && "
              f"!F[{b.valid_slot}]) : ({fields or '1'}))")
        return f"((v_t)({'!' if negate else ''}{eq}))"


def _kind(tv: dict) -> str:
    t, v = tv.get("type"), tv.get("value")
    if t in ("header", "regular"):
        return "header"
    if t == "expression" and isinstance(v, dict) and "op" not in v:
        return _kind(v)
    return "data"


def _brief(tv: Any) -> str:
    text = repr(tv)
    return text if len(text) <= 80 else text[:77] + "..."
