"""Where P4 values live in BMv2: header instances, stacks, unions and ``scalars``.

BMv2 only has header instances with fields. p4c maps every P4 storage location onto
them, and so do we:

* each header (in the headers struct, a local header variable) is a header instance
  named by its path (``ethernet``; stack elements ``srcRoutes[0]``);
* ``standard_metadata`` is an instance of the ``standard_metadata`` header type;
* user metadata fields, local variables and compiler temporaries are fields of the one
  metadata instance ``scalars`` (type ``scalars_0``): ``metadata.sw_id``, ``tmp``...

A `Loc` says where an l-value lives; `Layout` allocates storage and accumulates the
``header_types`` / ``headers`` / ``header_stacks`` / ``header_union*`` JSON arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

from p4sim.compiler import types as T
from p4sim.compiler.bmv2.jsonutil import NameGen
from p4sim.compiler.diagnostics import CompileError, SrcPos


def base_type(t: T.Type) -> T.Type:
    """The representation type: new types and serializable enums by their base."""
    while isinstance(t, T.NewT):
        t = t.base
    if isinstance(t, T.EnumT) and t.underlying is not None:
        return t.underlying
    return t


def scalar_width(t: T.Type) -> Optional[int]:
    """Bits a value of ``t`` occupies as a BMv2 field (None: not a scalar type)."""
    t = base_type(t)
    if isinstance(t, T.BitT):
        return t.width
    if isinstance(t, T.BoolT):
        return 1
    if isinstance(t, (T.ErrorT, T.EnumT)):
        return 32
    return None


def header_leaves(ht: T.HeaderT) -> list[tuple[tuple[str, ...], str, T.Type]]:
    """A header's fields as BMv2 holds them, in wire order: (P4 path, BMv2 field name,
    type). A field of struct type (P4-16 allows structs of bit-like fields in headers)
    is flattened as p4c's FlattenHeaders does it: ``row.e`` becomes ``_row_e0``, the
    number counting the flattened fields of the header."""
    out: list[tuple[tuple[str, ...], str, T.Type]] = []

    def walk(path: tuple[str, ...], t: T.Type) -> None:
        bt = base_type(t)
        if isinstance(bt, T.StructT):
            for f in bt.fields:
                walk(path + (f.name,), f.type)
        elif len(path) == 1:
            out.append((path, path[0], t))
        else:
            out.append((path, "_" + "_".join(path) + str(sum(len(p) > 1 for p, _, _ in out)), t))

    for f in ht.fields:
        walk((f.name,), f.type)
    return out


def _field_tree(ht: T.HeaderT, name: str, leaf: "Callable[[int, str, T.Type], Loc]") -> "Loc":
    """Field ``name`` of a header: one leaf location, or for a struct-typed field a
    `StructLoc` of its flattened leaves (``leaf(index, bmv2 name, type)``)."""
    f = ht.field(name)
    assert f is not None
    leaves = [(i, p, n, t) for i, (p, n, t) in enumerate(header_leaves(ht)) if p[0] == name]
    if len(leaves) == 1 and len(leaves[0][1]) == 1:
        i, _, n, t = leaves[0]
        return leaf(i, n, t)

    def build(prefix: tuple[str, ...], t: T.Type) -> "Loc":
        bt = base_type(t)
        if not isinstance(bt, T.StructT):
            (i, _, n, lt), = [x for x in leaves if x[1] == prefix]
            return leaf(i, n, lt)
        return StructLoc(t, {g.name: build(prefix + (g.name,), g.type) for g in bt.fields})

    return build((name,), f.type)


@dataclass
class FieldLoc:
    header: str
    field: str
    type: T.Type

    def node(self) -> dict:
        return {"type": "field", "value": [self.header, self.field]}


@dataclass
class DynFieldLoc:
    """A field of a header chosen at run time (``stack[i].f``)."""

    header: dict  # type-value node producing a header
    offset: int
    type: T.Type

    def node(self) -> dict:
        return {"type": "expression", "value": {"op": "access_field", "left": self.header, "right": self.offset}}


@dataclass
class HeaderLoc:
    name: str
    type: T.HeaderT

    def node(self) -> dict:
        return {"type": "header", "value": self.name}

    def field(self, name: str, pos: SrcPos) -> Any:
        """A `FieldLoc`; a `StructLoc` of them for a struct-typed field."""
        if self.type.field(name) is None:
            raise CompileError(f"header type '{self.type.name}' has no field '{name}'", pos)
        return _field_tree(self.type, name, lambda _i, n, t: FieldLoc(self.name, n, t))

    def leaves(self) -> list[FieldLoc]:
        """Every field BMv2 holds for this header, in wire order."""
        return [FieldLoc(self.name, n, t) for _p, n, t in header_leaves(self.type)]


@dataclass
class DynHeaderLoc:
    """``stack[i]`` with a run-time index: a ``dereference_header_stack`` expression."""

    expr: dict
    type: T.HeaderT

    def node(self) -> dict:
        return self.expr

    def field(self, name: str, pos: SrcPos) -> Any:
        """A `DynFieldLoc` (BMv2 field index); a `StructLoc` of them for a struct-typed field."""
        if self.type.field(name) is None:
            raise CompileError(f"header type '{self.type.name}' has no field '{name}'", pos)
        return _field_tree(self.type, name, lambda i, _n, t: DynFieldLoc(self.expr, i, t))


@dataclass
class StackLoc:
    name: str
    type: T.StackT
    elements: list[HeaderLoc]

    def node(self) -> dict:
        return {"type": "header_stack", "value": self.name}


@dataclass
class UnionLoc:
    name: str
    type: T.HeaderUnionT
    members: dict[str, HeaderLoc]

    def node(self) -> dict:
        return {"type": "header_union", "value": self.name}


@dataclass
class UnionStackLoc:
    """A stack of header unions, kept as one union per element (p4c's mid end
    flattens them the same way): only constant indexes reach an element, so a
    run-time index is unrolled over the elements, and the stack's next index is a
    metadata field of its own (`Layout.union_stack_next`)."""

    name: str
    type: T.StackT
    elements: list[UnionLoc]


@dataclass
class StructLoc:
    type: T.Type
    fields: dict[str, "Loc"]


@dataclass
class ParamLoc:
    """An action parameter: entry ``runtime_data[index]``."""

    index: int
    type: T.Type

    def node(self) -> dict:
        return {"type": "local", "value": self.index}


@dataclass
class ConstLoc:
    value: int
    type: T.Type


@dataclass
class ValueLoc:
    """An r-value already converted (a constructor argument bound to an expression)."""

    node_: dict
    type: T.Type

    def node(self) -> dict:
        return self.node_


Loc = Union[FieldLoc, DynFieldLoc, HeaderLoc, DynHeaderLoc, StackLoc, UnionLoc, UnionStackLoc, StructLoc,
            ParamLoc, ConstLoc, ValueLoc]

SCALARS = "scalars"


@dataclass
class Layout:
    """Allocates storage and records the header-related JSON arrays."""

    header_types: list[dict] = field(default_factory=list)
    headers: list[dict] = field(default_factory=list)
    header_stacks: list[dict] = field(default_factory=list)
    header_union_types: list[dict] = field(default_factory=list)
    header_unions: list[dict] = field(default_factory=list)
    scalars: list[list] = field(default_factory=list)
    instance_names: NameGen = field(default_factory=NameGen)
    scalar_names: NameGen = field(default_factory=NameGen)
    union_next: dict[str, FieldLoc] = field(default_factory=dict)  # union stack -> its next index
    _type_names: dict[T.HeaderT, str] = field(default_factory=dict)
    _type_name_gen: NameGen = field(default_factory=NameGen)

    def __post_init__(self) -> None:
        # scalars_0 is header type 0 and scalars instance 0, as p4c emits them;
        # its fields are filled in by `finish`.
        self._type_name_gen.reserve("scalars_0")
        self.header_types.append({"name": "scalars_0", "id": 0, "fields": self.scalars})
        self.instance_names.reserve(SCALARS)
        self.headers.append({"name": SCALARS, "id": 0, "header_type": "scalars_0", "metadata": True, "pi_omit": True})

    # ------------------------------------------------------------- header types
    def header_type(self, ht: T.HeaderT, name: Optional[str] = None) -> str:
        if ht in self._type_names:
            return self._type_names[ht]
        tname = self._type_name_gen.fresh(name or ht.name)
        fields: list[list] = []
        max_bytes = 0
        has_varbit = False
        for _path, fname, ftype in header_leaves(ht):
            ft = base_type(ftype)
            if isinstance(ft, T.VarbitT):
                fields.append([fname, "*"])
                max_bytes += ft.max_width // 8
                has_varbit = True
                continue
            w = scalar_width(ft)
            if w is None:
                raise CompileError(f"header field '{ht.name}.{fname}' has a type BMv2 cannot hold")
            fields.append([fname, w, isinstance(ft, T.BitT) and ft.signed])
        entry: dict = {"name": tname, "id": len(self.header_types), "fields": fields}
        if has_varbit:
            entry["max_length"] = (ht.bit_width + 7) // 8 + max_bytes
        self.header_types.append(entry)
        self._type_names[ht] = tname
        return tname

    # ------------------------------------------------------------- instances
    def header_instance(self, name: str, ht: T.HeaderT, metadata: bool = False,
                        type_name: Optional[str] = None) -> HeaderLoc:
        iname = self.instance_names.fresh(name)
        tname = self.header_type(ht, type_name)
        self.headers.append({"name": iname, "id": len(self.headers), "header_type": tname,
                             "metadata": metadata, "pi_omit": True})
        return HeaderLoc(iname, ht)

    def header_id(self, name: str) -> int:
        for h in self.headers:
            if h["name"] == name:
                return h["id"]
        raise KeyError(name)

    def stack(self, name: str, st: T.StackT, pos: Optional[SrcPos] = None) -> Union[StackLoc, UnionStackLoc]:
        if isinstance(st.element, T.HeaderUnionT):
            uname = self.instance_names.fresh(name)
            return UnionStackLoc(uname, st, [self.union(f"{uname}[{i}]", st.element) for i in range(st.size)])
        if not isinstance(st.element, T.HeaderT):
            raise CompileError(f"stack '{name}': only stacks of headers are supported", pos, "unsupported")
        sname = self.instance_names.fresh(name)
        elems = [self.header_instance(f"{sname}[{i}]", st.element) for i in range(st.size)]
        self.header_stacks.append({"name": sname, "id": len(self.header_stacks),
                                   "header_type": self.header_type(st.element),
                                   "header_ids": [self.header_id(e.name) for e in elems]})
        return StackLoc(sname, st, elems)

    def union(self, name: str, ut: T.HeaderUnionT) -> UnionLoc:
        uname = self.instance_names.fresh(name)
        tname = ut.name
        if all(u["name"] != tname for u in self.header_union_types):
            self.header_union_types.append({
                "name": tname, "id": len(self.header_union_types),
                "headers": [[f.name, self.header_type(f.type)] for f in ut.fields]})
        members = {f.name: self.header_instance(f"{uname}.{f.name}", f.type) for f in ut.fields}
        self.header_unions.append({"name": uname, "id": len(self.header_unions), "union_type": tname,
                                   "header_ids": [self.header_id(m.name) for m in members.values()]})
        return UnionLoc(uname, ut, members)

    def union_stack_next(self, stack: UnionStackLoc) -> FieldLoc:
        """The next index of a stack of header unions (P4-16 ``nextIndex``): BMv2
        keeps one inside each stack, but p4sim emits no stack for unions, so it is a
        ``scalars`` field, 0 for each packet like all metadata. Allocated on first
        use, so a program that never needs it keeps its JSON."""
        nxt = self.union_next.get(stack.name)
        if nxt is None:
            nxt = self.union_next[stack.name] = self.scalar(f"{stack.name}_next", T.BitT(32))
        return nxt

    def scalar(self, name: str, t: T.Type, pos: Optional[SrcPos] = None) -> FieldLoc:
        w = scalar_width(t)
        if w is None:
            raise CompileError(f"'{name}': a value of this type cannot be stored in a metadata field", pos,
                               "unsupported")
        fname = self.scalar_names.fresh(name)
        bt = base_type(t)
        self.scalars.append([fname, w, isinstance(bt, T.BitT) and bt.signed])
        return FieldLoc(SCALARS, fname, t)

    def storage(self, name: str, t: T.Type, pos: Optional[SrcPos] = None) -> Loc:
        """Fresh storage for a variable called ``name`` of type ``t``."""
        bt = base_type(t)
        if isinstance(bt, T.HeaderT):
            return self.header_instance(name, bt)
        if isinstance(bt, T.StackT):
            return self.stack(name, bt, pos)
        if isinstance(bt, T.HeaderUnionT):
            return self.union(name, bt)
        if isinstance(bt, T.StructT):
            return StructLoc(t, {f.name: self.storage(f"{name}.{f.name}", f.type, pos) for f in bt.fields})
        if isinstance(bt, T.TupleT):
            return StructLoc(t, {str(i): self.storage(f"{name}.{i}", e, pos) for i, e in enumerate(bt.elements)})
        if isinstance(bt, T.VarbitT):
            # BMv2 has variable-length fields only in header types: a varbit variable or
            # struct field is the one field of a metadata instance of its own (never
            # emitted, so never on the wire), as p4c's HeaderConverter makes it
            vt = T.HeaderT(f"varbit_{bt.max_width}_t", (T.FieldT("value", bt),))
            return self.header_instance(name, vt, metadata=True).field("value", pos)
        return self.scalar(name, t, pos)

    def finish(self) -> None:
        """Pad ``scalars_0`` to whole bytes, as p4c does."""
        total = sum(f[1] for f in self.scalars)
        if total % 8:
            self.scalars.append([self.scalar_names.fresh("_padding_0"), 8 - total % 8, False])
