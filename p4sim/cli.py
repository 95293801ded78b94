"""``p4sim``: the toolchain's single entry point.

Each sub-command lives in the package that owns it and exposes ``main(argv) -> int``;
this module only dispatches, so that ``p4sim compile`` looks and feels like ``p4c``,
``p4sim switch`` like ``simple_switch_grpc`` and ``p4sim stf`` like p4c's STF runner.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "compile": ("p4sim.compiler.command", "compile P4-16 (v1model) to BMv2 JSON + P4Info, like p4c"),
    "stf": ("p4sim.stf.command", "run an STF test against a P4 program"),
    "switch": ("p4sim.switch.command", "run a v1model switch with a P4Runtime server, like simple_switch_grpc"),
    "switches": ("p4sim.switch.shared", "run several native switches in one process, one packet loop for all"),
    "switch-member": ("p4sim.switch.member", "run one switch of a `p4sim switches --members` process while it lives"),
}


def usage() -> str:
    lines = ["usage: p4sim COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<13} {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"p4sim: unknown command '{name}'\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    return module.main(rest)


if __name__ == "__main__":
    sys.exit(main())
