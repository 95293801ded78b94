"""stop_process: a polite stop for cooperative processes, SIGKILL for the rest."""

import signal
import subprocess
import sys

from topo.processes import stop_process


def test_a_running_process_ends_on_sigterm():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert stop_process(proc, 10) == -signal.SIGTERM


def test_a_process_ignoring_sigterm_is_killed_after_the_grace_period():
    proc = subprocess.Popen([sys.executable, "-c",
                             "import signal, sys, time\n"
                             "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                             "print('ready', flush=True)\n"
                             "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    assert stop_process(proc, 0.2) == -signal.SIGKILL
    proc.stdout.close()


def test_an_exited_process_keeps_its_status():
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait()
    assert stop_process(proc, 1) == 3
