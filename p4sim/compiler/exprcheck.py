"""Types and expressions: the half of the type checker that works on one expression.

`ExprChecker` turns type syntax into semantic types (`type_of`), types expressions
(`expr`), checks calls -- argument counts and directions, inference of the type
parameters of generic externs and functions -- and tells assignable expressions
(`check_lvalue`). `typecheck.Checker` extends it with the walk over declarations and
statements; the contract both keep is documented in `typecheck`.
"""

from __future__ import annotations

import os
from typing import Any, Optional, Sequence

from p4sim.compiler import ast
from p4sim.compiler import consteval
from p4sim.compiler import types as T
from p4sim.compiler.diagnostics import CompileError, SrcPos
from p4sim.compiler.preprocess import P4INCLUDE
from p4sim.compiler.resolve import ProgramNames, Scope, TypeParam, describe, param_count


_BASE = {
    "bool": T.BoolT(), "error": T.ErrorT(), "string": T.StringT(), "void": T.VoidT(),
    "int": T.InfIntT(), "match_kind": T.MatchKindT(),
}
_HEADER_METHODS = {"isValid": T.BoolT(), "setValid": T.VoidT(), "setInvalid": T.VoidT()}
_ARITH = {"+", "-", "*", "/", "%", "|+|", "|-|", "&", "|", "^"}
_COMPARE = {"<", ">", "<=", ">="}


def fmt(t: Optional[T.Type]) -> str:
    """A type as P4 source writes it, for messages."""
    if isinstance(t, T.BitT):
        return f"{'int' if t.signed else 'bit'}<{t.width}>"
    if isinstance(t, T.VarbitT):
        return f"varbit<{t.max_width}>"
    if isinstance(t, T.InfIntT):
        return "int"
    simple = {T.BoolT: "bool", T.StringT: "string", T.VoidT: "void", T.ErrorT: "error",
              T.MatchKindT: "match_kind", T.DontCareT: "_"}
    for cls, word in simple.items():
        if isinstance(t, cls):
            return word
    if isinstance(t, T.StackT):
        return f"{fmt(t.element)}[{t.size}]"
    if isinstance(t, T.TupleT):
        return "tuple<" + ", ".join(fmt(e) for e in t.elements) + ">"
    if isinstance(t, T.ListT):
        return f"list<{fmt(t.element)}>"
    if isinstance(t, T.ExternT):
        return t.name + ("<" + ", ".join(fmt(a) for a in t.args) + ">" if t.args else "")
    if isinstance(t, (T.StructLikeT, T.EnumT, T.NewT, T.ParserT, T.ControlT, T.PackageT, T.TypeVarT)):
        return t.name or "struct"
    if isinstance(t, T.TableT):
        return f"table {t.name}"
    if isinstance(t, T.ActionT):
        return f"action {t.name}"
    if isinstance(t, T.MethodT):
        return "method"
    return type(t).__name__ if t is not None else "?"


def _require_architecture_extern(decl: ast.Decl, pos: SrcPos) -> None:
    """Only the externs of core.p4/v1model.p4 have an implementation in the switch;
    one the program declares itself would compile to nothing that runs."""
    if not os.path.abspath(decl.pos.file).startswith(P4INCLUDE + os.sep):
        raise CompileError(f"extern '{decl.name}' is not part of v1model: p4sim can only run the "
                           "externs of core.p4 and v1model.p4", pos, kind="unsupported")


def strip_newtype(t: T.Type) -> T.Type:
    """The representation of a ``type``-declared new type; other types unchanged."""
    return t.base if isinstance(t, T.NewT) else t


def _is_int_like(t: T.Type) -> bool:
    return isinstance(t, (T.BitT, T.InfIntT))


def _substitute(t: T.Type, sub: dict[str, T.Type]) -> T.Type:
    """``t`` with its type variables replaced (a generic struct's use ``pair_t<bit<8>>``)."""
    if isinstance(t, T.TypeVarT):
        return sub.get(t.name, t)
    if isinstance(t, T.StructLikeT):
        return type(t)(t.name, tuple(T.FieldT(f.name, _substitute(f.type, sub)) for f in t.fields))
    if isinstance(t, T.StackT):
        return T.StackT(_substitute(t.element, sub), t.size)
    if isinstance(t, T.TupleT):
        return T.TupleT(tuple(_substitute(e, sub) for e in t.elements))
    return t


