"""Run parsed STF commands against a v1model switch engine, judging like p4c's runner.

The semantics are p4c's ``bmv2stf.py`` against simple_switch: control-plane commands
act in file order; every packet's outputs are collected per egress port; ``expect``
lines form a per-port queue compared *in order* with what came out of that port (the
position of an ``expect`` relative to its ``packet`` does not matter); a packet needs
only match the expected bytes as a prefix unless the pattern ends in ``$``; at the end
every missing and every unexpected packet is a failure. ``expect PORT`` without data
accepts anything on that port. The switch has only the ports that ``packet`` and
``expect`` lines name, as p4c's runner starts simple_switch with exactly those
interfaces: a packet sent to any other port is dropped (and said so), not judged.

Where p4c leaves a command to the target, this runner fixes it so that results are
reproducible: the engine runs on a virtual clock that advances 1 us per packet and
1 s per ``wait`` (so meters see well-defined times); ``no_packet`` is a checkpoint --
no port may have received more packets than the ``expect`` lines so far allow.
``add``/``setdefault`` on a table with an action profile give the entry a member of
its own (p4c's runner cannot fill such tables; groups need the CLI commands).
A failed control-plane command (unknown table, bad value) is a failure at its line,
and the run goes on, so one report shows every problem of a test.
"""

from __future__ import annotations

import operator
import sys
from dataclasses import dataclass, field
from typing import Callable, TextIO

from p4sim.stf.cli import CommandError, SwitchCli
from p4sim.stf.keys import BadEntry, engine_priority, entry_match
from p4sim.stf.program import Program, TableInfo, UnknownName
from p4sim.stf.syntax import (
    ActionCall,
    Add,
    CheckCounter,
    CliCommand,
    Command,
    Expect,
    KeyMatch,
    Loc,
    NoPacket,
    Packet,
    Remove,
    SetDefault,
    Wait,
    spaced_hex,
)
from p4sim.switch.errors import StateError
from p4sim.switch.native.engine import make_engine
from p4sim.switch.v1model import run_to_completion

PACKET_GAP_US = 1  # virtual time between two STF packets
WAIT_US = 1_000_000  # virtual time a ``wait`` lets pass

_COMPARE: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}  # fmt: skip


@dataclass
class Failure:
    loc: Loc | None
    message: str
    detail: list[str] = field(default_factory=list)

    def render(self) -> str:
        where = f"{self.loc}: " if self.loc else ""
        return "\n".join([f"{where}FAIL: {self.message}"] + [f"    {d}" for d in self.detail])


@dataclass
class StfResult:
    packets: int = 0
    expectations: int = 0
    failures: list[Failure] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        counts = f"{self.packets} packets, {self.expectations} expectations"
        if self.passed:
            return f"PASS: {counts}"
        return f"FAIL: {len(self.failures)} failure{'s' * (len(self.failures) != 1)} ({counts})"


@dataclass
class _Received:
    data: bytes
    source: Loc  # the ``packet`` line that caused it


def _hex(data: bytes) -> str:
    return spaced_hex(data.hex().upper())


