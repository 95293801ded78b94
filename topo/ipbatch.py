"""Kernel configuration in batches: many ``ip`` commands given to one ``ip -batch``.

An ``ip`` process costs ~2 ms here, and a fabric's start configures a few hundred
interfaces, cables, routes and rules; one ``ip -batch`` per node does them all. The
commands go through a node's shell (Mininet's ``node.cmd``), whose terminal keeps at most
4095 characters of a line, so long lists are cut into several batches.
"""

from __future__ import annotations

from typing import Any

# Mininet hands a command to the host's shell through a terminal, whose line discipline
# keeps at most 4095 characters of a line: an 8-NIC server's commands joined are longer.
MAX_COMMAND_LINE = 2048


def shell_batches(cmds: list[str]) -> list[list[str]]:
    """``cmds`` in order, in batches whose joined line stays under MAX_COMMAND_LINE
    (none for none)."""
    out: list[list[str]] = [[]]
    for cmd in cmds:
        if out[-1] and len("; ".join(out[-1] + [cmd])) > MAX_COMMAND_LINE:
            out.append([])
        out[-1].append(cmd)
    return out if cmds else []


def ip_batch(lines: list[str]) -> list[str]:
    """Shell commands that give ``lines`` (``ip`` commands without the ``ip``: "link set
    dev x mtu 4200") to one ``ip -batch`` each, as few as MAX_COMMAND_LINE allows. A
    refused line prints ``Command failed -:N``, N counting from 1 in its command."""
    return [f"printf '%s\\n' {' '.join(batch)} | ip -batch -"
            for batch in shell_batches([f"'{line}'" for line in lines])]


def first_refusal(node: Any, commands: list[str]) -> tuple[str, str] | None:
    """Run ``commands`` in order in ``node``'s shell (Mininet's ``node.cmd``), where a
    command that works prints nothing; the first that printed something, with what it
    printed -- ``(output, command)`` -- and nothing run after it; None if all ran quietly."""
    for command in commands:
        out = node.cmd(command).strip()
        if out:
            return out, command
    return None
