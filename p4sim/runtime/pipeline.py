"""The committed forwarding pipeline: one V1Switch plus the P4Runtime state that drives it.

`Pipeline` is what a Write mutates and a Read inspects: it dispatches each entity to
the module that owns it (tables.py for table entries, profiles.py for action profiles,
externs.py for counters, meters, registers, value sets, PRE and digests), checks the role's write
permissions, and translates engine errors into P4Runtime status codes.
"""

from __future__ import annotations

from typing import Callable, Iterator

import grpc

from p4sim.proto import p4r
from p4sim.runtime import codec
from p4sim.runtime.arbitration import RolePolicy
from p4sim.runtime.config import PipelineConfig
from p4sim.runtime.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    P4RuntimeError,
    PermissionDenied,
    ResourceExhausted,
    Unimplemented,
)
from p4sim.runtime.externs import Externs
from p4sim.runtime.schema import TableInfo
from p4sim.runtime.tables import StoredEntry, Tables
from p4sim.switch import errors as engine_errors
from p4sim.switch.v1model import V1Switch

_ENGINE_ERRORS: list[tuple[type[Exception], type[P4RuntimeError]]] = [
    (engine_errors.DuplicateEntry, AlreadyExists),
    (engine_errors.NoSuchEntry, NotFound),
    (engine_errors.TableFull, ResourceExhausted),
    (engine_errors.InUse, FailedPrecondition),
]


def translate_engine_error(exc: Exception) -> P4RuntimeError:
    """Engine StateError -> P4Runtime error with the same message; anything else is INTERNAL."""
    if isinstance(exc, P4RuntimeError):
        return exc
    for cls, err in _ENGINE_ERRORS:
        if isinstance(exc, cls):
            return err(str(exc))
    if isinstance(exc, engine_errors.StateError):
        return InvalidArgument(str(exc))
    return P4RuntimeError(f"internal error in the switch engine: {exc!r}", grpc.StatusCode.INTERNAL)