class StfRunner:
    """One switch instance driven by STF commands; `run` returns the verdict."""

    def __init__(self, bmv2_json: dict, out: TextIO = sys.stdout, verbose: bool = False,
                 engine: str = "python"):
        self.program = Program(bmv2_json)
        self.now_us = 0
        self.switch = make_engine(bmv2_json, engine, clock=lambda: self.now_us)
        self.out = out
        self.verbose = verbose
        self.result = StfResult()
        self.named_entries: dict[str, tuple[str, int]] = {}  # ``add ... = NAME`` -> (table, handle)
        self.received: dict[int, list[_Received]] = {}
        self.expected: dict[int, list[Expect]] = {}
        self.any_ports: dict[int, Loc] = {}
        self.reported_extra: set[tuple[int, int]] = set()
        self.ports: set[int] = set()  # the switch's ports: those the STF names
        self.cli = SwitchCli(self.switch, self.program, self._say, self._note)

    # ------------------------------------------------------------ driver

    def run(self, commands: list[Command]) -> StfResult:
        self.ports = {c.port for c in commands if isinstance(c, (Packet, Expect))}
        for cmd in commands:
            self._note(f"{cmd.loc}: {type(cmd).__name__.lower()}")
            try:
                self._execute(cmd)
            except (CommandError, UnknownName, BadEntry, StateError) as e:
                self.result.failures.append(Failure(cmd.loc, str(e)))
        self._check_outputs()
        return self.result

    def _say(self, text: str) -> None:
        print(text, file=self.out)

    def _note(self, text: str) -> None:
        """Trace-only output (handles assigned, ...), shown with ``-v``."""
        if self.verbose:
            self._say(text)

    def _execute(self, cmd: Command) -> None:
        if isinstance(cmd, Packet):
            self._packet(cmd)
        elif isinstance(cmd, Expect):
            self._expect(cmd)
        elif isinstance(cmd, Add):
            self._add(cmd)
        elif isinstance(cmd, SetDefault):
            self._set_default(cmd)
        elif isinstance(cmd, Remove):
            self._remove(cmd)
        elif isinstance(cmd, CheckCounter):
            self._check_counter(cmd)
        elif isinstance(cmd, NoPacket):
            self._no_packet(cmd)
        elif isinstance(cmd, Wait):
            self.now_us += WAIT_US
        elif isinstance(cmd, CliCommand):
            self.cli.run(cmd)
        else:  # a new Command class without a case here is a programming error
            raise TypeError(f"unhandled STF command {cmd!r}")

    # ------------------------------------------------------------ packets

    def _packet(self, cmd: Packet) -> None:
        self.result.packets += 1
        try:
            outputs = run_to_completion(self.switch, cmd.port, cmd.data)
        except Exception as e:  # the engine failing on a packet fails the test, not the runner
            raise CommandError(f"engine error on packet from port {cmd.port}: {type(e).__name__}: {e}") from e
        finally:
            self.now_us += PACKET_GAP_US
        for port, data in outputs:
            if port not in self.ports:
                self._say(f"{cmd.loc}: note: a packet left on port {port}, which no packet or expect line "
                          "names: dropped, as on p4c's simple_switch that has no such port: "
                          f"{_hex(data) or '(no bytes)'}")
                continue
            self.received.setdefault(port, []).append(_Received(data, cmd.loc))
            self._note(f"  out port {port}: {_hex(data)}")
        for name, messages in self.switch.pop_digests():
            for values in messages:
                self._say(f"digest {name}: {', '.join(hex(v) for v in values)}")

    def _expect(self, cmd: Expect) -> None:
        self.result.expectations += 1
        if cmd.pattern is None:
            self.any_ports[cmd.port] = cmd.loc
        else:
            self.expected.setdefault(cmd.port, []).append(cmd)

    def _no_packet(self, cmd: NoPacket) -> None:
        for port, got in sorted(self.received.items()):
            if port in self.any_ports:
                continue
            allowed = len(self.expected.get(port, []))
            for i in range(allowed, len(got)):
                if (port, i) in self.reported_extra:
                    continue
                self.reported_extra.add((port, i))
                self.result.failures.append(Failure(
                    cmd.loc, f"no_packet: unexpected packet on port {port}",
                    [f"actual:   {_hex(got[i].data)}", f"(from packet at {got[i].source})"],
                ))  # fmt: skip

    def _check_outputs(self) -> None:
        fail = self.result.failures.append
        for port in sorted(set(self.received) | set(self.expected) | set(self.any_ports)):
            exps, got = self.expected.get(port, []), self.received.get(port, [])
            if port in self.any_ports:
                if exps:
                    fail(Failure(self.any_ports[port], f"port {port} has both 'expect {port}' without data and with data"))
                continue
            for i, exp in enumerate(exps):
                assert exp.pattern is not None
                if i >= len(got):
                    fail(Failure(exp.loc, f"expected packet #{i + 1} on port {port} was not received",
                                 [f"expected: {exp.pattern}"]))  # fmt: skip
                    continue
                why = exp.pattern.mismatch(got[i].data)
                if why:
                    fail(Failure(exp.loc, f"packet #{i + 1} on port {port} {why}", [
                        f"expected: {exp.pattern}",
                        f"actual:   {_hex(got[i].data)}",
                        f"(from packet at {got[i].source})",
                    ]))  # fmt: skip
            for i in range(len(exps), len(got)):
                if (port, i) not in self.reported_extra:
                    fail(Failure(got[i].source, f"unexpected packet #{i + 1} on port {port}",
                                 [f"actual:   {_hex(got[i].data)}"]))  # fmt: skip

    # ------------------------------------------------------------ tables

    def _key_values(self, table: TableInfo, keys: tuple[KeyMatch, ...]) -> list:
        values = {}
        for km in keys:
            index = self.program.key_index(table, km.field)
            if index in values:
                raise CommandError(f"key field '{table.keys[index].name}' given twice")
            values[index] = km.value
        return entry_match(table, values)

    def _action_args(self, table: TableInfo, call: ActionCall) -> tuple[str, list[int]]:
        action = self.program.action(table, call.name)
        given = dict(call.args)
        unknown = sorted(set(given) - {p.name for p in action.params})
        if unknown:
            raise CommandError(f"action '{action.name}' has no parameter '{unknown[0]}' "
                               f"(parameters: {', '.join(p.name for p in action.params) or 'none'})")  # fmt: skip
        missing = [p.name for p in action.params if p.name not in given]
        if missing:
            raise CommandError(f"action '{action.name}': missing parameter '{missing[0]}'")
        for p in action.params:
            if given[p.name] >= 1 << p.width:
                raise CommandError(f"value {given[p.name]:#x} does not fit in the {p.width}-bit "
                                   f"parameter '{p.name}' of '{action.name}'")  # fmt: skip
        return action.name, [given[p.name] for p in action.params]

    def _add(self, cmd: Add) -> None:
        table = self.program.table(cmd.table)
        match = self._key_values(table, cmd.keys)
        action, args = self._action_args(table, cmd.action)
        priority = engine_priority(table, cmd.priority)
        if table.kind == "simple":
            handle = self.switch.table_add(table.name, action, match, args, priority=priority)
        else:
            handle = self._with_new_member(
                table, action, args, lambda m: self.switch.table_indirect_add(table.name, match, m, priority=priority)
            )
        if cmd.handle_name:
            self.named_entries[cmd.handle_name] = (table.name, handle)

    def _set_default(self, cmd: SetDefault) -> None:
        table = self.program.table(cmd.table)
        action, args = self._action_args(table, cmd.action)
        if table.kind == "simple":
            self.switch.table_set_default(table.name, action, args)
        else:
            self._with_new_member(table, action, args, lambda m: self.switch.table_indirect_set_default(table.name, m))

    def _with_new_member(self, table: TableInfo, action: str, args: list[int], use: Callable[[int], object]):
        """An action-profile table's entry points at a fresh member made for it; if the
        entry is refused, the member goes too, so a failed line leaves no trace."""
        member = self.switch.act_prof_add_member(table.action_profile, action, args)
        try:
            return use(member)
        except StateError:
            self.switch.act_prof_delete_member(table.action_profile, member)
            raise

    def _remove(self, cmd: Remove) -> None:
        if cmd.table is None:
            for table in self.program.tables.values():
                if not table.has_const_entries:
                    self.switch.table_clear(table.name)
            return
        table = self.program.table(cmd.table)
        if not cmd.keys:
            self.switch.table_clear(table.name)
            return
        match = self._key_values(table, cmd.keys)
        priority = engine_priority(table, cmd.priority)
        for entry in self.switch.table_entries(table.name):
            if list(entry.match) == match and (priority is None or entry.priority == priority):
                self.switch.table_delete(table.name, entry.handle)
                return
        raise CommandError(f"table '{table.name}' has no entry with that key")

    # ------------------------------------------------------------ counters

    def _check_counter(self, cmd: CheckCounter) -> None:
        counter = self.program.counter(cmd.counter)
        if isinstance(cmd.index, str):
            if cmd.index not in self.named_entries:
                raise CommandError(f"no entry named '{cmd.index}' (name entries with 'add ... = {cmd.index}')")
            table, handle = self.named_entries[cmd.index]
            if not counter.is_direct or counter.table != table:
                raise CommandError(f"'{counter.name}' is not the direct counter of table '{table}'")
            packets, bytes_ = self.switch.table_counter_read(table, handle)
        else:
            if counter.is_direct:
                raise CommandError(f"'{counter.name}' is a direct counter: name the entry, e.g. {cmd.counter}(NAME)")
            packets, bytes_ = self.switch.counter_read(counter.name, cmd.index)
        actual = packets if cmd.kind == "packets" else bytes_
        if not _COMPARE[cmd.op](actual, cmd.value):
            self.result.failures.append(Failure(
                cmd.loc, f"counter {counter.name}({cmd.index}) {cmd.kind}: expected {cmd.op} {cmd.value}, got {actual}",
                [f"(packets={packets}, bytes={bytes_})"],
            ))  # fmt: skip
