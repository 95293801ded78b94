"""Calls in parser states to functions that need states of their own.

A BMv2 parser state cannot branch, so a function whose body has an ``if`` on a
run-time condition or an early return is inlined into the calling state, whose
statements are then split into states (`parsers.ParserLowerer.lower_state`), as p4c's
function inliner and parser control-flow pass do. This module finds such calls
(`stateful_call`, `stateful_key_call`) in the order P4 evaluates them, the ``&&``,
``||`` and ``?:`` that may skip one (`skipping_operator`, computed first by ``if``
statements, `short_circuit`), and refuses those whose value cannot be computed before
their statement.
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
    Its value is computed before the statement; that is exact unless the call is
    an operand and may write what the statement reads before it (an ``out`` or
    ``inout`` parameter): that is refused. (A call an operator may skip is never
    the first: `skipping_operator` computes the operator before.)"""
    exprs = _statement_expressions(st)
    whole = exprs[-1] if exprs and not isinstance(st, ast.IfStmt) else None
    for e in exprs:
        c = _first_stateful(e, done, whole)
        if c is not None:
            return c
    return None


def skipping_operator(st: ast.Stmt, done: dict[int, Any]) -> Optional[ast.Expr]:
    """The outermost ``&&``, ``||`` or ``?:`` of statement ``st`` (not yet computed,
    in ``done``) whose skipped operand calls a function that needs states: such a
    call must not run when the operator skips it, so the operator is computed before
    its statement by ``if`` statements (`short_circuit`), as p4c's side-effect
    ordering does. None while a call to such a function is evaluated before the
    operator (`stateful_call` inlines it first). Computing the operator first must
    not reorder effects, so it is refused (file:line:col) when it holds a call that
    may write (an ``out``/``inout`` or extern argument) and is not the statement's
    whole value, or when a call the statement evaluates before it may write or the
    operator may."""
    exprs = _statement_expressions(st)
    op = _outermost_skipping(exprs, done)
    if op is None:
        return None
    inside = {id(c) for c, _ in _calls_in_order(op, False)}
    writing = next((c for c, _ in _calls_in_order(op, False) if _may_write(c)), None)
    if writing is not None and op is not exprs[-1]:
        raise CompileError(f"a call to '{_callee(writing)}' (with out, inout or extern arguments) inside '&&', "
                           "'||' or '?:' that may skip a call to a function with if statements or an early "
                           "return is not supported in a parser state unless the operator is the statement's "
                           "whole value", writing.pos, "unsupported")
    for c, _ in _calls_in_order(exprs, False, done):
        if id(c) in inside:
            return op
        if id(c) in done or writing is None and not _may_write(c):
            continue
        f = called_function(c)
        if f is not None and needs_states(f):
            return None
        skipped = next(x for x, skippable in _calls_in_order(op, False) if skippable and _needs_states(x, done))
        raise CompileError(f"a call to '{_callee(skipped)}' (a function with if statements or an early return) "
                           f"that '&&', '||' or '?:' may skip, after a call to '{_callee(c)}' in the same "
                           "statement, is not supported in a parser state; assign that call's value to a "
                           "variable first", skipped.pos, "unsupported")
    return op


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


def _callee(c: ast.CallExpr) -> str:
    t = c.target
    return t.name if isinstance(t, ast.PathExpr) else t.member if isinstance(t, ast.MemberExpr) else "a function"


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
        c = _first_stateful(k, done, None)
        if c is not None:
            return c
    return None


def _first_stateful(e: Optional[ast.Expr], done: dict[int, Any],
                    whole: Optional[ast.Expr]) -> Optional[ast.CallExpr]:
    for c, _ in _calls_in_order(e, False, done):
        f = called_function(c)
        if f is None or id(c) in done or not needs_states(f):
            continue
        if c is not whole and any(p.direction in ("out", "inout") for p in f.params):
            raise CompileError(f"a call to '{f.name}' (a function with if statements or an early return, "
                               "and out or inout parameters) inside an expression is not supported in a "
                               "parser state; call it as a statement", c.pos, "unsupported")
        return c
    return None


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
