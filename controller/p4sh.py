"""p4runtime-shell (the P4 tutorials' P4Runtime client) on one of the fabric's switches,
as the prompt's ``p4sh`` runs it: the shell's process, the election id that makes it a
backup or the primary, and GOR taking its switch back after a primary shell.

The shell's venv is not made here: it pins protobuf < 3.21 and lives in its own
(`testbed.clients`), whose python the prompt is handed (controller/ sits below testbed/).
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import IO

from controller.gor import Gor
from topo.addressing import SwitchInfo

TAKE_BACK_WAIT_S = 10.0  # emulated s GOR has to take its switch back after a primary shell


def election_id(gor_primary_id: int, primary: bool) -> int:
    """The shell's election id. Backup: one below GOR's, which P4Runtime never makes
    primary. Primary: above the highest the switch has seen (GOR's, or a previous
    shell's that GOR took over)."""
    return gor_primary_id + 1 if primary else 1


def run_shell(python: Path, sw: SwitchInfo, election: int, stdin: IO, stdout: IO) -> int:
    """Run p4runtime-shell on ``sw`` with the P4Info the switch runs, on the prompt's
    terminal, until it exits; its exit status. Ctrl-C belongs to the shell (IPython)
    meanwhile, not to the prompt."""
    cmd = [str(python), "-m", "p4runtime_sh", "--grpc-addr", sw.grpc_address,
           "--device-id", str(sw.device_id), "--election-id", f"{election >> 64},{election & (2**64 - 1)}"]
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return subprocess.run(cmd, stdin=stdin, stdout=stdout, stderr=stdout).returncode
    finally:
        signal.signal(signal.SIGINT, previous)


def taken_back(gor: Gor, switch: str, pushes: int) -> bool:
    """Wait (up to TAKE_BACK_WAIT_S emulated) until GOR has pushed ``switch``'s program
    again after ``pushes`` pushes: it is primary there again."""
    clock = gor.time
    end = clock.now() + TAKE_BACK_WAIT_S
    while gor.fleet.pushes[switch] == pushes and clock.now() < end:
        clock.sleep(0.05)
    return gor.fleet.pushes[switch] > pushes
