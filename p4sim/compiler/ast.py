"""The P4-16 syntax tree: the contract between the front end and the back end.

The parser (`parse.py`) builds these nodes from source; the front-end passes
(`resolve.py`, `typecheck.py`) then fill in annotation slots that the back end
relies on, so the back end never re-derives a name or a width:

* ``Expr.type``  -- the semantic type of every expression (a `types.Type`);
* ``PathExpr.ref`` / ``MemberExpr.ref`` -- the declaration a name denotes (a `Decl`
  node, a `Param`, or an `EnumMember`), when it denotes one.
* ``TypeRef.type`` -- the semantic type a piece of type syntax denotes (parameter,
  variable, field, instance types), so the back end need not resolve names itself.

The full contract is in the docstring of `typecheck.py`.

Every node carries ``pos`` (file, line, column of its first token) for diagnostics.
The nodes mirror the P4-16 grammar closely (spec section numbers in comments) so that a
reader of the spec finds the construct here under the same name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from p4sim.compiler.diagnostics import SrcPos


@dataclass(eq=False)
class Node:
    pos: SrcPos = field(repr=False, compare=False)


@dataclass(eq=False)
class Annotation(Node):
    """``@name`` / ``@name("x")`` / ``@id(5)`` / ``@field_list(1)``: args kept as Exprs."""

    name: str
    args: list["Expr"] = field(default_factory=list)


# ---------------------------------------------------------------- type references
# What the source *says* (before resolution); the semantic type is in `types.py`.


@dataclass(eq=False)
class TypeRef(Node):
    # Filled by typecheck.py: the semantic type this syntax denotes (`types.Type`).
    type: Any = field(default=None, init=False, repr=False, compare=False)


@dataclass(eq=False)
class BitTypeRef(TypeRef):
    """``bit<W>``, ``int<W>``, ``varbit<W>``; ``bit`` alone is bit<1>."""

    kind: str  # "bit" | "int" | "varbit"
    width: "Expr"


@dataclass(eq=False)
class NamedTypeRef(TypeRef):
    """A type by name, possibly specialised: ``headers_t``, ``register<bit<32>>``."""

    name: str
    args: list[TypeRef] = field(default_factory=list)


@dataclass(eq=False)
class BaseTypeRef(TypeRef):
    """``bool``, ``error``, ``match_kind``, ``string``, ``void``, ``int`` (infinite
    precision), ``packet_in``/``packet_out`` are NamedTypeRefs to core.p4 externs."""

    name: str


@dataclass(eq=False)
class StackTypeRef(TypeRef):
    """``h_t[4]``: a header stack."""

    element: TypeRef
    size: "Expr"


@dataclass(eq=False)
class TupleTypeRef(TypeRef):
    elements: list[TypeRef]


@dataclass(eq=False)
class ListTypeRef(TypeRef):
    """``list<T>`` (P4-16 1.2.4): only as the type a list expression is cast to in
    ``for (T x in (list<T>) {a, b})``; p4sim has no list values elsewhere."""

    element: TypeRef


@dataclass(eq=False)
class InitTypeRef(TypeRef):
    """No syntax: the type of a compiler-made variable is its initializer's (the
    temporary that holds a compound assignment's index, evaluated once)."""


@dataclass(eq=False)
class DontCareTypeRef(TypeRef):
    """``_`` used as a type argument (to be inferred)."""


# ---------------------------------------------------------------- expressions (8.)


@dataclass(eq=False)
class Expr(Node):
    # Filled by typecheck.py; the back end reads it.
    type: Any = field(default=None, init=False, repr=False, compare=False)


@dataclass(eq=False)
class IntLit(Expr):
    """``42``, ``8w5``, ``4s-1``, ``0x0a``: width None means arbitrary precision."""

    value: int
    width: Optional[int] = None
    signed: bool = False


@dataclass(eq=False)
class BoolLit(Expr):
    value: bool


@dataclass(eq=False)
class StringLit(Expr):
    value: str


@dataclass(eq=False)
class PathExpr(Expr):
    """A bare name (``hdr``, ``NoAction``, ``.ipv4`` with leading dot = top-level)."""

    name: str
    top_level: bool = False
    ref: Any = field(default=None, init=False, repr=False, compare=False)


