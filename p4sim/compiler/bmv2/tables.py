"""One P4 table -> its BMv2 JSON table object (and its P4Info inventory entry).

Keys become ``key`` entries on fields (``["ipv4", "dstAddr"]``), validity bits
(``["ipv4", "$valid$"]``) or, for any other expression, a ``scalars`` temporary that a
synthesized action computes just before the table (p4c does the same). Keys of match
kind ``selector`` are the action selector's hash input, not part of the key (left
out, as by p4c, when the table has no action selector). The table's ``match_type``
follows JSON_format.md: ``range`` if any key is range, ``ternary`` if any is
ternary/optional, else ``lpm`` if any is lpm, else ``exact``.
"""

from __future__ import annotations

import re
from typing import Any, Optional, Protocol

from p4sim.compiler import ast
from p4sim.compiler import types as T
from p4sim.compiler.bmv2.actions import action_id, bind_directional
from p4sim.compiler.bmv2.context import (
    COUNTER_UNITS, METER_UNITS, ActionValue, Context, ExternValue, TableValue, enum_arg, instantiate,
    ordered_args,
)
from p4sim.compiler.bmv2.expressions import ExprLowerer
from p4sim.compiler.bmv2.jsonutil import hexstr, mask, source_info
from p4sim.compiler.bmv2.statements import StmtLowerer, runtime_index
from p4sim.compiler.bmv2.storage import FieldLoc, HeaderLoc, scalar_width
from p4sim.compiler.consteval import const_value
from p4sim.compiler.diagnostics import CompileError
from p4sim.compiler.midend.controlplane import (
    CPActionProfile, CPActionRef, CPCounter, CPMatchField, CPMeter, CPTable,
)
DEFAULT_TABLE_SIZE = 1024  # p4c's default when a table has no size property
MATCH_KINDS = ("exact", "lpm", "ternary", "range", "optional")


class Pipeline(Protocol):
    """What a table needs of the pipeline it is placed in (`controls.ControlLowerer`):
    the program's context, the pipeline's action profiles, ids for new JSON objects."""

    ctx: Context
    action_profiles: list[dict]

    def new_id(self, kind: str) -> int: ...


def table_match_type(kinds: list[str]) -> str:
    if "range" in kinds:
        return "range"
    if "ternary" in kinds or "optional" in kinds:
        return "ternary"
    if "lpm" in kinds:
        return "lpm"
    return "exact"


