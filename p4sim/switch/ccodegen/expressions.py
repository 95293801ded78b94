"""Expressions: BMv2 JSON type-value objects as C expressions of type `v_t`
(__int128) over the PHV `F` -- the C twin of `codegen.expressions`.

Every reference is a constant slot. A field is read as its value (a signed field
sign-extended), computed on in 128 bits with the helpers of native/runtime.h (wrapping
+ - *, Python's shifts, floor division), and truncated (or sign-wrapped) only when
stored, as the Python engine does with its unbounded ints. A header known only at run
time (a stack element ``hs[i]``, ``hs.last``) is a header id looked up in the layout
tables ``p4n_hv``/``p4n_hf`` (`layout.tables`), as the Python engine's ``HV``/``HF``;
an index outside the stack marks the packet's pipeline error (the Python engine raises
IndexError there); a union's members likewise through ``p4n_uh``. A field wider than
64 bits is several words (`CContext.more`), read and written as one `v_t` up to 128
bits; unsigned 128-bit patterns of 2**127 or more compare, shift and divide unsigned
(`CExpressions.big`). A varbit field is its words and its length: only extracted,
deparsed, copied (``assign_VL``, whole headers) and compared as part of a header.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

from ..program import FieldInfo, HeaderInfo, StackInfo, UnionInfo
from .context import CContext, Unsupported

M64 = (1 << 64) - 1
#: The widest field an expression reads or writes: a `v_t` holds 128 bits. Wider
#: fields are only extracted, deparsed, copied and compared as whole headers.
MAX_EXPR_BITS = 128


def lit(n: int) -> str:
    """A `v_t` literal for the integer `n` (-2**127 <= n < 2**128; from 2**127 on, the
    128-bit pattern, which is what a 128-bit field holds)."""
    if n < 0:
        return f"p4n_neg({lit(-n)})"
    if n <= M64:
        return f"((v_t){hex(n)}ULL)"
    return f"((v_t)(((u_t){hex(n >> 64)}ULL << 64) | (u_t){hex(n & M64)}ULL))"


@dataclass(frozen=True)
class Slot:
    """A field to read or write: its slot (a constant, or code giving it at run time),
    width and signedness, and the code of its further words when it is wider than 64
    bits (least significant first; `CContext.more`)."""

    slot: str
    width: int
    signed: bool
    more: tuple[str, ...] = ()

    @property
    def mask(self) -> int:
        """All-ones mask of the width."""
        return (1 << self.width) - 1

    @property
    def top_width(self) -> int:
        """Bits in the most significant word."""
        return self.width - 64 * len(self.more)


def slot_of(ctx: CContext, f: FieldInfo) -> Slot:
    """The slot of a field known at compile time."""
    return Slot(str(f.slot), f.width, f.signed, tuple(str(w) for w in ctx.more.get(f.slot, [])))


def _expr_width(s: Slot) -> None:
    if s.width > MAX_EXPR_BITS:
        raise Unsupported(f"a field of {s.width} bits (> {MAX_EXPR_BITS}) in an expression")


def read(s: Slot) -> str:
    """The value of a field (sign-extended when signed)."""
    if s.more:
        _expr_width(s)
        return f"p4n_w2(F[{s.slot}], F[{s.more[0]}])"
    return f"((v_t)(int64_t)F[{s.slot}])" if s.signed else f"((v_t)F[{s.slot}])"


def pieces(s: Slot) -> list[tuple[str, int]]:
    """A field as its unsigned bits in words of at most 64 bits, most significant
    first, each a (uint64_t code, width): what keys and byte images read."""
    words = [s.slot, *s.more][::-1]
    out = []
    for i, w in enumerate(words):
        width = s.top_width if i == 0 else 64
        out.append((f"(F[{w}] & {hex((1 << width) - 1)}ULL)" if s.signed and width < 64 else f"F[{w}]",
                    width))
    return out


def bits(s: Slot) -> str:
    """A field of at most 64 bits as its unsigned bits, a uint64_t."""
    if s.more:
        raise Unsupported(f"a field of {s.width} bits where at most 64 fit")
    return pieces(s)[0][0]


def store(s: Slot, src: str) -> str:
    """Statement storing `src` into a field (sign-wrapped when signed)."""
    val = f"p4n_sx({src}, {s.width})" if s.signed else f"(({src}) & {lit(s.mask)})"
    if s.more:
        _expr_width(s)
        return f"{{ v_t w_ = {val}; F[{s.slot}] = (uint64_t)w_; F[{s.more[0]}] = (uint64_t)((u_t)w_ >> 64); }}"
    if s.signed:
        return f"F[{s.slot}] = (uint64_t)(int64_t){val};"
    return f"F[{s.slot}] = (uint64_t){val};"


def extract(s: Slot, bitoff: str) -> str:
    """Statements extracting a field of any width from the frame at bit `bitoff` (code)."""
    out, off = [], 0
    for (_code, width), w in zip(pieces(s), [s.slot, *s.more][::-1]):
        at = f"{bitoff} + {off}" if off else bitoff
        out.append(f"F[{w}] = p4n_bits(data, dlen, {at}, {width});")
        off += width
    if s.signed:   # the value as the Python engine holds it: sign-extended
        out.append(store(s, read(Slot(s.slot, s.width, False, s.more))))
    return " ".join(out)


#: Operators whose result on a 128-bit pattern of 2**127 or more differs from
#: the signed one (`CExpressions.big`), and their unsigned helpers (runtime.h).
_UNSIGNED = {"<": "p4n_ult", ">": "p4n_ugt", "<=": "p4n_ule", ">=": "p4n_uge", ">>": "p4n_ushr",
             "/": "p4n_udiv", "%": "p4n_umod"}
_ARITH = {"+": "p4n_add", "-": "p4n_sub", "*": "p4n_mul", "/": "p4n_div", "%": "p4n_mod",
          ">>": "p4n_shr", "<<": "p4n_shl"}


class CExpressions:
    """C expression code for one program."""

    def __init__(self, ctx: CContext) -> None:
        self.ctx = ctx
        self.L = ctx.layout
        # in an action with parameters wider than 64 bits: parameter -> (first word of
        # its value in `d`, words), least significant word first (`arg_layout`)
        self.args: dict[int, tuple[int, int]] = {}

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
                raise self.ctx.unsupported(f"varbit field {v[0]}.{v[1]} in an expression")
            return slot_of(self.ctx, f)
        if t == "expression" and isinstance(v, dict):
            if "op" not in v:
                return self.lvalue(v)
            if v["op"] == "access_field":
                static, code, h = self.href(v["left"])
                off = int(v["right"])
                f = h.fields[off]
                if f.varbit:
                    raise self.ctx.unsupported(f"varbit field {f.name!r} in an expression")
                if static:
                    return slot_of(self.ctx, f)
                return self.hf_slot(code, h, off)
        if t == "stack_field":
            st = self.stack(v[0])
            h = self.L.by_id[st.header_ids[0]]
            off = [f.name for f in h.fields].index(v[1])
            hid = self.stack_element(st, f"(v_t)F[{st.count_slot}] - 1")
            return self.hf_slot(hid, h, off)
        raise self.ctx.unsupported(f"field reference {_brief(tv)}")

    def is_varbit(self, tv: Any) -> bool:
        """Whether `tv` names a varbit field."""
        if not isinstance(tv, dict):
            return False
        t, v = tv.get("type"), tv.get("value")
        if t == "field":
            return self.L.field(v[0], v[1]).varbit
        if t == "expression" and isinstance(v, dict):
            if "op" not in v:
                return self.is_varbit(v)
            if v["op"] == "access_field":
                return self.href(v["left"])[2].fields[int(v["right"])].varbit
        return False

    def varbit(self, tv: dict) -> tuple[list[str], str]:
        """(code of each word, least significant first; code of the length slot) of a
        varbit field reference (the Python engine's ``varbit_ref``)."""
        t, v = tv["type"], tv["value"]
        if t == "field":
            h, f = self.L.header(v[0]), self.L.field(v[0], v[1])
            static, code, off = True, "", h.fields.index(f)
        elif t == "expression" and isinstance(v, dict) and "op" not in v:
            return self.varbit(v)
        elif t == "expression" and isinstance(v, dict) and v["op"] == "access_field":
            static, code, h = self.href(v["left"])
            off = int(v["right"])
        else:
            raise self.ctx.unsupported(f"varbit reference {_brief(tv)}")
        f = h.fields[off]
        if not f.varbit:
            raise self.ctx.unsupported(f"field {f.name!r} where a varbit field is needed")
        if static:
            return [str(w) for w in self.ctx.words(f)], str(f.len_slot)
        row = self.ctx.header_words(h)
        return ([f"p4n_hf[{code}][{i}]" for i in self.ctx.word_positions(h, off)],
                f"p4n_hf[{code}][{row.index(f.len_slot)}]")

    def hf_slot(self, hid: str, h: HeaderInfo, off: int) -> Slot:
        """Field `off` of the header whose id code `hid` gives at run time (of `h`'s type)."""
        f = h.fields[off]
        pos = [f"p4n_hf[{hid}][{i}]" for i in self.ctx.word_positions(h, off)]
        return Slot(pos[0], f.width, f.signed, tuple(pos[1:]))

    def assign(self, dst: dict, src: str) -> str:
        """Statement storing `src` into `dst`."""
        return store(self.lvalue(dst), src)

    def expr(self, tv: Any) -> str:
        """C source (type v_t) for a BMv2 type-value object."""
        if not isinstance(tv, dict):
            raise self.ctx.unsupported(f"expression {_brief(tv)}")
        t, v = tv.get("type"), tv.get("value")
        if t in ("field", "stack_field"):
            return read(self.lvalue(tv))
        if t == "hexstr":
            n = int(v, 16)
            if not -(1 << 127) <= n < 1 << MAX_EXPR_BITS:
                raise self.ctx.unsupported(f"constant {v} wider than {MAX_EXPR_BITS} bits")
            return lit(n)
        if t == "bool":
            return "((v_t)1)" if v else "((v_t)0)"
        if t in ("runtime_data", "local"):
            off, n = self.args.get(int(v), (int(v), 1))
            return f"p4n_w2(d[{off}], d[{off + 1}])" if n > 1 else f"((v_t)d[{off}])"
        if t == "lookahead":
            off, width = int(v[0]), int(v[1])
            at = f"(uint64_t)pos * 8 + {off}"
            if width <= 64:
                return f"((v_t)p4n_bits(data, dlen, {at}, {width}))"
            if width > MAX_EXPR_BITS:
                raise self.ctx.unsupported(f"lookahead of {width} bits (> {MAX_EXPR_BITS})")
            return (f"p4n_w2(p4n_bits(data, dlen, {at} + {width - 64}, 64), "
                    f"p4n_bits(data, dlen, {at}, {width - 64}))")
        if t == "expression":
            return self.expr(v) if "op" not in v else self.op(v)
        raise self.ctx.unsupported(f"expression operand type {t!r}")

    def op(self, v: dict) -> str:
        """C source for one expression operator node."""
        op = v["op"]
        left, right = v.get("left"), v.get("right")
        e = self.expr
        if op in _UNSIGNED and (self.big(left) or self.big(right)):
            return f"{_UNSIGNED[op]}({e(left)}, {e(right)})"
        if op in _ARITH:
            return f"{_ARITH[op]}({e(left)}, {e(right)})"
        if op in ("&", "|", "^"):
            return f"({e(left)} {op} {e(right)})"
        if op in ("==", "!=") and self.is_varbit(left) and self.is_varbit(right):
            # the Python engine compares the values (ints), not the lengths
            a, b = self.varbit(left)[0], self.varbit(right)[0]
            same = " && ".join(f"{_word(x)} == {_word(y)}" for x, y in zip_longest(a, b))
            return f"((v_t){'!' if op == '!=' else ''}({same}))"
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
        top = MAX_EXPR_BITS if op == "two_comp_mod" else 126
        if tv.get("type") != "hexstr" or not 0 < int(tv["value"], 16) <= top:
            raise self.ctx.unsupported(f"{op} with a width that is not a constant of 1..{top}")
        return int(tv["value"], 16)

    def big(self, tv: Any) -> bool:
        """Whether an expression may hold an unsigned value of 2**127 or more -- a
        128-bit pattern that `v_t` reads as negative, so that comparisons, right
        shifts and divisions on it must be unsigned (`_UNSIGNED`) to agree with the
        Python engine's unbounded ints. Such values come from unsigned 128-bit fields
        and constants, through the operators that keep a value's bits."""
        if not isinstance(tv, dict):
            return False
        t, v = tv.get("type"), tv.get("value")
        if t in ("field", "stack_field"):
            s = self.lvalue(tv)
            return not s.signed and s.width >= MAX_EXPR_BITS
        if t == "hexstr":
            return int(v, 16) >= 1 << 127
        if t == "lookahead":
            return int(v[1]) >= MAX_EXPR_BITS
        if t != "expression" or not isinstance(v, dict):
            return False
        if "op" not in v:
            return self.big(v)
        if v["op"] == "access_field":
            s = self.lvalue(tv)
            return not s.signed and s.width >= MAX_EXPR_BITS
        if v["op"] in ("&", "|", "^", "~", "+", "-", "*", "<<", ">>", "/", "%", "?"):
            return any(self.big(v.get(k)) for k in ("left", "right"))
        return False

    def header_equal(self, left: dict, right: dict, negate: bool) -> str:
        """BMv2 `==h`: both invalid, or both valid with equal fields."""
        _s, a, _h = self.href(left)
        _s2, b, _h2 = self.href(right)
        return f"((v_t)({'!' if negate else ''}p4n_h_equal(F, {a}, {b})))"


def _word(code: str | None) -> str:
    return "0" if code is None else f"F[{code}]"


def arg_layout(widths: list[int]) -> list[tuple[int, int]]:
    """Where each action parameter of `widths` bits is in the words the engine passes
    (`d`): (first word, words), a parameter wider than 64 bits taking two."""
    out, at = [], 0
    for w in widths:
        n = 2 if w > 64 else 1
        out.append((at, n))
        at += n
    return out


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
