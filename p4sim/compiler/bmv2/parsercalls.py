"""Calls in parser states to functions that need states of their own.

A BMv2 parser state cannot branch, so a function whose body has an ``if`` on a
run-time condition or an early return is inlined into the calling state, whose
statements are then split into states (`parsers.ParserLowerer.lower_state`), as p4c's
function inliner and parser control-flow pass do. This module finds such calls
(`stateful_call`, `stateful_key_call`) in the order P4 evaluates them, and refuses
those whose value cannot be computed before their statement.
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
    Its value is computed before the statement; that is exact unless the
    statement would have skipped it (``&&``, ``||``, ``?:``), or the call is an
    operand and may write what the statement reads before it (an ``out`` or
    ``inout`` parameter): those are refused."""
    whole: Optional[ast.Expr] = None
    exprs: list[Optional[ast.Expr]] = []
    if isinstance(st, ast.IfStmt):
        exprs = [st.cond]
    elif isinstance(st, ast.AssignStmt):
        exprs, whole = [st.lhs, st.rhs], st.rhs
    elif isinstance(st, ast.CallStmt):
        exprs, whole = [st.call], st.call
    elif isinstance(st, (ast.VarDecl, ast.ReturnStmt)):
        whole = st.init if isinstance(st, ast.VarDecl) else st.value
        exprs = [whole]
    for e in exprs:
        c = _first_stateful(e, done, whole)
        if c is not None:
            return c
    return None


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
    for c, skippable in _calls_in_order(e, False):
        f = called_function(c)
        if f is None or id(c) in done or not needs_states(f):
            continue
        if skippable:
            raise CompileError(f"a call to '{f.name}' (a function with if statements or an early return) "
                               "that '&&', '||' or '?:' may skip is not supported in a parser state",
                               c.pos, "unsupported")
        if c is not whole and any(p.direction in ("out", "inout") for p in f.params):
            raise CompileError(f"a call to '{f.name}' (a function with if statements or an early return, "
                               "and out or inout parameters) inside an expression is not supported in a "
                               "parser state; call it as a statement", c.pos, "unsupported")
        return c
    return None


def called_function(c: ast.CallExpr) -> Optional[ast.FunctionDecl]:
    t = c.target
    return t.ref if isinstance(t, ast.PathExpr) and isinstance(t.ref, ast.FunctionDecl) else None


def _calls_in_order(e: Any, skippable: bool) -> Iterator[tuple[ast.CallExpr, bool]]:
    """The calls in expression ``e`` in evaluation order (arguments before their
    call, left operands before right ones), each with whether evaluation may skip it
    (the right operand of ``&&``/``||``, a branch of ``?:``)."""
    if isinstance(e, ast.Argument):
        e = e.value
    if isinstance(e, (list, tuple)):
        for x in e:
            yield from _calls_in_order(x, skippable)
        return
    if not isinstance(e, ast.Expr):
        return
    if isinstance(e, ast.BinaryExpr) and e.op in ("&&", "||"):
        yield from _calls_in_order(e.left, skippable)
        yield from _calls_in_order(e.right, True)
        return
    if isinstance(e, ast.TernaryExpr):
        yield from _calls_in_order(e.cond, skippable)
        yield from _calls_in_order([e.then, e.else_], True)
        return
    for f in dataclasses.fields(e):
        if f.name not in ("pos", "ref", "type"):
            yield from _calls_in_order(getattr(e, f.name), skippable)
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