class Pipeline:
    """A committed PipelineConfig, its engine and the P4Runtime bookkeeping around it."""

    def __init__(self, config: PipelineConfig, switch: V1Switch):
        self.config = config
        self.schema = config.schema
        self.switch = switch
        self.tables = Tables(self.schema, switch, self._engine)
        self.tables.import_const_entries()
        self.externs = Externs(self.schema, switch, self._engine)

    def _engine(self, fn: Callable, *args):
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - translated
            raise translate_engine_error(exc) from exc

    # -- Write --------------------------------------------------------------------------------

    def write(self, update: p4r.Update, policy: RolePolicy) -> None:
        """Apply one update, or raise leaving the state unchanged."""
        kind = update.type
        if kind not in (p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE):
            # proto3 enums are open: any int32 arrives, and the entity writers below
            # may name the type, so it is checked once here, before any of them.
            raise InvalidArgument(f"update type {kind} is not INSERT, MODIFY or DELETE")

        def allowed(p4_id: int) -> None:
            if policy.writable_ids is not None and p4_id not in policy.writable_ids:
                raise PermissionDenied(f"the controller's role may not write P4 object id {p4_id}")

        e = update.entity
        which = e.WhichOneof("entity")
        if which == "table_entry":
            self.tables.write_entry(kind, e.table_entry, allowed)
        elif which == "action_profile_member":
            self.tables.profiles.write_member(kind, e.action_profile_member, allowed)
        elif which == "action_profile_group":
            self.tables.profiles.write_group(kind, e.action_profile_group, allowed)
        elif which == "counter_entry":
            allowed(e.counter_entry.counter_id)
            self.externs.write_counter(kind, e.counter_entry)
        elif which == "direct_counter_entry":
            self._write_direct_counter(kind, e.direct_counter_entry, allowed)
        elif which == "meter_entry":
            allowed(e.meter_entry.meter_id)
            self.externs.write_meter(kind, e.meter_entry)
        elif which == "direct_meter_entry":
            self._write_direct_meter(kind, e.direct_meter_entry, allowed)
        elif which == "register_entry":
            allowed(e.register_entry.register_id)
            self.externs.write_register(kind, e.register_entry)
        elif which == "packet_replication_engine_entry":
            if policy.writable_ids is not None:
                raise PermissionDenied("the controller's role may not write the packet replication engine")
            self.externs.write_pre(kind, e.packet_replication_engine_entry)
        elif which == "digest_entry":
            allowed(e.digest_entry.digest_id)
            self.externs.write_digest(kind, e.digest_entry)
        elif which == "value_set_entry":
            allowed(e.value_set_entry.value_set_id)
            self.externs.write_value_set(kind, e.value_set_entry)
        elif which is None:
            raise InvalidArgument("update has no entity")
        else:
            raise Unimplemented(f"writing {which} is not supported")

    def _write_direct_counter(self, kind: int, e: p4r.DirectCounterEntry, allowed) -> None:
        table, stored = self.tables.find(e.table_entry)
        allowed(table.id)
        if kind != p4r.Update.MODIFY:
            raise InvalidArgument(f"direct counter of table '{table.name}': only MODIFY is allowed")
        if not table.direct_counter_id:
            raise InvalidArgument(f"table '{table.name}' has no direct counter")
        codec.check_counter_data(e.data, f"direct counter of table '{table.name}'")
        self._engine(self.switch.table_counter_write, table.name, stored.handle, e.data.packet_count, e.data.byte_count)

    def _write_direct_meter(self, kind: int, e: p4r.DirectMeterEntry, allowed) -> None:
        table, stored = self.tables.find(e.table_entry)
        allowed(table.id)
        if kind != p4r.Update.MODIFY:
            raise InvalidArgument(f"direct meter of table '{table.name}': only MODIFY is allowed")
        if not table.direct_meter_id:
            raise InvalidArgument(f"table '{table.name}' has no direct meter")
        if e.HasField("counter_data"):
            codec.check_meter_counter_data(e.counter_data, f"direct meter of table '{table.name}'")
        if not e.HasField("config"):
            raise Unimplemented(f"direct meter of table '{table.name}': resetting a meter to unconfigured is not supported; write a config")
        codec.check_meter_config(e.config, f"direct meter of table '{table.name}'")
        self._engine(self.switch.table_meter_set_rates, table.name, stored.handle, codec.meter_rates(e.config))
        stored.meter_config = e.config

    # -- Read ---------------------------------------------------------------------------------

    def read(self, entity: p4r.Entity) -> Iterator[p4r.Entity]:
        """Every entity matching a Read filter (ids 0 and unset fields are wildcards)."""
        which = entity.WhichOneof("entity")
        if which == "table_entry":
            for te in self._read_table_entries(entity.table_entry):
                yield p4r.Entity(table_entry=te)
        elif which == "action_profile_member":
            for m in self.tables.profiles.read_members(entity.action_profile_member):
                yield p4r.Entity(action_profile_member=m)
        elif which == "action_profile_group":
            for g in self.tables.profiles.read_groups(entity.action_profile_group):
                yield p4r.Entity(action_profile_group=g)
        elif which == "counter_entry":
            for c in self.externs.read_counters(entity.counter_entry):
                yield p4r.Entity(counter_entry=c)
        elif which == "direct_counter_entry":
            for dc in self._read_direct(entity.direct_counter_entry.table_entry, "counter"):
                yield p4r.Entity(direct_counter_entry=dc)
        elif which == "meter_entry":
            for m in self.externs.read_meters(entity.meter_entry):
                yield p4r.Entity(meter_entry=m)
        elif which == "direct_meter_entry":
            for dm in self._read_direct(entity.direct_meter_entry.table_entry, "meter"):
                yield p4r.Entity(direct_meter_entry=dm)
        elif which == "register_entry":
            for r in self.externs.read_registers(entity.register_entry):
                yield p4r.Entity(register_entry=r)
        elif which == "packet_replication_engine_entry":
            for p in self.externs.read_pre(entity.packet_replication_engine_entry):
                yield p4r.Entity(packet_replication_engine_entry=p)
        elif which == "digest_entry":
            for d in self.externs.read_digests(entity.digest_entry):
                yield p4r.Entity(digest_entry=d)
        elif which == "value_set_entry":
            for v in self.externs.read_value_sets(entity.value_set_entry):
                yield p4r.Entity(value_set_entry=v)
        elif which is None:
            raise InvalidArgument("read request entity has no type")
        else:
            raise Unimplemented(f"reading {which} is not supported")

    def _read_table_entries(self, req: p4r.TableEntry) -> Iterator[p4r.TableEntry]:
        tables = [self.schema.tables.get(req.table_id)] if req.table_id else list(self.schema.tables)
        if req.HasField("time_since_last_hit"):
            # the spec: INVALID_ARGUMENT where the table has no idle timeout; p4sim tracks no hits
            for table in tables:
                if not table.supports_timeout:
                    raise InvalidArgument(f"table '{table.name}' does not support idle timeouts (time_since_last_hit set)")
            raise Unimplemented("time_since_last_hit: p4sim does not track table hits")
        for table in tables:
            if req.is_default_action:
                yield self.tables.read_default(table)
                continue
            for _, stored in self.tables.lookup(table, req):
                yield self.entry_as_read(table, stored, req.HasField("counter_data"), req.HasField("meter_config"))

    def entry_as_read(self, table: TableInfo, stored: StoredEntry, counter_data: bool,
                      meter_config: bool) -> p4r.TableEntry:
        """A stored entry as a Read returns it, with its direct counter's values and its
        direct meter's config when asked for (and the table has them)."""
        out = p4r.TableEntry()
        out.CopyFrom(stored.proto)
        if counter_data and table.direct_counter_id:
            packets, nbytes = self.switch.table_counter_read(table.name, stored.handle)
            out.counter_data.packet_count, out.counter_data.byte_count = packets, nbytes
        if meter_config and stored.meter_config is not None:
            out.meter_config.CopyFrom(stored.meter_config)
        return out

    def _read_direct(self, req: p4r.TableEntry, kind: str):
        if req.table_id:
            tables = [self.schema.tables.get(req.table_id)]
        else:
            tables = list(self.schema.tables)
        for table in tables:
            attached = table.direct_counter_id if kind == "counter" else table.direct_meter_id
            if not attached:
                if req.table_id:
                    raise InvalidArgument(f"table '{table.name}' has no direct {kind}")
                continue
            for _, stored in self.tables.lookup(table, req):
                te = p4r.TableEntry()
                te.CopyFrom(stored.proto)
                if kind == "counter":
                    packets, nbytes = self.switch.table_counter_read(table.name, stored.handle)
                    yield p4r.DirectCounterEntry(
                        table_entry=te, data=p4r.CounterData(packet_count=packets, byte_count=nbytes)
                    )
                else:
                    out = p4r.DirectMeterEntry(table_entry=te)
                    if stored.meter_config is not None:
                        out.config.CopyFrom(stored.meter_config)
                    yield out