def convert_table(cl: Pipeline, tv: TableValue) -> tuple[list[dict], dict]:
    ctx, decl, scope, name = cl.ctx, tv.decl, tv.scope, tv.name
    lw = StmtLowerer(scope)
    keys: list[dict] = []
    widths: list[int] = []
    kinds: list[str] = []
    cp_fields: list[CPMatchField] = []
    selector_inputs: list[dict] = []
    for k in decl.keys:
        mk = k.match_kind
        if mk == "selector":
            selector_inputs.append(_key_target(lw, k.expr, as_node=True))
            continue
        if mk not in MATCH_KINDS:
            raise CompileError(f"match kind '{mk}' is not supported by BMv2", k.pos, "unsupported")
        if mk == "lpm" and "lpm" in kinds:
            raise CompileError(f"table '{decl.name}' has a second lpm key: BMv2 supports at most one", k.pos,
                               "unsupported")
        target = _key_target(lw, k.expr, as_node=False)
        w = scalar_width(k.expr.type) or 1
        kname = _key_name(k) or expr_text(k.expr)
        keys.append({"match_type": mk, "name": kname, "target": target, "mask": None})
        widths.append(w)
        kinds.append(mk)
        kt = k.expr.type
        cp_fields.append(CPMatchField(kname, w, mk, list(k.annotations), kt if isinstance(kt, T.NewT) else None))

    action_names: list[str] = []
    action_ids: list[int] = []
    refs: list[CPActionRef] = []
    variants: dict[int, int] = {}  # action decl -> the copy bound by this table's action list
    listed = [(_action_of(scope, ar), ar, {a.name for a in ar.annotations}) for ar in decl.actions]
    if decl.default_action is None and all(av.name != "NoAction" for av, _ar, _n in listed):
        # p4c: a table without a default action defaults to NoAction, added as @defaultonly
        no_action = ctx.no_action()
        if no_action is not None:
            listed.append((no_action, ast.ActionRef(decl.pos, ast.PathExpr(decl.pos, "NoAction"), []),
                           {"defaultonly"}))
    for av, ar, names in listed:
        aid = action_id(ctx, av, bind_directional(lw, av, ar.args, ar.pos))
        variants[id(av.decl)] = aid
        action_ids.append(aid)
        action_names.append(av.name)
        sc = "DEFAULT_ONLY" if "defaultonly" in names else "TABLE_ONLY" if "tableonly" in names else "TABLE_AND_DEFAULT"
        refs.append(CPActionRef(av.name, sc, [a for a in ar.annotations if a.name not in ("defaultonly", "tableonly")]))

    size = DEFAULT_TABLE_SIZE
    sp = decl.prop("size")
    if sp is not None:
        size = _const(sp.value, "table size")
    table: dict = {
        "name": name, "id": cl.new_id("tables"), "source_info": source_info(decl.pos, decl.name),
        "key": keys, "match_type": table_match_type(kinds),
        "type": "simple", "max_size": size, "with_counters": False, "support_timeout": False,
        "direct_meters": None, "action_ids": action_ids, "actions": action_names,
        "base_default_next": None, "next_tables": {},
    }
    if table["source_info"] is None:
        del table["source_info"]
    cpt = CPTable(name, decl, cp_fields, refs, size)

    impl = decl.prop("implementation")
    if impl is not None:
        prof = _instance(lw, impl.value, ("action_profile", "action_selector"), "implementation", decl)
        with_selector = prof.type.name == "action_selector"
        table["type"] = "indirect_ws" if with_selector else "indirect"
        table["action_profile"] = prof.name
        _action_profile(cl, prof, name, selector_inputs)
        cpt.implementation = prof.name
    # selector keys without an action_selector are left out, as p4c's back end leaves them

    counters = decl.prop("counters")
    if counters is not None:
        dc = _instance(lw, counters.value, ("direct_counter",), "counters")
        table["with_counters"] = True
        ctx.counter_arrays.append({"name": dc.name, "id": len(ctx.counter_arrays), "is_direct": True,
                                   "binding": name})
        unit = COUNTER_UNITS.get(enum_arg(dc.args, 0, "counter type", dc.decl.pos), "BOTH")
        ctx.cp.add("counters", CPCounter(dc.name, dc.decl, unit, size, direct_table=name))
        cpt.direct_resources.append(dc.name)
    meters = decl.prop("meters")
    if meters is not None:
        dm = _instance(lw, meters.value, ("direct_meter",), "meters")
        table["direct_meters"] = dm.name
        dm.info.update(table=name, size=size)
        ctx.direct_meters.append(dm)
        unit = METER_UNITS.get(enum_arg(dm.args, 0, "meter type", dm.decl.pos), "BYTES")
        ctx.cp.add("meters", CPMeter(dm.name, dm.decl, unit, size, direct_table=name))
        cpt.direct_resources.append(dm.name)
    timeout = decl.prop("support_timeout")
    if timeout is not None and const_value(timeout.value):
        table["support_timeout"] = True
        cpt.support_timeout = True

    default = decl.default_action
    if default is None and "NoAction" in action_names:
        table["default_entry"] = {"action_id": action_ids[action_names.index("NoAction")], "action_const": False,
                                  "action_data": [], "action_entry_const": False}
        cpt.initial_default_action = "NoAction"
    elif default is not None:
        av = _action_of(scope, default)
        aid = variants.get(id(av.decl))
        if aid is None:
            aid = action_id(ctx, av)
        data = _action_data(ctx, av, default)
        if table["type"] == "simple":
            table["default_entry"] = {"action_id": aid, "action_const": decl.default_action_const,
                                      "action_data": data, "action_entry_const": decl.default_action_const}
        if decl.default_action_const:
            cpt.const_default_action = av.name
        cpt.initial_default_action = av.name
        bits = [scalar_width(ctx.types.resolve(p.type_ref)) or 1 for p in av.decl.params if p.direction is None]
        cpt.initial_default_args = [(int(h, 16), w) for h, w in zip(data, bits)]

    if decl.entries is not None:
        if table["type"] != "simple":
            # BMv2 loads `entries` only into tables of type "simple" (P4Objects.cpp throws
            # for an indirect table); p4c writes them anyway and simple_switch refuses the JSON.
            where = decl.entries[0].pos if decl.entries else decl.pos
            raise CompileError(f"table '{decl.name}': entries on a table with an implementation (action "
                               "profile or selector) are not supported: BMv2 accepts entries only in "
                               "tables of type 'simple'", where, "unsupported")
        prios = bmv2_priorities(decl)
        table["entries"] = [_entry(ctx, scope, e, kinds, widths, p, variants)
                            for e, p in zip(decl.entries, prios)]
        cpt.is_const = decl.entries_const
        cpt.has_initial_entries = True

    if decl.annotation("hidden") is None:  # @hidden: not visible to the control plane
        ctx.cp.add("tables", cpt)
    return lw.out, table


