"""Assemble the whole BMv2 JSON document for a v1model program.

Storage is laid out first the way p4c lays it out -- ``scalars`` (instance 0),
``standard_metadata`` (instance 1), then every header of the headers struct in
declaration order -- and bound to the parameters of all six blocks, so that ``hdr``
means the same instances in the parser, the pipelines and the deparser. Then each block
is lowered into its JSON slot, and the top-level arrays are written in p4c's order.
"""

from __future__ import annotations

from typing import Any

from p4sim.compiler import ast
from p4sim.compiler import types as T
from p4sim.compiler.bmv2.context import Context, PacketValue, Scope, enum_member, ordered_args
from p4sim.compiler.bmv2.controls import ControlLowerer, bind_ctor_params
from p4sim.compiler.bmv2.externs import create_calculation
from p4sim.compiler.bmv2.ordering import put_in_reading_order, renumber_actions
from p4sim.compiler.bmv2.parsers import ParserLowerer
from p4sim.compiler.bmv2.statements import StmtLowerer
from p4sim.compiler.bmv2.storage import (
    FieldLoc, HeaderLoc, StackLoc, StructLoc, UnionLoc, UnionStackLoc, base_type, header_leaves,
)
from p4sim.compiler.consteval import const_value
from p4sim.compiler.diagnostics import CompileError
from p4sim.compiler.midend import Design
from p4sim.compiler.midend.blocks import BlockInstance
from p4sim.compiler.midend.controlplane import CPControllerHeader, ControlPlane
from p4sim.compiler.midend.names import annotation_string, local_name

JSON_VERSION = [2, 23]  # behavioral-model docs/JSON_format.md version we follow

#: BMv2's names for v1model's queueing/intrinsic metadata (p4c always emits these).
FIELD_ALIASES = [
    ("queueing_metadata.enq_timestamp", "enq_timestamp"),
    ("queueing_metadata.enq_qdepth", "enq_qdepth"),
    ("queueing_metadata.deq_timedelta", "deq_timedelta"),
    ("queueing_metadata.deq_qdepth", "deq_qdepth"),
    ("intrinsic_metadata.ingress_global_timestamp", "ingress_global_timestamp"),
    ("intrinsic_metadata.egress_global_timestamp", "egress_global_timestamp"),
    ("intrinsic_metadata.mcast_grp", "mcast_grp"),
    ("intrinsic_metadata.egress_rid", "egress_rid"),
    ("intrinsic_metadata.priority", "priority"),
]


def build_bmv2_json(design: Design, source_name: str) -> tuple[dict, ControlPlane]:
    ctx = Context(design)
    b = design.blocks
    hdr, meta, std = layout_parameters(ctx, b.parser.decl)

    parser_scope = block_scope(ctx, b.parser, "parser", [PacketValue("in"), hdr, meta, std])
    parser = ParserLowerer(ctx).lower(b.parser.decl, parser_scope)

    ids: dict[str, int] = {}
    pipelines = []
    for pid, (inst, name) in enumerate(((b.ingress, "ingress"), (b.egress, "egress"))):
        cl = ControlLowerer(ctx, name, ids)
        scope = block_scope(ctx, inst, name, [hdr, meta, std], cl)
        init = cl.lower_control(inst.decl, scope, None)
        pipelines.append(cl.pipeline(init, pid))

    for inst, verify in ((b.verify, True), (b.compute, False)):
        scope = block_scope(ctx, inst, "verify" if verify else "compute", [hdr, meta])
        checksums(ctx, inst.decl.apply.stmts, scope, verify)

    put_in_reading_order(pipelines, ctx.actions, ctx.synth_tables, ctx.synth_actions, set(ctx.names.used))
    renumber_actions(pipelines, ctx.actions, declaration_rank(ctx))

    dep_scope = block_scope(ctx, b.deparser, "deparser", [PacketValue("out"), hdr])
    order = deparser_order(dep_scope, b.deparser.decl.apply.stmts)

    check_direct_meters(ctx)
    for dm in ctx.direct_meters:
        entry: dict[str, Any] = {"name": dm.name, "id": len(ctx.meter_arrays), "is_direct": True,
                                 "rate_count": 2, "type": enum_member(dm.args[0].value) if dm.args else "bytes",
                                 "size": dm.info["size"], "binding": dm.info["table"]}
        if "result" in dm.info:
            entry["result_target"] = dm.info["result"]
        ctx.meter_arrays.append(entry)
    controller_headers(ctx)
    ctx.layout.finish()
    sort_by_declaration(ctx)

    lay = ctx.layout
    doc = {
        "header_types": lay.header_types,
        "headers": lay.headers,
        "header_stacks": lay.header_stacks,
        "header_union_types": lay.header_union_types,
        "header_unions": lay.header_unions,
        "header_union_stacks": [],
        "field_lists": ctx.field_lists,
        "errors": [[name, i] for name, i in ctx.errors.items()],
        "enums": [],
        "parsers": [parser],
        "parse_vsets": ctx.parse_vsets,
        "deparsers": [{"name": "deparser", "id": 0, "order": order, "primitives": []}],
        "meter_arrays": ctx.meter_arrays,
        "counter_arrays": ctx.counter_arrays,
        "register_arrays": ctx.register_arrays,
        "calculations": ctx.calculations,
        "learn_lists": ctx.learn_lists,
        "actions": ctx.actions,
        "pipelines": pipelines,
        "checksums": ctx.checksums,
        "force_arith": [],
        "extern_instances": ctx.extern_instances,
        "field_aliases": [[alias, ["standard_metadata", f]] for alias, f in FIELD_ALIASES],
        "program": source_name,
        "__meta__": {"version": JSON_VERSION, "compiler": "p4sim (https://github.com/p4lang/p4c compatible)"},
    }
    return doc, ctx.cp


