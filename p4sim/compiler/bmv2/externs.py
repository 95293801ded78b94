"""v1model extern calls -> the BMv2 primitives they become (their instances and arrays
are made by `context.instantiate`).

Follows p4c's simple_switch back end: ``counter.count(i)`` is ``count``,
``register.read`` is ``register_read``, ``hash(...)`` is
``modify_field_with_hash_based_offset`` over a named calculation, ``digest`` is
``generate_digest`` over a learn list, ``clone`` is ``clone_ingress_pkt_to_egress``
with a field list, ``random`` is ``modify_field_rng_uniform``. Direct counters and
meters, action profiles and selectors only exist through the table that uses them
(see `tables`).
"""

from __future__ import annotations

from typing import Any, Optional

from p4sim.compiler import ast
from p4sim.compiler.bmv2.context import ExternValue, enum_member, ordered_args
from p4sim.compiler.bmv2.jsonutil import as_param, hex_node, hexstr
from p4sim.compiler.bmv2.primitives import PrimitiveLowerer
from p4sim.compiler.bmv2.storage import ConstLoc, FieldLoc, HeaderLoc, StructLoc, scalar_width
from p4sim.compiler.consteval import const_value
from p4sim.compiler.diagnostics import CompileError
from p4sim.compiler.midend.controlplane import CPDigest

HASH_ALGORITHMS = {"crc32", "crc32_custom", "crc16", "crc16_custom", "random", "identity", "csum16", "xor16"}


# ---------------------------------------------------------------------- methods
def extern_method(lw: PrimitiveLowerer, ev: ExternValue, method: str, c: ast.CallExpr) -> None:
    kind = ev.type.name
    args = [a.value for a in c.args]
    if kind == "counter" and method == "count":
        lw.prim("count", [{"type": "counter_array", "value": ev.name}, as_param(lw.data(args[0]))])
    elif kind == "meter" and method == "execute_meter":
        dst, pending = lw.field_dest(args[1])
        lw.prim("execute_meter", [{"type": "meter_array", "value": ev.name}, as_param(lw.data(args[0])), dst])
        lw.finish_dest(pending)
    elif kind == "register" and method == "read":
        dst, pending = lw.field_dest(args[0])
        lw.prim("register_read", [dst, {"type": "register_array", "value": ev.name}, as_param(lw.data(args[1]))])
        lw.finish_dest(pending)
    elif kind == "register" and method == "write":
        lw.prim("register_write", [{"type": "register_array", "value": ev.name},
                                   as_param(lw.data(args[0])), as_param(lw.data(args[1]))])
    elif kind == "direct_counter" and method == "count":
        pass  # counted by the table itself
    elif kind == "direct_meter" and method == "read":
        loc = lw.loc(args[0])
        if not isinstance(loc, FieldLoc):
            raise CompileError("direct_meter.read needs a field as destination", args[0].pos, "unsupported")
        ev.info["result"] = [loc.header, loc.field]
        lw.ctx.read_meters.append(ev)
    else:
        raise CompileError(f"{kind}.{method} is not supported by the BMv2 back end", c.pos, "unsupported")


def extern_method_value(lw: PrimitiveLowerer, ev: ExternValue, method: str, c: ast.CallExpr) -> dict:
    """An extern method whose result is used as a value. ``Checksum16.get(data)``
    (v1model's deprecated checksum unit) is the ones'-complement sum BMv2 computes as
    the ``csum16`` calculation: ``modify_field_with_hash_based_offset`` into a
    temporary, base 0, size 2^16 (so the sum itself)."""
    if ev.type.name == "Checksum16" and method == "get":
        calc = create_calculation(lw, "csum16", c.args[0].value)
        tmp = lw.temp(c.type)
        lw.prim("modify_field_with_hash_based_offset",
                [tmp.node(), hex_node(0, 16), {"type": "calculation", "value": calc}, hex_node(1 << 16, 32)])
        return tmp.node()
    raise CompileError(f"{ev.type.name}.{method} cannot be used as a value here", c.pos, "unsupported")


