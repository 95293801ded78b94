"""Checks on the whole typed program that p4c's front end makes after type checking.

Each is a fact no single declaration shows, so the type checker's walk (one
declaration at a time) cannot see it:

* two actions whose control-plane names collide (p4c's
  DuplicateActionControlPlaneNameCheck: a P4Runtime client could not tell them
  apart);
* ``__v1model_version`` outside the versions v1model.p4 knows (p4c's
  GetV1ModelVersion; ``-DV1MODEL_VERSION=...`` sets it);
* a parser none of whose states, followed from ``start``, ever moves to
  ``accept`` or ``reject`` (p4c's SimplifyParsers: such a parser never ends).
"""

from __future__ import annotations

from p4sim.compiler import ast
from p4sim.compiler.consteval import const_value
from p4sim.compiler.diagnostics import CompileError
from p4sim.compiler.midend.names import annotation_string

V1MODEL_VERSIONS = (20180101, 20200408)  # the first and the latest v1model.p4 knows


def check_whole_program(program: ast.Program) -> None:
    """Raise `CompileError` at the first declaration one of the checks refuses."""
    actions: dict[str, ast.ActionDecl] = {}
    for d in program.decls:
        if isinstance(d, ast.ActionDecl):
            _unique_action_name(d, "", actions)
        elif isinstance(d, ast.ControlDecl):
            for local in d.locals:
                if isinstance(local, ast.ActionDecl):
                    _unique_action_name(local, d.name, actions)
        elif isinstance(d, ast.ParserDecl):
            _parser_ends(d)
        elif isinstance(d, ast.ConstDecl) and d.name == "__v1model_version":
            _v1model_version(d)


def _unique_action_name(action: ast.ActionDecl, control: str, seen: dict[str, ast.ActionDecl]) -> None:
    """An action's name as p4c compares them: absolute (leading dot), inside the
    control *declaration* it is written in (instances do not count)."""
    name = annotation_string(action, "name") or action.name
    if not name.startswith("."):
        name = f".{control}.{name}" if control else f".{name}"
    other = seen.setdefault(name, action)
    if other is not action:
        raise CompileError(f"action '{action.name}' has the control-plane name '{name[1:]}' of action "
                           f"'{other.name}' declared at {other.pos}", action.pos)


def _v1model_version(d: ast.ConstDecl) -> None:
    value = d.value
    if isinstance(value, ast.UnaryExpr) and value.op == "-":
        raise CompileError("the v1model version (V1MODEL_VERSION) must be a non-negative number", value.pos)
    v = const_value(value)
    if v is None or not V1MODEL_VERSIONS[0] <= v <= V1MODEL_VERSIONS[-1]:
        raise CompileError(f"unknown v1model version (V1MODEL_VERSION) {v}: the first supported is {V1MODEL_VERSIONS[0]}, "
                           f"the latest {V1MODEL_VERSIONS[-1]}", value.pos)


def _parser_ends(p: ast.ParserDecl) -> None:
    states = {s.name: s for s in p.states}
    todo, seen = ["start"], set()
    while todo:
        name = todo.pop()
        if name in ("accept", "reject"):
            return
        if name in seen or name not in states:
            continue
        seen.add(name)
        t = states[name].transition
        todo.extend([t] if isinstance(t, str) else [c.next_state for c in t.cases])
    if "start" in states:
        raise CompileError(f"parser '{p.name}' never reaches accept or reject: no state reachable from "
                           "start moves to either", p.pos)
