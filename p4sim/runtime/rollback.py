"""Undoing the applied updates of a Write batch, for the batches whose answer must be
"nothing applied".

A failed batch is answered with one ``p4.v1.Error`` per update, but a default gRPC
client drops a trailer over 8 KiB, so past `service.MAX_BATCH_UPDATES` updates that
report may not reach it. Such a batch is applied as usual with an undo log kept
beside it (`undo_of`, taken just before each update, from the state the Read path
sees); if some updates failed and the report does not fit, the service runs the log
backwards (`roll_back`) and answers that none of the batch is applied. Each undo step
is a P4Runtime write (the inverse update: DELETE what an INSERT added, INSERT back what
a DELETE removed, MODIFY back what a MODIFY changed), so it goes through the same
checks and engine calls as the client's own writes -- except meters whose cells had
no rates before, which P4Runtime cannot write back and the engine unsets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import grpc

from p4sim.proto import p4r
from p4sim.runtime.arbitration import RolePolicy
from p4sim.runtime.errors import P4RuntimeError
from p4sim.runtime.pipeline import Pipeline

log = logging.getLogger(__name__)
Update = p4r.Update
Undo = Callable[[], None]
_FULL_ACCESS = RolePolicy()  # undo steps restore what the batch's own writes changed


def undo_of(pipeline: Pipeline, update: p4r.Update) -> list[Undo]:
    """What puts the state back as it is now, should `update` succeed; call before it.

    An update that cannot succeed (unknown ids, a missing entity) gets whatever the
    lookup finds -- nothing -- since only applied updates are undone.
    """
    entity = update.entity
    if update.type == Update.INSERT:
        return [_write(pipeline, Update.DELETE, entity)]
    try:
        prior = _prior(pipeline, entity)
    except P4RuntimeError:
        return []  # the update addresses nothing that exists: it fails, nothing to undo
    back = Update.MODIFY if update.type == Update.MODIFY else Update.INSERT
    return [_write(pipeline, back, p) if isinstance(p, p4r.Entity) else p for p in prior]


def roll_back(undo_log: list[list[Undo]]) -> None:
    """Run the undo steps of the applied updates (one list per update), last update first.

    A step that fails is a server bug; it is reported INTERNAL naming the update, and
    that the batch is then partly applied, so the client knows to read the state back.
    """
    for i in range(len(undo_log) - 1, -1, -1):
        for step in undo_log[i]:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - reported to the client, with what it means
                log.exception("rolling back update #%d failed", i)
                raise P4RuntimeError(
                    f"internal error: rolling back update #{i} of a failed batch failed ({exc!r}); updates "
                    f"#0..#{i} may be partly applied: read the state back", grpc.StatusCode.INTERNAL) from exc


def _write(pipeline: Pipeline, kind: int, entity: p4r.Entity) -> Undo:
    update = p4r.Update(type=kind, entity=entity)
    return lambda: pipeline.write(update, _FULL_ACCESS)


def _prior(pipeline: Pipeline, entity: p4r.Entity) -> list[p4r.Entity | Undo]:
    """The entities `entity` addresses as they are now, to write back; an `Undo` where
    P4Runtime has no write that restores the state (a meter without rates)."""
    which = entity.WhichOneof("entity")
    if which == "table_entry":
        return _prior_table_entry(pipeline, entity.table_entry)
    if which == "meter_entry":
        return [m if m.meter_entry.HasField("config") else _unset_meter(pipeline, m.meter_entry)
                for m in pipeline.read(entity)]
    if which == "direct_meter_entry":
        return [m if m.direct_meter_entry.HasField("config")
                else _unset_direct_meter(pipeline, m.direct_meter_entry.table_entry)
                for m in pipeline.read(entity)]
    if which == "action_profile_member":  # member id 0 is a member, not a wildcard, here
        mid = entity.action_profile_member.member_id
        return [m for m in pipeline.read(entity) if m.action_profile_member.member_id == mid]
    if which == "action_profile_group":
        gid = entity.action_profile_group.group_id
        return [g for g in pipeline.read(entity) if g.action_profile_group.group_id == gid]
    return list(pipeline.read(entity))


def _prior_table_entry(pipeline: Pipeline, te: p4r.TableEntry) -> list[p4r.Entity | Undo]:
    tables = pipeline.tables
    if te.is_default_action:
        table = pipeline.schema.tables.get(te.table_id)
        stored_default = tables.defaults.get(table.id)
        # MODIFY without an action restores the program's own default entry
        restore = stored_default if stored_default is not None else p4r.TableEntry(table_id=table.id, is_default_action=True)
        return [p4r.Entity(table_entry=restore)]
    table, stored = tables.find(te)
    out = pipeline.entry_as_read(table, stored, counter_data=True, meter_config=True)
    prior: list[p4r.Entity | Undo] = [p4r.Entity(table_entry=out)]
    if stored.meter_config is None and table.direct_meter_id:
        prior.append(_unset_direct_meter(pipeline, out))
    return prior


def _unset_meter(pipeline: Pipeline, m: p4r.MeterEntry) -> Undo:
    def unset() -> None:
        info = pipeline.schema.meters.get(m.meter_id)
        pipeline.switch.meter_unset(info.name, m.index.index)
        pipeline.externs.meter_configs.pop((info.id, m.index.index), None)
    return unset


def _unset_direct_meter(pipeline: Pipeline, te: p4r.TableEntry) -> Undo:
    key = p4r.TableEntry()
    key.CopyFrom(te)

    def unset() -> None:
        table, stored = pipeline.tables.find(key)
        pipeline.switch.table_meter_unset(table.name, stored.handle)
        stored.meter_config = None
    return unset