def layout_parameters(ctx: Context, parser: ast.ParserDecl) -> tuple[Any, Any, Any]:
    """Storage for the headers, user metadata and standard metadata parameters."""
    if len(parser.params) != 4:
        raise CompileError("the v1model parser takes 4 parameters (packet_in, out headers, inout metadata, "
                           "inout standard_metadata_t)", parser.pos)
    types = ctx.types
    h_t = types.resolve(parser.params[1].type_ref)
    m_t = types.resolve(parser.params[2].type_ref)
    s_t = types.resolve(parser.params[3].type_ref)
    if not isinstance(s_t, T.StructLikeT):
        raise CompileError("the 4th parser parameter must be standard_metadata_t", parser.params[3].pos)
    lay = ctx.layout
    std = lay.header_instance("standard_metadata", T.HeaderT("standard_metadata", s_t.fields), metadata=True,
                              type_name="standard_metadata")
    fields = lay.header_types[-1]["fields"]
    width = sum(f[1] for f in fields)
    if width % 8:
        fields.append(["_padding", 8 - width % 8, False])
    if not isinstance(h_t, T.StructT):
        raise CompileError("the headers parameter must be a struct", parser.params[1].pos)
    hpos, mpos = parser.params[1].pos, parser.params[2].pos
    hdr = StructLoc(h_t, {f.name: lay.storage(f.name, f.type, hpos) for f in h_t.fields})
    meta = lay.storage(m_t.name if isinstance(m_t, T.StructT) else "meta", m_t, mpos)
    ctx.user_meta = meta
    decl = types.lookup(getattr(parser.params[2].type_ref, "name", ""))
    ctx.user_meta_decl = decl if isinstance(decl, ast.StructDecl) else None
    return hdr, meta, std


def block_scope(ctx: Context, inst: BlockInstance, block: str, values: list[Any],
                cl: ControlLowerer | None = None) -> Scope:
    decl = inst.decl
    if len(decl.params) != len(values):
        raise CompileError(f"'{decl.name}' must have {len(values)} parameters to be used as the v1model "
                           f"{block} block", decl.pos)
    prefix = local_name(decl)
    bindings = {id(p): v for p, v in zip(decl.params, values)}
    if cl is not None:
        return cl.enter(decl, prefix, bindings, inst.args, ctx.globals)
    scope = Scope(ctx, prefix, ctx.globals, block=block)
    scope.bindings.update(bindings)
    bind_ctor_params(ctx.globals, scope, decl.ctor_params, inst.args)
    if isinstance(decl, ast.ControlDecl):
        for d in decl.locals:
            raise CompileError(f"declarations are not supported in the v1model {block} control", d.pos,
                               "unsupported")
    return scope


def checksums(ctx: Context, stmts: list[ast.Stmt], scope: Scope, verify: bool) -> None:
    want = ("verify_checksum", "verify_checksum_with_payload") if verify else \
        ("update_checksum", "update_checksum_with_payload")
    for s in stmts:
        if isinstance(s, ast.BlockStmt):
            checksums(ctx, s.stmts, scope, verify)
            continue
        if isinstance(s, ast.EmptyStmt):
            continue
        call = s.call if isinstance(s, ast.CallStmt) else None
        f = call.target.ref if call is not None and isinstance(call.target, ast.PathExpr) else None
        if not isinstance(f, ast.ExternFunctionDecl) or f.name not in want:
            raise CompileError(f"only calls to {want[0]} or {want[1]} are allowed in this control", s.pos,
                               "unsupported")
        cond, data, target, algo = ordered_args(f.proto.params, call.args, call.pos)
        lw = StmtLowerer(scope)
        calc = create_calculation(lw, enum_member(algo) or "?", data, f.name.endswith("_with_payload"), temps=False)
        dst = lw.loc(target)
        if not isinstance(dst, FieldLoc):
            raise CompileError("the checksum must be written to a header field", target.pos)
        c = const_value(cond)
        ctx.checksums.append({
            "name": ctx.names.fresh("cksum"), "id": len(ctx.checksums), "target": [dst.header, dst.field],
            "type": "generic", "calculation": calc, "verify": verify, "update": not verify,
            "if_cond": None if c == 1 else lw.rv(cond),
        })


