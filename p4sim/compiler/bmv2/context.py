"""State shared by the whole BMv2 lowering, and the lexical scopes it runs in.

`Context` owns every JSON array that is program-wide (actions, calculations, field and
learn lists, extern arrays, ...) and the control-plane inventory. A `Scope` maps the
declarations visible in one control/parser instance (or one inlined action/function
body) to what they are in BMv2: storage (`storage.Loc`), an action, a table, an extern
instance, a sub-control instance or the packet. Inlining a sub-control or an action is
"lower its body in a new scope whose parameters are bound to the caller's arguments"
(`ordered_args` pairs them up).

`instantiate` makes the value of an instantiation and the extern array it owns. It
lives here, with the values and the arrays, because a scope creates a top-level
instance the first time a name reaches it (`Context.global_value`), so that arrays
are numbered in the order the program uses them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from p4sim.compiler import ast
from p4sim.compiler import types as T
from p4sim.compiler.bmv2.jsonutil import NameGen
from p4sim.compiler.bmv2.storage import ConstLoc, Layout, base_type
from p4sim.compiler.consteval import const_value
from p4sim.compiler.diagnostics import CompileError
from p4sim.compiler.midend import Design
from p4sim.compiler.midend.controlplane import CPCounter, CPMeter, CPRegister, ControlPlane
from p4sim.compiler.midend.names import control_plane_name

COUNTER_UNITS = {"packets": "PACKETS", "bytes": "BYTES", "packets_and_bytes": "BOTH"}
METER_UNITS = {"packets": "PACKETS", "bytes": "BYTES"}
# Externs whose instance makes no array of its own: the table that uses them does.
DEFERRED = {"direct_counter", "direct_meter", "action_profile", "action_selector"}


@dataclass
class ActionValue:
    decl: ast.ActionDecl
    scope: "Scope"

    @property
    def name(self) -> str:
        return control_plane_name(self.decl, self.scope.prefix)


@dataclass
class TableValue:
    decl: ast.TableDecl
    scope: "Scope"

    @property
    def name(self) -> str:
        return control_plane_name(self.decl, self.scope.prefix)


@dataclass
class ExternValue:
    """An extern object instance (counter, register, action_selector...)."""

    decl: ast.Decl
    name: str
    type: T.ExternT
    args: list[ast.Argument]
    scope: "Scope"
    info: dict = field(default_factory=dict)  # facts found later (direct meter target...)


@dataclass
class BlockValue:
    """An instance of a sub-control or sub-parser, inlined where it is applied."""

    decl: ast.Decl  # ControlDecl | ParserDecl
    name: str  # control-plane prefix of its contents
    args: list[ast.Argument]
    scope: "Scope"
    inner: Optional["Scope"] = None  # its own scope, created when instantiated


@dataclass
class PacketValue:
    direction: str  # "in" (packet_in) | "out" (packet_out)


@dataclass
class FunctionValue:
    decl: ast.FunctionDecl


class Scope:
    """Declarations -> values, chained to the enclosing scope."""

    def __init__(self, ctx: "Context", prefix: str, parent: Optional["Scope"] = None, block: str = ""):
        self.ctx = ctx
        self.prefix = prefix
        self.parent = parent
        self.block = block or (parent.block if parent else "")
        self.bindings: dict[int, Any] = {}

    def child(self, prefix: Optional[str] = None) -> "Scope":
        return Scope(self.ctx, self.prefix if prefix is None else prefix, self)

    def bind(self, decl: object, value: Any) -> None:
        self.bindings[id(decl)] = value

    def find(self, decl: object) -> Any:
        s: Optional[Scope] = self
        key = id(decl)
        while s is not None:
            if key in s.bindings:
                return s.bindings[key]
            s = s.parent
        return None

    def lookup(self, decl: object, e: ast.Expr) -> Any:
        v = self.find(decl)
        if v is not None:
            return v
        return self.ctx.global_value(decl, e)


class Context:
    def __init__(self, design: Design):
        self.design = design
        self.types = design.types
        self.layout = Layout()
        self.cp = ControlPlane()
        self.names = NameGen()  # actions, tables, conditionals, calculations...
        self.synth_actions: set[str] = set()  # names the compiler made up
        self.synth_tables: set[str] = set()
        # expressions computed before their statement into a temporary (a
        # ``t.apply().hit``/``.miss``, or the ``&&``/``||``/``?:`` holding one):
        # the expression's id -> the temporary, which the expression then denotes
        self.hoisted: dict[int, Any] = {}
        self.actions: list[dict] = []
        self.action_ids: dict[tuple[int, str], int] = {}
        self.calculations: list[dict] = []
        self.field_lists: list[dict] = []
        self.learn_lists: list[dict] = []
        self.counter_arrays: list[dict] = []
        self.meter_arrays: list[dict] = []
        self.register_arrays: list[dict] = []
        self.parse_vsets: list[dict] = []
        self.checksums: list[dict] = []
        self.extern_instances: list[dict] = []
        self.errors = {name: i for i, name in enumerate(design.errors)}
        self.globals = Scope(self, "")
        self.node_counter = 0
        self.user_meta_decl: Optional[ast.StructDecl] = None
        self.user_meta: Any = None  # StructLoc of the user metadata parameter
        self.preserved_lists: dict[int, int] = {}  # @field_list index -> field list id
        self.direct_meters: list[Any] = []  # ExternValues bound to tables, emitted last
        self.read_meters: list[Any] = []  # direct_meter ExternValues some action reads

    # -------------------------------------------------------------- naming
    def node_name(self) -> str:
        self.node_counter += 1
        name = self.names.fresh(f"node_{self.node_counter}")
        self.synth_tables.add(name)
        return name

    # -------------------------------------------------------------- globals
    def global_value(self, decl: object, e: ast.Expr) -> Any:
        """Values of top-level declarations referenced from anywhere."""
        if isinstance(decl, ast.ConstDecl):
            v = const_value(decl.value)
            if v is None:
                raise CompileError(f"constant '{decl.name}' has no compile-time value", e.pos)
            return ConstLoc(v, e.type if e.type is not None else self.types.resolve(decl.type_ref))
        if isinstance(decl, ast.ActionDecl):
            return ActionValue(decl, self.globals)
        if isinstance(decl, ast.FunctionDecl):
            return FunctionValue(decl)
        if isinstance(decl, ast.InstantiationDecl):
            v = self.globals.find(decl)
            if v is None:
                v = instantiate(self.globals, decl)
                self.globals.bind(decl, v)
            return v
        if decl is None:
            raise CompileError("name was not resolved by the front end", e.pos)
        what = getattr(decl, "name", type(decl).__name__)
        raise CompileError(f"'{what}' cannot be used here", e.pos)

    def no_action(self) -> Optional[ActionValue]:
        """core.p4's ``NoAction`` (None if the program does not declare it)."""
        for d in self.design.program.decls:
            if isinstance(d, ast.ActionDecl) and d.name == "NoAction":
                return ActionValue(d, self.globals)
        return None

    def error_value(self, name: str, pos: Any) -> int:
        if name not in self.errors:
            raise CompileError(f"unknown error constant 'error.{name}'", pos)
        return self.errors[name]

    def add_field_list(self, name: str, elements: list[dict]) -> int:
        fid = len(self.field_lists) + 1
        self.field_lists.append({"id": fid, "name": name, "elements": elements})
        return fid


