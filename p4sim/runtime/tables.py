"""Table entries and default entries: P4Runtime writes on the engine.

The engine knows entries by handle; P4Runtime knows them by (table, match key,
priority). This module keeps that mapping, plus the canonical TableEntry of each
entry so that Read returns exactly what was accepted. Entries of indirect tables point
at action profile members, groups or one-shot sets, kept by profiles.py.

Every mutation either completes or leaves engine and bookkeeping as they were: checks
run before the first engine call, and multi-step operations undo their earlier steps
when a later one fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from p4sim.proto import p4r
from p4sim.runtime import codec
from p4sim.runtime.codec import FieldValue
from p4sim.runtime.errors import AlreadyExists, InvalidArgument, NotFound, PermissionDenied, Unimplemented
from p4sim.runtime.profiles import Profiles, Target
from p4sim.runtime.schema import MatchType, Schema, TableInfo
from p4sim.switch import match as engine_match

Update = p4r.Update

BMV2_MAX_PRIORITY = (1 << 31) - 1
"""BMv2 picks the entry with the *lowest* priority number, P4Runtime the highest; the
engine mirrors BMv2, so a P4Runtime priority p becomes BMV2_MAX_PRIORITY - p (the same
inversion BMv2's own P4Runtime server applies)."""


def engine_priority(priority: int) -> int | None:
    return BMV2_MAX_PRIORITY - priority if priority else None


def to_engine_match(key: tuple[FieldValue, ...]) -> list:
    """FieldValues -> the engine's match objects (p4sim/switch/match.py)."""
    out = []
    for v in key:
        if v.kind == MatchType.EXACT:
            out.append(engine_match.Exact(v.a))
        elif v.kind == MatchType.LPM:
            out.append(engine_match.Lpm(v.a, v.b))
        elif v.kind == MatchType.TERNARY:
            out.append(engine_match.Ternary(v.a, v.b))
        elif v.kind == MatchType.RANGE:
            out.append(engine_match.Range(v.a, v.b))
        else:
            out.append(engine_match.Optional(v.a, v.wildcard))
    return out


def _field_value(kind: int, mv) -> FieldValue:
    """An engine match object -> FieldValue (inverse of `to_engine_match`)."""
    if isinstance(mv, engine_match.Lpm):
        return FieldValue(kind, mv.value, mv.prefix_len)
    if isinstance(mv, engine_match.Ternary):
        return FieldValue(kind, mv.value, mv.mask)
    if isinstance(mv, engine_match.Range):
        return FieldValue(kind, mv.low, mv.high)
    if isinstance(mv, engine_match.Optional):
        return FieldValue(kind, mv.value, wildcard=mv.wildcard)
    return FieldValue(kind, int(mv.value))


@dataclass
class StoredEntry:
    handle: int
    proto: p4r.TableEntry  # canonical form, without counter/meter data
    target: Target | None = None  # indirect tables only
    meter_config: p4r.MeterConfig | None = None  # direct meter config, as last written


class Tables:
    """P4Runtime view of the engine's tables and action profiles."""

    def __init__(self, schema: Schema, switch, engine: Callable):
        """``engine(fn, *args)`` calls the engine, translating its errors to P4Runtime ones."""
        self.schema = schema
        self.switch = switch
        self._engine = engine
        self.entries: dict[int, dict[tuple, StoredEntry]] = {t.id: {} for t in schema.tables}
        self.defaults: dict[int, p4r.TableEntry] = {}  # defaults changed by a controller
        self.profiles = Profiles(schema, switch, engine)

    def import_const_entries(self) -> None:
        """Make the program's own entries (BMv2 JSON ``entries``, const in BMv2) readable.

        They were loaded by the engine; P4Runtime Read must return them, flagged
        ``is_const``, in the same canonical form as controller-written entries.
        """
        for table in self.schema.tables:
            for e in self.switch.table_entries(table.name):
                key = tuple(_field_value(f.match_type, mv) for f, mv in zip(table.match_fields, e.match))
                priority = BMV2_MAX_PRIORITY - e.priority if table.needs_priority and e.priority is not None else 0
                canon = p4r.TableEntry(table_id=table.id, priority=priority, is_const=True)
                canon.match.extend(codec.encode_match(table, key))
                if e.action is not None:
                    canon.action.action.CopyFrom(codec.encode_action(self.schema.actions.by_name(e.action), e.args))
                self.entries[table.id][(key, priority)] = StoredEntry(e.handle, canon)

    # -- table entries ----------------------------------------------------------------------

    def write_entry(self, kind: int, entry: p4r.TableEntry, policy_check: Callable[[int], None]) -> None:
        table = self.schema.tables.get(entry.table_id)
        policy_check(table.id)
        if entry.is_const:
            raise InvalidArgument(f"table '{table.name}': is_const is set by the server in Read responses, it must be false in a write")
        if entry.is_default_action:
            self._write_default(kind, table, entry)
            return
        if table.is_const:
            raise PermissionDenied(f"table '{table.name}' is const: its entries cannot be changed")
        if kind != Update.DELETE:  # DELETE looks at the key only, whatever else is set
            self._check_write_only_fields(table, entry)
        if kind == Update.INSERT and not table.match_fields:
            raise InvalidArgument(f"table '{table.name}' has no match key: only its default entry can be written")
        key = codec.decode_match(table, entry.match)
        codec.check_priority(table, entry.priority)
        ident = (key, entry.priority)
        stored = self.entries[table.id].get(ident)
        if kind == Update.INSERT:
            if stored is not None:
                raise AlreadyExists(f"table '{table.name}': an entry with this match key and priority already exists")
            self._insert(table, key, entry)
        elif kind == Update.MODIFY:
            if stored is None:
                raise NotFound(f"table '{table.name}': no entry with this match key and priority")
            self._modify(table, key, entry, stored)
        elif kind == Update.DELETE:
            if stored is None:
                raise NotFound(f"table '{table.name}': no entry with this match key and priority")
            self._engine(self.switch.table_delete, table.name, stored.handle)
            self.profiles.release(table.implementation_id, stored.target)
            del self.entries[table.id][ident]
        else:
            raise InvalidArgument(f"update type {kind} is not INSERT, MODIFY or DELETE")

    def _canonical(self, table: TableInfo, key: tuple, entry: p4r.TableEntry, action: p4r.TableAction) -> p4r.TableEntry:
        out = p4r.TableEntry(table_id=table.id, priority=entry.priority, metadata=entry.metadata)
        out.match.extend(codec.encode_match(table, key))
        out.action.CopyFrom(action)
        return out

    def _insert(self, table: TableInfo, key: tuple, entry: p4r.TableEntry) -> None:
        self._check_direct_resources(table, entry)
        action, target = self._decode_table_action(table, entry.action, default=False)
        match = to_engine_match(key)
        prio = engine_priority(entry.priority)
        if target is None:
            info, args = action
            handle = self._engine(self.switch.table_add, table.name, info.name, match, args, prio)
        else:
            self.profiles.acquire(table.implementation_id, target)
            try:
                handle = self._add_indirect(table, match, target, prio)
            except Exception:
                self.profiles.release(table.implementation_id, target)
                raise
        try:
            self._write_direct_resources(table, handle, entry)
        except Exception:
            self.switch.table_delete(table.name, handle)
            self.profiles.release(table.implementation_id, target)
            raise
        canon = self._canonical(table, key, entry, self._encode_table_action(entry.action, action, target))
        meter = entry.meter_config if entry.HasField("meter_config") else None
        self.entries[table.id][(key, entry.priority)] = StoredEntry(handle, canon, target, meter)

    def _modify(self, table: TableInfo, key: tuple, entry: p4r.TableEntry, stored: StoredEntry) -> None:
        self._check_direct_resources(table, entry)
        action, target = self._decode_table_action(table, entry.action, default=False)
        if target is None:
            info, args = action
            self._engine(self.switch.table_modify, table.name, stored.handle, info.name, args)
            handle = stored.handle
        else:
            # The engine API has no "modify indirect entry": re-add the entry pointing at
            # the new target, restoring the old one if that fails.
            self.profiles.acquire(table.implementation_id, target)
            match = to_engine_match(key)
            prio = engine_priority(entry.priority)
            self._engine(self.switch.table_delete, table.name, stored.handle)
            try:
                handle = self._add_indirect(table, match, target, prio)
            except Exception:
                stored.handle = self._add_indirect(table, match, stored.target, prio)
                self.profiles.release(table.implementation_id, target)
                raise
            self.profiles.release(table.implementation_id, stored.target)
        self._write_direct_resources(table, handle, entry)
        canon = self._canonical(table, key, entry, self._encode_table_action(entry.action, action, target))
        meter = entry.meter_config if entry.HasField("meter_config") else stored.meter_config
        self.entries[table.id][(key, entry.priority)] = StoredEntry(handle, canon, target, meter)

    def _add_indirect(self, table: TableInfo, match: list, target: Target, prio: int | None) -> int:
        profile = self.profiles.get(table.implementation_id)
        if target.kind == "member":
            mbr = profile.members[target.ident].handle
            return self._engine(self.switch.table_indirect_add, table.name, match, mbr, prio)
        grp = profile.groups[target.ident].handle if target.kind == "group" else target.oneshot[0]
        return self._engine(self.switch.table_indirect_add_with_group, table.name, match, grp, prio)

    @staticmethod
    def _check_write_only_fields(table: TableInfo, entry: p4r.TableEntry) -> None:
        """Idle-timeout fields of an INSERT/MODIFY (spec, "Idle-timeout")."""
        if entry.HasField("time_since_last_hit"):
            raise InvalidArgument(f"table '{table.name}': time_since_last_hit is read-only, it must be unset in a write")
        if entry.idle_timeout_ns:
            if not table.supports_timeout:
                raise InvalidArgument(f"table '{table.name}' does not support idle timeouts (idle_timeout_ns set)")
            raise Unimplemented(f"table '{table.name}': idle timeout notifications are not supported")

    def _check_direct_resources(self, table: TableInfo, entry: p4r.TableEntry) -> None:
        what = f"table '{table.name}' entry"
        if entry.HasField("counter_data"):
            if not table.direct_counter_id:
                raise InvalidArgument(f"table '{table.name}' has no direct counter, but the entry sets counter_data")
            codec.check_counter_data(entry.counter_data, what)
        if entry.HasField("meter_config"):
            if not table.direct_meter_id:
                raise InvalidArgument(f"table '{table.name}' has no direct meter, but the entry sets meter_config")
            codec.check_meter_config(entry.meter_config, what)
        if entry.HasField("meter_counter_data"):
            if not table.direct_meter_id:
                raise InvalidArgument(f"table '{table.name}' has no direct meter, but the entry sets meter_counter_data")
            codec.check_meter_counter_data(entry.meter_counter_data, what)

    def _write_direct_resources(self, table: TableInfo, handle: int, entry: p4r.TableEntry) -> None:
        if entry.HasField("counter_data"):
            d = entry.counter_data
            self._engine(self.switch.table_counter_write, table.name, handle, d.packet_count, d.byte_count)
        if entry.HasField("meter_config"):
            self._engine(self.switch.table_meter_set_rates, table.name, handle, codec.meter_rates(entry.meter_config))

    # -- default entries --------------------------------------------------------------------

    def _write_default(self, kind: int, table: TableInfo, entry: p4r.TableEntry) -> None:
        if kind != Update.MODIFY:
            raise InvalidArgument(f"table '{table.name}': the default entry can only be MODIFYed, not inserted or deleted")
        if entry.match or entry.priority:
            raise InvalidArgument(f"table '{table.name}': a default entry has no match fields and no priority")
        if entry.idle_timeout_ns or entry.HasField("time_since_last_hit"):
            raise InvalidArgument(f"table '{table.name}': a default entry has no idle timeout (idle_timeout_ns / time_since_last_hit set)")
        if table.implementation_id:
            # The spec restricts an indirect table's default entry to a constant NoAction.
            raise InvalidArgument(f"table '{table.name}' is indirect: its default entry cannot be written")
        if table.const_default_action_id:
            raise PermissionDenied(f"table '{table.name}' has a const default action")
        if not entry.HasField("action"):
            # P4Runtime: MODIFY without an action restores the program's default.
            self._engine(self.switch.table_reset_default, table.name)
            self.defaults.pop(table.id, None)
            return
        action, _ = self._decode_table_action(table, entry.action, default=True)
        info, args = action
        self._engine(self.switch.table_set_default, table.name, info.name, args)
        canon = p4r.TableEntry(table_id=table.id, is_default_action=True)
        canon.action.action.CopyFrom(codec.encode_action(info, args))
        self.defaults[table.id] = canon

    def read_default(self, table: TableInfo) -> p4r.TableEntry:
        stored = self.defaults.get(table.id)
        if stored is not None:
            return stored
        out = p4r.TableEntry(table_id=table.id, is_default_action=True)
        if table.implementation_id:
            return out  # an indirect table's initial default has no action to name
        name, args = self.switch.table_get_default(table.name)
        try:
            info = self.schema.actions.by_name(name)
        except InvalidArgument:
            return out
        out.action.action.CopyFrom(codec.encode_action(info, args))
        return out

    # -- actions of entries -----------------------------------------------------------------

    def _decode_table_action(self, table: TableInfo, ta: p4r.TableAction, default: bool):
        """Check a TableAction; return ((ActionInfo, args) or None, Target or None)."""
        allowed = table.default_action_ids if default else table.entry_action_ids
        what = f"table '{table.name}'" + (" default entry" if default else "")
        kind = ta.WhichOneof("type")
        if kind is None:
            raise InvalidArgument(f"{what}: the entry has no action")
        if not table.implementation_id:
            if kind != "action":
                raise InvalidArgument(f"{what}: a direct table takes an action, not {kind}")
            if ta.action.action_id in (table.entry_action_ids | table.default_action_ids) - allowed:
                # the table's action, outside its P4Info scope: the spec's PERMISSION_DENIED
                scope = "@tableonly" if default else "@defaultonly"
                name = self.schema.actions.get(ta.action.action_id).name
                raise PermissionDenied(f"{what}: action '{name}' is {scope} in this table")
            return codec.decode_action(self.schema, ta.action, allowed, what), None
        profile = self.profiles.get(table.implementation_id)
        if kind == "action":
            raise InvalidArgument(f"{what}: table is implemented by action profile '{profile.info.name}': give a member, group or action set")
        if kind == "action_profile_member_id":
            if ta.action_profile_member_id not in profile.members:
                raise NotFound(f"{what}: action profile '{profile.info.name}' has no member {ta.action_profile_member_id}")
            return None, Target("member", ta.action_profile_member_id)
        if kind == "action_profile_group_id":
            if not profile.info.with_selector:
                raise InvalidArgument(f"{what}: action profile '{profile.info.name}' has no selector, groups are not allowed")
            if ta.action_profile_group_id not in profile.groups:
                raise NotFound(f"{what}: action profile '{profile.info.name}' has no group {ta.action_profile_group_id}")
            return None, Target("group", ta.action_profile_group_id)
        return None, self.profiles.create_oneshot(profile, ta.action_profile_action_set, allowed, what)

    def _encode_table_action(self, given: p4r.TableAction, action, target: Target | None) -> p4r.TableAction:
        out = p4r.TableAction()
        if target is None:
            out.action.CopyFrom(codec.encode_action(*action))
        elif target.kind == "member":
            out.action_profile_member_id = target.ident
        elif target.kind == "group":
            out.action_profile_group_id = target.ident
        else:
            aset = out.action_profile_action_set
            for apa in given.action_profile_action_set.action_profile_actions:
                info, args = codec.decode_action(self.schema, apa.action, frozenset({apa.action.action_id}), "")
                aset.action_profile_actions.add(action=codec.encode_action(info, args), weight=apa.weight)
        return out

    # -- action profiles --------------------------------------------------------------------

    # -- reads ------------------------------------------------------------------------------

    def lookup(self, table: TableInfo, entry: p4r.TableEntry) -> Iterator[tuple[TableInfo, StoredEntry]]:
        """Entries matching a Read filter: all of a table (optionally of one priority), or
        the one with this key."""
        if not entry.match:
            for (_, priority), stored in self.entries[table.id].items():
                if not entry.priority or priority == entry.priority:
                    yield table, stored
            return
        key = codec.decode_match(table, entry.match)
        stored = self.entries[table.id].get((key, entry.priority))
        if stored is not None:
            yield table, stored

    def find(self, entry: p4r.TableEntry) -> tuple[TableInfo, StoredEntry]:
        """The one entry a DirectCounter/DirectMeter write addresses."""
        table = self.schema.tables.get(entry.table_id)
        key = codec.decode_match(table, entry.match)
        codec.check_priority(table, entry.priority)
        stored = self.entries[table.id].get((key, entry.priority))
        if stored is None:
            raise NotFound(f"table '{table.name}': no entry with this match key and priority")
        return table, stored