def expr_text(e: ast.Expr) -> str:
    """Source-like text of a key expression (p4c names keys after their source)."""
    if isinstance(e, ast.PathExpr):
        return ("." if e.top_level else "") + e.name
    if isinstance(e, ast.MemberExpr):
        return f"{expr_text(e.expr)}.{e.member}"
    if isinstance(e, ast.IndexExpr):
        return f"{expr_text(e.expr)}[{expr_text(e.index)}]"
    if isinstance(e, ast.CallExpr) and isinstance(e.target, ast.MemberExpr) and e.target.member == "isValid":
        return f"{expr_text(e.target.expr)}.$valid$"  # p4c's KeyNameGenerator, what P4Runtime expects
    if isinstance(e, ast.CallExpr):
        return f"{expr_text(e.target)}()"
    if isinstance(e, ast.SliceExpr):
        return f"{expr_text(e.expr)}[{expr_text(e.hi)}:{expr_text(e.lo)}]"
    if isinstance(e, ast.IntLit):  # in the base it is written in, as p4c's KeyNameGenerator
        written = e.pos.text[max(e.pos.col - 1, 0):] if e.pos.text else ""
        return hex(e.value) if re.match(r"(\d+[ws])?0[xX]", written) else str(e.value)
    if isinstance(e, ast.BinaryExpr) and e.op == "&":
        return f"{expr_text(e.left)} & {expr_text(e.right)}"
    return "key"


def _key_name(k: ast.KeyElement) -> Optional[str]:
    for a in k.annotations:
        if a.name == "name" and a.args and isinstance(a.args[0], ast.StringLit):
            return a.args[0].value
    return None


def _key_target(lw: StmtLowerer, e: ast.Expr, as_node: bool) -> Any:
    """Where a key is read from: a field, a header's valid bit; other expressions
    (and a stack element chosen at run time) go through a temporary."""
    if runtime_index(e, lw.ctx.hoisted) is None:
        if isinstance(e, ast.CallExpr) and isinstance(e.target, ast.MemberExpr) and e.target.member == "isValid":
            h = lw.loc(e.target.expr)
            if isinstance(h, HeaderLoc):
                return {"type": "field", "value": [h.name, "$valid$"]} if as_node else [h.name, "$valid$"]
        if isinstance(e, (ast.PathExpr, ast.MemberExpr)):
            loc = lw.loc(e)
            if isinstance(loc, FieldLoc):
                return loc.node() if as_node else [loc.header, loc.field]
    tmp = lw.temp(e.type, "key")
    lw.assign_value(tmp, e)  # a stack element chosen at run time is unrolled (p4c: SimplifyKey, HSIndexSimplifier)
    return tmp.node() if as_node else [tmp.header, tmp.field]


def _const(e: ast.Expr, what: str) -> int:
    v = const_value(e)
    if v is None:
        raise CompileError(f"{what} must be a compile-time constant", e.pos)
    return v