class ExprChecker:
    """Types expressions in a scope; holds the context that changes their meaning
    (inside a parser, inside an action, the return type of the enclosing body)."""

    def __init__(self) -> None:
        self.names = ProgramNames()
        self._decl_types: dict[int, T.Type] = {}
        self.return_type: Optional[T.Type] = None
        self.in_parser = False
        self.in_action = False

    # ================================================================ types
    def type_of(self, tr: ast.TypeRef, scope: Scope) -> T.Type:
        """The semantic type ``tr`` denotes (also stored in ``tr.type``)."""
        t = self._type_of(tr, scope)
        tr.type = t
        return t

    def _type_of(self, tr: ast.TypeRef, scope: Scope) -> T.Type:
        if isinstance(tr, ast.BitTypeRef):
            w = self.const_int(tr.width, scope, "a width")
            if w < (1 if tr.kind != "bit" else 0):
                raise CompileError(f"invalid width {w} for {tr.kind}", tr.width.pos)
            if tr.kind == "varbit":
                return T.VarbitT(w)
            if w == 0:
                raise CompileError("bit<0> is not supported", tr.pos, kind="unsupported")
            return T.BitT(w, tr.kind == "int")
        if isinstance(tr, ast.BaseTypeRef):
            if tr.name in _BASE:
                return _BASE[tr.name]
            return self._named(ast.NamedTypeRef(tr.pos, tr.name), scope)
        if isinstance(tr, ast.StackTypeRef):
            elem = self.type_of(tr.element, scope)
            size = self.const_int(tr.size, scope, "a header stack size")
            if not isinstance(elem, (T.HeaderT, T.HeaderUnionT)):
                raise CompileError(f"header stacks must hold headers, not {fmt(elem)}", tr.pos)
            if size <= 0:
                raise CompileError(f"invalid header stack size {size}", tr.size.pos)
            return T.StackT(elem, size)
        if isinstance(tr, ast.TupleTypeRef):
            return T.TupleT(tuple(self.type_of(e, scope) for e in tr.elements))
        if isinstance(tr, ast.ListTypeRef):
            raise CompileError("list<T> is supported only as the type of a for-in loop's collection "
                               "(for (T x in (list<T>) {a, b}))", tr.pos, "unsupported")
        if isinstance(tr, ast.DontCareTypeRef):
            return T.DontCareT()
        if isinstance(tr, ast.NamedTypeRef):
            return self._named(tr, scope)
        raise CompileError("unknown type syntax", tr.pos)

    def _named(self, tr: ast.NamedTypeRef, scope: Scope) -> T.Type:
        d = scope.lookup(tr.name, tr.pos)
        args = tuple(self.type_of(a, scope) for a in tr.args)
        if isinstance(d, TypeParam):
            return T.TypeVarT(d.name)
        if isinstance(d, ast.ExternDecl):
            if len(args) > len(d.type_params) or (args and len(args) != len(d.type_params)):
                raise CompileError(f"extern '{d.name}' takes {len(d.type_params)} type arguments, "
                                   f"got {len(args)}", tr.pos)
            return T.ExternT(d.name, args or tuple(T.TypeVarT(n) for n in d.type_params), d)
        if isinstance(d, ast.StructDecl) and d.type_params:
            if len(args) != len(d.type_params):
                raise CompileError(f"struct '{d.name}' takes {len(d.type_params)} type arguments, "
                                   f"got {len(args)}", tr.pos)
            return _substitute(self.decl_type(d, scope), dict(zip(d.type_params, args)))
        if args and not isinstance(d, (ast.ParserTypeDecl, ast.ControlTypeDecl, ast.PackageTypeDecl)):
            raise CompileError(f"{describe(d)} does not take type arguments", tr.pos)
        if isinstance(d, (ast.HeaderDecl, ast.HeaderUnionDecl, ast.StructDecl, ast.EnumDecl,
                          ast.TypedefDecl, ast.ParserDecl, ast.ParserTypeDecl, ast.ControlDecl,
                          ast.ControlTypeDecl, ast.PackageTypeDecl)):
            return self.decl_type(d, scope)
        raise CompileError(f"{describe(d)} is not a type", tr.pos)

    def decl_type(self, d: ast.Decl, scope: Scope) -> T.Type:
        """The type a type declaration introduces (memoised per declaration)."""
        cached = self._decl_types.get(id(d))
        if cached is not None:
            return cached
        t: T.Type
        if isinstance(d, (ast.HeaderDecl, ast.HeaderUnionDecl, ast.StructDecl)):
            fields = []
            seen: set[str] = set()
            if isinstance(d, ast.StructDecl) and d.type_params:
                # a generic struct: fields over type variables, substituted per use
                scope = scope.child()
                for n in d.type_params:
                    scope.declare(n, TypeParam(n, d.pos), d.pos)
            for f in d.fields:
                if f.name in seen:
                    raise CompileError(f"duplicate field '{f.name}' in '{d.name}'", f.pos)
                seen.add(f.name)
                ft = self.type_of(f.type_ref, scope)
                self._check_field(d, f, ft)
                fields.append(T.FieldT(f.name, ft))
            cls = {ast.HeaderDecl: T.HeaderT, ast.HeaderUnionDecl: T.HeaderUnionT,
                   ast.StructDecl: T.StructT}[type(d)]
            t = cls(d.name, tuple(fields))
            if isinstance(d, ast.HeaderDecl):
                bits = sum(f.type.max_width if isinstance(f.type, T.VarbitT) else T.width_of(f.type)
                           for f in fields)
                if bits % 8:  # p4c's BMv2 back end refuses such headers (ERR_UNSUPPORTED_ON_TARGET)
                    raise CompileError(f"header '{d.name}' has fields of {bits} bits in all: BMv2 supports only "
                                       "headers of whole bytes (a multiple of 8 bits)", d.pos, "unsupported")
        elif isinstance(d, ast.EnumDecl):
            t = self._enum_type(d, scope)
        elif isinstance(d, ast.TypedefDecl):
            base = d.type_ref.type if d.type_ref.type is not None else self.type_of(d.type_ref, scope)
            t = T.NewT(d.name, base) if d.is_new_type else base
        elif isinstance(d, (ast.ParserDecl, ast.ParserTypeDecl)):
            t = T.ParserT(d.name, d)
        elif isinstance(d, (ast.ControlDecl, ast.ControlTypeDecl)):
            t = T.ControlT(d.name, d)
        elif isinstance(d, ast.PackageTypeDecl):
            t = T.PackageT(d.name, d)
        else:
            raise CompileError(f"{describe(d)} is not a type", d.pos)
        self._decl_types[id(d)] = t
        return t

    def _check_field(self, d: ast.Decl, f: ast.FieldDecl, ft: T.Type) -> None:
        ok: tuple[type, ...]
        if isinstance(d, ast.HeaderDecl):
            ok = (T.BitT, T.VarbitT, T.BoolT, T.NewT, T.EnumT)
            if isinstance(ft, T.EnumT) and ft.underlying is None:
                ok = ()
        elif isinstance(d, ast.HeaderUnionDecl):
            ok = (T.HeaderT,)
        else:
            ok = (T.BitT, T.VarbitT, T.BoolT, T.NewT, T.EnumT, T.ErrorT, T.StructT, T.HeaderT,
                  T.HeaderUnionT, T.StackT, T.TupleT, T.MatchKindT, T.TypeVarT)
        if isinstance(d, ast.HeaderDecl) and isinstance(ft, T.StructT) and _bit_like_struct(ft):
            ok = (T.StructT,)  # P4-16: a struct of bit-like fields (flattened in BMv2 JSON)
        if not isinstance(ft, ok):
            kind = "header" if isinstance(d, ast.HeaderDecl) else (
                "header union" if isinstance(d, ast.HeaderUnionDecl) else "struct")
            raise CompileError(f"field '{f.name}' of {kind} '{d.name}' cannot have type {fmt(ft)}", f.pos)
        if isinstance(d, ast.HeaderDecl) and isinstance(ft, T.VarbitT):
            others = [x for x in d.fields if x is not f and isinstance(x.type_ref.type, T.VarbitT)]
            if others:
                raise CompileError(f"header '{d.name}' has more than one varbit field", f.pos)

    def _enum_type(self, d: ast.EnumDecl, scope: Scope) -> T.Type:
        names = [m.name for m in d.members]
        for i, n in enumerate(names):
            if n in names[:i]:
                raise CompileError(f"duplicate enum member '{n}' in '{d.name}'", d.members[i].pos)
        for m in d.members:
            m.enum = d
        if d.underlying is None:
            return T.EnumT(d.name, tuple(names))
        under = self.type_of(d.underlying, scope)
        under = strip_newtype(under)
        if not isinstance(under, T.BitT):
            raise CompileError(f"the underlying type of enum '{d.name}' must be bit<W> or int<W>",
                               d.underlying.pos)
        values = []
        for m in d.members:
            assert m.value is not None
            self.expect(m.value, scope, under, f"value of {d.name}.{m.name}")
            values.append(int(consteval.evaluate(m.value, f"the value of {d.name}.{m.name}")))
        return T.EnumT(d.name, tuple(names), under, tuple(values))

    def const_int(self, e: ast.Expr, scope: Scope, what: str) -> int:
        """``e`` must be an integer known at compile time (of any integer type)."""
        t = strip_newtype(self.expr(e, scope))
        if not isinstance(t, (T.BitT, T.InfIntT)):
            raise CompileError(f"{what} must be an integer, not {fmt(t)}", e.pos)
        return int(consteval.evaluate(e, what))

    # ================================================================ assignable expressions
    def check_lvalue(self, e: ast.Expr, scope: Scope, what: str) -> None:
        """``e`` must denote storage the program may write."""
        if isinstance(e, ast.DontCareExpr):
            return
        if isinstance(e, ast.PathExpr):
            ref = e.ref
            if isinstance(ref, ast.VarDecl):
                return
            if isinstance(ref, ast.Param):
                if ref.direction in ("out", "inout"):
                    return
                kind = f"an '{ref.direction}' parameter" if ref.direction else "a directionless parameter"
                raise CompileError(f"'{e.name}' is {kind} and cannot be {what}", e.pos)
            raise CompileError(f"{describe(ref)} cannot be {what}", e.pos)
        if isinstance(e, ast.MemberExpr):
            if isinstance(e.expr.type, (T.StructLikeT, T.StackT)) and e.member not in ("size", "lastIndex"):
                self.check_lvalue(e.expr, scope, what)
                return
            raise CompileError(f"'{e.member}' cannot be {what}", e.pos)
        if isinstance(e, (ast.IndexExpr, ast.SliceExpr)):
            self.check_lvalue(e.expr, scope, what)
            return
        raise CompileError(f"an expression that is not assignable cannot be {what}", e.pos)

    # ================================================================ expressions
    def expect(self, e: ast.Expr, scope: Scope, t: T.Type, what: str) -> None:
        """Check ``e`` where a value of type ``t`` is required."""
        et = self.expr(e, scope, t)
        self.coerce(e, et, t, what)

    def coerce(self, e: ast.Expr, et: T.Type, t: T.Type, what: str) -> None:
        """Accept ``e`` (of type ``et``) where ``t`` is required, adopting the type for
        unsized literals; otherwise a type-mismatch error."""
        if self.compatible(t, et):
            if isinstance(et, T.InfIntT) and isinstance(strip_newtype(t), T.BitT):
                self.adopt(e, t)
            return
        raise CompileError(self._mismatch(et, t, what), e.pos)

    @staticmethod
    def _mismatch(et: T.Type, t: T.Type, what: str) -> str:
        hint = ""
        if isinstance(et, T.BitT) and isinstance(t, T.BitT):
            hint = " (widths differ; use a cast)" if et.width != t.width else " (use a cast)"
        return f"type mismatch in {what}: expected {fmt(t)}, got {fmt(et)}{hint}"

    def compatible(self, want: T.Type, got: T.Type) -> bool:
        if want == got or isinstance(got, T.DontCareT) or isinstance(want, (T.DontCareT, T.TypeVarT)):
            return True
        if isinstance(got, T.InfIntT):
            return isinstance(strip_newtype(want), (T.BitT, T.InfIntT))
        if isinstance(got, T.EnumT) and got.underlying is not None and got.underlying == want:
            return True  # implicit cast of a serializable enum to its underlying type
        if isinstance(want, T.StructLikeT) and isinstance(got, T.TupleT):
            return len(want.fields) == len(got.elements) and all(
                self.compatible(f.type, g) for f, g in zip(want.fields, got.elements))
        if isinstance(want, T.StructLikeT) and isinstance(got, T.StructT) and got.name == "":
            return [f.name for f in want.fields] == [f.name for f in got.fields] and all(
                self.compatible(f.type, g.type) for f, g in zip(want.fields, got.fields))
        if isinstance(want, T.TupleT) and isinstance(got, T.TupleT):
            return len(want.elements) == len(got.elements) and all(
                self.compatible(a, b) for a, b in zip(want.elements, got.elements))
        if isinstance(want, T.ExternT) and isinstance(got, T.ExternT):
            return want.name == got.name and all(
                self.compatible(a, b) for a, b in zip(want.args, got.args))
        if isinstance(want, T.ParserT) and isinstance(got, T.ParserT):
            return True
        if isinstance(want, T.ControlT) and isinstance(got, T.ControlT):
            return True
        return False

    def adopt(self, e: ast.Expr, t: T.Type) -> None:
        """Give an unsized-integer expression the type ``t`` its context requires."""
        if not isinstance(e.type, T.InfIntT):
            return
        e.type = t
        if isinstance(e, ast.BinaryExpr) and e.op not in ("<<", ">>"):
            self.adopt(e.left, t)
            self.adopt(e.right, t)
        elif isinstance(e, ast.BinaryExpr):
            self.adopt(e.left, t)
        elif isinstance(e, ast.UnaryExpr):
            self.adopt(e.expr, t)
        elif isinstance(e, ast.TernaryExpr):
            self.adopt(e.then, t)
            self.adopt(e.else_, t)

    def expr(self, e: ast.Expr, scope: Scope, expected: Optional[T.Type] = None) -> T.Type:
        """Type ``e`` (setting ``e.type``); ``expected`` guides literals and lists."""
        t = self._expr(e, scope, expected)
        e.type = t
        return t

    def _expr(self, e: ast.Expr, scope: Scope, expected: Optional[T.Type]) -> T.Type:
        if isinstance(e, ast.IntLit):
            if e.width is not None:
                return T.BitT(e.width, e.signed)
            if expected is not None and isinstance(strip_newtype(expected), T.BitT):
                return expected
            return T.InfIntT()
        if isinstance(e, ast.BoolLit):
            return T.BoolT()
        if isinstance(e, ast.StringLit):
            return T.StringT()
        if isinstance(e, ast.PathExpr):
            return self.path(e, scope)
        if isinstance(e, ast.TypeNameExpr):
            return self.type_of(e.type_ref, scope)
        if isinstance(e, ast.MemberExpr):
            return self.member(e, scope)
        if isinstance(e, ast.IndexExpr):
            return self.index(e, scope)
        if isinstance(e, ast.SliceExpr):
            return self.slice(e, scope)
        if isinstance(e, ast.UnaryExpr):
            return self.unary(e, scope, expected)
        if isinstance(e, ast.BinaryExpr):
            return self.binary(e, scope, expected)
        if isinstance(e, ast.TernaryExpr):
            self.expect(e.cond, scope, T.BoolT(), "condition of ?:")
            a = self.expr(e.then, scope, expected)
            b = self.expr(e.else_, scope, expected if isinstance(a, T.InfIntT) else a)
            return self.unify_operands(e.then, a, e.else_, b, "?:", e.pos)
        if isinstance(e, ast.CastExpr):
            return self.cast(e, scope)
        if isinstance(e, ast.CallExpr):
            return self.call(e, scope)
        if isinstance(e, ast.ListExpr):
            return self.list_expr(e, scope, expected)
        if isinstance(e, ast.StructInitExpr):
            return self.struct_init(e, scope, expected)
        if isinstance(e, (ast.DefaultExpr, ast.DontCareExpr)):
            return T.DontCareT()
        raise CompileError(f"unexpected expression {type(e).__name__}", e.pos)

    def path(self, e: ast.PathExpr, scope: Scope) -> T.Type:
        found = scope.lookup_all(e.name, e.top_level)
        if not found:
            raise CompileError(f"undefined name '{e.name}'", e.pos)
        d = found[0]
        e.ref = d
        return self.value_type(d, e)

    def value_type(self, d: Any, e: ast.Expr) -> T.Type:
        """The type of a name used as a value."""
        if isinstance(d, (ast.VarDecl, ast.ConstDecl, ast.Param)):
            return d.type_ref.type
        if isinstance(d, ast.InstantiationDecl):
            return d.type_ref.type
        if isinstance(d, ast.TableDecl):
            return T.TableT(d.name)
        if isinstance(d, ast.ActionDecl):
            return T.ActionT(d.name)
        if isinstance(d, ast.ValueSetDecl):
            return T.ValueSetT(d.element.type)
        if isinstance(d, (ast.FunctionDecl, ast.ExternFunctionDecl)):
            proto = d.proto if isinstance(d, ast.ExternFunctionDecl) else d
            return T.MethodT(tuple(p.type_ref.type for p in proto.params), proto.return_type.type)
        raise CompileError(f"{describe(d)} cannot be used as a value", e.pos)

    def member(self, e: ast.MemberExpr, scope: Scope) -> T.Type:
        if isinstance(e.expr, ast.TypeNameExpr):
            return self.type_member(e, scope)
        ot = self.expr(e.expr, scope)
        base = strip_newtype(ot)
        name = e.member
        if isinstance(base, (T.HeaderT, T.HeaderUnionT)) and name in _HEADER_METHODS:
            if isinstance(base, T.HeaderUnionT) and name != "isValid":
                raise CompileError(f"header unions have no method '{name}'", e.member_pos or e.pos)
            return T.MethodT((), _HEADER_METHODS[name])
        if isinstance(base, T.StructLikeT):
            f = base.field(name)
            if f is None:
                raise CompileError(f"{fmt(base)} has no field '{name}'", e.member_pos or e.pos)
            return f.type
        if isinstance(base, T.StackT):
            if name in ("next", "last"):
                if not self.in_parser:
                    raise CompileError(f"'{name}' of a header stack is only allowed in a parser", e.member_pos or e.pos)
                return base.element
            if name in ("size", "lastIndex"):
                return T.BitT(32)
            if name in ("push_front", "pop_front"):
                return T.MethodT((T.InfIntT(),), T.VoidT())
            raise CompileError(f"header stacks have no member '{name}'", e.member_pos or e.pos)
        if isinstance(base, T.ExternT):
            methods = [m for m in base.decl.methods if m.name == name and m.return_type is not None]
            if not methods:
                raise CompileError(f"extern '{base.name}' has no method '{name}'", e.member_pos or e.pos)
            e.ref = methods[0]
            return T.MethodT(tuple(p.type_ref.type for p in methods[0].params), methods[0].return_type.type)
        if isinstance(base, T.TableT):
            if name == "apply":
                if self.in_action:
                    raise CompileError("tables cannot be applied inside an action", e.member_pos or e.pos)
                return T.MethodT((), T.ApplyResultT(base.name))
            raise CompileError(f"tables have no member '{name}' (only apply)", e.member_pos or e.pos)
        if isinstance(base, T.ApplyResultT):
            if name in ("hit", "miss"):
                return T.BoolT()
            if name == "action_run":
                return T.ActionEnumT(base.table)
            raise CompileError(f"a table's apply() result has no member '{name}'", e.member_pos or e.pos)
        if isinstance(base, (T.ParserT, T.ControlT)) and name == "apply":
            # an instance, or a constructor parameter of a control/parser type
            if isinstance(e.expr, ast.PathExpr) and isinstance(e.expr.ref, (ast.InstantiationDecl, ast.Param)):
                params = base.decl.params
                return T.MethodT(tuple(p.type_ref.type for p in params), T.VoidT())
        raise CompileError(f"{fmt(ot)} has no member '{name}'", e.member_pos or e.pos)

    def type_member(self, e: ast.MemberExpr, scope: Scope) -> T.Type:
        assert isinstance(e.expr, ast.TypeNameExpr)
        tt = self.expr(e.expr, scope)
        if isinstance(tt, T.ErrorT):
            if e.member not in self.names.errors:
                raise CompileError(f"error.{e.member} is not declared", e.member_pos or e.pos)
            return tt
        if isinstance(tt, T.EnumT):
            decl = self._enum_decl(e.expr.type_ref, scope)
            for m in decl.members:
                if m.name == e.member:
                    e.ref = m
                    return tt
            raise CompileError(f"enum '{tt.name}' has no member '{e.member}'", e.member_pos or e.pos)
        if isinstance(tt, (T.ParserT, T.ControlT)) and e.member == "apply" \
                and isinstance(tt.decl, (ast.ParserDecl, ast.ControlDecl)):
            if tt.decl.ctor_params:
                raise CompileError(f"'{tt.name}' has constructor parameters, so it cannot be applied by its "
                                   "type name", e.member_pos or e.pos)
            return T.MethodT(tuple(p.type_ref.type for p in tt.decl.params), T.VoidT())
        raise CompileError(f"type {fmt(tt)} has no member '{e.member}'", e.member_pos or e.pos)

    def _enum_decl(self, tr: ast.TypeRef, scope: Scope) -> ast.EnumDecl:
        assert isinstance(tr, ast.NamedTypeRef)
        d = scope.lookup(tr.name, tr.pos)
        while isinstance(d, ast.TypedefDecl):
            inner = d.type_ref
            assert isinstance(inner, ast.NamedTypeRef)
            d = scope.lookup(inner.name, inner.pos)
        assert isinstance(d, ast.EnumDecl)
        return d

    def index(self, e: ast.IndexExpr, scope: Scope) -> T.Type:
        ot = self.expr(e.expr, scope)
        it = self.expr(e.index, scope)
        bt = strip_newtype(it)
        if isinstance(bt, T.EnumT) and bt.underlying is not None:
            bt = bt.underlying  # a serializable enum indexes by its value, as in p4c
        if not _is_int_like(bt):
            raise CompileError(f"an index must be an integer, not {fmt(it)}", e.index.pos)
        if isinstance(ot, T.StackT):
            v = consteval.try_evaluate(e.index)
            if v is not None and not 0 <= int(v) < ot.size:
                raise CompileError(f"index {v} is out of bounds for a stack of size {ot.size}", e.index.pos)
            return ot.element
        if isinstance(ot, T.TupleT):
            v = consteval.evaluate(e.index, "a tuple index")
            return ot.elements[int(v)]
        raise CompileError(f"cannot index a value of type {fmt(ot)}", e.pos)

    def slice(self, e: ast.SliceExpr, scope: Scope) -> T.Type:
        ot = strip_newtype(self.expr(e.expr, scope))
        hi = self.const_int(e.hi, scope, "a slice bound")
        lo = self.const_int(e.lo, scope, "a slice bound")
        if not isinstance(ot, T.BitT):
            if isinstance(ot, T.InfIntT):
                return T.BitT(int(hi) - int(lo) + 1)
            raise CompileError(f"cannot slice a value of type {fmt(ot)}", e.pos)
        if not 0 <= lo <= hi < ot.width:
            raise CompileError(f"slice [{hi}:{lo}] is out of range for {fmt(ot)}", e.pos)
        return T.BitT(int(hi) - int(lo) + 1)

    def unary(self, e: ast.UnaryExpr, scope: Scope, expected: Optional[T.Type]) -> T.Type:
        if e.op == "!":
            self.expect(e.expr, scope, T.BoolT(), "operand of !")
            return T.BoolT()
        t = self.expr(e.expr, scope, expected)
        b = strip_newtype(t)
        if e.op == "~" and isinstance(b, T.BitT):
            return t
        if e.op in ("-", "+") and isinstance(b, (T.BitT, T.InfIntT)):
            return t
        if e.op == "~" and isinstance(b, T.InfIntT):
            raise CompileError("~ needs an operand of known width (use a cast or a width prefix)", e.pos)
        raise CompileError(f"operator {e.op} cannot be applied to {fmt(t)}", e.pos)

    def unify_operands(self, le: ast.Expr, lt: T.Type, re_: ast.Expr, rt: T.Type, op: str,
                       pos: SrcPos) -> T.Type:
        """Both operands must have one type; an unsized literal adopts the other's."""
        if lt == rt:
            return lt
        if isinstance(lt, T.InfIntT) and self.compatible(rt, lt):
            self.adopt(le, rt)
            return rt
        if isinstance(rt, T.InfIntT) and self.compatible(lt, rt):
            self.adopt(re_, lt)
            return lt
        if isinstance(lt, T.DontCareT):
            return rt
        if isinstance(rt, T.DontCareT) or self.compatible(lt, rt):
            return lt
        if self.compatible(rt, lt):
            return rt
        hint = ""
        if isinstance(lt, T.BitT) and isinstance(rt, T.BitT):
            hint = " (widths differ; use a cast)" if lt.width != rt.width else " (use a cast)"
        raise CompileError(f"operands of {op} have different types: {fmt(lt)} and {fmt(rt)}{hint}", pos)

    def binary(self, e: ast.BinaryExpr, scope: Scope, expected: Optional[T.Type]) -> T.Type:
        op = e.op
        if op in ("&&", "||"):
            self.expect(e.left, scope, T.BoolT(), f"operand of {op}")
            self.expect(e.right, scope, T.BoolT(), f"operand of {op}")
            return T.BoolT()
        if op in ("&&&", ".."):
            raise CompileError(f"'{op}' is only allowed in a keyset", e.pos)
        if op in ("<<", ">>"):
            lt = self.expr(e.left, scope, expected)
            rt = self.expr(e.right, scope)
            if not isinstance(strip_newtype(lt), (T.BitT, T.InfIntT)):
                raise CompileError(f"cannot shift a value of type {fmt(lt)}", e.left.pos)
            if not isinstance(rt, (T.BitT, T.InfIntT)) or (isinstance(rt, T.BitT) and rt.signed):
                # a `type` is not its base type here (p4c: bit<S> or a non-negative constant)
                raise CompileError(f"a shift amount must be an unsigned integer, not {fmt(rt)}", e.right.pos)
            # p4c types `1 << x` before its context: an unsized left operand shifted by a
            # run-time amount has no width, even where the context would give one
            unsized = (isinstance(e.left, ast.IntLit) and e.left.width is None
                       and consteval.const_value(e.right) is None)
            if (isinstance(lt, T.InfIntT) or unsized) and not isinstance(rt, T.InfIntT):
                raise CompileError("the left operand of a shift needs a known width (use a cast)", e.left.pos)
            return lt
        if op == "++":
            lt = strip_newtype(self.expr(e.left, scope))
            rt = strip_newtype(self.expr(e.right, scope))
            for side, t in ((e.left, lt), (e.right, rt)):
                if not isinstance(t, T.BitT):
                    raise CompileError(f"operands of ++ must be bit<W> or int<W>, not {fmt(t)}", side.pos)
            assert isinstance(lt, T.BitT) and isinstance(rt, T.BitT)
            return T.BitT(lt.width + rt.width, lt.signed)
        if op in ("==", "!="):
            lt = self.expr(e.left, scope)
            rt = self.expr(e.right, scope, lt)
            if isinstance(lt, T.InfIntT) and not isinstance(rt, T.InfIntT):
                lt = self.expr(e.left, scope, rt)
            self.unify_operands(e.left, lt, e.right, rt, op, e.pos)
            return T.BoolT()
        lt = self.expr(e.left, scope, expected)
        rt = self.expr(e.right, scope, lt if not isinstance(lt, T.InfIntT) else expected)
        if isinstance(lt, T.InfIntT) and not isinstance(rt, T.InfIntT):
            lt = self.expr(e.left, scope, rt)
        t = self.unify_operands(e.left, lt, e.right, rt, op, e.pos)
        b = strip_newtype(t)
        if op in _COMPARE:
            if not isinstance(b, (T.BitT, T.InfIntT)):
                raise CompileError(f"operator {op} cannot compare values of type {fmt(t)}", e.pos)
            return T.BoolT()
        if op in _ARITH:
            if not isinstance(b, (T.BitT, T.InfIntT)):
                raise CompileError(f"operator {op} cannot be applied to {fmt(t)}", e.pos)
            if op in ("/", "%") and isinstance(b, T.BitT) and b.signed:
                raise CompileError(f"operator {op} is not defined for signed values", e.pos,
                                   kind="unsupported")
            return t
        raise CompileError(f"unknown operator {op}", e.pos)

    def cast(self, e: ast.CastExpr, scope: Scope) -> T.Type:
        to = self.type_of(e.type_ref, scope)
        src = self.expr(e.expr, scope, to if isinstance(e.expr, (ast.ListExpr, ast.StructInitExpr)) else None)
        a, b = strip_newtype(to), strip_newtype(src)
        if self.compatible(to, src) or a == b:
            if isinstance(src, T.InfIntT) and isinstance(a, T.BitT):
                self.adopt(e.expr, to)
            return to
        ok = (
            (isinstance(a, T.BitT) and isinstance(b, (T.BitT, T.BoolT, T.InfIntT)))
            or (isinstance(a, T.BoolT) and isinstance(b, T.BitT) and b.width == 1)
            or (isinstance(a, T.BoolT) and isinstance(b, T.InfIntT))
            or (isinstance(a, T.BitT) and isinstance(b, T.EnumT) and b.underlying is not None)
            or (isinstance(a, T.EnumT) and a.underlying is not None and isinstance(b, (T.BitT, T.InfIntT)))
        )
        if not ok:
            raise CompileError(f"cannot cast {fmt(src)} to {fmt(to)}", e.pos)
        return to

    def list_expr(self, e: ast.ListExpr, scope: Scope, expected: Optional[T.Type]) -> T.Type:
        if isinstance(expected, T.StructLikeT) and len(expected.fields) == len(e.elements):
            for el, f in zip(e.elements, expected.fields):
                self.expect(el, scope, f.type, f"field '{f.name}'")
            return expected
        if isinstance(expected, T.TupleT) and len(expected.elements) == len(e.elements):
            for el, t in zip(e.elements, expected.elements):
                self.expect(el, scope, t, "tuple element")
            return expected
        return T.TupleT(tuple(self.expr(el, scope) for el in e.elements))

    def struct_init(self, e: ast.StructInitExpr, scope: Scope, expected: Optional[T.Type]) -> T.Type:
        if isinstance(expected, T.StructLikeT):
            names = [n for n, _ in e.fields]
            for n, v in e.fields:
                f = expected.field(n)
                if f is None:
                    raise CompileError(f"{fmt(expected)} has no field '{n}'", v.pos)
                self.expect(v, scope, f.type, f"field '{n}'")
            missing = [f.name for f in expected.fields if f.name not in names]
            if missing:
                raise CompileError(f"missing field '{missing[0]}' in initializer of {fmt(expected)}", e.pos)
            return expected
        fields = tuple(T.FieldT(n, self.expr(v, scope)) for n, v in e.fields)
        return T.StructT("", fields)

    # ================================================================ calls
    def call(self, e: ast.CallExpr, scope: Scope) -> T.Type:
        target = e.target
        if isinstance(target, ast.TypeNameExpr):
            return self.constructor_call(e, scope)
        if isinstance(target, ast.PathExpr):
            found = scope.lookup_all(target.name, target.top_level)
            if not found:
                raise CompileError(f"undefined name '{target.name}'", target.pos)
            callables = [d for d in found if isinstance(d, (ast.ActionDecl, ast.FunctionDecl,
                                                            ast.ExternFunctionDecl))]
            if not callables:
                if isinstance(found[0], (ast.ParserDecl, ast.ControlDecl, ast.ExternDecl)):
                    raise CompileError(f"{describe(found[0])} is a type: instantiate it "
                                       f"({found[0].name}() name;) and call name.apply()", target.pos)
                raise CompileError(f"{describe(found[0])} is not callable", target.pos)
            decl = self._pick_overload(callables, e, target.name)
            target.ref = decl
            if isinstance(decl, ast.ActionDecl):
                if self.return_type is None and self.in_parser:
                    raise CompileError("actions cannot be called from a parser", e.pos)
                target.type = T.ActionT(decl.name)
                self.arguments(e.args, decl.params, {}, decl.name, e.pos, scope)
                return T.VoidT()
            if isinstance(decl, ast.ExternFunctionDecl):
                _require_architecture_extern(decl, target.pos)
            proto = decl.proto if isinstance(decl, ast.ExternFunctionDecl) else decl
            return self.proto_call(e, proto, {}, scope)
        if isinstance(target, ast.MemberExpr):
            if isinstance(target.expr, ast.TypeNameExpr):
                mt = self.expr(target, scope)
                tt = target.expr.type
                if isinstance(mt, T.MethodT) and isinstance(tt, (T.ParserT, T.ControlT)):
                    if self.in_action:
                        raise CompileError("controls cannot be applied inside an action", e.pos)
                    self.arguments(e.args, tt.decl.params, {}, f"{tt.decl.name}.apply", e.pos, scope)
                    return T.VoidT()
                raise CompileError(f"'{target.member}' is not callable", target.member_pos or target.pos)
            ot = self.expr(target.expr, scope)
            base = strip_newtype(ot)
            if isinstance(base, T.ExternT):
                methods = [m for m in base.decl.methods if m.name == target.member and m.return_type is not None]
                if not methods:
                    raise CompileError(f"extern '{base.name}' has no method '{target.member}'",
                                       target.member_pos or target.pos)
                proto = self._pick_overload(methods, e, target.member)
                target.ref = proto
                bindings = {n: a for n, a in zip(base.decl.type_params, base.args)
                            if not isinstance(a, T.TypeVarT)}
                return self.proto_call(e, proto, bindings, scope)
            mt = self.member(target, scope)
            target.type = mt
            if not isinstance(mt, T.MethodT):
                raise CompileError(f"'{target.member}' is not callable", target.member_pos or target.pos)
            return self.builtin_call(e, target, base, mt, scope)
        t = self.expr(target, scope)
        raise CompileError(f"a value of type {fmt(t)} is not callable", target.pos)

    def builtin_call(self, e: ast.CallExpr, target: ast.MemberExpr, base: T.Type, mt: T.MethodT,
                     scope: Scope) -> T.Type:
        name = target.member
        if isinstance(base, (T.ParserT, T.ControlT)):
            assert isinstance(target.expr, ast.PathExpr)
            decl = base.decl
            self.arguments(e.args, decl.params, {}, f"{decl.name}.apply", e.pos, scope)
            return T.VoidT()
        if isinstance(base, T.StackT):
            if len(e.args) != 1:
                raise CompileError(f"{name} expects 1 argument, got {len(e.args)}", e.pos)
            self.const_int(e.args[0].value, scope, f"the argument of {name}")
            self.check_lvalue(target.expr, scope, f"modified by {name}")
            return T.VoidT()
        if e.args:
            raise CompileError(f"{name} expects no arguments, got {len(e.args)}", e.pos)
        if name in ("setValid", "setInvalid"):
            self.check_lvalue(target.expr, scope, f"modified by {name}")
        return mt.return_type

    def _pick_overload(self, decls: list, e: ast.CallExpr, name: str) -> Any:
        n = len(e.args)
        fitting = [d for d in decls if param_count(d)[0] <= n <= param_count(d)[1]]
        if not fitting:
            counts = sorted({param_count(d)[1] for d in decls})
            want = " or ".join(str(c) for c in counts)
            raise CompileError(f"wrong number of arguments to '{name}': expected {want}, got {n}", e.pos)
        if len(fitting) > 1:
            exact = [d for d in fitting if param_count(d)[1] == n]
            if exact:
                return exact[0]
        return fitting[0]

    def proto_call(self, e: ast.CallExpr, proto: Any, bindings: dict[str, T.Type], scope: Scope) -> T.Type:
        """A call of an extern method/function or a P4 function: infer type params."""
        tparams = list(getattr(proto, "type_params", []))
        if e.type_args:
            if len(e.type_args) != len(tparams):
                raise CompileError(f"'{proto.name}' takes {len(tparams)} type arguments, got "
                                   f"{len(e.type_args)}", e.pos)
            for n, tr in zip(tparams, e.type_args):
                bindings[n] = self.type_of(tr, scope)
            if proto.name == "lookahead" and not _fixed_width(bindings[tparams[0]]):
                raise CompileError("the type argument of lookahead must be a fixed-width type (no varbit "
                                   "field, no header union), as P4-16 and p4c require", e.type_args[0].pos)
        self.arguments(e.args, proto.params, bindings, proto.name, e.pos, scope)
        ret = self.subst(proto.return_type.type, bindings)
        e.target.type = T.MethodT(tuple(self.subst(p.type_ref.type, bindings) for p in proto.params), ret)
        if isinstance(ret, T.TypeVarT) and ret.name in tparams:
            raise CompileError(f"cannot infer the type {ret.name} that '{proto.name}' returns: "
                               f"give it as {proto.name}<type>(...)", e.pos)
        return ret

    def arguments(self, args: list[ast.Argument], params: Sequence[ast.Param], bindings: dict[str, T.Type],
                  callee: str, pos: SrcPos, scope: Scope) -> None:
        """Match arguments to parameters, check directions and types, infer bindings."""
        pairs: list[tuple[ast.Param, ast.Argument]] = []
        if any(a.name for a in args):
            by_name = {p.name: p for p in params}
            for a in args:
                if a.name is None:
                    raise CompileError("cannot mix named and positional arguments", a.pos)
                if a.name not in by_name:
                    raise CompileError(f"'{callee}' has no parameter named '{a.name}'", a.pos)
                pairs.append((by_name[a.name], a))
            given = {a.name for a in args}
            for p in params:
                if p.name not in given and p.default is None and p.annotation("optional") is None:
                    raise CompileError(f"missing argument for parameter '{p.name}' of '{callee}'", pos)
        else:
            required = sum(1 for p in params if p.default is None and p.annotation("optional") is None)
            if not required <= len(args) <= len(params):
                want = str(len(params)) if required == len(params) else f"{required} to {len(params)}"
                raise CompileError(f"wrong number of arguments to '{callee}': expected {want}, "
                                   f"got {len(args)}", pos)
            pairs = list(zip(params, args))
        for p, a in pairs:
            pt = self.subst(p.type_ref.type, bindings)
            at = self.expr(a.value, scope, None if self._has_var(pt) else pt)
            a.value.type = at
            if self._has_var(pt):
                self.unify(pt, at, bindings, a.value, p, callee)
                pt = self.subst(pt, bindings)
            if p.direction in ("out", "inout"):
                if isinstance(a.value, ast.DontCareExpr) and p.direction == "out":
                    a.value.type = pt
                    continue
                self.check_lvalue(a.value, scope, f"passed to '{p.direction}' parameter '{p.name}' of "
                                  f"'{callee}'")
                if not (at == pt or isinstance(pt, (T.TypeVarT, T.DontCareT))):
                    raise CompileError(f"type mismatch for '{p.direction}' parameter '{p.name}' of "
                                       f"'{callee}': expected {fmt(pt)}, got {fmt(at)}", a.value.pos)
            elif isinstance(pt, (T.ParserT, T.ControlT)) and type(pt) is type(at):
                self._check_block_arg(pt, at, bindings, a.value, f"argument '{p.name}' of '{callee}'")
            else:
                self.coerce(a.value, at, pt, f"argument '{p.name}' of '{callee}'")

    def _check_block_arg(self, want: Any, got: Any, bindings: dict[str, T.Type], e: ast.Expr,
                         what: str) -> None:
        """A parser/control passed to a package must have the parameter list of the
        package's block type, with its type parameters (``H``, ``M``) bound
        consistently across all the package's arguments."""
        wparams, gparams = want.decl.params, got.decl.params
        if len(wparams) != len(gparams):
            raise CompileError(f"{what}: {got.name} has {len(gparams)} parameters, {want.name} needs "
                               f"{len(wparams)}", e.pos)
        for wp, gp in zip(wparams, gparams):
            wt, gt = wp.type_ref.type, gp.type_ref.type
            if wp.direction != gp.direction:
                raise CompileError(f"{what}: parameter '{gp.name}' of {got.name} is "
                                   f"'{gp.direction or 'directionless'}', {want.name} needs "
                                   f"'{wp.direction or 'directionless'}'", e.pos)
            if isinstance(wt, T.TypeVarT):
                bound = bindings.setdefault(f"{want.decl.name}:{wt.name}", gt)
                shared = bindings.setdefault(wt.name, gt)
                if bound != gt or shared != gt:
                    raise CompileError(f"{what}: parameter '{gp.name}' of {got.name} has type {fmt(gt)}, "
                                       f"but {wt.name} is {fmt(shared)} for the other blocks", e.pos)
            elif wt != gt:
                raise CompileError(f"{what}: parameter '{gp.name}' of {got.name} has type {fmt(gt)}, "
                                   f"{want.name} needs {fmt(wt)}", e.pos)

    def _has_var(self, t: T.Type) -> bool:
        if isinstance(t, T.TypeVarT):
            return True
        if isinstance(t, T.TupleT):
            return any(self._has_var(x) for x in t.elements)
        if isinstance(t, T.StackT):
            return self._has_var(t.element)
        if isinstance(t, T.ExternT):
            return any(self._has_var(x) for x in t.args)
        return False

    def unify(self, pt: T.Type, at: T.Type, bindings: dict[str, T.Type], e: ast.Expr, p: ast.Param,
              callee: str) -> None:
        if isinstance(pt, T.TypeVarT):
            if pt.name not in bindings:
                bindings[pt.name] = at
            return
        if isinstance(pt, T.TupleT) and isinstance(at, T.TupleT) and len(pt.elements) == len(at.elements):
            for x, y in zip(pt.elements, at.elements):
                self.unify(x, y, bindings, e, p, callee)
            return
        if isinstance(pt, T.ExternT) and isinstance(at, T.ExternT) and pt.name == at.name:
            for x, y in zip(pt.args, at.args):
                self.unify(x, y, bindings, e, p, callee)
            return
        raise CompileError(f"type mismatch for parameter '{p.name}' of '{callee}': expected {fmt(pt)}, "
                           f"got {fmt(at)}", e.pos)

    def subst(self, t: T.Type, bindings: dict[str, T.Type]) -> T.Type:
        if not bindings:
            return t
        if isinstance(t, T.TypeVarT):
            return bindings.get(t.name, t)
        if isinstance(t, T.TupleT):
            return T.TupleT(tuple(self.subst(x, bindings) for x in t.elements))
        if isinstance(t, T.StackT):
            return T.StackT(self.subst(t.element, bindings), t.size)
        if isinstance(t, T.ExternT):
            return T.ExternT(t.name, tuple(self.subst(x, bindings) for x in t.args), t.decl)
        return t

    def constructor_call(self, e: ast.CallExpr, scope: Scope) -> T.Type:
        """``T(args)``: an extern, parser, control or package instance."""
        assert isinstance(e.target, ast.TypeNameExpr)
        tr = e.target.type_ref
        t = self.expr(e.target, scope)
        if isinstance(t, T.ExternT):
            decl = t.decl
            _require_architecture_extern(decl, e.pos)
            ctors = [m for m in decl.methods if m.return_type is None]
            if not ctors:
                raise CompileError(f"extern '{decl.name}' has no constructor", e.pos)
            ctor = self._pick_overload(ctors, e, decl.name)
            bindings = {n: a for n, a in zip(decl.type_params, t.args) if not isinstance(a, T.TypeVarT)}
            self.arguments(e.args, ctor.params, bindings, decl.name, e.pos, scope)
            result = T.ExternT(decl.name, tuple(bindings.get(n, T.TypeVarT(n)) for n in decl.type_params), decl)
            tr.type = result
            e.target.type = result
            return result
        if isinstance(t, (T.ParserT, T.ControlT)):
            decl = t.decl
            if isinstance(decl, (ast.ParserTypeDecl, ast.ControlTypeDecl)):
                raise CompileError(f"{describe(decl)} is only a type and cannot be instantiated", e.pos)
            self.arguments(e.args, decl.ctor_params, {}, decl.name, e.pos, scope)
            return t
        if isinstance(t, T.PackageT):
            decl = t.decl
            self.arguments(e.args, decl.params, {}, decl.name, e.pos, scope)
            return t
        raise CompileError(f"type {fmt(t)} cannot be instantiated", e.pos)


def _fixed_width(t: T.Type) -> bool:
    """Whether ``t`` has one width for every value: no varbit, no header union in it."""
    bt = t.base if isinstance(t, T.NewT) else t
    if isinstance(bt, T.HeaderUnionT):
        return False
    if isinstance(bt, T.StructLikeT):
        return all(_fixed_width(f.type) for f in bt.fields)
    try:
        T.width_of(bt)
    except TypeError:
        return False
    return True


def _bit_like_struct(t: T.StructT) -> bool:
    """A struct P4-16 allows as a header field: bit<W>, int<W>, bool, serializable
    enums, `type`s of those, and such structs, nested."""
    for f in t.fields:
        ft = f.type
        while isinstance(ft, T.NewT):
            ft = ft.base
        if isinstance(ft, T.StructT):
            if not _bit_like_struct(ft):
                return False
        elif not (isinstance(ft, (T.BitT, T.BoolT)) or isinstance(ft, T.EnumT) and ft.underlying is not None):
            return False
    return True