def ordered_args(params: list[ast.Param], args: list[ast.Argument], pos: Any) -> list[Optional[ast.Expr]]:
    """Arguments in parameter order (named arguments placed; defaults left None)."""
    out: list[Optional[ast.Expr]] = [None] * len(params)
    names = [p.name for p in params]
    for i, a in enumerate(args):
        if a.name is not None:
            if a.name not in names:
                raise CompileError(f"no parameter named '{a.name}'", a.pos)
            out[names.index(a.name)] = a.value
        elif i < len(out):
            out[i] = a.value
        else:
            raise CompileError("too many arguments", a.pos)
    for i, p in enumerate(params):
        if out[i] is None and p.default is not None:
            out[i] = p.default
    return out


# ---------------------------------------------------------------------- instances
def enum_member(e: ast.Expr) -> Optional[str]:
    """``HashAlgorithm.crc16`` -> "crc16" (also for a bare resolved member)."""
    if isinstance(e, ast.MemberExpr):
        return e.member
    if isinstance(e, ast.PathExpr) and isinstance(e.ref, ast.EnumMember):
        return e.ref.name
    return None


def const_arg(args: list[ast.Argument], i: int, what: str, pos: Any) -> int:
    return _arg(args, i, what, pos, const_value, "a compile-time constant")


