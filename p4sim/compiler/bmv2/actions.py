"""The BMv2 JSON actions: a P4 action once per binding of its directional parameters,
and the actions the compiler makes up for runs of plain statements.

Both the tables (an action list binds and lists actions) and the control flow (a
direct action call, a ``tbl_act``) emit actions, so this sits below both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from p4sim.compiler import ast
from p4sim.compiler import types as T
from p4sim.compiler.bmv2.context import ActionValue, Context, ordered_args
from p4sim.compiler.bmv2.expressions import to_data
from p4sim.compiler.bmv2.statements import StmtLowerer
from p4sim.compiler.bmv2.storage import ConstLoc, ParamLoc, ValueLoc, scalar_width
from p4sim.compiler.consteval import const_value
from p4sim.compiler.diagnostics import CompileError
from p4sim.compiler.midend.controlplane import CPAction


@dataclass(frozen=True)
class CopiedArg:
    """A location an action-list argument names that the action must work on a copy
    of (`midend.copyinout`): copied in when the action starts, out when it ends."""

    loc: Any
    direction: str


def action_id(ctx: Context, av: ActionValue, bound: Optional[list[Any]] = None) -> int:
    """Emit the JSON action for ``av`` (once per binding) and return its id.

    ``bound`` holds the locations (or `ConstLoc`s) that a table's action list binds
    to the action's directional parameters, in parameter order. Like p4c, every
    distinct binding gets its own copy of the action, under the same control-plane
    name; only the directionless parameters are action data (``runtime_data``).
    """
    directional = [p for p in av.decl.params if p.direction is not None]
    bound = bound or []
    if len(bound) != len(directional):
        p = directional[len(bound)]
        raise CompileError(f"action '{av.decl.name}' has a directional parameter '{p.name}' that the table's "
                           "action list must bind", p.pos)
    key = (id(av.decl), av.scope.prefix, tuple(repr(b) for b in bound))
    if key in ctx.action_ids:
        return ctx.action_ids[key]
    scope = av.scope.child()
    lw = StmtLowerer(scope)
    runtime_data, params = [], []
    copy_out: list[tuple[Any, Any]] = []
    for p, loc in zip(directional, bound):
        pt = ctx.types.resolve(p.type_ref)
        if isinstance(loc, CopiedArg):
            tmp = ctx.layout.storage(p.name, pt, p.pos)
            if loc.direction == "out":
                lw.invalidate(tmp)
            else:
                lw.copy(tmp, loc.loc, p)
            if loc.direction != "in":
                copy_out.append((loc.loc, tmp))
            loc = tmp
        if p.direction == "in" and isinstance(loc, ValueLoc):
            # copy-in when the action starts, as the call would
            tmp = ctx.layout.storage(p.name, pt, p.pos)
            lw.set_field(tmp, loc.node())
            loc = tmp
        scope.bind(p, loc)
    for p in av.decl.params:
        if p.direction is not None:
            continue
        pt = ctx.types.resolve(p.type_ref)
        w = scalar_width(pt)
        if w is None:
            raise CompileError(f"action parameter '{p.name}' must have a bit, int or bool type", p.pos)
        scope.bind(p, ParamLoc(len(runtime_data), pt))
        runtime_data.append({"name": p.name, "bitwidth": w})
        params.append((p.name, w, pt if isinstance(pt, T.NewT) else None))
    lw.tail = True
    lw.inline_body(scope, av.decl.body, None)
    lw.finish_exits()  # copy-out still happens after an exit (P4-16 12.5)
    lw.copy_out(copy_out, av.decl)
    aid = len(ctx.actions)
    ctx.action_ids[key] = aid
    ctx.actions.append({"name": av.name, "id": aid, "runtime_data": runtime_data, "primitives": lw.out})
    if av.decl.annotation("hidden") is None:
        ctx.cp.add("actions", CPAction(av.name, av.decl, params))
    return aid


def bind_directional(lw: StmtLowerer, av: ActionValue, args: list[ast.Argument], pos: Any) -> list[Any]:
    """What a table's action list (``a(hdr.x)``) binds to ``av``'s directional
    parameters, evaluated where the table is: a location for ``out``/``inout`` and
    aggregates, a constant or an expression (`ValueLoc`) for scalar ``in``."""
    directional = [p for p in av.decl.params if p.direction is not None]
    given = {id(x.value): x for x in args}
    out: list[Any] = []
    emitted = len(lw.out)
    for p, a in zip(directional, ordered_args(directional, args[:len(directional)], pos)):
        if a is None:
            raise CompileError(f"the action list must bind parameter '{p.name}' of '{av.decl.name}'", pos)
        pt = lw.ctx.types.resolve(p.type_ref)
        if p.direction in ("out", "inout") or scalar_width(pt) is None:
            if isinstance(a, ast.DontCareExpr):
                out.append(lw.ctx.layout.storage(p.name, pt, a.pos))
            elif id(given[id(a)]) in lw.ctx.design.copies.copied:
                out.append(CopiedArg(lw.loc(a), p.direction))
            else:
                out.append(lw.loc(a))
            continue
        v = const_value(a)
        out.append(ConstLoc(v, pt) if v is not None else ValueLoc(to_data(lw.rv(a), pt), pt))
    if len(lw.out) != emitted:
        raise CompileError("an action-list argument needing computation before the table is not supported",
                           pos, "unsupported")
    return out


def synthesized_action(ctx: Context, base: str, primitives: list[dict]) -> tuple[str, int]:
    name = ctx.names.fresh(base)
    ctx.synth_actions.add(name)
    aid = len(ctx.actions)
    ctx.actions.append({"name": name, "id": aid, "runtime_data": [], "primitives": primitives})
    return name, aid