def _action_of(scope: Any, ar: ast.ActionRef) -> ActionValue:
    e = ar.name
    av = ExprLowerer(scope).loc(e) if isinstance(e, ast.PathExpr) else None
    if not isinstance(av, ActionValue):
        raise CompileError("expected an action", e.pos)
    return av


def _action_data(ctx: Any, av: ActionValue, ar: ast.ActionRef) -> list[str]:
    out = []
    args = ordered_args(av.decl.params, ar.args, ar.pos)
    for p, a in zip(av.decl.params, args):
        if p.direction is not None:  # bound by the action list, not action data
            continue
        if a is None:
            raise CompileError(f"missing argument for action parameter '{p.name}'", ar.pos)
        w = scalar_width(ctx.types.resolve(p.type_ref)) or 1
        out.append(hexstr(_const(a, "action argument") & mask(w), w))
    return out


def _instance(lw: StmtLowerer, e: ast.Expr, kinds: tuple[str, ...], prop: str,
              table: Optional[ast.TableDecl] = None) -> ExternValue:
    """The extern instance a table property names. ``implementation =
    action_profile(N)`` (a constructor call in the property) is an instance of the
    table's own, named after the table as p4c names it."""
    if table is not None and isinstance(e, ast.CallExpr) and isinstance(e.target, ast.TypeNameExpr):
        anon = ast.InstantiationDecl(e.pos, table.name, e.target.type_ref, e.args,
                                     annotations=table.annotations)
        v: Any = instantiate(lw.scope, anon)
    else:
        v = lw.loc(e) if isinstance(e, ast.PathExpr) else None
    if not isinstance(v, ExternValue) or v.type.name not in kinds:
        raise CompileError(f"table property '{prop}' must name an instance of {' or '.join(kinds)}", e.pos,
                           "unsupported")
    return v


def _action_profile(cl: Pipeline, prof: ExternValue, table: str, selector_inputs: list[dict]) -> None:
    ctx = cl.ctx
    for ap in cl.action_profiles:
        if ap["name"] == prof.name:
            for cp in ctx.cp.action_profiles:
                if cp.name == prof.name:
                    cp.tables.append(table)
            return
    with_selector = prof.type.name == "action_selector"
    size_index = 1 if with_selector else 0
    size = _const(prof.args[size_index].value, "action profile size")
    entry: dict = {"name": prof.name, "id": cl.new_id("action_profiles"), "max_size": size}
    mgs = prof.decl.annotation("max_group_size")
    max_group_size = const_value(mgs.args[0]) if mgs is not None and mgs.args else None
    if with_selector:
        algo = enum_arg(prof.args, 0, "selector algorithm", prof.decl.pos)
        if not selector_inputs:
            raise CompileError("a table with an action_selector needs 'selector' keys", prof.decl.pos)
        entry["selector"] = {"algo": algo, "input": selector_inputs}
    cl.action_profiles.append(entry)
    ctx.cp.add("action_profiles", CPActionProfile(prof.name, prof.decl, [table], with_selector, size,
                                                  max_group_size or 0))


def bmv2_priorities(decl: ast.TableDecl) -> list[int]:
    """BMv2 priorities (lowest number wins) of a table's initial entries.

    Without explicit priorities the first entry wins (1, 2, 3...), except that an
    ``@priority(N)`` annotation on an entry gives it BMv2 priority N. With them, P4's
    rules apply (p4c's EntryPriorities): an entry without a priority takes the
    previous one's minus ``priority_delta`` (plus, if ``largest_priority_wins =
    false``), and by default the largest priority wins -- mapped here onto BMv2's
    order-preserving lowest-wins numbers."""
    entries = decl.entries or []
    if all(e.priority is None for e in entries):
        # p4c's older form: an entry's @priority(N) is its BMv2 priority as is; the
        # others keep their position
        out = []
        for i, e in enumerate(entries):
            anno = next((a for a in e.annotations if a.name == "priority"), None)
            if anno is not None and (len(anno.args) != 1 or const_value(anno.args[0]) is None):
                raise CompileError("@priority needs one integer", anno.pos)
            out.append(const_value(anno.args[0]) if anno is not None else i + 1)
        return out
    largest = True
    lp = decl.prop("largest_priority_wins")
    if lp is not None and const_value(lp.value) is not None:
        largest = bool(const_value(lp.value))
    dp = decl.prop("priority_delta")
    delta = _const(dp.value, "priority_delta") if dp is not None else 1
    p4: list[int] = []
    current = 0
    for i, e in enumerate(entries):
        if e.priority is not None:
            current = _const(e.priority, "priority")
        elif i == 0:
            raise CompileError("the first entry must have a priority when others do", e.pos)
        p4.append(current)
        if largest and current < delta:  # p4c computes in unsigned numbers: it would wrap
            raise CompileError(f"table '{decl.name}': priorities counting down by priority_delta {delta} "
                               f"from this entry's {current} fall below 0", e.pos)
        current = current - delta if largest else current + delta
    if not largest:
        return p4
    top = max(p4)
    return [top - p + 1 for p in p4]


