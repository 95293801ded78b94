"""``python -m topo.cleanup`` (`make stop`): remove what a crashed `make run` left behind.

Runs ``mn -c`` (Mininet's own cleanup of namespaces, interfaces and its processes),
then ends the switch processes whose PID files are still in the run directory --
by PID, and only if that PID still runs one of our switch programs (a PID can be
reused once its process is gone).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from topo.nodes import RUN_DIR

# Command-line words that identify a switch process started by topo.nodes.
OUR_PROGRAMS = ("p4sim.cli", "simple_switch_grpc")


def is_our_switch(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    words = [w.decode(errors="replace") for w in cmdline]
    return any(os.path.basename(w) in OUR_PROGRAMS or w in OUR_PROGRAMS for w in words)


def end_leftover_switches(run_dir: Path = RUN_DIR, grace_s: float = 3.0) -> list[int]:
    """SIGTERM (then SIGKILL) every live switch process named by a PID file; returns the
    PIDs that were signalled. PID files are removed."""
    pids = []
    for pid_file in sorted(run_dir.glob("*.pid")):
        try:
            pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            pid = 0
        pid_file.unlink(missing_ok=True)
        if pid > 0 and is_our_switch(pid):
            os.kill(pid, signal.SIGTERM)
            pids.append(pid)
    deadline = time.monotonic() + grace_s
    for pid in pids:
        while is_our_switch(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if is_our_switch(pid):
            os.kill(pid, signal.SIGKILL)
    return pids


def main() -> int:
    subprocess.run(["mn", "-c"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids = end_leftover_switches()
    print(f"mn -c done; ended {len(pids)} leftover switch process(es)"
          + (f": {', '.join(map(str, pids))}" if pids else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