def deparser_order(scope: Scope, stmts: list[ast.Stmt]) -> list[str]:
    order: list[str] = []
    lw = StmtLowerer(scope)

    def walk(loc: Any) -> None:
        if isinstance(loc, HeaderLoc):
            order.append(loc.name)
        elif isinstance(loc, StackLoc):
            order.extend(e.name for e in loc.elements)
        elif isinstance(loc, UnionLoc):
            order.extend(m.name for m in loc.members.values())
        elif isinstance(loc, UnionStackLoc):
            for u in loc.elements:
                walk(u)
        elif isinstance(loc, StructLoc):
            for f in loc.fields.values():
                if not isinstance(f, FieldLoc):
                    walk(f)

    def visit(ss: list[ast.Stmt]) -> None:
        for s in ss:
            if isinstance(s, ast.BlockStmt):
                visit(s.stmts)
            elif isinstance(s, ast.CallStmt) and isinstance(s.call.target, ast.MemberExpr) \
                    and s.call.target.member == "emit" and s.call.args:
                walk(lw.loc(s.call.args[0].value))
            elif not isinstance(s, ast.EmptyStmt):
                raise CompileError("only packet.emit(...) is supported in the deparser", s.pos, "unsupported")

    visit(stmts)
    return order


def controller_headers(ctx: Context) -> None:
    """``@controller_header("packet_in")`` headers -> P4Info controller_packet_metadata."""
    for d in ctx.design.program.decls:
        if isinstance(d, ast.HeaderDecl) and d.annotation("controller_header") is not None:
            name = annotation_string(d, "controller_header") or d.name
            t = ctx.types.resolve(ast.NamedTypeRef(d.pos, d.name))
            fields = []
            for fd, ft in zip(d.fields, t.fields):
                # a struct-typed field is one metadata per flattened field, named by its
                # path ("b.b"), as p4c's P4Info names them
                for path, _name, lt in header_leaves(T.HeaderT(t.name, (ft,))):
                    bt = base_type(lt)
                    if not isinstance(bt, T.BitT):
                        raise CompileError("controller header fields must be bit<W>", fd.pos)
                    fields.append((".".join(path), bt.width, list(fd.annotations)))
            ctx.cp.add("controller_headers", CPControllerHeader(name, d, fields))


def declaration_order(ctx: Context) -> dict[int, int]:
    """Rank of every declaration (by id) in source order, control locals included."""
    order: dict[int, int] = {}

    def number(decls: list[ast.Decl]) -> None:
        for d in decls:
            order.setdefault(id(d), len(order))
            if isinstance(d, (ast.ControlDecl, ast.ParserDecl)):
                number(d.locals)

    number(ctx.design.program.decls)
    return order


def declaration_rank(ctx: Context) -> dict[str, int]:
    """Control-plane action name -> source rank of its declaration."""
    order = declaration_order(ctx)
    return {a.name: order.get(id(a.decl), len(order)) for a in ctx.cp.actions}


def sort_by_declaration(ctx: Context) -> None:
    """P4Info lists objects in source declaration order (``NoAction`` from core.p4
    first), as p4c does, not in the order the lowering happened to meet them."""
    order = declaration_order(ctx)
    cp = ctx.cp
    for items in (cp.tables, cp.actions, cp.action_profiles, cp.counters, cp.meters, cp.registers,
                  cp.value_sets, cp.controller_headers):
        items.sort(key=lambda o: order.get(id(o.decl), len(order)))


def check_direct_meters(ctx: Context) -> None:
    """A BMv2 direct meter is a table's (its ``binding``) and writes its colour into
    a field when the table hits (its ``result_target``): one without the other
    cannot be written (p4c refuses both, one as a compiler bug)."""
    for dm in ctx.read_meters:
        if "table" not in dm.info:
            raise CompileError(f"direct_meter '{dm.name}' is read, but no table names it in its 'meters' "
                               "property", dm.decl.pos)
    for dm in ctx.direct_meters:
        if "result" not in dm.info:
            raise CompileError(f"direct_meter '{dm.name}' of table '{dm.info['table']}' is never read: BMv2 "
                               f"needs the field it writes ({dm.decl.name}.read(field) in an action of the "
                               "table)", dm.decl.pos)
