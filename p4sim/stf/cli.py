"""The simple_switch_CLI commands an STF file may contain, carried out on the engine.

p4c's BMv2 runner hands these lines to ``simple_switch_CLI`` unchanged, so they keep
the CLI's syntax and meaning: positional arguments, BMv2 handles (members, groups,
multicast nodes count from 0 in creation order), BMv2 priorities (lower wins) in
``table_indirect_add``. One ``do_<name>`` method per command, its docstring the
CLI usage; `syntax.CLI_SIGNATURES` types the arguments before they arrive here.
Names go through the same suffix matching as the rest of the STF file.
"""

from __future__ import annotations

from typing import Callable

from p4sim.stf.keys import engine_priority, to_match
from p4sim.stf.program import Program
from p4sim.stf.syntax import CliCommand, KeyValue


class CommandError(Exception):
    """A command this program/engine cannot carry out (reported as a failure at its line)."""


class SwitchCli:
    """simple_switch_CLI on top of a `V1Switch`; `say` prints what the CLI would print."""

    def __init__(self, switch, program: Program, say: Callable[[str], None], note: Callable[[str], None]):
        self.sw = switch
        self.program = program
        self.say = say  # output a person asked for (reads)
        self.note = note  # trace output (handles assigned), shown only when verbose

    def run(self, cmd: CliCommand) -> None:
        getattr(self, "do_" + cmd.name)(*cmd.args)

    # ------------------------------------------------------------ mirroring, multicast

    def do_mirroring_add(self, session: int, port: int) -> None:
        """mirroring_add SESSION PORT"""
        self.sw.mirroring_add(session, port)

    def do_mirroring_add_mc(self, session: int, mgrp: int) -> None:
        """mirroring_add_mc SESSION MGRP"""
        self.sw.mirroring_add_mc(session, mgrp)

    def do_mirroring_delete(self, session: int) -> None:
        """mirroring_delete SESSION"""
        self.sw.mirroring_delete(session)

    def do_mc_mgrp_create(self, mgrp: int) -> None:
        """mc_mgrp_create MGRP"""
        self.sw.mc_mgrp_create(mgrp)

    def do_mc_mgrp_destroy(self, mgrp: int) -> None:
        """mc_mgrp_destroy MGRP"""
        self.sw.mc_mgrp_destroy(mgrp)

    def do_mc_node_create(self, rid: int, ports: tuple[int, ...]) -> None:
        """mc_node_create RID PORT...  (prints the node handle)"""
        self.note(f"mc_node_create: node created with handle {self.sw.mc_node_create(rid, list(ports))}")

    def do_mc_node_update(self, handle: int, ports: tuple[int, ...]) -> None:
        """mc_node_update HANDLE PORT..."""
        self.sw.mc_node_update(handle, list(ports))

    def do_mc_node_destroy(self, handle: int) -> None:
        """mc_node_destroy HANDLE"""
        self.sw.mc_node_destroy(handle)

    def do_mc_node_associate(self, mgrp: int, handle: int) -> None:
        """mc_node_associate MGRP HANDLE"""
        self.sw.mc_node_associate(mgrp, handle)

    def do_mc_node_dissociate(self, mgrp: int, handle: int) -> None:
        """mc_node_dissociate MGRP HANDLE"""
        self.sw.mc_node_dissociate(mgrp, handle)

    # ------------------------------------------------------------ counters, registers, meters

    def do_counter_read(self, name: str, index: int) -> None:
        """counter_read COUNTER INDEX"""
        counter = self.program.counter(name).name
        packets, bytes_ = self.sw.counter_read(counter, index)
        self.say(f"{counter}[{index}]= packets={packets}, bytes={bytes_}")

    def do_counter_write(self, name: str, index: int, packets: int, bytes_: int) -> None:
        """counter_write COUNTER INDEX PACKETS BYTES"""
        self.sw.counter_write(self.program.counter(name).name, index, packets, bytes_)

    def do_counter_reset(self, name: str) -> None:
        """counter_reset COUNTER"""
        self.sw.counter_reset(self.program.counter(name).name)

    def do_register_read(self, name: str, index: int) -> None:
        """register_read REGISTER INDEX"""
        register = self.program.register(name)
        self.say(f"{register}[{index}]= {self.sw.register_read(register, index)}")

    def do_register_write(self, name: str, index: int, value: int) -> None:
        """register_write REGISTER INDEX VALUE"""
        self.sw.register_write(self.program.register(name), index, value)

    def do_register_reset(self, name: str) -> None:
        """register_reset REGISTER"""
        self.sw.register_reset(self.program.register(name))

    def do_meter_set_rates(self, name: str, index: int, rates: tuple[tuple[float, int], ...]) -> None:
        """meter_set_rates METER INDEX CIR:CBS PIR:PBS  (a direct meter's INDEX is the entry handle)"""
        meter = self.program.meter(name)
        if meter.is_direct:
            self.sw.table_meter_set_rates(meter.table, index, list(rates))
        else:
            self.sw.meter_set_rates(meter.name, index, list(rates))

    def do_meter_array_set_rates(self, name: str, rates: tuple[tuple[float, int], ...]) -> None:
        """meter_array_set_rates METER CIR:CBS PIR:PBS"""
        meter = self.program.meter(name)
        if meter.is_direct:
            raise CommandError(f"'{meter.name}' is a direct meter: use meter_set_rates NAME HANDLE ...")
        for index in range(meter.size):
            self.sw.meter_set_rates(meter.name, index, list(rates))

    # ------------------------------------------------------------ parser value sets

    def do_pvs_add(self, name: str, value: int) -> None:
        """pvs_add VALUE_SET VALUE"""
        self.sw.parser_value_set_add(self.program.value_set(name), value)

    def do_pvs_clear(self, name: str) -> None:
        """pvs_clear VALUE_SET"""
        self.sw.parser_value_set_clear(self.program.value_set(name))

    # ------------------------------------------------------------ action profiles and selectors

    def do_act_prof_create_member(self, profile: str, action_name: str, args: tuple[int, ...]) -> None:
        """act_prof_create_member PROFILE ACTION [ARG...]  (prints the member handle)"""
        action = self.program.any_action(action_name)
        if len(args) != len(action.params):
            raise CommandError(f"action '{action.name}' takes {len(action.params)} parameters, got {len(args)}")
        member = self.sw.act_prof_add_member(self.program.action_profile(profile), action.name, list(args))
        self.note(f"act_prof_create_member: member created with handle {member}")

    def do_act_prof_create_group(self, profile: str) -> None:
        """act_prof_create_group PROFILE  (prints the group handle)"""
        group = self.sw.act_prof_create_group(self.program.action_profile(profile))
        self.note(f"act_prof_create_group: group created with handle {group}")

    def do_act_prof_add_member_to_group(self, profile: str, member: int, group: int) -> None:
        """act_prof_add_member_to_group PROFILE MEMBER GROUP"""
        self.sw.act_prof_add_member_to_group(self.program.action_profile(profile), member, group)

    def do_act_prof_remove_member_from_group(self, profile: str, member: int, group: int) -> None:
        """act_prof_remove_member_from_group PROFILE MEMBER GROUP"""
        self.sw.act_prof_remove_member_from_group(self.program.action_profile(profile), member, group)

    def do_table_indirect_add(self, table: str, keys: tuple[KeyValue, ...], rest: tuple[int, ...]) -> None:
        """table_indirect_add TABLE KEY... => MEMBER [PRIORITY]"""
        self._indirect_add(table, keys, rest, with_group=False)

    def do_table_indirect_add_with_group(self, table: str, keys: tuple[KeyValue, ...],
                                         rest: tuple[int, ...]) -> None:  # fmt: skip
        """table_indirect_add_with_group TABLE KEY... => GROUP [PRIORITY]"""
        self._indirect_add(table, keys, rest, with_group=True)

    def do_table_indirect_set_default(self, table: str, member: int) -> None:
        """table_indirect_set_default TABLE MEMBER"""
        self.sw.table_indirect_set_default(self.program.table(table).name, member)

    def do_table_indirect_set_default_with_group(self, table: str, group: int) -> None:
        """table_indirect_set_default_with_group TABLE GROUP"""
        self.sw.table_indirect_set_default_with_group(self.program.table(table).name, group)

    def _indirect_add(self, table_name: str, keys: tuple[KeyValue, ...], rest: tuple[int, ...],
                      with_group: bool) -> None:  # fmt: skip
        table = self.program.table(table_name)
        if len(keys) != len(table.keys):
            raise CommandError(f"table '{table.name}' has {len(table.keys)} key fields, got {len(keys)} values")
        if len(rest) not in (1, 2):
            raise CommandError("expected '=> HANDLE [PRIORITY]' after the key values")
        match = [to_match(k, v) for k, v in zip(table.keys, keys)]
        priority = engine_priority(table, rest[1] if len(rest) == 2 else None, stf_ranking=False)
        add = self.sw.table_indirect_add_with_group if with_group else self.sw.table_indirect_add
        self.note(f"entry added to {table.name} with handle {add(table.name, match, rest[0], priority=priority)}")
