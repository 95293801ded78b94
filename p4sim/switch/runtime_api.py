"""`RuntimeAPI`: the runtime-state API of a v1model switch, apart from its pipeline.

BMv2 keeps simple_switch.cpp's packet path apart from the runtime interface its
servers call; this is that interface for p4sim -- tables and their default entries,
action profiles, counters, meters, registers, clone sessions, the multicast
replication engine, parser value sets, digests and custom CRC parameters, each call
named by BMv2 JSON names as `simple_switch_CLI` names them (docs/engine-api.md).
It works on the run-time objects a switch's loading built (`v1model.V1Switch` makes
them and binds its generated code to them), so it serves both engines: `V1Switch`
is one, and `native.engine.NativeSwitch` extends it, mirroring each accepted write
into its C tables. The P4Runtime server (p4sim/runtime), the STF runner and the
device call only these methods (and `run_ingress`/`run_egress` for packets).
"""

from __future__ import annotations

from collections.abc import Callable

from . import hashes
from .errors import NoSuchName, StateError
from .externs import CounterArray, MeterArray, RegisterArray, Replication, ValueSet
from .tables import ActionInfo, ActionProfile, Entry, Table, lookup_name


class RuntimeAPI:
    """The control plane's calls on a loaded switch (see the module docstring).

    A call that raises leaves the state exactly as it was; errors are
    `errors.StateError` subclasses naming what is wrong.
    """

    # The run-time objects, made by the switch's loading (V1Switch._load).
    tables: dict[str, Table]
    profiles: dict[str, ActionProfile]
    actions: dict[int, ActionInfo]
    counters: dict[str, CounterArray]
    _direct_counters: dict[str, str]   # direct counter name -> its table
    meters: dict[str, MeterArray]
    registers: dict[str, RegisterArray]
    value_sets: dict[str, ValueSet]
    rep: Replication
    _digests: list[tuple[str, tuple[int, ...]]]
    _named_hashes: dict[str, Callable]

    # ------------------------------------------------------------------ tables
    def _table(self, name: str) -> Table:
        return lookup_name(self.tables, name, "table")

    def _profile(self, name: str) -> ActionProfile:
        return lookup_name(self.profiles, name, "action profile")

    def table_add(self, table: str, action: str, match: list, args: list[int],
                  priority: int | None = None) -> int:
        """Add an entry; returns its handle. Lower priority value = higher priority."""
        return self._table(table).add(list(match), action, list(args), priority)

    def table_modify(self, table: str, handle: int, action: str, args: list[int]) -> None:
        """Change the action and data of entry `handle` (match and priority stay)."""
        self._table(table).modify(handle, action, list(args))

    def table_delete(self, table: str, handle: int) -> None:
        """Remove entry `handle`; its handle becomes free for reuse."""
        self._table(table).delete(handle)

    def table_set_default(self, table: str, action: str, args: list[int]) -> None:
        """Set the action run on a miss (refused when the JSON made it const)."""
        self._table(table).set_default(action, list(args))

    def table_reset_default(self, table: str) -> None:
        """Restore the default entry the JSON gave (or none)."""
        self._table(table).reset_default()

    def table_clear(self, table: str) -> None:
        """Remove every entry (the default entry is kept)."""
        self._table(table).clear()

    def table_entries(self, table: str) -> list[Entry]:
        """All entries, by handle."""
        return self._table(table).list_entries()

    def table_get_default(self, table: str) -> tuple[str | None, list[int]]:
        """(action name, args) run on a miss; (None, []) when there is none."""
        d = self._table(table).default
        return (None, []) if d is None else (d.info.name, list(d.args))

    def act_prof_add_member(self, profile: str, action: str, args: list[int]) -> int:
        """Add an action-profile member (action + data); returns its handle."""
        return self._profile(profile).add_member(action, list(args))

    def act_prof_modify_member(self, profile: str, mbr: int, action: str,
                               args: list[int]) -> None:
        """Change the action and data of a member."""
        self._profile(profile).modify_member(mbr, action, list(args))

    def act_prof_delete_member(self, profile: str, mbr: int) -> None:
        """Delete a member no group, entry or default still uses."""
        self._profile(profile).delete_member(mbr)

    def act_prof_create_group(self, profile: str) -> int:
        """Create an empty group in a profile with a selector; returns its handle."""
        return self._profile(profile).create_group()

    def act_prof_delete_group(self, profile: str, grp: int) -> None:
        """Delete a group no entry or default still uses."""
        self._profile(profile).delete_group(grp)

    def act_prof_add_member_to_group(self, profile: str, mbr: int, grp: int) -> None:
        """Put member `mbr` into group `grp`."""
        self._profile(profile).add_member_to_group(mbr, grp)

    def act_prof_remove_member_from_group(self, profile: str, mbr: int, grp: int) -> None:
        """Take member `mbr` out of group `grp`."""
        self._profile(profile).remove_member_from_group(mbr, grp)

    def table_indirect_add(self, table: str, match: list, mbr: int,
                           priority: int | None = None) -> int:
        """Add an entry of an indirect table pointing to member `mbr`."""
        return self._table(table).add_indirect(list(match), mbr, None, priority)

    def table_indirect_add_with_group(self, table: str, match: list, grp: int,
                                      priority: int | None = None) -> int:
        """Add an entry of a selector table pointing to (non-empty) group `grp`."""
        return self._table(table).add_indirect(list(match), None, grp, priority)

    def table_indirect_set_default(self, table: str, mbr: int) -> None:
        """Make member `mbr` the default entry of an indirect table."""
        self._table(table).set_default_indirect(mbr, None)

    def table_indirect_set_default_with_group(self, table: str, grp: int) -> None:
        """Make group `grp` the default entry of a selector table."""
        self._table(table).set_default_indirect(None, grp)

    # ------------------------------------------------------------------ externs
    def _counter(self, name: str) -> CounterArray:
        return lookup_name(self.counters, name, "counter")

    def _direct_counter_table(self, name: str) -> Table | None:
        if name in self._direct_counters:
            return self._table(self._direct_counters[name])
        return None

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        """(packets, bytes); for a direct counter `index` is the entry handle."""
        tbl = self._direct_counter_table(name)
        if tbl is not None:
            return self.table_counter_read(tbl.name, index)
        arr = self._counter(name)
        arr.check(index)
        return arr.packets[index], arr.bytes[index]

    def counter_write(self, name: str, index: int, packets: int, bytes: int) -> None:
        """Overwrite one counter cell (for a direct counter `index` is the entry handle)."""
        tbl = self._direct_counter_table(name)
        if tbl is not None:
            self.table_counter_write(tbl.name, index, packets, bytes)
            return
        arr = self._counter(name)
        arr.check(index)
        arr.packets[index] = packets
        arr.bytes[index] = bytes

    def counter_reset(self, name: str) -> None:
        """Zero every cell of a counter (or every entry of a direct counter)."""
        tbl = self._direct_counter_table(name)
        if tbl is not None:
            for rec in tbl.entries.values():
                rec.counter[0] = rec.counter[1] = 0
            return
        self._counter(name).reset()

    def table_counter_read(self, table: str, handle: int) -> tuple[int, int]:
        """(packets, bytes) of entry `handle`'s direct counter."""
        tbl = self._table(table)
        if not tbl.with_counters:
            raise StateError(f"table {table!r} has no direct counter")
        c = tbl.get(handle).counter
        return c[0], c[1]

    def table_counter_write(self, table: str, handle: int, packets: int, bytes: int) -> None:
        """Overwrite entry `handle`'s direct counter."""
        tbl = self._table(table)
        if not tbl.with_counters:
            raise StateError(f"table {table!r} has no direct counter")
        c = tbl.get(handle).counter
        c[0], c[1] = packets, bytes

    def register_read(self, name: str, index: int) -> int:
        """One register cell."""
        arr = lookup_name(self.registers, name, "register")
        arr.check(index)
        return arr.values[index]

    def register_write(self, name: str, index: int, value: int) -> None:
        """Write one register cell (truncated to the register's width)."""
        arr = lookup_name(self.registers, name, "register")
        arr.check(index)
        if not isinstance(value, int):
            raise StateError(f"register {name!r}: value {value!r} is not an integer")
        arr.values[index] = value & ((1 << arr.bitwidth) - 1)

    def register_reset(self, name: str) -> None:
        """Zero every cell of a register."""
        arr = lookup_name(self.registers, name, "register")
        for i in range(arr.size):
            arr.values[i] = 0

    def register_size(self, name: str) -> int:
        """Number of cells of a register."""
        return lookup_name(self.registers, name, "register").size

    def meter_set_rates(self, name: str, index: int, rates: list[tuple[float, int]]) -> None:
        """Configure meter cell `index`: [(CIR, CBS), (PIR, PBS)], rates per microsecond."""
        arr = lookup_name(self.meters, name, "meter")
        arr.check(index)
        arr.meters[index].set_rates(list(rates), f"meter {name!r}[{index}]")

    def table_meter_set_rates(self, table: str, handle: int,
                              rates: list[tuple[float, int]]) -> None:
        """Configure the direct meter of entry `handle` (same rates as meter_set_rates)."""
        tbl = self._table(table)
        rec = tbl.get(handle)
        if rec.meter is None:
            raise StateError(f"table {table!r} has no direct meter")
        rec.meter.set_rates(list(rates), f"table {table!r} entry {handle}")

    def meter_unset(self, name: str, index: int) -> None:
        """Make meter cell `index` unconfigured again (green for every packet), as a
        P4Runtime Write batch's rollback needs where the cell had no rates before."""
        arr = lookup_name(self.meters, name, "meter")
        arr.check(index)
        arr.meters[index].unset()

    def table_meter_unset(self, table: str, handle: int) -> None:
        """Make entry `handle`'s direct meter unconfigured again (see `meter_unset`)."""
        rec = self._table(table).get(handle)
        if rec.meter is None:
            raise StateError(f"table {table!r} has no direct meter")
        rec.meter.unset()

    def mirroring_add(self, session: int, port: int) -> None:
        """Clone session `session` sends its copies to `port`."""
        self._check_session(session)
        self.rep.sessions[session] = (port, None)

    def mirroring_add_mc(self, session: int, mgrp: int) -> None:
        """Clone session `session` replicates its copies to multicast group `mgrp`."""
        self._check_session(session)
        self.rep.sessions[session] = (None, mgrp)

    def mirroring_delete(self, session: int) -> None:
        """Remove a clone session (clones to it are then dropped, as in BMv2)."""
        if session not in self.rep.sessions:
            raise NoSuchName(f"no mirroring session {session}")
        del self.rep.sessions[session]

    @staticmethod
    def _check_session(session: int) -> None:
        if not isinstance(session, int) or not 0 <= session <= 0xFFFF:
            raise StateError(f"mirroring session id {session!r} outside 0..65535")

    def mc_mgrp_create(self, mgrp: int) -> None:
        """Create multicast group `mgrp` (empty)."""
        self.rep.mgrp_create(mgrp)

    def mc_mgrp_destroy(self, mgrp: int) -> None:
        """Delete multicast group `mgrp` (its nodes stay, unassociated)."""
        self.rep.mgrp_destroy(mgrp)

    def mc_node_create(self, rid: int, ports: list[int]) -> int:
        """Create a replication node (rid, ports); returns its handle."""
        return self.rep.node_create(rid, list(ports))

    def mc_node_update(self, handle: int, ports: list[int]) -> None:
        """Replace a node's ports."""
        self.rep.node_update(handle, list(ports))

    def mc_node_destroy(self, handle: int) -> None:
        """Delete a node (dissociating it first)."""
        self.rep.node_destroy(handle)

    def mc_node_associate(self, mgrp: int, handle: int) -> None:
        """Add node `handle` to group `mgrp` (copies follow association order)."""
        self.rep.associate(mgrp, handle)

    def mc_node_dissociate(self, mgrp: int, handle: int) -> None:
        """Take node `handle` out of group `mgrp`."""
        self.rep.dissociate(mgrp, handle)

    def parser_value_set_add(self, name: str, value: int, mask: int | None = None) -> None:
        """Add a value (optionally masked) to a parser value set."""
        lookup_name(self.value_sets, name, "parser value set").add(value, mask)

    def parser_value_set_clear(self, name: str) -> None:
        """Empty a parser value set."""
        lookup_name(self.value_sets, name, "parser value set").clear()

    def pop_digests(self) -> list[tuple[str, list[tuple[int, ...]]]]:
        """Digest messages since the last call, grouped by digest name (first-seen order)."""
        grouped: dict[str, list[tuple[int, ...]]] = {}
        for name, values in self._digests:
            grouped.setdefault(name, []).append(values)
        self._digests = []
        return list(grouped.items())

    def set_crc_parameters(self, calculation: str, poly: int, init: int, xor_out: int,
                           reflect_in: bool, reflect_out: bool) -> None:
        """BMv2 `set_crc16_parameters`/`set_crc32_parameters` for a *_custom calculation."""
        fn = lookup_name(self._named_hashes, calculation, "calculation")
        if not isinstance(fn, hashes.Crc):
            raise StateError(f"calculation {calculation!r} is not a custom CRC")
        fn.set_parameters(poly, init, xor_out, reflect_in, reflect_out)
