"""`NativeSwitch`: the v1model switch of `V1Switch`, its packets run by a pipeline
generated in C (p4sim/switch/ccodegen/) and compiled at start (build.py).

Same Python API as `V1Switch` (docs/engine-api.md), so the Python Device loop, the
P4Runtime server and the STF runner use it unchanged. The control plane's book --
tables, action profiles, replication, value sets, with their validation, handles and
listings -- stays in the Python objects `V1Switch` builds and `runtime_api.RuntimeAPI`
serves, so every refusal and every read of configuration is the Python engine's own;
each write they accept is mirrored into the C tables at once (one entry, member or
group at a time). What packets change -- counters, registers, meters, digests --
lives in C and is read from there.

For the native packet loop (p4sim/switch/native/, pipeline.h): `pipeline` is the
`p4n_pipeline *` (a cffi pointer; `int(ffi.cast("uintptr_t", sw.pipeline))` gives its
address) and `ops` the `const p4n_ops *` of the loaded library, whose ingress, egress
and job_free the loop calls directly under the same device lock the runtime API takes.
`library` is the path of the shared object.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

from ..ccodegen import Unsupported, generate_c
from ..errors import P4AssertionError, ProgramError, StateError
from ..v1model import V1Switch
from .build import compile_pipeline, ffi, load

log = logging.getLogger(__name__)

#: Hand-offs one ingress or egress run may make (multicast copies, clones).
MAX_JOBS = 4096
#: Bytes of the buffer an egress run writes its frame into.
FRAME_CAP = 1 << 17
#: Words of digest data taken from C per call.
DIGEST_WORDS = 1 << 14


#: What the Python engine raises where a native run fails, by p4n_last_error (runtime.h).
_FAILURES: dict[int | None, Callable[[], Exception]] = {
    1: lambda: ProgramError("a header stack index outside the stack (Python: IndexError)"),
    2: lambda: P4AssertionError("assert failed"),
    3: lambda: P4AssertionError("assume failed"),
    5: lambda: ProgramError("a varbit extract of a negative length (Python: ValueError)"),
    None: lambda: ProgramError("native pipeline error (too many copies or a frame too long)"),
}


def _words(value: int, n: int) -> list[int]:
    """`value` as `n` 64-bit words, most significant first."""
    return [(value >> (64 * (n - 1 - i))) & ((1 << 64) - 1) for i in range(n)]


class NativeJob:
    """A packet queued between ingress and egress: the C job and what the traffic
    manager reads (`EgressJob`'s port, priority and length). The C job is freed when
    egress consumes it, or with this object if it never gets there (tail drop)."""

    __slots__ = ("port", "priority", "length", "ptr")

    def __init__(self, port: int, priority: int, length: int, ptr: Any) -> None:
        self.port = port
        self.priority = priority
        self.length = length
        self.ptr = ptr


class NativeSwitch(V1Switch):
    """A v1model switch whose pipeline runs in generated C (see the module docstring).

    Raises `ccodegen.Unsupported` (naming the construct and its place in the JSON) for
    a program the C engine does not run; `make_engine` then falls back to Python.
    """

    def __init__(self, bmv2_json: dict, *, cpu_port: int | None = None, device_id: int = 0,
                 clock: Callable[[], int] | None = None, sanitize: bool = False) -> None:
        super().__init__(bmv2_json, cpu_port=cpu_port, device_id=device_id, clock=clock)
        self.program = generate_c(bmv2_json, self.layout)
        self.library = compile_pipeline(self.program.source, sanitize=sanitize)
        lib = load(self.library)
        self._lib = lib
        ptr = lib.p4n_new()
        if ptr == ffi.NULL:
            raise ProgramError("native pipeline: out of memory")
        self.pipeline = ffi.gc(ptr, lib.p4n_free)
        self.ops = lib.p4n_get_ops()
        self._ingress = self.ops.ingress
        self._egress = self.ops.egress
        pipeline, job_free = self.pipeline, self.ops.job_free
        self._job_free = lambda job: job_free(pipeline, job)
        self._out = ffi.new("p4n_handoff[]", MAX_JOBS)    # ingress's hand-offs
        self._more = ffi.new("p4n_handoff[]", MAX_JOBS)   # egress's
        self._frame_buf = ffi.new("uint8_t[]", FRAME_CAP)
        self._frame = ffi.new("p4n_frame *", {"data": self._frame_buf, "cap": FRAME_CAP})
        self._mgrps: set[int] = set()
        # per learn list: its name, and per field its words in a digest (ccodegen/layout.py)
        ctx = self.program.context
        self._learn_info = {ll["id"]: (ll["name"], [(f, len(ctx.words(f))) for f in (
                                self.layout.field(*e["value"]) for e in ll.get("elements", []))])
                            for ll in bmv2_json.get("learn_lists", [])}
        self._sync_all()
        self.seed_random_from_python()

    def seed_random_from_python(self) -> None:
        """Give the C `random` the state of Python's `random` now, so that it draws
        the numbers the Python engine would (differential tests seed both alike)."""
        state = random.getstate()[1]
        self._check(self._lib.p4n_rng_state(self.pipeline, ffi.new("uint32_t[]", list(state[:624])),
                                            state[624]), "the random state")

    # ------------------------------------------------------------------ packets
    def _jobs(self, n: int, out: Any) -> list[NativeJob]:
        if n < 0:
            raise _FAILURES.get(self._lib.p4n_last_error(self.pipeline), _FAILURES[None])()
        if n == 0:
            return []
        gc, free = ffi.gc, self._job_free
        jobs = []
        for i in range(n):
            h = out[i]
            jobs.append(NativeJob(h.port, h.priority, h.length, gc(h.job, free)))
        return jobs

    def run_ingress(self, port: int, data: bytes) -> list[NativeJob]:  # type: ignore[override]
        """Parser + ingress + traffic-manager hand-off, in C (see `V1Switch.run_ingress`)."""
        n = self._ingress(self.pipeline, port, ffi.from_buffer(data), len(data), self.clock(),
                          self._out, MAX_JOBS)
        return self._jobs(n, self._out)

    def run_egress(self, job: NativeJob, enq_qdepth: int, deq_qdepth: int,  # type: ignore[override]
                   enq_timestamp: int, deq_timedelta: int
                   ) -> tuple[list[tuple[int, bytes]], list[NativeJob]]:
        """Egress of one dequeued job, in C (see `V1Switch.run_egress`)."""
        if job.ptr is None:
            raise StateError("this job already went through egress")
        ptr = job.ptr
        ffi.gc(ptr, None)   # egress consumes (frees) the C job: no destructor any more
        job.ptr = None
        out = self._more
        frame = self._frame
        n = self._egress(self.pipeline, ptr, enq_qdepth, deq_qdepth, enq_timestamp,
                         deq_timedelta, self.clock(), frame, out, MAX_JOBS)
        if frame.len:
            sent = [(job.port, ffi.buffer(self._frame_buf, frame.len)[:])]
        else:  # nothing, or an empty frame (the Python engine sends those)
            sent = [(job.port, b"")] if self._lib.p4n_egress_sent(self.pipeline) else []
        return sent, self._jobs(n, out)

    # ------------------------------------------------------------------ mirroring to C
    @staticmethod
    def _check(rc: int, what: str) -> None:
        if rc != 0:
            raise ProgramError(f"native pipeline refused {what} (out of memory?)")

    def _sync_all(self) -> None:
        """Everything the Python load set up: entries, defaults of every table."""
        for name, tbl in self.tables.items():
            for rec in tbl.entries.values():
                self._push_entry(name, rec)
            self._push_default(name)

    def _args(self, action: int, args: tuple | list) -> tuple[Any, int]:
        """The C array of action `action`'s parameters and its length in words (a
        parameter wider than 64 bits is two, least significant first:
        `ccodegen.expressions.arg_layout`)."""
        widths = self.program.context.wide_args.get(action)
        if widths:
            args = [w for a, width in zip(args, widths) for w in _words(a, 2 if width > 64 else 1)[::-1]]
        return ffi.new("uint64_t[]", list(args) or [0]), len(args)

    def _push_entry(self, table: str, rec: Any) -> None:
        tbl = self.tables[table]
        widths = self.program.context.wide_keys.get(table)
        checks = []   # (value or low, mask or high, 0 or a range's words) per key word
        for i, a, b, is_range in rec.checks:
            n = (widths[i] + 63) // 64 if widths else 1
            if n == 1:
                checks.append((a, b, int(is_range)))
            elif is_range:   # a range's first word says how many words it spans (runtime.h)
                checks += [(x, y, n if j == 0 else 0) for j, (x, y) in
                           enumerate(zip(_words(a, n), _words(b, n)))]
            else:            # a key field wider than 64 bits: its words, most significant first
                checks += [(x, y, 0) for x, y in zip(_words(a, n), _words(b, n))]
        lo = [c[0] for c in checks] or [0]
        hi = [c[1] for c in checks] or [0]
        rng = [c[2] for c in checks] or [0]
        plen = rec.dkey[0] if tbl.mode == "lpm" else 0
        prio = rec.priority if rec.priority is not None else 0
        if rec.ref is not None:
            action, args = rec.ref.id, rec.ref.args
        else:
            action, args = -1, ()
        rc = self._lib.p4n_table_add(
            self.pipeline, self.program.table_ix[table], rec.handle, ffi.new("uint64_t[]", lo),
            ffi.new("uint64_t[]", hi), ffi.new("uint8_t[]", rng), plen, prio, action,
            *self._args(action, args), -1 if rec.mbr is None else rec.mbr,
            -1 if rec.grp is None else rec.grp)
        self._check(rc, f"an entry of table {table!r}")

    def _push_default(self, table: str) -> None:
        tbl = self.tables[table]
        t = self.program.table_ix[table]
        if tbl.default_grp is not None:
            rc = self._lib.p4n_table_set_default(self.pipeline, t, -1, *self._args(-1, ()),
                                                 tbl.default_grp)
        elif tbl.default is not None:
            rc = self._lib.p4n_table_set_default(self.pipeline, t, tbl.default.id,
                                                 *self._args(tbl.default.id, tbl.default.args), -1)
        else:
            rc = self._lib.p4n_table_set_default(self.pipeline, t, -1, *self._args(-1, ()), -1)
        self._check(rc, f"the default entry of table {table!r}")

    def _push_member(self, profile: str, mbr: int) -> None:
        prof = self.profiles[profile]
        ref = prof.members.get(mbr)
        action, args = (ref.id, ref.args) if ref is not None else (-1, ())
        rc = self._lib.p4n_member_set(self.pipeline, self.program.profile_ix[profile], mbr,
                                      action, *self._args(action, args))
        self._check(rc, f"a member of action profile {profile!r}")

    def _push_group(self, profile: str, grp: int) -> None:
        members = self.profiles[profile].groups.get(grp)
        n = -1 if members is None else len(members)
        rc = self._lib.p4n_group_set(self.pipeline, self.program.profile_ix[profile], grp, n,
                                     ffi.new("uint32_t[]", list(members or []) or [0]))
        self._check(rc, f"a group of action profile {profile!r}")

    def _push_meter(self, mid: int, t: int, idx: int, meter: Any) -> None:
        rates = meter.rates
        n = len(rates)
        rc = self._lib.p4n_meter_set(
            self.pipeline, mid, t, idx, int(meter.configured), int(meter.packets), n, meter.t0,
            ffi.new("double[]", [r[0] for r in rates] or [0]),
            ffi.new("int64_t[]", [r[1] for r in rates] or [0]),
            ffi.new("int64_t[]", [r[2] for r in rates] or [0]),
            ffi.new("int64_t[]", [r[3] for r in rates] or [0]),
            ffi.new("int[]", [r[4] for r in rates] or [0]))
        self._check(rc, "a meter's rates")

    def _push_mgrps(self) -> None:
        groups = set(self.rep.groups)
        for mgrp in self._mgrps - groups:
            self._check(self._lib.p4n_mgrp_set(self.pipeline, mgrp, -1, ffi.NULL, ffi.NULL),
                        "a multicast group")
        for mgrp in groups:
            copies = self.rep.replicate(mgrp)
            rc = self._lib.p4n_mgrp_set(self.pipeline, mgrp, len(copies),
                                        ffi.new("uint32_t[]", [c[0] for c in copies] or [0]),
                                        ffi.new("uint32_t[]", [c[1] for c in copies] or [0]))
            self._check(rc, "a multicast group")
        self._mgrps = groups

    def _push_session(self, session: int) -> None:
        port, mgrp = self.rep.sessions.get(session, (None, None))
        rc = self._lib.p4n_session_set(self.pipeline, session, -1 if port is None else port,
                                       -1 if mgrp is None else mgrp)
        self._check(rc, f"mirroring session {session}")

    def _push_vset(self, name: str) -> None:
        vs = self.value_sets[name]
        values = [v for v in vs.exact] + [pv for pv, _pm in vs.masked]
        masks = [(1 << 64) - 1] * len(vs.exact) + [pm for _pv, pm in vs.masked]
        rc = self._lib.p4n_vset_set(self.pipeline, self.program.vset_ix[name], len(values),
                                    ffi.new("uint64_t[]", values or [0]),
                                    ffi.new("uint64_t[]", masks or [0]))
        self._check(rc, f"value set {name!r}")

    # ------------------------------------------------------------------ tables
    def table_add(self, table: str, action: str, match: list, args: list[int],
                  priority: int | None = None) -> int:
        handle = super().table_add(table, action, match, args, priority)
        self._push_entry(table, self.tables[table].entries[handle])
        return handle

    def table_modify(self, table: str, handle: int, action: str, args: list[int]) -> None:
        super().table_modify(table, handle, action, args)
        ref = self.tables[table].entries[handle].ref
        rc = self._lib.p4n_table_set_action(self.pipeline, self.program.table_ix[table], handle,
                                            ref.id, *self._args(ref.id, ref.args))
        self._check(rc, f"an entry of table {table!r}")

    def table_delete(self, table: str, handle: int) -> None:
        super().table_delete(table, handle)
        self._check(self._lib.p4n_table_delete(self.pipeline, self.program.table_ix[table], handle),
                    f"an entry of table {table!r}")

    def table_set_default(self, table: str, action: str, args: list[int]) -> None:
        super().table_set_default(table, action, args)
        self._push_default(table)

    def table_reset_default(self, table: str) -> None:
        super().table_reset_default(table)
        self._push_default(table)

    def table_clear(self, table: str) -> None:
        handles = list(self._table(table).entries)
        super().table_clear(table)
        for h in handles:
            self._check(self._lib.p4n_table_delete(self.pipeline, self.program.table_ix[table], h),
                        f"an entry of table {table!r}")

    def table_indirect_add(self, table: str, match: list, mbr: int,
                           priority: int | None = None) -> int:
        handle = super().table_indirect_add(table, match, mbr, priority)
        self._push_entry(table, self.tables[table].entries[handle])
        return handle

    def table_indirect_add_with_group(self, table: str, match: list, grp: int,
                                      priority: int | None = None) -> int:
        handle = super().table_indirect_add_with_group(table, match, grp, priority)
        self._push_entry(table, self.tables[table].entries[handle])
        return handle

    def table_indirect_set_default(self, table: str, mbr: int) -> None:
        super().table_indirect_set_default(table, mbr)
        self._push_default(table)

    def table_indirect_set_default_with_group(self, table: str, grp: int) -> None:
        super().table_indirect_set_default_with_group(table, grp)
        self._push_default(table)

    def act_prof_add_member(self, profile: str, action: str, args: list[int]) -> int:
        mbr = super().act_prof_add_member(profile, action, args)
        self._push_member(profile, mbr)
        return mbr

    def act_prof_modify_member(self, profile: str, mbr: int, action: str,
                               args: list[int]) -> None:
        super().act_prof_modify_member(profile, mbr, action, args)
        self._push_member(profile, mbr)

    def act_prof_delete_member(self, profile: str, mbr: int) -> None:
        super().act_prof_delete_member(profile, mbr)
        self._push_member(profile, mbr)

    def act_prof_create_group(self, profile: str) -> int:
        grp = super().act_prof_create_group(profile)
        self._push_group(profile, grp)
        return grp

    def act_prof_delete_group(self, profile: str, grp: int) -> None:
        super().act_prof_delete_group(profile, grp)
        self._push_group(profile, grp)

    def act_prof_add_member_to_group(self, profile: str, mbr: int, grp: int) -> None:
        super().act_prof_add_member_to_group(profile, mbr, grp)
        self._push_group(profile, grp)

    def act_prof_remove_member_from_group(self, profile: str, mbr: int, grp: int) -> None:
        super().act_prof_remove_member_from_group(profile, mbr, grp)
        self._push_group(profile, grp)

    # ------------------------------------------------------------------ externs
    def _cells(self, fn: Any, *args: Any) -> tuple[int, int]:
        pk, by = ffi.new("uint64_t *"), ffi.new("uint64_t *")
        self._check(fn(self.pipeline, *args, pk, by, 0), "a counter read")
        return pk[0], by[0]

    def _write_cells(self, fn: Any, packets: int, nbytes: int, *args: Any) -> None:
        pk, by = ffi.new("uint64_t *", packets), ffi.new("uint64_t *", nbytes)
        self._check(fn(self.pipeline, *args, pk, by, 1), "a counter write")

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        tbl = self._direct_counter_table(name)
        if tbl is not None:
            return self.table_counter_read(tbl.name, index)
        self._counter(name).check(index)
        return self._cells(self._lib.p4n_counter, self.program.counter_ix[name], index)

    def counter_write(self, name: str, index: int, packets: int, bytes: int) -> None:
        tbl = self._direct_counter_table(name)
        if tbl is not None:
            self.table_counter_write(tbl.name, index, packets, bytes)
            return
        self._counter(name).check(index)
        self._write_cells(self._lib.p4n_counter, packets, bytes, self.program.counter_ix[name],
                          index)

    def counter_reset(self, name: str) -> None:
        tbl = self._direct_counter_table(name)
        if tbl is not None:
            for h in tbl.entries:
                self._write_cells(self._lib.p4n_entry_counter, 0, 0,
                                  self.program.table_ix[tbl.name], h)
            return
        arr = self._counter(name)
        for i in range(arr.size):
            self._write_cells(self._lib.p4n_counter, 0, 0, self.program.counter_ix[name], i)

    def table_counter_read(self, table: str, handle: int) -> tuple[int, int]:
        super().table_counter_read(table, handle)  # the Python engine's checks
        return self._cells(self._lib.p4n_entry_counter, self.program.table_ix[table], handle)

    def table_counter_write(self, table: str, handle: int, packets: int, bytes: int) -> None:
        super().table_counter_write(table, handle, packets, bytes)
        self._write_cells(self._lib.p4n_entry_counter, packets, bytes,
                          self.program.table_ix[table], handle)

    def register_read(self, name: str, index: int) -> int:
        super().register_read(name, index)
        value = ffi.new("uint64_t[2]")   # a cell of more than 64 bits is two words (api.h)
        self._check(self._lib.p4n_register(self.pipeline, self.program.register_ix[name], index,
                                           value, 0), "a register read")
        return value[0] | value[1] << 64

    def register_write(self, name: str, index: int, value: int) -> None:
        super().register_write(name, index, value)
        cell = ffi.new("uint64_t[2]", _words(self.registers[name].values[index], 2)[::-1])
        self._check(self._lib.p4n_register(self.pipeline, self.program.register_ix[name], index,
                                           cell, 1), "a register write")

    def register_reset(self, name: str) -> None:
        super().register_reset(name)
        zero = ffi.new("uint64_t[2]")
        for i in range(self.registers[name].size):
            self._lib.p4n_register(self.pipeline, self.program.register_ix[name], i, zero, 1)

    def meter_set_rates(self, name: str, index: int, rates: list[tuple[float, int]]) -> None:
        super().meter_set_rates(name, index, rates)
        self._push_meter(self.program.meter_ix[name], -1, index,
                         self.meters[name].meters[index])

    def table_meter_set_rates(self, table: str, handle: int,
                              rates: list[tuple[float, int]]) -> None:
        super().table_meter_set_rates(table, handle, rates)
        self._push_meter(-1, self.program.table_ix[table], handle,
                         self.tables[table].entries[handle].meter)

    def meter_unset(self, name: str, index: int) -> None:
        super().meter_unset(name, index)
        self._push_meter(self.program.meter_ix[name], -1, index,
                         self.meters[name].meters[index])

    def table_meter_unset(self, table: str, handle: int) -> None:
        super().table_meter_unset(table, handle)
        self._push_meter(-1, self.program.table_ix[table], handle,
                         self.tables[table].entries[handle].meter)

    def mirroring_add(self, session: int, port: int) -> None:
        super().mirroring_add(session, port)
        self._push_session(session)

    def mirroring_add_mc(self, session: int, mgrp: int) -> None:
        super().mirroring_add_mc(session, mgrp)
        self._push_session(session)

    def mirroring_delete(self, session: int) -> None:
        super().mirroring_delete(session)
        self._push_session(session)

    def mc_mgrp_create(self, mgrp: int) -> None:
        super().mc_mgrp_create(mgrp)
        self._push_mgrps()

    def mc_mgrp_destroy(self, mgrp: int) -> None:
        super().mc_mgrp_destroy(mgrp)
        self._push_mgrps()

    def mc_node_create(self, rid: int, ports: list[int]) -> int:
        return super().mc_node_create(rid, ports)   # unassociated: no copies yet

    def mc_node_update(self, handle: int, ports: list[int]) -> None:
        super().mc_node_update(handle, ports)
        self._push_mgrps()

    def mc_node_destroy(self, handle: int) -> None:
        super().mc_node_destroy(handle)
        self._push_mgrps()

    def mc_node_associate(self, mgrp: int, handle: int) -> None:
        super().mc_node_associate(mgrp, handle)
        self._push_mgrps()

    def mc_node_dissociate(self, mgrp: int, handle: int) -> None:
        super().mc_node_dissociate(mgrp, handle)
        self._push_mgrps()

    def parser_value_set_add(self, name: str, value: int, mask: int | None = None) -> None:
        super().parser_value_set_add(name, value, mask)
        self._push_vset(name)

    def parser_value_set_clear(self, name: str) -> None:
        super().parser_value_set_clear(name)
        self._push_vset(name)

    def pop_digests(self) -> list[tuple[str, list[tuple[int, ...]]]]:
        """Digest messages since the last call, grouped by digest name (first-seen order)."""
        grouped: dict[str, list[tuple[int, ...]]] = {}
        buf = ffi.new("uint64_t[]", DIGEST_WORDS)
        while True:
            n = self._lib.p4n_digest_take(self.pipeline, buf, DIGEST_WORDS)
            if n <= 0:
                break
            words = list(buf[0:n])
            i = 0
            while i < n:
                lid, count = words[i], words[i + 1]
                name, fields = self._learn_info[lid]
                vals, at = [], i + 2
                for f, nw in fields:   # a field wider than 64 bits: words, least significant first
                    vals.append(sum(w << (64 * j) for j, w in enumerate(words[at:at + nw])))
                    at += nw
                grouped.setdefault(name, []).append(tuple(
                    (v & f.mask) - (1 << f.width) if f.signed and (v & f.mask) >> (f.width - 1)
                    else v & f.mask for v, (f, _nw) in zip(vals, fields)))
                i += 2 + count
        return list(grouped.items())

    def set_crc_parameters(self, calculation: str, poly: int, init: int, xor_out: int,
                           reflect_in: bool, reflect_out: bool) -> None:
        super().set_crc_parameters(calculation, poly, init, xor_out, reflect_in, reflect_out)
        rc = self._lib.p4n_crc_params(self.pipeline, self.program.calc_ix[calculation],
                                      poly, init, xor_out, int(reflect_in), int(reflect_out))
        self._check(rc, f"the CRC parameters of {calculation!r}")


def make_engine(bmv2_json: dict, engine: str = "auto", **kwargs: Any) -> V1Switch:
    """The switch engine `engine` chooses: "native", "python", or "auto" (native when
    the C engine runs every construct of the program, else Python, said once in the
    log with the construct and its place in the JSON). "native" refuses such a program
    with the same message (`Unsupported`)."""
    if engine == "python":
        return V1Switch(bmv2_json, **kwargs)
    if engine not in ("native", "auto"):
        raise ValueError(f"unknown engine {engine!r} (native, python or auto)")
    try:
        return NativeSwitch(bmv2_json, **kwargs)
    except Unsupported as exc:
        if engine == "native":
            raise
        if str(exc) not in _SAID:
            _SAID.add(str(exc))
            log.warning("the native engine does not run this program (%s): using the Python "
                        "engine", exc)
        return V1Switch(bmv2_json, **kwargs)


#: Fallback messages already logged (a program reloaded again and again says it once).
_SAID: set[str] = set()
