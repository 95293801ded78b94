"""Expressions: BMv2 JSON type-value objects (fields, constants, operators, header and
union references) as Python expressions over the PHV `F`.

Every reference known at compile time becomes a constant slot index (``F[12]``); only a
header chosen at run time (a stack element ``hs[i]``, a union stack's member) goes
through the layout tables ``HF``/``HV``/``UH`` (see `symbols`). Nothing here emits a
statement; the other generators put these expressions into theirs.
"""

from __future__ import annotations

from typing import Any

from ..errors import ProgramError
from ..program import FieldInfo, HeaderInfo, StackInfo, UnionInfo
from .context import Context


def field_bits(f: FieldInfo) -> str:
    """Code reading field `f` as its unsigned bits (a signed field's slot holds the
    sign-extended value, keys and byte images need the bits)."""
    return f"F[{f.slot}]" + (f" & {hex(f.mask)}" if f.signed else "")


class Expressions:
    """Expression code for one program."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.L = ctx.layout
        self.symbols = ctx.symbols
        self._union_ids = {u.name: uid for uid, u in self.L.union_by_id.items()}

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
                return (False, f"{self.symbols.stack(stack.name)}[{idx}]",
                        self.L.by_id[stack.header_ids[0]])
            if op == "access_union_header":
                ucode, sample = self.uref(v["left"])
                off = int(v["right"])
                hid = sample.header_ids[off]
                if ucode.isdigit():
                    return True, str(hid), self.L.by_id[hid]
                return False, f"UH[{ucode}][{off}]", self.L.by_id[hid]
        raise ProgramError(f"expected a header reference, got {tv!r}")

    def uref(self, tv: dict) -> tuple[str, UnionInfo]:
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
            return f"{self.symbols.union_stack(st.name)}[{idx}]", self.L.union_by_id[st.header_ids[0]]
        raise ProgramError(f"expected a header union reference, got {tv!r}")

    def stack(self, name: str) -> StackInfo:
        """Header stack by name, or ProgramError."""
        try:
            return self.L.stacks[name]
        except KeyError:
            raise ProgramError(f"unknown header stack {name!r}") from None

    def valid_code(self, tv: dict) -> str:
        """Source reading the validity of a header reference."""
        static, code, h = self.href(tv)
        return f"F[{self.L.by_id[int(code)].valid_slot}]" if static else f"F[HV[{code}]]"

    # -- fields -----------------------------------------------------------------
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
            return (f"F[HF[{self.symbols.stack(st.name)}[F[{st.count_slot}] - 1]][{off}]]",
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

    def register(self, name: str) -> str:
        """Name bound to a register array's cell list."""
        self.ctx.declared(self.ctx.registers, "register array", name)
        return self.symbols.register(name)

    # -- expressions ------------------------------------------------------------
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
        if op in ("==", "!=") and operand_kind(left) != "data":
            # BMv2 picks the comparison from the operand type: headers and unions
            # compare validity and fields
            op += "h" if operand_kind(left) == "header" else "u"
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
            return operand_kind(v)
        if op in ("dereference_header_stack", "dereference_stack", "access_union_header"):
            return "header"
        if op == "dereference_union_stack":
            return "union"
    return "data"