def _entry(ctx: Any, scope: Any, e: ast.TableEntry, kinds: list[str], widths: list[int], priority: int,
           variants: dict[int, int]) -> dict:
    keys = e.keys
    if len(keys) == 1 and len(kinds) > 1 and isinstance(keys[0], ast.ListExpr):
        keys = keys[0].elements
    if len(keys) == 1 and len(kinds) > 1 and isinstance(keys[0], (ast.DefaultExpr, ast.DontCareExpr)):
        keys = [keys[0]] * len(kinds)
    if len(keys) != len(kinds):
        raise CompileError(f"entry has {len(keys)} key values, the table has {len(kinds)} keys", e.pos)
    for k in keys:
        if isinstance(k.type, T.ErrorT):  # p4c's bmv2 suite lists such programs as expected failures
            raise CompileError("an entry value of type error for a table key is not supported on BMv2", k.pos,
                               "unsupported")
    match_key = [_match(k, mk, w) for k, mk, w in zip(keys, kinds, widths)]
    av = _action_of(scope, e.action)
    aid = variants.get(id(av.decl))
    if aid is None:
        raise CompileError(f"action '{av.decl.name}' of an entry is not in the table's actions", e.action.pos)
    return {"match_key": match_key,
            "action_entry": {"action_id": aid, "action_data": _action_data(ctx, av, e.action)},
            "priority": priority}


def _match(k: ast.Expr, mk: str, w: int) -> dict:
    full = mask(w)
    wild = isinstance(k, (ast.DefaultExpr, ast.DontCareExpr))
    if mk == "exact":
        if wild:
            raise CompileError("an exact key cannot be a wildcard", k.pos)
        return {"match_type": "exact", "key": hexstr(_const(k, "key") & full, w)}
    if isinstance(k, ast.BinaryExpr) and k.op == "&&&":
        v, m = _const(k.left, "key") & full, _const(k.right, "mask") & full
    elif isinstance(k, ast.BinaryExpr) and k.op == "..":
        lo, hi = _const(k.left, "range start") & full, _const(k.right, "range end") & full
        if mk != "range":
            raise CompileError("a range needs a key of match kind range", k.pos)
        return {"match_type": "range", "start": hexstr(lo, w), "end": hexstr(hi, w)}
    elif wild:
        v, m = 0, 0
    else:
        v, m = _const(k, "key") & full, full
    if mk == "range":
        if m not in (0, full):
            raise CompileError("a masked value cannot be used for a range key", k.pos)
        return {"match_type": "range", "start": hexstr(v if m else 0, w), "end": hexstr(v if m else full, w)}
    if mk == "lpm":
        plen = bin(m).count("1")
        if m != (full >> (w - plen) << (w - plen) if plen else 0):
            raise CompileError("an lpm mask must be a prefix", k.pos)
        return {"match_type": "lpm", "key": hexstr(v & m, w), "prefix_length": plen}
    if mk == "optional":
        if m not in (0, full):
            raise CompileError("an optional key is either a value or a wildcard", k.pos)
        return {"match_type": "optional", "key": hexstr(v & m, w), "mask": hexstr(m, w)}
    return {"match_type": "ternary", "key": hexstr(v & m, w), "mask": hexstr(m, w)}
