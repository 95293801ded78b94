"""A ``p4sim switch`` process for the device and client tests, always ended by PID.

The switch logs to ``<workdir>/switch.log`` and its stderr goes to
``<workdir>/switch.stderr``; it counts as started once the log says "switch running"
(its ports are open and its loop runs), so a test never sends into a switch that is
still booting. A switch that exits or does not start in time fails the test with
what it said.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence
from topo.processes import stop_process

START_TIMEOUT_S = 20.0   # a busy 2-core machine: imports and compiling the pipeline
STOP_TIMEOUT_S = 10.0    # SIGTERM, then SIGKILL after this


class SwitchProcess:
    """``python -m p4sim.cli switch <args>`` behind ``prefix`` (e.g. ``ip netns exec
    sw``); ``stop`` ends it by PID and returns its exit code."""

    def __init__(self, workdir: Path, *args: str, prefix: Sequence[str] = ()) -> None:
        self.log = workdir / "switch.log"
        self.stderr = workdir / "switch.stderr"
        cmd = [*prefix, sys.executable, "-m", "p4sim.cli", "switch", "--log-file", str(self.log), *args]
        with open(self.stderr, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + START_TIMEOUT_S
        while "switch running" not in self.log_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                state = f"exited with {self.proc.returncode}" if self.proc.poll() is not None else \
                    f"not running after {START_TIMEOUT_S:g} s"
                self.stop()
                raise AssertionError(f"switch did not start ({state}): {self.stderr.read_text()}{self.log_text()}")
            time.sleep(0.02)

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def stop(self) -> int:
        return stop_process(self.proc, STOP_TIMEOUT_S)
