"""The agent spawner (tccl/spawner.py): agents forked from a process that has imported
them behave as ``python -m tccl.agent`` started by Mininet's ``mnexec -da``.

* the same exit status and output as ``python -m tccl.agent`` for the agent's own
  errors (argparse, a missing job file, a bad clock) and for ``--help``;
* every end is reported, also of agents that end before their start is answered; a
  namespace that cannot be entered is named in the agent's log;
* (root) a spawned agent runs in the namespace it was given, in a session of its own,
  at the niceness asked for, sets up its NIC there and waits at the job's barrier; a
  signal ends it with Popen's status for it;
* (root) when the launching process dies outright, the spawner stops the agents it
  forked and exits itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Iterator

import pytest

from tccl.job import Job, RankInfo, Workload
from tccl.rundir import ready_path
from tccl.spawner import ORPHAN_GRACE_S, Spawner
from topo.namespaces import Netns, named_netns

from testkit import wait_for

ROOT = Path(__file__).resolve().parent.parent
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")


@pytest.fixture
def spawner() -> Iterator[Spawner]:
    own = Spawner()
    try:
        yield own
    finally:
        own.close()


def _as_python_m(args: list[str], tmp: Path) -> tuple[int, str]:
    out = subprocess.run([sys.executable, "-m", "tccl.agent", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    return out.returncode, out.stdout + out.stderr


def test_exit_status_and_output_are_those_of_python_m(spawner: Spawner, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    Job(ranks=(RankInfo(0, "s", 0, 0, "eth0", "10.0.0.1", "02:00:00:00:00:01", "02:ff:00:00:00:01"),),
        workload=Workload(op="sendrecv")).save(job)
    cases = [["--help"], ["--bogus"], ["--job", str(tmp_path / "missing.yaml"), "--server", "s",
                                       "--run-dir", str(tmp_path / "run")],
             ["--job", str(job), "--server", "s", "--run-dir", str(tmp_path / "run"), "--clock", "soon"]]
    for i, args in enumerate(cases):
        log = tmp_path / f"agent-{i}.log"
        code = spawner.spawn(args, log).wait(60)
        assert (code, log.read_text()) == _as_python_m(args, tmp_path), args
    assert [spawner.spawn(args, tmp_path / "x.log").wait(60) for args in cases] == [0, 2, 2, 2]


def test_a_namespace_that_cannot_be_entered_is_named_in_the_agents_log(spawner: Spawner, tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    missing = str(tmp_path / "no-such-netns")
    assert spawner.spawn(["--help"], log, netns=missing).wait(60) == 2
    assert log.read_text() == f"tccl agent: network namespace {missing}: No such file or directory\n"


def test_every_end_is_reported_also_of_agents_ending_at_once(spawner: Spawner, tmp_path: Path) -> None:
    """Agents that exit right away, started from several threads at once: each one's
    end reaches its handle (the answer naming its PID comes before its end)."""
    codes: list[int] = []

    def start(k: int) -> None:
        codes.append(spawner.spawn(["--bogus"], tmp_path / f"a{k}.log").wait(60))

    threads = [threading.Thread(target=start, args=(k,)) for k in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert codes == [2] * 24


def _pair_job(net: Netns, run_dir: Path) -> Path:
    """Servers a and b, one NIC each, joined by a veth pair; only a's agent is started,
    so it opens its NIC and waits at the start barrier for b's."""
    net.add_ns("a")
    net.add_ns("b")
    ifaces = net.add_link("a", "b")
    macs = ["02:00:0a:09:00:01", "02:00:0a:09:00:02"]
    ranks = tuple(RankInfo(k, ns, 0, 0, ifaces[k], f"10.9.0.{k + 1}", macs[k], macs[1 - k])
                  for k, ns in enumerate("ab"))
    for k, ns in enumerate("ab"):
        net.run(ns, "ip", "link", "set", ifaces[k], "address", macs[k])
    path = run_dir / "job.yaml"
    run_dir.mkdir(parents=True, exist_ok=True)
    Job(ranks=ranks, workload=Workload(op="sendrecv", sizes=(4096,), iters=1, warmup=0)).save(path)
    return path


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


@needs_root
def test_an_agent_runs_in_its_namespace_niced_in_a_session_of_its_own(spawner: Spawner, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with Netns() as net:
        job = _pair_job(net, run_dir)
        log = run_dir / "agent-a.log"
        agent = spawner.spawn(["--job", str(job), "--server", "a", "--run-dir", str(run_dir)], log,
                              netns=named_netns(net.name("a")), nice=-10)
        try:
            wait_for("agent a's ready marker (its NIC open in namespace a)",
                     lambda: ready_path(run_dir, "a").exists() or agent.poll() is not None, 30,
                     detail=lambda: log.read_text() if log.exists() else "")
            assert agent.poll() is None, log.read_text()
            assert os.stat(f"/proc/{agent.pid}/ns/net").st_ino == os.stat(named_netns(net.name("a"))).st_ino
            fields = _stat(agent.pid)
            # stat's fields after the command name: state, ppid, pgrp, session, ..., nice
            assert int(fields[3]) == agent.pid, "not a session leader"
            assert int(fields[16]) == -10
        finally:
            agent.terminate()
            code = agent.wait(30)
    assert code == -signal.SIGTERM


LAUNCHER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from tccl.spawner import spawner
    run_dir, netns = Path(sys.argv[1]), sys.argv[2]
    own = spawner()
    agent = own.spawn(["--job", str(run_dir / "job.yaml"), "--server", "a", "--run-dir", str(run_dir)],
                      run_dir / "agent-a.log", netns=netns)
    print(json.dumps({"agent": agent.pid, "spawner": own._proc.pid}), flush=True)
    time.sleep(600)
""")


def test_a_launcher_that_exits_leaves_no_spawner_behind() -> None:
    """A launcher's normal exit (the prompt's ``quit``) waits for its spawner to end: by
    the time the launcher's exit status is in, the spawner has exited and been reaped."""
    launcher = subprocess.run([sys.executable, "-c", "from tccl.spawner import spawner; print(spawner()._proc.pid)"],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert launcher.returncode == 0, launcher.stderr
    assert not Path(f"/proc/{int(launcher.stdout)}").exists()


@needs_root
def test_the_agents_are_stopped_when_their_launcher_dies(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with Netns() as net:
        _pair_job(net, run_dir)
        launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(run_dir), named_netns(net.name("a"))],
                                    cwd=ROOT, stdout=subprocess.PIPE, text=True)
        try:
            assert launcher.stdout is not None
            pids = json.loads(launcher.stdout.readline())
            wait_for("agent a's ready marker", lambda: ready_path(run_dir, "a").exists(), 30)
            assert Path(f"/proc/{pids['agent']}").exists()
        finally:
            launcher.kill()
            launcher.wait()
        def gone(pid: int) -> bool:     # or a zombie: the spawner's parent was the launcher
            try:
                return _stat(pid)[0] == "Z"
            except FileNotFoundError:
                return True

        wait_for("the orphaned agent to be stopped", lambda: gone(pids["agent"]), ORPHAN_GRACE_S + 10)
        wait_for("the spawner to exit", lambda: gone(pids["spawner"]), ORPHAN_GRACE_S + 10)