@dataclass(eq=False)
class TypeNameExpr(Expr):
    """A type used in expression position, e.g. the ``error`` in ``error.NoError``
    or ``MyEnum`` in ``MyEnum.A`` after resolution knows it names a type."""

    type_ref: TypeRef


@dataclass(eq=False)
class MemberExpr(Expr):
    """``e.m``: field, header-stack ``next``/``last``/``size``/``lastIndex``,
    method (``isValid``, ``apply``, ``extract``, ``read``...), or enum/error member."""

    expr: Expr
    member: str
    ref: Any = field(default=None, init=False, repr=False, compare=False)
    # Position of the member name itself (set by the parser), for diagnostics.
    member_pos: Optional[SrcPos] = field(default=None, init=False, repr=False, compare=False)


@dataclass(eq=False)
class IndexExpr(Expr):
    """``stack[i]``."""

    expr: Expr
    index: Expr


@dataclass(eq=False)
class SliceExpr(Expr):
    """``e[hi:lo]``: bits hi..lo inclusive, both compile-time constants."""

    expr: Expr
    hi: Expr
    lo: Expr


@dataclass(eq=False)
class UnaryExpr(Expr):
    """``!e``, ``~e``, ``-e``, ``+e``."""

    op: str
    expr: Expr


@dataclass(eq=False)
class BinaryExpr(Expr):
    """Arithmetic/logic/comparison: ``+ - * / % << >> & | ^ && || == != < > <= >=``,
    saturating ``|+| |-|``, concatenation ``++``; in keysets also mask ``&&&`` and
    range ``..``."""

    op: str
    left: Expr
    right: Expr


@dataclass(eq=False)
class TernaryExpr(Expr):
    cond: Expr
    then: Expr
    else_: Expr


@dataclass(eq=False)
class CastExpr(Expr):
    """``(bit<16>) e``."""

    type_ref: TypeRef
    expr: Expr


@dataclass(eq=False)
class Argument(Node):
    """A call argument; ``name`` is set for named arguments (``f(x = 1)``)."""

    value: Expr
    name: Optional[str] = None


@dataclass(eq=False)
class CallExpr(Expr):
    """``target<type_args>(args)``. What is called (action, extern function, extern
    method, built-in method such as ``isValid``/``extract``/``apply``/``push_front``,
    parser/control apply) is read off ``target``'s resolution."""

    target: Expr
    type_args: list[TypeRef] = field(default_factory=list)
    args: list[Argument] = field(default_factory=list)


@dataclass(eq=False)
class ListExpr(Expr):
    """``{a, b, c}``: a tuple/list expression (also struct initialiser by position)."""

    elements: list[Expr]


@dataclass(eq=False)
class StructInitExpr(Expr):
    """``{f1 = a, f2 = b}``; type comes from context (e.g. a typed declaration)."""

    fields: list[tuple[str, Expr]]


@dataclass(eq=False)
class DefaultExpr(Expr):
    """``default`` in a keyset or switch label; ``_`` (dont-care) uses DontCareExpr."""


@dataclass(eq=False)
class DontCareExpr(Expr):
    """``_``: matches anything in a keyset; discards an out argument."""


# ---------------------------------------------------------------- statements (12.)


@dataclass(eq=False)
class Stmt(Node):
    pass


@dataclass(eq=False)
class AssignStmt(Stmt):
    lhs: Expr
    rhs: Expr


@dataclass(eq=False)
class CallStmt(Stmt):
    call: CallExpr


@dataclass(eq=False)
class BlockStmt(Stmt):
    stmts: list[Stmt] = field(default_factory=list)


@dataclass(eq=False)
class IfStmt(Stmt):
    cond: Expr
    then: Stmt
    else_: Optional[Stmt] = None


@dataclass(eq=False)
class SwitchCase(Node):
    """One label; ``body`` None means fall through to the next label's body."""

    label: Expr  # an Expr, PathExpr naming an action, or DefaultExpr
    body: Optional[BlockStmt]


@dataclass(eq=False)
class SwitchStmt(Stmt):
    """``switch (t.apply().action_run) {...}`` or ``switch (value) {...}``."""

    expr: Expr
    cases: list[SwitchCase]