def enum_arg(args: list[ast.Argument], i: int, what: str, pos: Any) -> str:
    return _arg(args, i, what, pos, enum_member, "a constant")


def _arg(args: list[ast.Argument], i: int, what: str, pos: Any, value_of: Callable[[ast.Expr], Any],
         must_be: str) -> Any:
    """``value_of`` argument ``i``; an error naming ``what`` if it is missing or has no
    such value."""
    if i >= len(args):
        raise CompileError(f"missing {what}", pos)
    v = value_of(args[i].value)
    if v is None:
        raise CompileError(f"{what} must be {must_be}", args[i].value.pos)
    return v


def direct_instance(scope: Scope, tn: ast.TypeNameExpr) -> BlockValue:
    """The instance that ``T.apply(...)`` applies: like ``T() T;`` declared here (p4c
    names it after the type)."""
    t = scope.ctx.types.resolve(tn.type_ref)
    if not isinstance(t, (T.ControlT, T.ParserT)):
        raise CompileError("only controls and parsers can be applied by their type name", tn.pos)
    name = f"{scope.prefix}.{t.decl.name}" if scope.prefix else t.decl.name
    return BlockValue(t.decl, name, [], scope)


def instantiate(scope: Scope, decl: ast.InstantiationDecl) -> Any:
    """Create the BMv2 object for an instantiation in ``scope``."""
    ctx = scope.ctx
    t = ctx.types.resolve(decl.type_ref)
    name = control_plane_name(decl, scope.prefix)
    if isinstance(t, (T.ControlT, T.ParserT)):
        return BlockValue(t.decl, name, list(decl.args), scope)
    if not isinstance(t, T.ExternT):
        raise CompileError(f"cannot instantiate '{decl.type_ref}'", decl.pos)
    ev = ExternValue(decl, name, t, list(decl.args), scope)
    kind, args, pos = t.name, decl.args, decl.pos
    if kind == "counter":
        size = const_arg(args, 0, "counter size", pos)
        unit = COUNTER_UNITS.get(enum_arg(args, 1, "counter type", pos), "BOTH")
        ctx.counter_arrays.append({"name": name, "id": len(ctx.counter_arrays), "is_direct": False, "size": size})
        ctx.cp.add("counters", CPCounter(name, decl, unit, size))
    elif kind == "meter":
        size = const_arg(args, 0, "meter size", pos)
        mtype = enum_arg(args, 1, "meter type", pos)
        ctx.meter_arrays.append({"name": name, "id": len(ctx.meter_arrays), "is_direct": False, "size": size,
                                 "rate_count": 2, "type": mtype})
        ctx.cp.add("meters", CPMeter(name, decl, METER_UNITS.get(mtype, "BYTES"), size))
    elif kind == "register":
        size = const_arg(args, 0, "register size", pos)
        if not t.args or not isinstance(base_type(t.args[0]), T.BitT):
            raise CompileError("only registers of bit<W> or int<W> cells are supported", pos, "unsupported")
        if size == 0:
            raise CompileError("direct registers are not supported in bmv2", pos, "unsupported")
        ctx.register_arrays.append({"name": name, "id": len(ctx.register_arrays), "size": size,
                                    "bitwidth": base_type(t.args[0]).width})
        ctx.cp.add("registers", CPRegister(name, decl, t.args[0], size))
    elif kind == "Checksum16":
        pass  # no state: each get() is a csum16 calculation (`externs.extern_method_value`)
    elif kind not in DEFERRED:
        raise CompileError(f"extern '{kind}' is not supported by the BMv2 back end", pos, "unsupported")
    return ev
