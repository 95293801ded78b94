"""Calls in parser states to functions that need states of their own.

A BMv2 parser state cannot branch, so a function whose body has an ``if`` on a
run-time condition or an early return is inlined into the calling state, whose
statements are then split into states (`parsers.ParserLowerer.lower_state`), as p4c's
function inliner and parser control-flow pass do. This module finds such calls
(`stateful_call`, `stateful_key_call`) in the order P4 evaluates them, the ``&&``,
``||`` and ``?:`` that may skip one (`skipping_operator`, computed first by ``if``
statements, `short_circuit`), and what the statement evaluates before either that
must be copied first so that computing it before the statement reorders nothing
(`operands_first`), as p4c's side-effect ordering does.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Optional

from p4sim.compiler import ast
from p4sim.compiler.consteval import const_value
from p4sim.compiler.diagnostics import CompileError


def stateful_call(st: ast.Stmt, done: dict[int, Any]) -> Optional[ast.CallExpr]:
    """The first call (in evaluation order) statement ``st`` makes, not yet
    inlined (in ``done``), to a function that needs states (`needs_states`).
    Its value is computed before the statement, after what `operands_first`
    copies. (A call an operator may skip is never the first: `skipping_operator`
    computes the operator before.)"""
    for e in _statement_expressions(st):
        c = _first_stateful(e, done)
        if c is not None:
            return c
    return None


def skipping_operator(st: ast.Stmt, done: dict[int, Any]) -> Optional[ast.Expr]:
    """The outermost ``&&``, ``||`` or ``?:`` of statement ``st`` (not yet computed,
    in ``done``) whose skipped operand calls a function that needs states: such a
    call must not run when the operator skips it, so the operator is computed before
    its statement by ``if`` statements (`short_circuit`), after what
    `operands_first` copies."""
    return _outermost_skipping(_statement_expressions(st), done)


def operands_first(st: ast.Stmt, target: ast.Expr, done: dict[int, Any]) -> list[ast.Expr]:
    """What statement ``st`` evaluates before ``target`` (a call that needs states,
    or an operator that may skip one, about to be computed before the statement)
    when that could change it: ``target`` may write (an ``out``, ``inout`` or extern
    argument), or what comes before it calls something that may write or needs
    states. Those parts (outermost, not constant) are then computed into
    temporaries first, in order, as p4c's side-effect ordering copies them; [] when
    nothing needs copying. An ``out``/``inout`` argument among them cannot be a copy:
    refused (file:line:col)."""
    parts = [(e, d) for e, d in _parts_before(st, target) if id(e) not in done and const_value(e) is None]
    values = [e for e, _ in parts]
    if not _reorders(target, values, done):
        return []
    for e, d in parts:
        if d != "in":
            raise CompileError("an argument that is not 'in', evaluated before a call to a function with if "
                               "statements or an early return in the same statement, is not supported in a "
                               "parser state (it would have to be copied first); compute that call first",
                               e.pos, "unsupported")
    return values


def key_call_reorders(transition: ast.SelectExpr, c: ast.CallExpr, done: dict[int, Any]) -> bool:
    """Whether computing the call ``c`` of a ``select`` key before the select
    (`stateful_key_call`) could change a key evaluated before it (as
    `operands_first` judges): then every key is computed first, in order."""
    parts, _ = _before(ast.ListExpr(transition.pos, list(transition.keys)), c)
    return _reorders(c, [e for e, _ in parts if id(e) not in done and const_value(e) is None], done)


def _reorders(target: ast.Expr, before: list[ast.Expr], done: dict[int, Any]) -> bool:
    """Whether computing ``target`` ahead of ``before`` (what P4 evaluates first)
    could change either: ``target`` may write, or ``before`` calls something that
    may write or needs states."""
    return bool(before) and (any(_may_write(c) for c, _ in _calls_in_order(target, False, done))
                             or any(_may_write(c) or _needs_states(c, done)
                                    for c, _ in _calls_in_order(before, False, done)))


def _parts_before(st: ast.Stmt, target: ast.Expr) -> list[tuple[ast.Expr, Optional[str]]]:
    """The outermost parts of ``st`` evaluated before ``target``, each with how it is
    passed (``"in"`` for a value; a call argument's direction, None if unknown). An
    assignment's target comes first: only its run-time indexes are values there."""
    out: list[tuple[ast.Expr, Optional[str]]] = []
    if isinstance(st, ast.AssignStmt):
        got, found = _before(st.lhs, target)
        if found:
            return got
        out = [(i, "in") for i in _indexes(st.lhs)]
        exprs: list[Optional[ast.Expr]] = [st.rhs]
    else:
        exprs = _statement_expressions(st)
    for e in exprs:
        got, found = _before(e, target)
        if found:
            return out + got
    return []


def _before(e: Optional[ast.Expr], target: ast.Expr) -> tuple[list[tuple[ast.Expr, Optional[str]]], bool]:
    """(the outermost parts of ``e`` evaluated before ``target``, whether ``target``
    is in ``e``)."""
    if e is target:
        return [], True
    if not isinstance(e, ast.Expr):
        return [], False
    out: list[tuple[ast.Expr, Optional[str]]] = []
    for child, direction in _operands(e):
        got, found = _before(child, target)
        if found:
            return out + got, True
        if direction != _LOCATION:
            out.append((child, direction))
    return [], False


#: How `_operands` marks the base of an index, member or slice: a location, not a
#: value to copy.
_LOCATION = "location"


def _operands(e: ast.Expr) -> list[tuple[ast.Expr, Optional[str]]]:
    """What P4 evaluates for ``e``, in order, each with how it is passed: a call's
    arguments (with their directions; not what it calls), the base of an index,
    member or slice (a location), an index, the operands of anything else (values)."""
    if isinstance(e, ast.CallExpr):
        f = called_function(e)
        params = f.params if f is not None else []
        out = []
        for i, a in enumerate(e.args):
            p = next((q for q in params if q.name == a.name), None) if a.name is not None \
                else (params[i] if i < len(params) else None)
            out.append((a.value, p.direction if p is not None else None))
        return out
    if isinstance(e, ast.IndexExpr):
        return [(e.expr, _LOCATION), (e.index, "in")]
    if isinstance(e, (ast.MemberExpr, ast.SliceExpr)):
        return [(e.expr, _LOCATION)]
    children: list[tuple[ast.Expr, Optional[str]]] = []
    for f in dataclasses.fields(e):
        if f.name in ("pos", "ref", "type"):
            continue
        v = getattr(e, f.name)
        for x in (v if isinstance(v, list) else [v]):
            x = x.value if isinstance(x, ast.Argument) else x
            if isinstance(x, ast.Expr):
                children.append((x, "in"))
    return children


def _indexes(e: ast.Expr) -> list[ast.Expr]:
    """The indexes in location ``e`` (``hdr.s[i].f``: ``i``), outer stacks first."""
    if isinstance(e, ast.IndexExpr):
        return _indexes(e.expr) + [e.index]
    if isinstance(e, (ast.MemberExpr, ast.SliceExpr)):
        return _indexes(e.expr)
    return []


def key_skips_a_call(transition: Any, done: dict[int, Any]) -> bool:
    """Whether a key of a ``select`` transition has an operator that may skip a call
    to a function that needs states (`skipping_operator`): its keys are then
    computed by statements first."""
    return not isinstance(transition, str) and _outermost_skipping(transition.keys, done) is not None


def short_circuit(op: ast.Expr, tmp: ast.PathExpr) -> list[ast.Stmt]:
    """Statements computing operator ``op`` (`skipping_operator`) into ``tmp``:
    ``a && b`` -> ``tmp = a; if (tmp) tmp = b;``, ``a || b`` -> ``tmp = a; if (tmp) {}
    else tmp = b;``, ``c ? a : b`` -> ``if (c) tmp = a; else tmp = b;``. Each ``if``
    splits the state, so the skipped call runs only on its own branch."""
    pos = op.pos
    if isinstance(op, ast.TernaryExpr):
        return [ast.IfStmt(pos, op.cond, ast.AssignStmt(pos, tmp, op.then), ast.AssignStmt(pos, tmp, op.else_))]
    assert isinstance(op, ast.BinaryExpr)
    rest = ast.AssignStmt(pos, tmp, op.right)
    skip = ast.BlockStmt(pos, [])
    return [ast.AssignStmt(pos, tmp, op.left),
            ast.IfStmt(pos, tmp, rest, None) if op.op == "&&" else ast.IfStmt(pos, tmp, skip, rest)]


def _statement_expressions(st: ast.Stmt) -> list[Optional[ast.Expr]]:
    """What statement ``st`` evaluates, in order (an assignment's target first)."""
    if isinstance(st, ast.IfStmt):
        return [st.cond]
    if isinstance(st, ast.AssignStmt):
        return [st.lhs, st.rhs]
    if isinstance(st, ast.CallStmt):
        return [st.call]
    if isinstance(st, ast.VarDecl):
        return [st.init]
    if isinstance(st, ast.ReturnStmt):
        return [st.value]
    return []


def _outermost_skipping(e: Any, done: dict[int, Any]) -> Optional[ast.Expr]:
    if isinstance(e, ast.Argument):
        e = e.value
    if isinstance(e, (list, tuple)):
        return next((op for op in (_outermost_skipping(x, done) for x in e) if op is not None), None)
    if not isinstance(e, ast.Expr) or id(e) in done:
        return None
    if isinstance(e, ast.BinaryExpr) and e.op in ("&&", "||") or isinstance(e, ast.TernaryExpr):
        if any(skippable and _needs_states(c, done) for c, skippable in _calls_in_order(e, False)):
            return e
    return _outermost_skipping([getattr(e, f.name) for f in dataclasses.fields(e)
                                if f.name not in ("pos", "ref", "type")], done)


def _needs_states(c: ast.CallExpr, done: dict[int, Any]) -> bool:
    f = called_function(c)
    return f is not None and id(c) not in done and needs_states(f)


def _may_write(c: ast.CallExpr) -> bool:
    """Whether call ``c`` may change anything: a function with an ``out``, ``inout``
    or directionless (extern, e.g. ``packet_in``) parameter, or a method other than
    ``isValid`` and ``lookahead``."""
    f = called_function(c)
    if f is not None:
        return any(p.direction != "in" for p in f.params)
    return not (isinstance(c.target, ast.MemberExpr) and c.target.member in ("isValid", "lookahead"))


def stateful_key_call(transition: Any, done: dict[int, Any]) -> Optional[ast.CallExpr]:
    """`stateful_call` for the keys of a ``select`` transition."""
    if isinstance(transition, str):
        return None
    for k in transition.keys:
        c = _first_stateful(k, done)
        if c is not None:
            return c
    return None


def _first_stateful(e: Optional[ast.Expr], done: dict[int, Any]) -> Optional[ast.CallExpr]:
    return next((c for c, _ in _calls_in_order(e, False, done) if _needs_states(c, done)), None)


def called_function(c: ast.CallExpr) -> Optional[ast.FunctionDecl]:
    t = c.target
    return t.ref if isinstance(t, ast.PathExpr) and isinstance(t.ref, ast.FunctionDecl) else None


def _calls_in_order(e: Any, skippable: bool, done: Optional[dict[int, Any]] = None
                    ) -> Iterator[tuple[ast.CallExpr, bool]]:
    """The calls in expression ``e`` in evaluation order (arguments before their
    call, left operands before right ones), each with whether evaluation may skip it
    (the right operand of ``&&``/``||``, a branch of ``?:``); none inside an
    expression already computed (in ``done``)."""
    if isinstance(e, ast.Argument):
        e = e.value
    if isinstance(e, (list, tuple)):
        for x in e:
            yield from _calls_in_order(x, skippable, done)
        return
    if not isinstance(e, ast.Expr) or done and id(e) in done and not isinstance(e, ast.CallExpr):
        return
    if isinstance(e, ast.BinaryExpr) and e.op in ("&&", "||"):
        yield from _calls_in_order(e.left, skippable, done)
        yield from _calls_in_order(e.right, True, done)
        return
    if isinstance(e, ast.TernaryExpr):
        yield from _calls_in_order(e.cond, skippable, done)
        yield from _calls_in_order([e.then, e.else_], True, done)
        return
    for f in dataclasses.fields(e):
        if f.name not in ("pos", "ref", "type"):
            yield from _calls_in_order(getattr(e, f.name), skippable, done)
    if isinstance(e, ast.CallExpr):
        yield e, skippable


def needs_states(f: ast.FunctionDecl) -> bool:
    """Whether function ``f``, called from a parser state, needs states of its own:
    its body (or that of a function it calls) has an ``if`` on a run-time condition,
    an early return or a ``switch``."""
    def walk(n: Any) -> bool:
        if isinstance(n, ast.IfStmt) and const_value(n.cond) is None or isinstance(n, ast.SwitchStmt):
            return True
        if isinstance(n, ast.CallExpr):
            g = called_function(n)
            if g is not None and needs_states(g):
                return True
        if isinstance(n, list):
            return any(walk(x) for x in n)
        if isinstance(n, (ast.Stmt, ast.Expr, ast.Argument)):
            return any(walk(getattr(n, x.name)) for x in dataclasses.fields(n)
                       if x.name not in ("pos", "ref", "type", "type_ref"))
        return False
    return returns_early(f.body) or walk(f.body)


def returns_early(body: ast.BlockStmt) -> bool:
    """Whether a function body has a return anywhere but as its last statement."""
    def walk(st: Any, last: bool) -> bool:
        if isinstance(st, ast.ReturnStmt):
            return not last
        if isinstance(st, ast.BlockStmt):
            return any(walk(x, last and i == len(st.stmts) - 1) for i, x in enumerate(st.stmts))
        if isinstance(st, ast.IfStmt):
            return walk(st.then, False) or (st.else_ is not None and walk(st.else_, False))
        return False
    return walk(body, True)