# ---------------------------------------------------------------------- lists
def flatten(lw: PrimitiveLowerer, e: ast.Expr) -> list[Any]:
    """The leaves of a field list argument: Locs for storage, Exprs otherwise."""
    if isinstance(e, ast.ListExpr):
        return [x for el in e.elements for x in flatten(lw, el)]
    if isinstance(e, ast.StructInitExpr):
        return [x for _, v in e.fields for x in flatten(lw, v)]
    if isinstance(e, (ast.PathExpr, ast.MemberExpr, ast.IndexExpr)) and const_value(e) is None:
        return _flatten_loc(lw.loc(e))
    return [e]


def _flatten_loc(loc: Any) -> list[Any]:
    if isinstance(loc, StructLoc):
        return [x for f in loc.fields.values() for x in _flatten_loc(f)]
    return [loc]


def list_inputs(lw: PrimitiveLowerer, e: ast.Expr, *, headers: bool, temps: bool, what: str) -> list[dict]:
    """Field-list JSON (``field``/``hexstr`` with ``bitwidth``/``header``) for ``e``;
    values that are not fields are first copied into temporaries when allowed."""
    out: list[dict] = []
    for item in flatten(lw, e):
        if isinstance(item, FieldLoc):
            out.append(item.node())
        elif isinstance(item, HeaderLoc) and headers:
            out.append(item.node())
        elif isinstance(item, HeaderLoc):
            out.extend(f.node() for f in item.leaves())
        elif isinstance(item, ConstLoc):
            w = scalar_width(item.type) or 32
            out.append({"type": "hexstr", "value": hexstr(item.value, w), "bitwidth": w})
        elif isinstance(item, ast.Expr) and const_value(item) is not None and scalar_width(item.type):
            w = scalar_width(item.type)
            out.append({"type": "hexstr", "value": hexstr(const_value(item), w), "bitwidth": w})
        elif isinstance(item, ast.Expr) and temps and scalar_width(item.type):
            tmp = lw.temp(item.type)
            lw.set_field(tmp, lw.data(item))
            out.append(tmp.node())
        else:
            where = item.pos if isinstance(item, ast.Node) else e.pos
            raise CompileError(f"{what}: only fields and constants are supported here", where, "unsupported")
    return out


def create_calculation(lw: PrimitiveLowerer, algo: str, data: ast.Expr, payload: bool = False,
                       temps: bool = True) -> str:
    ctx = lw.ctx
    if algo not in HASH_ALGORITHMS:
        raise CompileError(f"hash algorithm '{algo}' is not supported by BMv2", data.pos, "unsupported")
    inputs = list_inputs(lw, data, headers=True, temps=temps, what="hash input")
    if payload:
        inputs.append({"type": "payload", "value": None})
    name = ctx.names.fresh("calc")
    ctx.calculations.append({"name": name, "id": len(ctx.calculations), "algo": algo, "input": inputs})
    return name


def preserved_field_list(lw: PrimitiveLowerer, index: int) -> int:
    """Id of field list ``field_list<index>``: user metadata fields tagged
    ``@field_list(index)`` (p4c's convention for *_preserving_field_list)."""
    ctx = lw.ctx
    if index in ctx.preserved_lists:
        return ctx.preserved_lists[index]
    elements: list[dict] = []

    def walk(decl: Optional[ast.StructDecl], loc: Any) -> None:
        if decl is None or not isinstance(loc, StructLoc):
            return
        for f in decl.fields:
            sub = loc.fields.get(f.name)
            a = f.annotation("field_list")
            if a is not None and any(const_value(x) == index for x in a.args):
                elements.extend(x.node() for x in _flatten_loc(sub) if isinstance(x, FieldLoc))
            nested = ctx.types.lookup(getattr(f.type_ref, "name", ""))
            if isinstance(nested, ast.StructDecl):
                walk(nested, sub)

    walk(ctx.user_meta_decl, ctx.user_meta)
    fid = ctx.add_field_list(f"field_list{index}", elements)
    ctx.preserved_lists[index] = fid
    return fid


# ---------------------------------------------------------------------- functions
def list_id(fid: int) -> dict:
    """A field/learn list id argument: p4c emits it as a bit<32> constant."""
    return hex_node(fid, 32)