@dataclass(eq=False)
class ExitStmt(Stmt):
    pass


@dataclass(eq=False)
class ReturnStmt(Stmt):
    value: Optional[Expr] = None


@dataclass(eq=False)
class EmptyStmt(Stmt):
    pass


@dataclass(eq=False)
class ForStmt(Stmt):
    """``for (init; cond; update) body`` (P4-16 1.2.4). ``for (T x in a..b)`` is
    built as this loop by the parser (`parse._Build.for_in_stmt`), with ``in_range``
    set: then ``init[0]`` declares ``x = a`` and ``init[1]`` the last value ``b``, so
    the mid end can still unroll it as the range it was. ``init`` holds
    declarations, assignments and calls; ``update`` assignments and calls."""

    init: list[Stmt]
    cond: Optional[Expr]
    update: list[Stmt]
    body: Stmt
    in_range: bool = False


@dataclass(eq=False)
class ForInStmt(Stmt):
    """``for (T x in stack) body``: the body once per element of a header stack,
    ``x`` a copy of the element (P4-16 12.8). Ranges ``a..b`` are `ForStmt`s; the
    mid end unrolls this loop (`midend.unroll`), so the back end never sees it."""

    var: "VarDecl"
    collection: Expr
    body: Stmt


@dataclass(eq=False)
class BreakStmt(Stmt):
    pass


@dataclass(eq=False)
class ContinueStmt(Stmt):
    pass


# ---------------------------------------------------------------- declarations


@dataclass(eq=False)
class Decl(Node):
    name: str
    annotations: list[Annotation] = field(default_factory=list, kw_only=True)

    def annotation(self, name: str) -> Optional[Annotation]:
        for a in self.annotations:
            if a.name == name:
                return a
        return None


@dataclass(eq=False)
class VarDecl(Decl, Stmt):
    """A local variable (statement) or a control/parser-local variable."""

    type_ref: TypeRef
    init: Optional[Expr] = None


@dataclass(eq=False)
class ConstDecl(Decl, Stmt):
    type_ref: TypeRef
    value: Expr


@dataclass(eq=False)
class Param(Decl):
    """``direction`` is "in", "out", "inout" or None (directionless: action data,
    constructor parameters)."""

    direction: Optional[str]
    type_ref: TypeRef
    default: Optional[Expr] = None


@dataclass(eq=False)
class FieldDecl(Decl):
    type_ref: TypeRef


@dataclass(eq=False)
class HeaderDecl(Decl):
    fields: list[FieldDecl]


@dataclass(eq=False)
class HeaderUnionDecl(Decl):
    fields: list[FieldDecl]


@dataclass(eq=False)
class StructDecl(Decl):
    fields: list[FieldDecl]
    type_params: list[str] = field(default_factory=list)


@dataclass(eq=False)
class EnumMember(Node):
    name: str
    value: Optional[Expr] = None  # serializable enums only
    enum: Any = field(default=None, init=False, repr=False, compare=False)


@dataclass(eq=False)
class EnumDecl(Decl):
    """``enum E {A, B}`` or serializable ``enum bit<8> E {A = 1, B = 2}``."""

    members: list[EnumMember]
    underlying: Optional[TypeRef] = None


@dataclass(eq=False)
class ErrorDecl(Decl):
    """``error {...}``: all error declarations merge into the one ``error`` type."""

    members: list[str]


@dataclass(eq=False)
class MatchKindDecl(Decl):
    members: list[str]


@dataclass(eq=False)
class TypedefDecl(Decl):
    """``typedef T N;`` (alias) or ``type T N;`` (new type, ``is_new_type``)."""

    type_ref: TypeRef
    is_new_type: bool = False


@dataclass(eq=False)
class MethodProto(Decl):
    """A method/function prototype: extern methods, extern functions, constructors
    (``return_type`` None), and the ``apply`` of parser/control/package types."""

    type_params: list[str]
    return_type: Optional[TypeRef]
    params: list[Param]
    is_abstract: bool = False


@dataclass(eq=False)
class ExternDecl(Decl):
    """``extern register<T, I> { register(bit<32> size); void read(...); ... }``."""

    type_params: list[str]
    methods: list[MethodProto]  # constructors have name == extern name


