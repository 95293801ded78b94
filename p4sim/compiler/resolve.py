"""Name resolution: scopes, declarations, and the program-wide ``error``/``match_kind``.

P4 names live in nested scopes -- the program, a parser/control/extern/function (with
its type parameters and parameters), a block -- and a name is looked up from the
innermost scope outwards (a leading dot, ``.x``, looks only at the top level). Types
and values share one namespace, as in p4c. A scope rejects a second declaration of
a name, except overloads: functions, extern functions and methods may share
a name when their parameter counts differ (``mark_to_drop()`` /
``mark_to_drop(standard_metadata)``).

The type checker (`typecheck.py`) drives the walk; this module only answers "what
does this name denote here" and reports undefined names and redefinitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from p4sim.compiler import ast
from p4sim.compiler.diagnostics import CompileError, SrcPos

#: Declarations that may be overloaded by parameter count.
_OVERLOADABLE = (ast.FunctionDecl, ast.ExternFunctionDecl, ast.MethodProto)


@dataclass(eq=False)
class TypeParam:
    """A type parameter in scope (``T`` inside ``extern register<T> {...}``)."""

    name: str
    pos: SrcPos


@dataclass(eq=False)
class ParserStateRef:
    """A parser state name in scope (``accept``, ``reject`` or a declared state)."""

    name: str
    state: Optional[ast.ParserState]


def param_count(d: Any) -> tuple[int, int]:
    """(minimum, maximum) number of arguments a callable declaration accepts."""
    params = _params_of(d)
    required = sum(1 for p in params if p.default is None and p.annotation("optional") is None)
    return required, len(params)


def _params_of(d: Any) -> list[ast.Param]:
    if isinstance(d, ast.ExternFunctionDecl):
        return d.proto.params
    return getattr(d, "params", [])


def describe(d: Any) -> str:
    """A short noun phrase for messages: "action 'drop'", "table 't'" ..."""
    kinds = [
        (ast.ActionDecl, "action"), (ast.TableDecl, "table"), (ast.ConstDecl, "constant"),
        (ast.VarDecl, "variable"), (ast.Param, "parameter"), (ast.HeaderDecl, "header type"),
        (ast.StructDecl, "struct type"), (ast.HeaderUnionDecl, "header union type"),
        (ast.EnumDecl, "enum type"), (ast.TypedefDecl, "type"), (ast.ExternDecl, "extern"),
        (ast.ExternFunctionDecl, "extern function"), (ast.FunctionDecl, "function"),
        (ast.ParserDecl, "parser"), (ast.ControlDecl, "control"),
        (ast.ParserTypeDecl, "parser type"), (ast.ControlTypeDecl, "control type"),
        (ast.PackageTypeDecl, "package type"), (ast.InstantiationDecl, "instance"),
        (ast.ValueSetDecl, "value set"), (ast.MethodProto, "method"),
        (TypeParam, "type parameter"), (ParserStateRef, "parser state"),
    ]
    for cls, word in kinds:
        if isinstance(d, cls):
            return f"{word} '{d.name}'"
    return f"'{getattr(d, 'name', d)}'"


@dataclass
class Scope:
    parent: Optional["Scope"] = None
    names: dict[str, list[Any]] = field(default_factory=dict)

    def child(self) -> "Scope":
        return Scope(self)

    def root(self) -> "Scope":
        s = self
        while s.parent is not None:
            s = s.parent
        return s

    def declare(self, name: str, decl: Any, pos: SrcPos) -> None:
        """Add ``decl`` under ``name``; a clash in this same scope is an error."""
        existing = self.names.get(name)
        if existing:
            if isinstance(decl, _OVERLOADABLE) and all(
                isinstance(e, _OVERLOADABLE) and type(e) is type(decl)
                and param_count(e) != param_count(decl) for e in existing
            ):
                existing.append(decl)
                return
            first = existing[0]
            if isinstance(first, ast.ExternDecl) and not first.methods and isinstance(decl, ast.ExternDecl):
                existing[0] = decl  # a forward declaration completed
                return
            where = getattr(first, "pos", None)
            at = f" (previous declaration at {where})" if where is not None and where.line else ""
            raise CompileError(f"redefinition of '{name}'{at}", pos)
        self.names[name] = [decl]

    def lookup_all(self, name: str, top_level: bool = False) -> Optional[list[Any]]:
        s: Optional[Scope] = self.root() if top_level else self
        while s is not None:
            found = s.names.get(name)
            if found:
                return found
            s = s.parent
        return None

    def lookup(self, name: str, pos: SrcPos, top_level: bool = False) -> Any:
        """The (first) declaration of ``name``; CompileError if there is none."""
        found = self.lookup_all(name, top_level)
        if not found:
            raise CompileError(f"undefined name '{name}'", pos)
        return found[0]


@dataclass
class ProgramNames:
    """Facts that span the whole program: all ``error`` and ``match_kind`` members
    (every declaration of either merges into one set, in declaration order)."""

    errors: list[str] = field(default_factory=list)
    match_kinds: list[str] = field(default_factory=list)

    def add_errors(self, d: ast.ErrorDecl) -> None:
        for m in d.members:
            if m in self.errors:
                raise CompileError(f"redefinition of error.{m}", d.pos)
            self.errors.append(m)

    def add_match_kinds(self, d: ast.MatchKindDecl) -> None:
        for m in d.members:
            if m in self.match_kinds:
                raise CompileError(f"redefinition of match_kind '{m}'", d.pos)
            self.match_kinds.append(m)
