"""Find the v1model pipeline: which parser and controls ``main`` is built from.

``V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
MyComputeChecksum(), MyDeparser()) main;`` names six blocks; the back end lowers each
into its BMv2 JSON slot (parser, checksum verification, ingress and egress pipelines,
checksum update, deparser). Arguments may be named (``ig = MyIngress()``) or refer to a
top-level instance (``MyIngress() ig; V1Switch(..., ig, ...) main;``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from p4sim.compiler import ast
from p4sim.compiler.diagnostics import CompileError
from p4sim.compiler.midend.typeref import TypeResolver

#: V1Switch's parameter names, in declaration order (p4c's v1model.p4).
V1SWITCH_SLOTS = ("p", "vr", "ig", "eg", "ck", "dep")

BlockDecl = Union[ast.ParserDecl, ast.ControlDecl]


@dataclass
class BlockInstance:
    """A parser or control together with the constructor arguments it was given."""

    decl: BlockDecl
    args: list[ast.Argument]
    pos: object


@dataclass
class V1Blocks:
    parser: BlockInstance
    verify: BlockInstance
    ingress: BlockInstance
    egress: BlockInstance
    compute: BlockInstance
    deparser: BlockInstance


def find_main(program: ast.Program) -> ast.InstantiationDecl:
    for d in program.decls:
        if isinstance(d, ast.InstantiationDecl) and d.name == "main":
            return d
    raise CompileError("no 'main' package instantiation: a v1model program needs "
                       "'V1Switch(...) main;'", program.pos)


def block_of(expr: ast.Expr, types: TypeResolver) -> BlockInstance:
    """The parser/control an argument of ``main`` denotes."""
    if isinstance(expr, ast.CallExpr):
        target = expr.target
        decl = getattr(target, "ref", None)
        if decl is None and isinstance(target, ast.TypeNameExpr) and isinstance(target.type_ref, ast.NamedTypeRef):
            decl = types.lookup(target.type_ref.name)
        if decl is None and isinstance(target, ast.PathExpr):
            decl = types.lookup(target.name)
        if isinstance(decl, (ast.ParserDecl, ast.ControlDecl)):
            return BlockInstance(decl, list(expr.args), expr.pos)
    if isinstance(expr, ast.PathExpr):
        ref = expr.ref if expr.ref is not None else types.lookup(expr.name)
        if isinstance(ref, ast.InstantiationDecl) and isinstance(ref.type_ref, ast.NamedTypeRef):
            decl = types.lookup(ref.type_ref.name)
            if isinstance(decl, (ast.ParserDecl, ast.ControlDecl)):
                return BlockInstance(decl, list(ref.args), ref.pos)
    raise CompileError("expected a parser or control instantiation here", expr.pos)


def v1model_blocks(program: ast.Program, types: TypeResolver) -> V1Blocks:
    main = find_main(program)
    pkg = main.type_ref.name if isinstance(main.type_ref, ast.NamedTypeRef) else "?"
    if pkg != "V1Switch":
        raise CompileError(f"main is a '{pkg}'; only the v1model architecture's "
                           "'V1Switch' package is supported", main.pos, "unsupported")
    if len(main.args) != len(V1SWITCH_SLOTS):
        raise CompileError(f"V1Switch takes {len(V1SWITCH_SLOTS)} arguments, "
                           f"{len(main.args)} given", main.pos)
    slots: dict[str, BlockInstance] = {}
    for i, arg in enumerate(main.args):
        name = arg.name or V1SWITCH_SLOTS[i]
        if name not in V1SWITCH_SLOTS:
            raise CompileError(f"V1Switch has no parameter '{name}'", arg.pos)
        slots[name] = block_of(arg.value, types)
    kinds = {"p": ast.ParserDecl}
    for name, inst in slots.items():
        want = kinds.get(name, ast.ControlDecl)
        if not isinstance(inst.decl, want):
            what = "a parser" if want is ast.ParserDecl else "a control"
            raise CompileError(f"V1Switch argument '{name}' must be {what}", inst.pos)
    return V1Blocks(slots["p"], slots["vr"], slots["ig"], slots["eg"], slots["ck"], slots["dep"])
