"""Copy-in/copy-out: which call arguments must be copied rather than aliased.

P4-16 calls copy ``in``/``inout`` arguments into the callee's parameters when the call
starts and ``out``/``inout`` parameters back when it ends (6.8 "Calling convention"),
evaluating each argument's l-value once. p4c writes every copy and then removes those
copy propagation proves useless; p4sim does the same analysis up front: an argument is
bound to the caller's storage (no copy) unless the difference can be seen, which
happens only when

* the callee reaches storage that overlaps the argument by another name (an action
  reading or writing the control's ``hdr`` while ``hdr.h`` is its ``inout``
  parameter), directly or through the actions and functions it calls;
* another argument of the same call overlaps it (``f(hdr.h, hdr.h)``,
  ``f(hdr, hdr.h)``), one of them written;
* the argument's l-value has a run-time index (``hdr.s[hdr.m.i]``) whose inputs the
  callee may change: the copy-out must go to the element chosen at the call.

`plan_copies` returns the `ast.Argument`s (by id) of action and function calls the
back end must copy, and those whose run-time indexes it must evaluate once, at the
call. Scalars are always copied by the back end; for them only the index snapshot
matters. Sub-controls and sub-parsers reach nothing of the caller's but their
arguments, so only overlapping arguments are copied there (`overlapping_arguments`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from p4sim.compiler import ast
from p4sim.compiler.consteval import const_value

#: One step of an access path: a member name, a constant index, or ``ANY`` (an index
#: known only at run time).
Step = Union[str, int]
ANY = "[*]"


@dataclass(frozen=True)
class Path:
    """An l-value as the storage it names: the declaration it starts at and the steps."""

    root: Any
    steps: tuple[Step, ...]

    def overlaps(self, other: "Path") -> bool:
        """Whether the two l-values may share storage: one is a prefix of the other,
        with a run-time index matching every index."""
        if self.root is not other.root:
            return False
        return all(a == b or ANY in (a, b) for a, b in zip(self.steps, other.steps))


@dataclass
class CopyPlan:
    """What the back end copies: argument ids to copy, argument ids whose run-time
    indexes are evaluated once at the call."""

    copied: set[int] = field(default_factory=set)
    snapshot: set[int] = field(default_factory=set)


def path_of(e: Any) -> Optional[Path]:
    """The access path of an l-value expression, None if ``e`` is not one."""
    if isinstance(e, ast.PathExpr):
        return Path(e.ref, ()) if isinstance(e.ref, (ast.Param, ast.VarDecl)) else None
    if isinstance(e, ast.MemberExpr):
        base = path_of(e.expr)
        return None if base is None else Path(base.root, base.steps + (e.member,))
    if isinstance(e, ast.IndexExpr):
        base = path_of(e.expr)
        if base is None:
            return None
        i = const_value(e.index)
        return Path(base.root, base.steps + (ANY if i is None else i,))
    if isinstance(e, ast.SliceExpr):
        return path_of(e.expr)
    return None


#: Fields that point back up the tree or hold annotations, not children.
_NOT_CHILDREN = ("pos", "ref", "type", "enum")


def _children(node: Any) -> list[Any]:
    out: list[Any] = []
    for f in dataclasses.fields(node):
        if f.name in _NOT_CHILDREN:
            continue
        v = getattr(node, f.name)
        out.extend(v if isinstance(v, list) else [v])
    return [x for x in out if isinstance(x, (ast.Node, tuple))]


def _index_paths(e: Any) -> list[Path]:
    """Paths read by the run-time indexes inside l-value ``e``."""
    found: list[Path] = []
    while isinstance(e, (ast.MemberExpr, ast.IndexExpr, ast.SliceExpr)):
        if isinstance(e, ast.IndexExpr) and const_value(e.index) is None:
            found.extend(_accesses(e.index))
        e = e.expr
    return found


def _accesses(node: Any) -> list[Path]:
    """Every storage path an expression or statement reads or writes, outermost
    l-values only (``hdr.h.a`` once, not also ``hdr.h`` and ``hdr``), plus the
    paths of run-time indexes inside them."""
    p = path_of(node) if isinstance(node, ast.Expr) else None
    if p is not None:
        return [p] + _index_paths(node)
    out: list[Path] = []
    if isinstance(node, tuple):  # (name, expr) pairs of struct initializers
        for x in node:
            if isinstance(x, ast.Node):
                out.extend(_accesses(x))
        return out
    if isinstance(node, ast.Node):
        for c in _children(node):
            out.extend(_accesses(c))
    return out


def _locals(body: Any) -> set[int]:
    """Ids of the variables a body declares."""
    found: set[int] = set()

    def walk(n: Any) -> None:
        if isinstance(n, ast.VarDecl):
            found.add(id(n))
        if isinstance(n, ast.Node):
            for c in _children(n):
                walk(c)

    walk(body)
    return found


def _calls(node: Any) -> list[ast.CallExpr]:
    found: list[ast.CallExpr] = []

    def walk(n: Any) -> None:
        if isinstance(n, ast.CallExpr):
            found.append(n)
        if isinstance(n, ast.Node):
            for c in _children(n):
                walk(c)
        elif isinstance(n, tuple):
            for x in n:
                walk(x)

    walk(node)
    return found


def _callee(c: ast.CallExpr) -> Optional[Union[ast.ActionDecl, ast.FunctionDecl]]:
    t = c.target
    if isinstance(t, ast.PathExpr) and isinstance(t.ref, (ast.ActionDecl, ast.FunctionDecl)):
        return t.ref
    return None


class _Analysis:
    def __init__(self) -> None:
        self.outside: dict[int, list[Path]] = {}  # callee id -> paths it reaches not via its parameters
        self.plan = CopyPlan()

    def outside_paths(self, decl: Union[ast.ActionDecl, ast.FunctionDecl]) -> list[Path]:
        """Storage a callee reaches by names of the caller's scope (the control's
        parameters and locals), directly or through its own callees."""
        key = id(decl)
        if key not in self.outside:
            own = {id(p) for p in decl.params} | _locals(decl.body)
            paths = [p for p in _accesses(decl.body) if id(p.root) not in own]
            for c in _calls(decl.body):
                inner = _callee(c)
                if inner is not None:
                    paths.extend(p for p in self.outside_paths(inner) if id(p.root) not in own)
            self.outside[key] = paths
        return self.outside[key]

    def call(self, callee: Union[ast.ActionDecl, ast.FunctionDecl], params: list[ast.Param],
             args: list[ast.Argument]) -> None:
        """Plan the arguments ``args`` bound to ``params`` of ``callee``."""
        if len(args) > len(params):
            return
        named = {a.name: a for a in args if a.name is not None}
        bound = [(p, named.get(p.name) if named else (args[i] if i < len(args) else None))
                 for i, p in enumerate(params)]
        outside = self.outside_paths(callee)
        paths = {id(a): path_of(a.value) for _, a in bound if a is not None}
        written = [a for p, a in bound if a is not None and p.direction in ("out", "inout")]
        for p, a in bound:
            if a is None:
                continue
            pa = paths[id(a)]
            if pa is None:
                continue
            others = [paths[id(b)] for _, b in bound if b is not None and b is not a and paths[id(b)] is not None]
            if p.direction in ("out", "inout"):
                if any(pa.overlaps(q) for q in outside + others):
                    self.plan.copied.add(id(a))
                idx = _index_paths(a.value)
                written_paths = [paths[id(b)] for b in written if b is not a and paths[id(b)] is not None]
                if any(i.overlaps(q) for i in idx for q in outside + written_paths + [pa]):
                    self.plan.snapshot.add(id(a))
                    self.plan.copied.add(id(a))
            elif any(pa.overlaps(paths[id(b)]) for b in written if paths[id(b)] is not None) \
                    or any(pa.overlaps(q) for q in outside):
                self.plan.copied.add(id(a))

    def run(self, program: ast.Program) -> CopyPlan:
        for c in _calls(program):
            callee = _callee(c)
            if callee is not None:
                self.call(callee, callee.params, c.args)
        for t in _tables(program):
            for ref in t.actions + ([t.default_action] if t.default_action is not None else []):
                decl = ref.name.ref
                if isinstance(decl, ast.ActionDecl) and ref.args:
                    # a table's action list binds the directional parameters
                    directional = [p for p in decl.params if p.direction is not None]
                    self.call(decl, directional, ref.args[:len(directional)])
        return self.plan


def _tables(program: ast.Program) -> list[ast.TableDecl]:
    found: list[ast.TableDecl] = []
    for d in program.decls:
        if isinstance(d, ast.ControlDecl):
            found.extend(x for x in d.locals if isinstance(x, ast.TableDecl))
    return found


def overlapping_arguments(params: list[ast.Param], args: list[Any], may_reject: bool = False) -> set[int]:
    """Ids of the arguments of a sub-control or sub-parser call that must be copied
    because they share storage with another argument the callee may write (P4-16
    6.8). An ``in`` argument is read as it was at the call (``c.apply(hdr, hdr.h.a)``:
    a snapshot suffices); two written ones are both copied in and out, so neither
    sees the other's writes before the call returns. A written argument that
    overlaps an ``in`` one stays bound to the caller's storage -- unless the callee
    ``may_reject``: a sub-parser that ends in ``reject`` never returns, and p4c's
    inliner (which copies both) leaves the caller's storage as it was then."""
    written = [p.direction in ("out", "inout") for p in params]
    paths = [path_of(a) if a is not None else None for a in args]
    found: set[int] = set()
    for i in range(len(args)):
        for j in range(i + 1, len(args)):
            pa, pb = paths[i], paths[j]
            if pa is None or pb is None or not pa.overlaps(pb) or not (written[i] or written[j]):
                continue
            found.update(id(args[k]) for k in (i, j)
                         if may_reject or written[i] == written[j] or not written[k])
    return found


def plan_copies(program: ast.Program) -> CopyPlan:
    """The arguments the back end must copy in and out (see the module docstring)."""
    return _Analysis().run(program)
