"""Ending a process this project started, by its Popen handle (never by name).

Ask first (SIGTERM by default, so a launcher can tear down what it started), wait a
grace period, then SIGKILL: the one shutdown sequence the launchers, benchmarks and
tests all use.
"""

from __future__ import annotations

import signal
import subprocess


def stop_process(proc: subprocess.Popen, grace_s: float, sig: int = signal.SIGTERM) -> int:
    """Stop ``proc`` if it still runs; return its exit status."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode
