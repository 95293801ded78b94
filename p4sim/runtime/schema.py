"""P4Info made navigable by id and by name (the role finsy's ``p4schema`` plays for clients).

P4Runtime requests name everything by numeric id; the engine names everything by its
BMv2 JSON name. p4c gives an object the same fully qualified name in both artefacts
(``MyIngress.ipv4_lpm``), so the schema's job is: id -> object info (name, widths, match
kinds, allowed actions), with a lookup that raises the right P4Runtime error naming the
unknown id and what kind of object was expected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Iterator, TypeVar

from p4sim.proto import p4i
from p4sim.runtime.errors import InvalidArgument

MatchType = p4i.MatchField.MatchType


@dataclass(frozen=True)
class MatchFieldInfo:
    """One key field of a table; ``index`` is its position in the BMv2 JSON ``key`` list."""

    id: int
    name: str
    bitwidth: int
    match_type: int  # p4i.MatchField.MatchType value
    index: int

    @property
    def kind(self) -> str:
        """The match kind as P4 spells it (``exact``, ``lpm``, ...), for messages."""
        return MatchType.Name(self.match_type).lower()


@dataclass(frozen=True)
class ParamInfo:
    """One action parameter; ``index`` is its position in BMv2's ``runtime_data``."""

    id: int
    name: str
    bitwidth: int
    index: int


@dataclass(frozen=True)
class ActionInfo:
    id: int
    name: str
    params: tuple[ParamInfo, ...]
    params_by_id: dict[int, ParamInfo] = field(compare=False)


@dataclass(frozen=True)
class TableInfo:
    id: int
    name: str
    match_fields: tuple[MatchFieldInfo, ...]
    fields_by_id: dict[int, MatchFieldInfo] = field(compare=False)
    entry_action_ids: frozenset[int]  # actions allowed in entries (scope != DEFAULT_ONLY)
    default_action_ids: frozenset[int]  # actions allowed as default (scope != TABLE_ONLY)
    const_default_action_id: int
    implementation_id: int  # action profile / selector id, 0 for a direct table
    direct_counter_id: int
    direct_meter_id: int
    size: int
    is_const: bool
    supports_timeout: bool  # P4Info idle_timeout_behavior is NOTIFY_CONTROL

    @property
    def needs_priority(self) -> bool:
        """P4Runtime: entries carry a priority iff a key is ternary, range or optional."""
        return any(
            f.match_type in (MatchType.TERNARY, MatchType.RANGE, MatchType.OPTIONAL)
            for f in self.match_fields
        )


@dataclass(frozen=True)
class ValueSetInfo:
    """A parser value set: up to ``size`` members, each a match on ``match_fields``."""

    id: int
    name: str
    size: int
    match_fields: tuple[MatchFieldInfo, ...]
    fields_by_id: dict[int, MatchFieldInfo] = field(compare=False)


@dataclass(frozen=True)
class ActionProfileInfo:
    id: int
    name: str
    table_ids: tuple[int, ...]
    with_selector: bool
    size: int
    max_group_size: int


@dataclass(frozen=True)
class IndexedInfo:
    """A counter, meter or register array: ``size`` cells addressed by index."""

    id: int
    name: str
    size: int
    unit: int = 0  # counter/meter unit enum value (BYTES, PACKETS, BOTH)
    bitwidth: int = 0  # registers only: the cell width


@dataclass(frozen=True)
class DirectInfo:
    """A direct counter or meter, attached to one table."""

    id: int
    name: str
    table_id: int
    unit: int = 0


@dataclass(frozen=True)
class MetadataInfo:
    """One field of a ``@controller_header`` header (packet_in / packet_out)."""

    id: int
    name: str
    bitwidth: int


@dataclass(frozen=True)
class ControllerHeaderInfo:
    id: int
    name: str
    fields: tuple[MetadataInfo, ...]
    fields_by_id: dict[int, MetadataInfo] = field(compare=False)

    @property
    def byte_length(self) -> int:
        """Length of the header on the wire (BMv2 requires whole bytes)."""
        return (sum(f.bitwidth for f in self.fields) + 7) // 8


@dataclass(frozen=True)
class DigestInfo:
    """A digest; ``member_widths`` are the bit widths of the struct's members in order."""

    id: int
    name: str
    member_widths: tuple[int, ...]


T = TypeVar("T")


class Registry(Generic[T]):
    """Objects of one kind by id and by name.

    An unknown id in a request is a malformed request (INVALID_ARGUMENT, as PI does),
    not a missing entity: NOT_FOUND is kept for entries that do not exist, which
    clients treat specially (e.g. a DELETE of something already gone).
    """

    def __init__(self, kind: str, items: list[T]):
        self.kind = kind
        self._by_id: dict[int, T] = {item.id: item for item in items}  # type: ignore[attr-defined]
        self._by_name: dict[str, T] = {item.name: item for item in items}  # type: ignore[attr-defined]

    def get(self, ident: int) -> T:
        """The object with id ``ident`` (P4Runtime ids are never 0)."""
        try:
            return self._by_id[ident]
        except KeyError:
            raise InvalidArgument(f"unknown {self.kind} id {ident}") from None

    def by_name(self, name: str) -> T:
        try:
            return self._by_name[name]
        except KeyError:
            raise InvalidArgument(f"unknown {self.kind} '{name}'") from None

    def __contains__(self, ident: int) -> bool:
        return ident in self._by_id

    def __iter__(self) -> Iterator[T]:
        return iter(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)


def _bitwidth_of_type_spec(spec: p4i.P4DataTypeSpec, where: str) -> int:
    """Width of a ``bit<W>`` / ``int<W>`` / ``varbit`` type spec; other types are rejected."""
    if spec.HasField("bitstring"):
        bs = spec.bitstring
        kind = bs.WhichOneof("type_spec")
        if kind == "bit":
            return bs.bit.bitwidth
        if kind == "int":
            return bs.int.bitwidth
        if kind == "varbit":
            return bs.varbit.max_bitwidth
    if spec.HasField("bool"):
        return 1
    if spec.HasField("serializable_enum"):
        raise InvalidArgument(f"{where}: serializable enum types are not supported")
    raise InvalidArgument(f"{where}: only bit<W>, int<W> and bool types are supported")


