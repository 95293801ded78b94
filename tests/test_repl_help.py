"""The prompt's `help` (no root, no fabric): the testbed's commands grouped, one line
each, before Mininet's own commands and text."""

from __future__ import annotations

import io

from controller.repl import COMMAND_GROUPS, GorCLI


def test_help_lists_the_testbeds_commands_grouped_one_line_each_before_mininets() -> None:
    cli = GorCLI.__new__(GorCLI)   # `help` needs neither a fabric nor GOR
    cli.stdout = io.StringIO()
    cli.do_help("")
    ours, mininet = cli.stdout.getvalue().split("Mininet's commands")
    commands = [name[3:] for name in vars(GorCLI) if name.startswith("do_") and name != "do_help"]
    for name in commands:
        assert len([line for line in ours.splitlines() if line.split()[:1] == [name]]) == 1, name
    titles = [f"  {title}:" for title, _ in COMMAND_GROUPS]
    assert [line for line in ours.splitlines() if line in titles] == titles
    # Mininet's commands follow, without the ones the testbed replaces (listed above).
    assert "pingall" in mininet.split() and "mininet> h1 ifconfig" in mininet
    assert not {"links", "link", "wait"} & set(mininet.split())
