"""Counters, meters, registers, parser value sets, the packet replication engine and
digest configs.

Indexed externs only support MODIFY (their cells always exist); an unset index means
"every cell", for Read and for Write. Registers are read and written over P4Runtime
here, which BMv2's own P4Runtime server leaves unimplemented. Multicast groups and
clone sessions map onto the engine's BMv2-style PRE calls (groups of nodes, one node
per replication id); a clone session with several replicas is realised like BMv2's
server does it, through a multicast group the server allocates for itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

from p4sim.proto import p4r
from p4sim.runtime import codec
from p4sim.runtime.errors import AlreadyExists, InvalidArgument, NotFound, ResourceExhausted, Unimplemented
from p4sim.runtime.schema import IndexedInfo, MatchType, Registry, Schema, ValueSetInfo

Update = p4r.Update

PORT_BITS = 9  # v1model egress_spec / egress_port width
RID_BITS = 16  # v1model egress_rid width
MGRP_MAX = (1 << 16) - 1  # v1model mcast_grp is bit<16>


def _only_modify(kind: int, what: str) -> None:
    if kind != Update.MODIFY:
        name = Update.Type.Name(kind) if kind in Update.Type.values() else str(kind)
        raise InvalidArgument(f"{what}: cells always exist, only MODIFY is allowed (got {name})")


def _cells(info: IndexedInfo, index: p4r.Index | None, what: str) -> range:
    """One cell (index set) or all cells (index unset)."""
    if index is None:
        return range(info.size)
    i = codec.check_index(index.index, info.size, what)
    return range(i, i + 1)


def _infos(registry: Registry[IndexedInfo], ident: int) -> list[IndexedInfo]:
    """Id 0 in a Read means every object of the kind."""
    return [registry.get(ident)] if ident else list(registry)


def _replica_port(r: p4r.Replica, what: str) -> int:
    if r.WhichOneof("port_kind") == "port":
        return codec.bytes_to_int(r.port, PORT_BITS, f"{what} replica port")
    if r.egress_port >> PORT_BITS:
        raise InvalidArgument(f"{what}: replica egress_port {r.egress_port} is too wide for bitwidth {PORT_BITS}")
    return r.egress_port


def _canonical_replica(r: p4r.Replica, port: int) -> p4r.Replica:
    """Echo the port the way the client gave it (deprecated egress_port or bytes)."""
    if r.WhichOneof("port_kind") == "port":
        return p4r.Replica(port=codec.int_to_bytes(port), instance=r.instance)
    return p4r.Replica(egress_port=port, instance=r.instance)


def _decode_replicas(replicas, what: str) -> tuple[dict[int, list[int]], list[p4r.Replica]]:
    """Replicas -> {rid: [ports]} (engine nodes) and their canonical protos."""
    nodes: dict[int, list[int]] = {}
    canon = []
    seen = set()
    for r in replicas:
        if r.backup_replicas:
            raise Unimplemented(f"{what}: backup replicas are not supported")
        port = _replica_port(r, what)
        if r.instance >> RID_BITS:
            raise InvalidArgument(f"{what}: replica instance {r.instance} is too wide for bitwidth {RID_BITS}")
        if (port, r.instance) in seen:
            raise InvalidArgument(f"{what}: replica (port {port}, instance {r.instance}) listed twice")
        seen.add((port, r.instance))
        nodes.setdefault(r.instance, []).append(port)
        canon.append(_canonical_replica(r, port))
    return nodes, canon


@dataclass
class McGroup:
    node_handles: list[int]
    proto: p4r.MulticastGroupEntry | None  # None: allocated by the server for a clone session


@dataclass
class CloneSession:
    proto: p4r.CloneSessionEntry
    mgrp: int | None = None  # internal multicast group for several replicas


@dataclass
class Externs:
    """P4Runtime view of the engine's extern state."""

    schema: Schema
    switch: object
    engine: Callable  # engine(fn, *args): calls the engine, translating its errors
    meter_configs: dict[tuple[int, int], p4r.MeterConfig] = field(default_factory=dict)
    mc_groups: dict[int, McGroup] = field(default_factory=dict)
    clone_sessions: dict[int, CloneSession] = field(default_factory=dict)
    digest_configs: dict[int, p4r.DigestEntry.Config] = field(default_factory=dict)
    value_set_members: dict[int, list[tuple]] = field(default_factory=dict)  # id -> member keys

    # -- counters ---------------------------------------------------------------------------

    def write_counter(self, kind: int, e: p4r.CounterEntry) -> None:
        info = self.schema.counters.get(e.counter_id)
        what = f"counter '{info.name}'"
        _only_modify(kind, what)
        codec.check_counter_data(e.data, what)
        cells = _cells(info, e.index if e.HasField("index") else None, what)
        for i in cells:
            self.engine(self.switch.counter_write, info.name, i, e.data.packet_count, e.data.byte_count)

    def read_counters(self, e: p4r.CounterEntry) -> Iterator[p4r.CounterEntry]:
        for info in _infos(self.schema.counters, e.counter_id):
            for i in _cells(info, e.index if e.HasField("index") else None, f"counter '{info.name}'"):
                packets, nbytes = self.switch.counter_read(info.name, i)
                yield p4r.CounterEntry(
                    counter_id=info.id,
                    index=p4r.Index(index=i),
                    data=p4r.CounterData(packet_count=packets, byte_count=nbytes),
                )

    # -- meters -----------------------------------------------------------------------------

    def write_meter(self, kind: int, e: p4r.MeterEntry) -> None:
        info = self.schema.meters.get(e.meter_id)
        what = f"meter '{info.name}'"
        _only_modify(kind, what)
        if e.HasField("counter_data"):
            codec.check_meter_counter_data(e.counter_data, what)
        if not e.HasField("config"):
            raise Unimplemented(f"{what}: resetting a meter to unconfigured is not supported; write a config")
        codec.check_meter_config(e.config, what)
        cells = _cells(info, e.index if e.HasField("index") else None, what)
        for i in cells:
            self.engine(self.switch.meter_set_rates, info.name, i, codec.meter_rates(e.config))
        for i in cells:
            self.meter_configs[(info.id, i)] = p4r.MeterConfig(
                cir=e.config.cir, cburst=e.config.cburst, pir=e.config.pir, pburst=e.config.pburst
            )

    def read_meters(self, e: p4r.MeterEntry) -> Iterator[p4r.MeterEntry]:
        for info in _infos(self.schema.meters, e.meter_id):
            for i in _cells(info, e.index if e.HasField("index") else None, f"meter '{info.name}'"):
                out = p4r.MeterEntry(meter_id=info.id, index=p4r.Index(index=i))
                cfg = self.meter_configs.get((info.id, i))
                if cfg is not None:
                    out.config.CopyFrom(cfg)
                yield out

    # -- registers --------------------------------------------------------------------------

    def write_register(self, kind: int, e: p4r.RegisterEntry) -> None:
        info = self.schema.registers.get(e.register_id)
        what = f"register '{info.name}'"
        _only_modify(kind, what)
        if not e.HasField("data"):
            raise InvalidArgument(f"{what}: a register write needs data")
        value = codec.decode_bitstring_data(e.data, info.bitwidth, what)
        for i in _cells(info, e.index if e.HasField("index") else None, what):
            self.engine(self.switch.register_write, info.name, i, value)

    def read_registers(self, e: p4r.RegisterEntry) -> Iterator[p4r.RegisterEntry]:
        for info in _infos(self.schema.registers, e.register_id):
            for i in _cells(info, e.index if e.HasField("index") else None, f"register '{info.name}'"):
                yield p4r.RegisterEntry(
                    register_id=info.id,
                    index=p4r.Index(index=i),
                    data=codec.encode_bitstring_data(self.switch.register_read(info.name, i)),
                )

    # -- packet replication engine ------------------------------------------------------------

    def write_pre(self, kind: int, e: p4r.PacketReplicationEngineEntry) -> None:
        which = e.WhichOneof("type")
        if which == "multicast_group_entry":
            self._write_mc_group(kind, e.multicast_group_entry)
        elif which == "clone_session_entry":
            self._write_clone_session(kind, e.clone_session_entry)
        else:
            raise InvalidArgument("packet replication engine entry has neither a multicast group nor a clone session")

    def _write_mc_group(self, kind: int, g: p4r.MulticastGroupEntry) -> None:
        gid = g.multicast_group_id
        what = f"multicast group {gid}"
        if not 0 < gid <= MGRP_MAX:
            raise InvalidArgument(f"{what}: group id must be in 1..{MGRP_MAX}")
        existing = self.mc_groups.get(gid)
        if existing is not None and existing.proto is None:
            raise AlreadyExists(f"{what} is used by the server for a clone session with several replicas")
        if kind == Update.INSERT:
            if existing is not None:
                raise AlreadyExists(f"{what} already exists")
            nodes, canon = _decode_replicas(g.replicas, what)
            self.engine(self.switch.mc_mgrp_create, gid)
            try:
                handles = self._create_nodes(gid, nodes)
            except Exception:
                self.switch.mc_mgrp_destroy(gid)
                raise
            self.mc_groups[gid] = McGroup(handles, p4r.MulticastGroupEntry(multicast_group_id=gid, replicas=canon, metadata=g.metadata))
        elif kind == Update.MODIFY:
            if existing is None:
                raise NotFound(f"{what} does not exist")
            nodes, canon = _decode_replicas(g.replicas, what)
            handles = self._create_nodes(gid, nodes)
            self._destroy_nodes(gid, existing.node_handles)
            existing.node_handles = handles
            existing.proto = p4r.MulticastGroupEntry(multicast_group_id=gid, replicas=canon, metadata=g.metadata)
        elif kind == Update.DELETE:
            if existing is None:
                raise NotFound(f"{what} does not exist")
            self._destroy_nodes(gid, existing.node_handles)
            self.engine(self.switch.mc_mgrp_destroy, gid)
            del self.mc_groups[gid]
        else:
            raise InvalidArgument(f"update type {kind} is not INSERT, MODIFY or DELETE")

    def _create_nodes(self, gid: int, nodes: dict[int, list[int]]) -> list[int]:
        handles: list[int] = []
        try:
            for rid, ports in nodes.items():
                handle = self.engine(self.switch.mc_node_create, rid, ports)
                handles.append(handle)
                self.engine(self.switch.mc_node_associate, gid, handle)
        except Exception:
            self._destroy_nodes(gid, handles)
            raise
        return handles

    def _destroy_nodes(self, gid: int, handles: list[int]) -> None:
        for handle in handles:
            try:
                self.switch.mc_node_dissociate(gid, handle)
            except Exception:  # noqa: BLE001 - a node that failed before association
                pass
            self.switch.mc_node_destroy(handle)

    def _write_clone_session(self, kind: int, s: p4r.CloneSessionEntry) -> None:
        sid = s.session_id
        what = f"clone session {sid}"
        if sid == 0:
            raise InvalidArgument(f"{what}: session_id 0 is the wildcard of a Read, never a session")
        existing = self.clone_sessions.get(sid)
        if kind == Update.DELETE:
            if existing is None:
                raise NotFound(f"{what} does not exist")
            self.engine(self.switch.mirroring_delete, sid)
            self._free_session_group(existing)
            del self.clone_sessions[sid]
            return
        if kind not in (Update.INSERT, Update.MODIFY):
            raise InvalidArgument(f"update type {kind} is not INSERT, MODIFY or DELETE")
        if kind == Update.INSERT and existing is not None:
            raise AlreadyExists(f"{what} already exists")
        if kind == Update.MODIFY and existing is None:
            raise NotFound(f"{what} does not exist")
        if s.packet_length_bytes:
            raise Unimplemented(f"{what}: packet truncation (packet_length_bytes) is not supported")
        if s.class_of_service:
            raise Unimplemented(f"{what}: class_of_service is not supported")
        nodes, canon = _decode_replicas(s.replicas, what)
        if not canon:
            raise InvalidArgument(f"{what}: a clone session needs at least one replica")
        session = CloneSession(p4r.CloneSessionEntry(session_id=sid, replicas=canon))
        if len(canon) == 1 and next(iter(nodes)) == 0:
            self.engine(self.switch.mirroring_add, sid, next(iter(nodes.values()))[0])
        else:
            session.mgrp = next(g for g in range(MGRP_MAX, 0, -1) if g not in self.mc_groups)
            self.engine(self.switch.mc_mgrp_create, session.mgrp)
            try:
                handles = self._create_nodes(session.mgrp, nodes)
                self.engine(self.switch.mirroring_add_mc, sid, session.mgrp)
            except Exception:
                self.switch.mc_mgrp_destroy(session.mgrp)
                raise
            self.mc_groups[session.mgrp] = McGroup(handles, None)
        if existing is not None:
            self._free_session_group(existing)
        self.clone_sessions[sid] = session

    def _free_session_group(self, session: CloneSession) -> None:
        if session.mgrp is None:
            return
        self._destroy_nodes(session.mgrp, self.mc_groups.pop(session.mgrp).node_handles)
        self.switch.mc_mgrp_destroy(session.mgrp)

    def read_pre(self, e: p4r.PacketReplicationEngineEntry) -> Iterator[p4r.PacketReplicationEngineEntry]:
        which = e.WhichOneof("type")
        if which == "multicast_group_entry":
            want = e.multicast_group_entry.multicast_group_id
            for gid, g in sorted(self.mc_groups.items()):
                if g.proto is not None and (not want or gid == want):
                    yield p4r.PacketReplicationEngineEntry(multicast_group_entry=g.proto)
        elif which == "clone_session_entry":
            want = e.clone_session_entry.session_id
            for sid, s in sorted(self.clone_sessions.items()):
                if not want or sid == want:
                    yield p4r.PacketReplicationEngineEntry(clone_session_entry=s.proto)
        else:
            raise InvalidArgument("packet replication engine read needs a multicast group or clone session entry")

    # -- parser value sets -------------------------------------------------------------------

    def write_value_set(self, kind: int, e: p4r.ValueSetEntry) -> None:
        """MODIFY replaces the whole member list (the only write P4Runtime defines)."""
        info = self.schema.value_sets.get(e.value_set_id)
        what = f"value set '{info.name}'"
        _only_modify(kind, what)
        keys = [codec.decode_match(info, m.match) for m in e.members]
        if len(set(keys)) != len(keys):
            raise AlreadyExists(f"{what}: a member is listed twice")
        if len(keys) > info.size:
            raise ResourceExhausted(f"{what}: {len(keys)} members exceed its size {info.size}")
        old = self.value_set_members.get(info.id, [])
        try:
            self._load_value_set(info, keys)
        except Exception:
            self._load_value_set(info, old)
            raise
        self.value_set_members[info.id] = keys

    def _load_value_set(self, info: ValueSetInfo, keys: list[tuple]) -> None:
        """Program the engine's set: fields concatenated first-field-most-significant, like
        BMv2's value set key; a mask only when some field is not exact."""
        self.engine(self.switch.parser_value_set_clear, info.name)
        for key in keys:
            value = mask = 0
            for f, v in zip(info.match_fields, key):
                full = (1 << f.bitwidth) - 1
                if v.kind == MatchType.TERNARY:
                    fmask = v.b
                elif v.kind == MatchType.LPM:
                    fmask = full ^ (full >> v.b)
                else:
                    fmask = full
                value = (value << f.bitwidth) | v.a
                mask = (mask << f.bitwidth) | fmask
            exact = all(v.kind == MatchType.EXACT for v in key)
            self.engine(self.switch.parser_value_set_add, info.name, value, None if exact else mask)

    def read_value_sets(self, e: p4r.ValueSetEntry) -> Iterator[p4r.ValueSetEntry]:
        infos = [self.schema.value_sets.get(e.value_set_id)] if e.value_set_id else list(self.schema.value_sets)
        for info in infos:
            out = p4r.ValueSetEntry(value_set_id=info.id)
            for key in self.value_set_members.get(info.id, []):
                out.members.add().match.extend(codec.encode_match(info, key))
            yield out

    # -- digests ----------------------------------------------------------------------------

    def write_digest(self, kind: int, d: p4r.DigestEntry) -> None:
        info = self.schema.digests.get(d.digest_id)
        what = f"digest '{info.name}'"
        existing = d.digest_id in self.digest_configs
        if kind == Update.DELETE:
            if not existing:
                raise NotFound(f"{what} is not configured")
            del self.digest_configs[d.digest_id]
            return
        if kind == Update.INSERT and existing:
            raise AlreadyExists(f"{what} is already configured")
        if kind == Update.MODIFY and not existing:
            raise NotFound(f"{what} is not configured")
        if kind not in (Update.INSERT, Update.MODIFY):
            raise InvalidArgument(f"update type {kind} is not INSERT, MODIFY or DELETE")
        cfg = d.config
        if cfg.max_timeout_ns < 0 or cfg.ack_timeout_ns < 0 or cfg.max_list_size < 0:
            raise InvalidArgument(f"{what}: digest config values must not be negative")
        self.digest_configs[d.digest_id] = p4r.DigestEntry.Config(
            max_timeout_ns=cfg.max_timeout_ns, max_list_size=cfg.max_list_size, ack_timeout_ns=cfg.ack_timeout_ns
        )

    def read_digests(self, d: p4r.DigestEntry) -> Iterator[p4r.DigestEntry]:
        for info in [self.schema.digests.get(d.digest_id)] if d.digest_id else list(self.schema.digests):
            cfg = self.digest_configs.get(info.id)
            if cfg is not None:
                yield p4r.DigestEntry(digest_id=info.id, config=cfg)
