"""`V1Switch`: BMv2 simple_switch's packet processing on a BMv2 JSON program.

The JSON is compiled once into Python functions (`codegen`); this module binds the
run-time objects those functions refer to (tables, extern arrays, value sets, under the
names `codegen.Symbols` makes) and strings the functions together exactly as
simple_switch's ingress and egress threads do. `run_ingress`: parser (with
`parser_error` set and the packet continuing to ingress on a parser exception),
checksum verification, ingress, I2E clone, digest, resubmit, multicast replication /
drop / unicast, giving one `EgressJob` per egress copy for the caller to queue.
`run_egress`, per dequeued job: egress, E2E clone, drop, checksum update, deparser,
recirculation. `run_to_completion` is the two with no queue in between. The
runtime-state API (tables, externs, replication: what the P4Runtime server calls) is
`runtime_api.RuntimeAPI`, apart from the packet path as BMv2 keeps simple_switch.cpp
apart from its runtime interface; the contract of both is docs/engine-api.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .codegen import DROP_PORT, Symbols, generate
from .phv import ExitPipeline
from .errors import ProgramError
from .externs import CounterArray, Meter, MeterArray, RegisterArray, Replication, ValueSet
from .program import Layout
from .runtime_api import RuntimeAPI
from .tables import ActionInfo, ActionProfile, KeyField, Table

# standard_metadata.instance_type values (simple_switch.cpp PktInstanceType)
NORMAL, INGRESS_CLONE, EGRESS_CLONE, COALESCED, RECIRC, REPLICATION, RESUBMIT = range(7)
#: Resubmit/recirculate passes after which a packet is dropped. BMv2 would circulate
#: such a packet forever (it never leaves the switch); a synchronous call must return.
MAX_PASSES = 1000

log = logging.getLogger(__name__)


class PacketState:
    """Per-packet registers that are not PHV fields (BMv2's packet registers)."""

    __slots__ = ("ilen", "plen", "payload", "clone", "clone_fl", "resubmit", "recirc",
                 "learn", "trunc", "passes")

    def __init__(self, ilen: int, plen: int, payload: bytes = b"", passes: int = 0) -> None:
        self.ilen = ilen          # ingress length: what counters and meters count
        self.plen = plen          # packet_length register (changes with add/remove_header)
        self.payload = payload    # bytes after the parsed headers
        self.passes = passes      # resubmissions + recirculations so far
        self.clone: int | None = None
        self.clone_fl = 0
        self.resubmit = 0
        self.recirc = 0
        self.learn = 0
        self.trunc: int | None = None


@dataclass(slots=True)
class EgressJob:
    """A packet handed from ingress (or an egress clone) to an egress port queue.

    `priority` is the egress priority queue: `standard_metadata.priority` (BMv2's
    `intrinsic_metadata.priority`) when the packet is enqueued, 0 without that field.
    """

    port: int
    F: list
    S: PacketState
    priority: int = 0

    @property
    def length(self) -> int:
        """Bytes the packet will have on the wire if egress leaves it unchanged."""
        return self.S.plen


def _monotonic_us() -> Callable[[], int]:
    start = time.monotonic_ns()
    return lambda: (time.monotonic_ns() - start) // 1000


class V1Switch(RuntimeAPI):
    """A v1model switch running one BMv2 JSON program (see docs/engine-api.md): the
    pipeline here, the runtime-state API it inherits from `runtime_api.RuntimeAPI`."""

    def __init__(self, bmv2_json: dict, *, cpu_port: int | None = None, device_id: int = 0,
                 clock: Callable[[], int] | None = None) -> None:
        if not isinstance(bmv2_json, dict):
            raise ProgramError("the BMv2 JSON must be an object (dict)")
        self.json = bmv2_json
        self.cpu_port = cpu_port
        self.device_id = device_id
        self.clock = clock or _monotonic_us()
        try:
            self._load(bmv2_json)
        except (KeyError, IndexError, TypeError) as exc:
            raise ProgramError(f"malformed BMv2 JSON: {type(exc).__name__}: {exc}") from exc

    # ------------------------------------------------------------------ loading
    def _load(self, js: dict) -> None:
        self.layout = Layout(js)
        sym = Symbols()
        env: dict[str, Any] = {}
        self._make_externs(js, env, sym)
        generated = generate(js, self.layout, sym)
        self.source = generated.source
        self._named_hashes = generated.hashes
        env.update(generated.constants)
        try:
            exec(compile(self.source, f"<p4sim:{js.get('program', 'program')}>", "exec"), env)
        except SyntaxError as exc:  # a generator bug, reported with the offending line
            raise ProgramError(f"internal code generation error: {exc}") from exc
        self._make_tables(js, env, sym, generated.vset_keys)
        self._parse = env[sym.PARSE]
        self._deparse = env[sym.DEPARSE]
        self._verify = env[sym.VERIFY_CHECKSUMS]
        self._update = env[sym.UPDATE_CHECKSUMS]
        self._template = self.layout.template()
        self._meta_slots = self.layout.metadata_slots()
        self.rep = Replication()
        self._field_lists = {fl["id"]: self._slots_of(fl.get("elements", []), fl["name"])
                             for fl in js.get("field_lists", [])}
        self._learn_lists = {ll["id"]: (ll["name"], self._slots_of(ll.get("elements", []),
                                                                   ll["name"]))
                             for ll in js.get("learn_lists", [])}
        self._digests: list[tuple[str, tuple[int, ...]]] = []
        self._find_standard_metadata()

    def _make_externs(self, js: dict, env: dict[str, Any], sym: Symbols) -> None:
        """Counter, meter and register arrays, bound where generated code expects them."""
        self.counters: dict[str, CounterArray] = {}
        self._direct_counters: dict[str, str] = {}
        for c in js.get("counter_arrays", []):
            if c.get("is_direct"):
                self._direct_counters[c["name"]] = c.get("binding")
                continue
            arr = CounterArray(c["name"], int(c["size"]))
            self.counters[c["name"]] = arr
            env[sym.counter_packets(c["name"])] = arr.packets
            env[sym.counter_bytes(c["name"])] = arr.bytes
        self.meters: dict[str, MeterArray] = {}
        self._direct_meters: dict[str, dict] = {}
        for mj in js.get("meter_arrays", []):
            if mj.get("is_direct"):
                self._direct_meters[mj["name"]] = mj
                continue
            arr = MeterArray(mj["name"], int(mj["size"]), mj.get("type") == "packets",
                             int(mj.get("rate_count", 2)), self.clock)
            self.meters[mj["name"]] = arr
            env[sym.meter(mj["name"])] = arr
        self.registers: dict[str, RegisterArray] = {}
        for r in js.get("register_arrays", []):
            arr = RegisterArray(r["name"], int(r["size"]), int(r["bitwidth"]))
            self.registers[r["name"]] = arr
            env[sym.register(r["name"])] = arr.values

    def _make_tables(self, js: dict, env: dict[str, Any], sym: Symbols,
                     vset_keys: dict[str, list[int]]) -> None:
        """Value sets, actions, action profiles and tables; wire the control graph."""
        pipelines = {p["name"]: p for p in js.get("pipelines", [])}
        self.value_sets: dict[str, ValueSet] = {}
        for v in js.get("parse_vsets", []):
            vs = ValueSet(v["name"], int(v.get("compressed_bitwidth", 0)),
                          vset_keys.get(v["name"], []))
            self.value_sets[v["name"]] = vs
            env[sym.value_set(v["name"])] = vs

        self.actions: dict[int, ActionInfo] = {}
        for act in js.get("actions", []):
            self.actions[act["id"]] = ActionInfo(
                act["name"], act["id"], [int(r["bitwidth"]) for r in act.get("runtime_data", [])],
                env[sym.action(act["id"])])
        self.tables: dict[str, Table] = {}
        self.profiles: dict[str, ActionProfile] = {}
        for pname, p in pipelines.items():
            for ap in p.get("action_profiles", []):
                acts = {a.name: a for a in self.actions.values()}
                sel = env[sym.selector(ap["name"])] if ap.get("selector") else None
                self.profiles[ap["name"]] = ActionProfile(ap["name"], int(ap.get("max_size", 0)),
                                                          acts, sel)
            for t in p.get("tables", []):
                tbl = self.tables[t["name"]] = self._make_table(t)
                env[sym.table(t["id"])] = tbl
                env[sym.exact_index(t["id"])] = tbl._exact

        def resolver(pname: str) -> Callable[[str | None], Any]:
            def resolve(n: str | None) -> Any:
                return None if n is None else env[sym.defined_node(pname, n)]
            return resolve

        for pname, p in pipelines.items():
            res = resolver(pname)
            for t in p.get("tables", []):
                self.tables[t["name"]].bind_nodes(res)
        self._ingress_init = resolver("ingress")(pipelines["ingress"].get("init_table"))
        self._egress_init = resolver("egress")(pipelines["egress"].get("init_table"))
        for p in pipelines.values():
            for t in p.get("tables", []):
                self._load_entries(self.tables[t["name"]], t)

    def _find_standard_metadata(self) -> None:
        """Slots of the fields simple_switch reads and writes (aliases resolved)."""
        L = self.layout
        self._mask: dict[int, int] = {}

        def slot(name: str) -> int | None:
            f = L.find_field(name)
            if f is None:
                return None
            self._mask[f.slot] = f.mask
            return f.slot

        required = ("ingress_port", "packet_length", "instance_type", "egress_spec",
                    "egress_port")
        for r in required:
            if slot("standard_metadata." + r) is None:
                raise ProgramError(f"the program has no standard_metadata.{r} field "
                                   f"(simple_switch requires it)")
        self._s_in = slot("standard_metadata.ingress_port")
        self._s_len = slot("standard_metadata.packet_length")
        self._s_inst = slot("standard_metadata.instance_type")
        self._s_espec = slot("standard_metadata.egress_spec")
        self._s_eport = slot("standard_metadata.egress_port")
        self._espec_reset = (DROP_PORT + 1) & L.find_field("standard_metadata.egress_spec").mask
        self._s_perr = slot("standard_metadata.parser_error")
        self._s_cerr = slot("standard_metadata.checksum_error")
        self._s_mcast = slot("intrinsic_metadata.mcast_grp") or slot("standard_metadata.mcast_grp")
        self._s_rid = slot("intrinsic_metadata.egress_rid") or slot("standard_metadata.egress_rid")
        self._s_igts = (slot("intrinsic_metadata.ingress_global_timestamp")
                        or slot("standard_metadata.ingress_global_timestamp"))
        self._s_egts = (slot("intrinsic_metadata.egress_global_timestamp")
                        or slot("standard_metadata.egress_global_timestamp"))
        self._s_prio = slot("intrinsic_metadata.priority") or slot("standard_metadata.priority")
        q = [slot("queueing_metadata." + n) or slot("standard_metadata." + n)
             for n in ("enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth")]
        self._q = q if all(s is not None for s in q) else None
        # masks of the fields written per packet, looked up once here
        m = self._mask
        self._m_in, self._m_len, self._m_eport = m[self._s_in], m[self._s_len], m[self._s_eport]
        self._m_igts = m[self._s_igts] if self._s_igts is not None else 0
        self._m_egts = m[self._s_egts] if self._s_egts is not None else 0
        self._q_masks = tuple(m[s] for s in self._q) if self._q is not None else ()

    def _slots_of(self, elements: list, where: str) -> list[int]:
        out = []
        for e in elements:
            if e.get("type") != "field":
                raise ProgramError(f"{where}: only field elements are supported")
            out.append(self.layout.field(*e["value"]).slot)
        return out

    def _make_table(self, t: dict) -> Table:
        L = self.layout
        keys = []
        for k in t.get("key", []):
            mt = k["match_type"]
            if mt == "valid":
                keys.append(KeyField(k.get("name", str(k["target"])), mt, 1))
                continue
            f = L.field(*k["target"])
            keys.append(KeyField(k.get("name", ".".join(k["target"])), mt, f.width))
        profile = self.profiles.get(t.get("action_profile")) if t.get("type", "simple") != "simple" else None
        if t.get("type", "simple") != "simple" and profile is None:
            raise ProgramError(f"table {t['name']!r}: unknown action profile "
                               f"{t.get('action_profile')!r}")
        meter_factory = None
        meter_slot = None
        dm = t.get("direct_meters")
        if dm:
            mj = self._direct_meters.get(dm)
            if mj is None:
                raise ProgramError(f"table {t['name']!r}: unknown direct meter {dm!r}")
            packets = mj.get("type") == "packets"
            rate_count = int(mj.get("rate_count", 2))
            clock = self.clock
            meter_factory = lambda: Meter(packets, rate_count, clock)  # noqa: E731
            if mj.get("result_target"):
                meter_slot = L.field(*mj["result_target"]).slot
        return Table(t, keys, self.actions, profile, meter_factory, meter_slot)

    def _load_entries(self, tbl: Table, t: dict) -> None:
        from . import match as m
        de = t.get("default_entry")
        if de is not None and de.get("action_id") in self.actions:
            info = self.actions[de["action_id"]]
            args = [int(x, 16) for x in de.get("action_data", [])]
            tbl.actions.setdefault(info.name, info)
            tbl.set_default(info.name, args)
            tbl.initial_default = tbl.default
            tbl.default_const = bool(de.get("action_const", False))
            tbl.default_entry_const = bool(de.get("action_entry_const", False))
        entries = t.get("entries")
        if not entries:
            return
        for e in entries:
            match_ = []
            for mk in e["match_key"]:
                kind = mk["match_type"]
                if kind == "exact":
                    match_.append(m.Exact(int(mk["key"], 16)))
                elif kind == "lpm":
                    match_.append(m.Lpm(int(mk["key"], 16), int(mk["prefix_length"])))
                elif kind in ("ternary", "optional"):
                    match_.append(m.Ternary(int(mk["key"], 16), int(mk["mask"], 16)))
                elif kind == "range":
                    match_.append(m.Range(int(mk["start"], 16), int(mk["end"], 16)))
                elif kind == "valid":
                    match_.append(m.Valid(bool(mk["key"])))
                else:
                    raise ProgramError(f"table {tbl.name!r}: unsupported const entry kind {kind!r}")
            ae = e["action_entry"]
            info = self.actions[ae["action_id"]]
            args = [int(x, 16) for x in ae.get("action_data", [])]
            prio = e.get("priority")
            tbl.add(match_, info.name, args, prio if tbl.mode == "scan" else None)
        tbl.const_entries = True

    # ------------------------------------------------------------------ packets
    def run_ingress(self, port: int, data: bytes) -> list[EgressJob]:
        """Parser + ingress + traffic-manager handoff; the jobs to enqueue per egress port."""
        data = bytes(data)
        F = self._template[:]
        n = len(data)
        S = PacketState(n, n)
        F[self._s_in] = port & self._m_in
        F[self._s_len] = n & self._m_len
        F[self._s_inst] = NORMAL
        if self._s_igts is not None:
            F[self._s_igts] = self.clock() & self._m_igts
        jobs: list[EgressJob] = []
        self._ingress(port, F, S, data, jobs)
        return jobs

    def _reset_metadata(self, F: list) -> None:
        for s in self._meta_slots:
            F[s] = 0

    def _copy_field_list(self, fl: int, src: list, dst: list) -> None:
        for s in self._field_lists.get(fl, ()):
            dst[s] = src[s]

    def _ingress(self, port: int, F: list, S: PacketState, data: bytes,
                 jobs: list[EgressJob]) -> None:
        while True:
            ingress_size = S.plen
            # parser and checksum verification
            pos, err = self._parse(F, S, data)
            S.payload = data[pos:]
            if self._s_perr is not None:
                F[self._s_perr] = err
            ok = self._verify(F, S)
            if self._s_cerr is not None:
                F[self._s_cerr] = 0 if ok else 1
            # the ingress control graph (exit ends it)
            node = self._ingress_init
            try:
                while node is not None:
                    node = node(F, S)
            except ExitPipeline:
                pass
            egress_spec = F[self._s_espec]
            if S.clone is not None:
                session, fl = S.clone, S.clone_fl
                S.clone = None
                cfg = self.rep.sessions.get(session)
                if cfg is not None:
                    F2 = self._template[:]
                    S2 = PacketState(S.ilen, ingress_size, passes=S.passes)
                    F2[self._s_in] = port
                    pos, _err = self._parse(F2, S2, data)
                    S2.payload = data[pos:]
                    self._reset_metadata(F2)
                    self._copy_field_list(fl, F, F2)
                    F2[self._s_inst] = INGRESS_CLONE
                    self._to_session(cfg, F2, S2, jobs)
            if S.learn:
                learn = self._learn_lists.get(S.learn)
                if learn is not None:
                    self._digests.append((learn[0], tuple(F[s] for s in learn[1])))
            if S.resubmit:
                if S.passes >= MAX_PASSES:
                    log.warning("packet resubmitted/recirculated %d times: dropped", MAX_PASSES)
                    return
                F2 = self._template[:]
                self._copy_field_list(S.resubmit, F, F2)
                F2[self._s_inst] = RESUBMIT
                F2[self._s_len] = ingress_size
                F, S = F2, PacketState(S.ilen, ingress_size, passes=S.passes + 1)
                continue
            mgid = F[self._s_mcast] if self._s_mcast is not None else 0
            if mgid:
                F[self._s_inst] = REPLICATION
                self._multicast(F, S, mgid, jobs)
                return
            if egress_spec == DROP_PORT:
                return
            F[self._s_inst] = NORMAL
            jobs.append(self._job(egress_spec, F, S))
            return

    def _to_session(self, cfg: tuple, F: list, S: PacketState, jobs: list[EgressJob]) -> None:
        port, mgrp = cfg
        if mgrp is not None:
            self._multicast(F, S, mgrp, jobs)
        if port is not None:
            jobs.append(self._job(port, F, S))

    def _job(self, port: int, F: list, S: PacketState) -> EgressJob:
        return EgressJob(port, F, S, F[self._s_prio] if self._s_prio is not None else 0)

    def _multicast(self, F: list, S: PacketState, mgrp: int, jobs: list[EgressJob]) -> None:
        for port, rid in self.rep.replicate(mgrp):
            if self._s_rid is not None:
                F[self._s_rid] = rid & self._mask[self._s_rid]
            jobs.append(self._job(port, F[:], PacketState(S.ilen, S.plen, S.payload, S.passes)))

    def run_egress(self, job: EgressJob, enq_qdepth: int, deq_qdepth: int,
                   enq_timestamp: int, deq_timedelta: int
                   ) -> tuple[list[tuple[int, bytes]], list[EgressJob]]:
        """Egress for one job dequeued with this queueing metadata: (packets out, all on
        `job.port`; new jobs to enqueue: E2E clones and the egress copies of
        recirculated packets)."""
        F, S = job.F, job.S
        out: list[tuple[int, bytes]] = []
        new_jobs: list[EgressJob] = []
        if self._s_egts is not None:
            F[self._s_egts] = self.clock() & self._m_egts
        q = self._q
        if q is not None:
            qm = self._q_masks
            F[q[0]] = enq_timestamp & qm[0]
            F[q[1]] = enq_qdepth & qm[1]
            F[q[2]] = deq_timedelta & qm[2]
            F[q[3]] = deq_qdepth & qm[3]
        F[self._s_eport] = job.port & self._m_eport
        F[self._s_espec] = self._espec_reset
        F[self._s_len] = S.plen & self._m_len
        node = self._egress_init
        try:
            while node is not None:
                node = node(F, S)
        except ExitPipeline:
            pass
        if S.clone is not None:
            session, fl = S.clone, S.clone_fl
            S.clone = None
            cfg = self.rep.sessions.get(session)
            if cfg is not None and S.passes >= MAX_PASSES:
                log.warning("egress clone of a packet cloned %d times: dropped", MAX_PASSES)
            elif cfg is not None:
                F2 = F[:]
                self._reset_metadata(F2)
                self._copy_field_list(fl, F, F2)
                F2[self._s_inst] = EGRESS_CLONE
                self._to_session(cfg, F2, PacketState(S.ilen, S.plen, S.payload, S.passes + 1),
                                 new_jobs)
        if F[self._s_espec] == DROP_PORT:
            return out, new_jobs
        self._update(F, S)
        data = self._deparse(F, S) + S.payload
        if S.recirc:
            if S.passes >= MAX_PASSES:
                log.warning("packet resubmitted/recirculated %d times: dropped", MAX_PASSES)
                return out, new_jobs
            F2 = self._template[:]
            self._copy_field_list(S.recirc, F, F2)
            F2[self._s_inst] = RECIRC
            F2[self._s_len] = len(data)
            self._ingress(0, F2, PacketState(len(data), len(data), passes=S.passes + 1), data,
                          new_jobs)
            return out, new_jobs
        if S.trunc is not None and S.trunc < len(data):
            data = data[:S.trunc]
        out.append((job.port, data))
        return out, new_jobs


def run_to_completion(switch: V1Switch, port: int, data: bytes) -> list[tuple[int, bytes]]:
    """One packet through `switch` with an instantaneous traffic manager: ingress, then
    egress for each copy and, before the next copy, for every job its egress makes (E2E
    clones, recirculated packets; FIFO), all with queue metadata 0 and enqueued now.
    The (egress port, bytes) of every packet out. For the STF runner, the in-process
    P4Runtime dataplane, benchmarks and tests; the device queues the jobs instead."""
    out: list[tuple[int, bytes]] = []
    for job in switch.run_ingress(port, data):
        pending = [job]
        for queued in pending:  # FIFO: the jobs egress makes join the end of the list
            sent, more = switch.run_egress(queued, 0, 0, switch.clock(), 0)
            out += sent
            pending += more
    return out