class Schema:
    """Everything a P4Runtime server needs from a P4Info, indexed by id and by name."""

    def __init__(self, p4info: p4i.P4Info):
        self.p4info = p4info
        self.actions: Registry[ActionInfo] = Registry("action", [self._action(a) for a in p4info.actions])
        self.action_profiles: Registry[ActionProfileInfo] = Registry(
            "action profile",
            [
                ActionProfileInfo(
                    ap.preamble.id, ap.preamble.name, tuple(ap.table_ids), ap.with_selector, ap.size, ap.max_group_size
                )
                for ap in p4info.action_profiles
            ],
        )
        self.counters: Registry[IndexedInfo] = Registry(
            "counter", [IndexedInfo(c.preamble.id, c.preamble.name, c.size, c.spec.unit) for c in p4info.counters]
        )
        self.direct_counters: Registry[DirectInfo] = Registry(
            "direct counter",
            [DirectInfo(c.preamble.id, c.preamble.name, c.direct_table_id, c.spec.unit) for c in p4info.direct_counters],
        )
        self.meters: Registry[IndexedInfo] = Registry(
            "meter", [IndexedInfo(m.preamble.id, m.preamble.name, m.size, m.spec.unit) for m in p4info.meters]
        )
        self.direct_meters: Registry[DirectInfo] = Registry(
            "direct meter",
            [DirectInfo(m.preamble.id, m.preamble.name, m.direct_table_id, m.spec.unit) for m in p4info.direct_meters],
        )
        direct_counter_of = {dc.table_id: dc.id for dc in self.direct_counters}
        direct_meter_of = {dm.table_id: dm.id for dm in self.direct_meters}
        self.tables: Registry[TableInfo] = Registry(
            "table",
            [self._table(t, direct_counter_of.get(t.preamble.id, 0), direct_meter_of.get(t.preamble.id, 0)) for t in p4info.tables],
        )
        self.registers: Registry[IndexedInfo] = Registry(
            "register",
            [
                IndexedInfo(
                    r.preamble.id,
                    r.preamble.name,
                    r.size,
                    bitwidth=_bitwidth_of_type_spec(r.type_spec, f"register '{r.preamble.name}'"),
                )
                for r in p4info.registers
            ],
        )
        self.controller_headers: Registry[ControllerHeaderInfo] = Registry(
            "controller packet metadata", [self._controller_header(c) for c in p4info.controller_packet_metadata]
        )
        self.digests: Registry[DigestInfo] = Registry("digest", [self._digest(d) for d in p4info.digests])
        self.value_sets: Registry[ValueSetInfo] = Registry("value set", [self._value_set(v) for v in p4info.value_sets])
        self._check_references()

    # -- construction -------------------------------------------------------------------

    @staticmethod
    def _action(a: p4i.Action) -> ActionInfo:
        params = tuple(ParamInfo(p.id, p.name, p.bitwidth, i) for i, p in enumerate(a.params))
        return ActionInfo(a.preamble.id, a.preamble.name, params, {p.id: p for p in params})

    @staticmethod
    def _match_fields(fields, where: str) -> tuple[MatchFieldInfo, ...]:
        out = []
        for i, mf in enumerate(fields):
            if mf.WhichOneof("match") != "match_type":
                raise InvalidArgument(f"{where} field '{mf.name}': match kind '{mf.other_match_type}' is not supported")
            out.append(MatchFieldInfo(mf.id, mf.name, mf.bitwidth, mf.match_type, i))
        return tuple(out)

    @classmethod
    def _value_set(cls, v: p4i.ValueSet) -> ValueSetInfo:
        fields = cls._match_fields(v.match, f"value set '{v.preamble.name}'")
        return ValueSetInfo(v.preamble.id, v.preamble.name, v.size, fields, {f.id: f for f in fields})

    @classmethod
    def _table(cls, t: p4i.Table, direct_counter_id: int, direct_meter_id: int) -> TableInfo:
        fields = cls._match_fields(t.match_fields, f"table '{t.preamble.name}'")
        entry_ids = frozenset(r.id for r in t.action_refs if r.scope != p4i.ActionRef.DEFAULT_ONLY)
        default_ids = frozenset(r.id for r in t.action_refs if r.scope != p4i.ActionRef.TABLE_ONLY)
        return TableInfo(
            id=t.preamble.id,
            name=t.preamble.name,
            match_fields=fields,
            fields_by_id={f.id: f for f in fields},
            entry_action_ids=entry_ids,
            default_action_ids=default_ids,
            const_default_action_id=t.const_default_action_id,
            implementation_id=t.implementation_id,
            direct_counter_id=direct_counter_id,
            direct_meter_id=direct_meter_id,
            size=t.size,
            is_const=t.is_const_table,
            supports_timeout=t.idle_timeout_behavior == p4i.Table.NOTIFY_CONTROL,
        )

    @staticmethod
    def _controller_header(c: p4i.ControllerPacketMetadata) -> ControllerHeaderInfo:
        fields = tuple(MetadataInfo(m.id, m.name, m.bitwidth) for m in c.metadata)
        return ControllerHeaderInfo(c.preamble.id, c.preamble.name, fields, {f.id: f for f in fields})

    def _digest(self, d: p4i.Digest) -> DigestInfo:
        where = f"digest '{d.preamble.name}'"
        spec = d.type_spec
        if spec.HasField("struct"):
            struct = self.p4info.type_info.structs.get(spec.struct.name)
            if struct is None:
                raise InvalidArgument(f"{where}: struct type '{spec.struct.name}' missing from type_info")
            widths = tuple(_bitwidth_of_type_spec(m.type_spec, f"{where} member '{m.name}'") for m in struct.members)
        else:
            widths = (_bitwidth_of_type_spec(spec, where),)
        return DigestInfo(d.preamble.id, d.preamble.name, widths)

    def _check_references(self) -> None:
        """Reject a P4Info whose objects refer to ids it does not define."""
        for table in self.tables:
            for ref in table.entry_action_ids | table.default_action_ids:
                if ref not in self.actions:
                    raise InvalidArgument(f"table '{table.name}' refers to unknown action id {ref}")
            if table.implementation_id and table.implementation_id not in self.action_profiles:
                raise InvalidArgument(
                    f"table '{table.name}' refers to unknown action profile id {table.implementation_id}"
                )
        for direct in list(self.direct_counters) + list(self.direct_meters):
            if direct.table_id not in self.tables:
                raise InvalidArgument(f"'{direct.name}' is attached to unknown table id {direct.table_id}")

    # -- lookups --------------------------------------------------------------------------

    def packet_in(self) -> ControllerHeaderInfo | None:
        """The ``@controller_header("packet_in")`` header, if the program has one."""
        return self._controller_header_named("packet_in")

    def packet_out(self) -> ControllerHeaderInfo | None:
        """The ``@controller_header("packet_out")`` header, if the program has one."""
        return self._controller_header_named("packet_out")

    def _controller_header_named(self, name: str) -> ControllerHeaderInfo | None:
        for header in self.controller_headers:
            if header.name == name:
                return header
        return None