def extern_function(lw: PrimitiveLowerer, f: ast.ExternFunctionDecl, c: ast.CallExpr) -> None:
    ctx = lw.ctx
    name = f.name
    args = ordered_args(f.proto.params, c.args, c.pos)
    if name == "mark_to_drop":
        lw.prim("mark_to_drop", [{"type": "header", "value": "standard_metadata"}])
    elif name == "hash":
        algo = enum_member(args[1])
        calc = create_calculation(lw, algo or "?", args[3])
        dst, pending = lw.field_dest(args[0])
        lw.prim("modify_field_with_hash_based_offset",
                [dst, as_param(lw.data(args[2])), {"type": "calculation", "value": calc}, as_param(lw.data(args[4]))])
        lw.finish_dest(pending)
    elif name == "random":
        dst, pending = lw.field_dest(args[0])
        lw.prim("modify_field_rng_uniform", [dst, as_param(lw.data(args[1])), as_param(lw.data(args[2]))])
        lw.finish_dest(pending)
    elif name == "digest":
        data = args[1]
        dtype = data.type
        list_name = getattr(dtype, "name", None) or "digest"
        elements = list_inputs(lw, data, headers=False, temps=True, what="digest data")
        lid = None
        for ll in ctx.learn_lists:
            if ll["name"] == list_name and ll["elements"] == elements:
                lid = ll["id"]
        if lid is None:
            lid = len(ctx.learn_lists) + 1
            ctx.learn_lists.append({"id": lid, "name": list_name, "elements": elements})
        ctx.cp.add("digests", CPDigest(list_name, dtype))
        lw.prim("generate_digest", [as_param(lw.data(args[0])), list_id(lid)])
    elif name in ("clone", "clone3", "clone_preserving_field_list"):
        kind = enum_member(args[0])
        if lw.scope.block not in ("ingress", "egress"):
            raise CompileError(f"{name} can only be called in ingress or egress", c.pos)
        if name == "clone":
            fid = ctx.add_field_list(ctx.names.fresh("fl"), [])
        elif name == "clone3":
            fid = ctx.add_field_list(ctx.names.fresh("fl"),
                                     list_inputs(lw, args[2], headers=False, temps=False, what="clone3 data"))
        else:
            fid = preserved_field_list(lw, lw.require_const(args[2]))
        prim = "clone_ingress_pkt_to_egress" if kind == "I2E" else "clone_egress_pkt_to_egress"
        lw.prim(prim, [as_param(lw.data(args[1])), list_id(fid)])
    elif name in ("resubmit", "resubmit_preserving_field_list", "recirculate", "recirculate_preserving_field_list"):
        prim = "resubmit" if name.startswith("resubmit") else "recirculate"
        if not args or args[0] is None:
            fid = ctx.add_field_list(ctx.names.fresh("fl"), [])
        elif name.endswith("_preserving_field_list"):
            fid = preserved_field_list(lw, lw.require_const(args[0]))
        else:
            fid = ctx.add_field_list(ctx.names.fresh("fl"),
                                     list_inputs(lw, args[0], headers=False, temps=False, what=f"{name} data"))
        lw.prim(prim, [list_id(fid)])
    elif name == "truncate":
        lw.prim("truncate", [as_param(lw.data(args[0]))])
    elif name == "log_msg":
        fmt = args[0]
        if not isinstance(fmt, ast.StringLit):
            raise CompileError("log_msg needs a string literal", c.pos)
        values = [] if len(args) < 2 or args[1] is None else [lw.data(x) for x in _leaves(args[1])]
        lw.prim("log_msg", [{"type": "string", "value": fmt.value}, {"type": "parameters_vector", "value": values}])
    elif name in ("assert", "assume"):
        lw.prim(name, [as_param(lw.rv(args[0]))])
    elif name == "verify":
        if not lw.parser:
            raise CompileError("verify can only be called in a parser", c.pos)
        err = args[1]
        lw.out.append({"op": "verify", "parameters": [lw.rv(args[0]), lw.rv(err)]})
    elif name in ("verify_checksum", "update_checksum", "verify_checksum_with_payload",
                  "update_checksum_with_payload"):
        raise CompileError(f"{name} can only be called in the checksum controls", c.pos)
    else:
        raise CompileError(f"extern function '{name}' is not supported by the BMv2 back end", c.pos, "unsupported")


def _leaves(e: ast.Expr) -> list[ast.Expr]:
    if isinstance(e, ast.ListExpr):
        return list(e.elements)
    if isinstance(e, ast.StructInitExpr):
        return [v for _, v in e.fields]
    return [e]
