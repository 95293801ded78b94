"""Semantic types of declarations, read from their source type syntax.

Expressions carry their type (``Expr.type``, set by the type checker), but the back end
also needs the types of things that are not expressions: the parameters of the v1model
blocks (to lay out headers and metadata), local variables, extern instantiations
(``register<bit<48>>``) and action parameters. This module resolves a `TypeRef` against
the program's top-level declarations, with the same rules the type checker uses.
"""

from __future__ import annotations

from typing import Optional

from p4sim.compiler import ast
from p4sim.compiler import types as T
from p4sim.compiler.consteval import const_value
from p4sim.compiler.diagnostics import CompileError

_BASE = {
    "bool": T.BoolT(),
    "error": T.ErrorT(),
    "string": T.StringT(),
    "void": T.VoidT(),
    "int": T.InfIntT(),
    "match_kind": T.MatchKindT(),
}


class TypeResolver:
    """Resolves type syntax to `types.Type`, memoising per declaration."""

    def __init__(self, program: ast.Program):
        self.decls: dict[str, ast.Decl] = {}
        for d in program.decls:
            # Later declarations never shadow earlier ones at top level in valid P4
            # (except overloaded functions/externs, which have no type meaning here).
            self.decls.setdefault(d.name, d)
        self._memo: dict[int, T.Type] = {}

    def lookup(self, name: str) -> Optional[ast.Decl]:
        return self.decls.get(name)

    def resolve(self, tr: ast.TypeRef, bindings: Optional[dict[str, T.Type]] = None) -> T.Type:
        known = getattr(tr, "type", None)  # the type checker annotates type syntax
        if known is not None and not bindings:
            return known
        if isinstance(tr, ast.BitTypeRef):
            w = const_value(tr.width)
            if w is None:
                raise CompileError("width must be a compile-time constant", tr.pos)
            if tr.kind == "varbit":
                return T.VarbitT(w)
            return T.BitT(w, tr.kind == "int")
        if isinstance(tr, ast.BaseTypeRef):
            if tr.name in _BASE:
                return _BASE[tr.name]
            return self._named(ast.NamedTypeRef(tr.pos, tr.name), bindings)
        if isinstance(tr, ast.StackTypeRef):
            size = const_value(tr.size)
            if size is None:
                raise CompileError("header stack size must be a compile-time constant", tr.pos)
            return T.StackT(self.resolve(tr.element, bindings), size)
        if isinstance(tr, ast.TupleTypeRef):
            return T.TupleT(tuple(self.resolve(e, bindings) for e in tr.elements))
        if isinstance(tr, ast.NamedTypeRef):
            return self._named(tr, bindings)
        if isinstance(tr, ast.DontCareTypeRef):
            return T.DontCareT()
        raise CompileError(f"cannot resolve type {tr!r}", tr.pos)

    def _named(self, tr: ast.NamedTypeRef, bindings: Optional[dict[str, T.Type]]) -> T.Type:
        if bindings and tr.name in bindings:
            return bindings[tr.name]
        if tr.name in _BASE:
            return _BASE[tr.name]
        d = self.decls.get(tr.name)
        if d is None:
            raise CompileError(f"unknown type '{tr.name}'", tr.pos)
        if isinstance(d, ast.ExternDecl):
            return T.ExternT(d.name, tuple(self.resolve(a, bindings) for a in tr.args), d)
        if isinstance(d, ast.StructDecl) and d.type_params:
            sub = dict(zip(d.type_params, (self.resolve(a, bindings) for a in tr.args)))
            return self._struct_like(d, sub)
        key = id(d)
        if key not in self._memo:
            self._memo[key] = self._decl_type(d, tr)
        return self._memo[key]

    def _decl_type(self, d: ast.Decl, tr: ast.NamedTypeRef) -> T.Type:
        if isinstance(d, (ast.HeaderDecl, ast.StructDecl, ast.HeaderUnionDecl)):
            return self._struct_like(d, None)
        if isinstance(d, ast.EnumDecl):
            names = tuple(m.name for m in d.members)
            if d.underlying is None:
                return T.EnumT(d.name, names)
            under = self.resolve(d.underlying)
            values = tuple(const_value(m.value) if m.value is not None else 0 for m in d.members)
            return T.EnumT(d.name, names, under, values)
        if isinstance(d, ast.TypedefDecl):
            base = self.resolve(d.type_ref)
            return T.NewT(d.name, base) if d.is_new_type else base
        if isinstance(d, ast.ControlDecl):
            return T.ControlT(d.name, d)
        if isinstance(d, ast.ParserDecl):
            return T.ParserT(d.name, d)
        if isinstance(d, ast.ErrorDecl):
            return T.ErrorT()
        raise CompileError(f"'{d.name}' does not name a type", tr.pos)

    def _struct_like(self, d: ast.Decl, sub: Optional[dict[str, T.Type]]) -> T.Type:
        fields = tuple(T.FieldT(f.name, self.resolve(f.type_ref, sub)) for f in d.fields)
        cls = {ast.HeaderDecl: T.HeaderT, ast.StructDecl: T.StructT, ast.HeaderUnionDecl: T.HeaderUnionT}[type(d)]
        return cls(d.name, fields)