@dataclass(eq=False)
class ExternFunctionDecl(Decl):
    """``extern void mark_to_drop(inout standard_metadata_t s);``"""

    proto: MethodProto


@dataclass(eq=False)
class FunctionDecl(Decl):
    """A P4 function with a body (``bit<8> max(in bit<8> a, in bit<8> b) {...}``)."""

    type_params: list[str]
    return_type: TypeRef
    params: list[Param]
    body: BlockStmt


@dataclass(eq=False)
class ParserTypeDecl(Decl):
    """``parser Parser<H, M>(packet_in b, out H h, ...);`` (an architecture type)."""

    type_params: list[str]
    params: list[Param]


@dataclass(eq=False)
class ControlTypeDecl(Decl):
    type_params: list[str]
    params: list[Param]


@dataclass(eq=False)
class PackageTypeDecl(Decl):
    """``package V1Switch<H, M>(Parser<H, M> p, ...);``"""

    type_params: list[str]
    params: list[Param]


@dataclass(eq=False)
class InstantiationDecl(Decl, Stmt):
    """``counter(64, CounterType.packets) c;`` / ``V1Switch(...) main;`` /
    ``MyIngress() ig;`` (sub-control instance)."""

    type_ref: TypeRef
    args: list[Argument]


@dataclass(eq=False)
class ValueSetDecl(Decl):
    """``value_set<bit<16>>(4) pvs;``"""

    element: TypeRef
    size: Expr


@dataclass(eq=False)
class ActionDecl(Decl):
    params: list[Param]
    body: BlockStmt


@dataclass(eq=False)
class KeyElement(Node):
    expr: Expr
    match_kind: str
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(eq=False)
class ActionRef(Node):
    """An action in a table's ``actions``/``default_action``/entry: name + args
    (bound arguments for default_action/entries; none in the actions list)."""

    name: Expr  # PathExpr resolving to an ActionDecl
    args: list[Argument] = field(default_factory=list)
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(eq=False)
class TableEntry(Node):
    """One of ``entries = {...}``: keyset (one Expr per key) -> action; an explicit
    ``priority = N:`` sets ``priority``."""

    keys: list[Expr]
    action: ActionRef
    priority: Optional[Expr] = None
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(eq=False)
class TableProperty(Node):
    """Any other property: ``size = 1024``, ``implementation = ...``,
    ``counters = c``, ``meters = m``, ``support_timeout = true``..."""

    name: str
    value: Expr
    is_const: bool = False
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(eq=False)
class TableDecl(Decl):
    keys: list[KeyElement]
    actions: list[ActionRef]
    default_action: Optional[ActionRef] = None
    default_action_const: bool = False
    entries: Optional[list[TableEntry]] = None
    entries_const: bool = True
    properties: list[TableProperty] = field(default_factory=list)

    def prop(self, name: str) -> Optional[TableProperty]:
        for p in self.properties:
            if p.name == name:
                return p
        return None


@dataclass(eq=False)
class SelectCase(Node):
    """``(k1, k2): next_state;`` -- keyset has one Expr per select key; a key may be
    a value, ``v &&& mask``, ``lo .. hi``, a value_set name, ``_`` or ``default``."""

    keyset: list[Expr]
    next_state: str


@dataclass(eq=False)
class SelectExpr(Node):
    keys: list[Expr]
    cases: list[SelectCase]


@dataclass(eq=False)
class ParserState(Decl):
    """``transition`` is a state name (str: "accept", "reject" or a state) or a
    SelectExpr."""

    stmts: list[Stmt]
    transition: Union[str, SelectExpr]


@dataclass(eq=False)
class ParserDecl(Decl):
    type_params: list[str]
    params: list[Param]
    ctor_params: list[Param]
    locals: list[Decl]
    states: list[ParserState]


@dataclass(eq=False)
class ControlDecl(Decl):
    type_params: list[str]
    params: list[Param]
    ctor_params: list[Param]
    locals: list[Decl]  # actions, tables, instantiations, variables, constants
    apply: BlockStmt


@dataclass(eq=False)
class Program(Node):
    decls: list[Decl]
