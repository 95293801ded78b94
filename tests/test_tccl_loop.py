"""The agent's event loop in time: it reads and sleeps on the fabric's emulation clock
(the agent takes it from ``--clock`` or ASTRAL_CLOCK, the launcher hands every agent
the same one) and wakes only when something is due or arrives. No root needed."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from emulation.clock import EmulationClock
from topo.spec import NIC_ENV, SpecError
from tccl import agent
from tccl.engine import Engine
from tccl.job import Job, RankInfo, Transport, Workload
from tccl import launch
from tccl.launch import LaunchError, resolve_nic, run_on_fabric

RANKS = tuple(RankInfo(rank=i, server="s", block=0, rail=i, iface=f"eth{i}", ip=f"10.{i}.0.1",
                       mac=f"02:00:00:00:00:{i:02x}", gateway_mac="02:ff:00:00:00:01") for i in range(2))


def nvlink_job() -> Job:
    return Job(ranks=RANKS, transport=Transport(nvlink_gbps=0.01, nvlink_latency_us=1.0), workload=Workload())


def test_engine_reads_and_waits_in_emulated_time():
    dilation = 4.0
    engine = Engine(nvlink_job(), "s", clock=EmulationClock.start(dilation))
    got = []
    # 10 kB over a 10 Mbit/s NVLink: 8 ms of emulated serialisation, 32 ms of wall time.
    engine.send(0, 1, bytes(10_000))
    wall = time.monotonic()
    assert engine.run_until(lambda: bool(got.append(engine.take(1, 0)) or got[-1]), 5)
    took = time.monotonic() - wall
    assert engine.clock() >= 0.008 and took >= 0.008 * dilation
    wall = time.monotonic()
    assert not engine.run_until(lambda: False, 0.02)   # a timeout is emulated seconds too
    assert time.monotonic() - wall >= 0.02 * dilation
    engine.close()


def test_idle_loop_sleeps_until_something_arrives():
    """Nothing due: the loop sleeps through to its deadline in one wake-up, and a
    command from another thread wakes it at once."""
    engine = Engine(nvlink_job(), "s")
    engine.run_until(lambda: False, 0.3)
    assert engine.turns <= 2        # the first turn, and the one at the deadline
    answered: list[int] = []
    threading.Timer(0.05, lambda: engine.call(lambda: answered.append(42))).start()
    started = time.monotonic()
    assert engine.run_until(lambda: bool(answered), 5)
    assert time.monotonic() - started < 2.5      # woken by the command, not the deadline
    engine.close()


def test_agent_rejects_a_bad_clock(tmp_path, capsys):
    job = tmp_path / "job.yaml"
    nvlink_job().save(job)
    args = ["--job", str(job), "--server", "s", "--run-dir", str(tmp_path)]
    assert agent.main([*args, "--clock", "soon"]) == 2
    assert "--clock: expected <origin_ns>:<dilation>, got 'soon'" in capsys.readouterr().err
    assert agent.main([*args, "--clock", "0:0.5"]) == 2
    assert "dilation must be a finite number >= 1" in capsys.readouterr().err


class RecordingHost:
    """A stand-in for a host whose agents the launcher starts by its popen (a cluster's
    remote host; a local Mininet host's are forked by the spawner): records the agent
    command, runs a process that only writes the results file the launcher reads back."""

    def __init__(self, commands: list[list[str]]) -> None:
        self.commands = commands

    def popen(self, cmd: list[str], **kwargs) -> subprocess.Popen:
        self.commands.append(cmd)
        run_dir, server = Path(cmd[cmd.index("--run-dir") + 1]), cmd[cmd.index("--server") + 1]
        out = run_dir / f"results-{server}.json"
        # A remote host's popen: the launcher sends the output to the agent's log.
        return subprocess.Popen([sys.executable, "-c", f"open({str(out)!r}, 'w').write('{{}}')"], **kwargs)


class FakeFabric:
    """What the launcher needs of a fabric, with hosts made by ``host``."""

    spec = SimpleNamespace(rt_priority=0, nic="python")   # normal scheduling: --rt-priority 0
    clock = None

    def __init__(self, run_dir: Path, host) -> None:
        self.run_dir, self.host = run_dir, host


TWO_SERVERS = (RANKS[0], RankInfo(1, "t", 0, 0, "eth0", "10.1.0.1", "02:00:00:00:01:00", "02:ff:00:00:00:01"))


def test_launcher_gives_every_agent_the_same_clock(tmp_path):
    commands: list[list[str]] = []
    clock = EmulationClock.start(3.0)
    results = run_on_fabric(FakeFabric(tmp_path, lambda name: RecordingHost(commands)),
                            Job(ranks=TWO_SERVERS, workload=Workload(op="sendrecv")), tmp_path / "run", clock=clock)
    assert set(results) == {"s", "t"} and len(commands) == 2
    for cmd in commands:
        assert cmd[cmd.index("--clock") + 1] == clock.encode()
    assert json.loads((tmp_path / "run" / "results-s.json").read_text()) == {}


def test_launcher_passes_the_transport_of_the_spec_or_the_caller(tmp_path, monkeypatch):
    monkeypatch.delenv(NIC_ENV, raising=False)
    commands: list[list[str]] = []
    fabric = FakeFabric(tmp_path, lambda name: RecordingHost(commands))
    job = Job(ranks=TWO_SERVERS, workload=Workload(op="sendrecv"))
    run_on_fabric(fabric, job, tmp_path / "a", clock=EmulationClock.start())
    run_on_fabric(fabric, job, tmp_path / "b", clock=EmulationClock.start(), nic="native")
    monkeypatch.setenv(NIC_ENV, "native")           # make NIC=native: over the spec's python
    run_on_fabric(fabric, job, tmp_path / "c", clock=EmulationClock.start())
    assert [cmd[cmd.index("--nic") + 1] for cmd in commands] == ["python"] * 2 + ["native"] * 4


def test_auto_is_the_native_nic_where_it_builds_else_python(monkeypatch, capsys):
    monkeypatch.delenv(NIC_ENV, raising=False)
    auto, python, native = (SimpleNamespace(nic=n) for n in ("auto", "python", "native"))
    assert resolve_nic(auto) == "native"            # it builds here (gcc, cffi: make setup)
    assert resolve_nic(python) == "python"
    monkeypatch.setattr(launch, "_native_nic_error", lambda: "FileNotFoundError: gcc")
    assert resolve_nic(auto) == "python"
    assert "native NIC does not build here (FileNotFoundError: gcc)" in capsys.readouterr().err
    monkeypatch.setenv(NIC_ENV, "auto")             # make NIC=auto over the spec's native
    assert resolve_nic(native) == "python"
    monkeypatch.setenv(NIC_ENV, "rxe")
    with pytest.raises(SpecError, match=r"ASTRAL_NIC \(make NIC=\): one of auto, python, native, got 'rxe'"):
        resolve_nic(auto)


def test_launcher_names_the_failed_ranks_at_once_and_stops_the_others(tmp_path):
    """Agent t dies while agent s (started first) waits for it, as a peer of a killed
    agent does: the launcher reports t's ranks as soon as t is gone and stops s."""
    procs: dict[str, subprocess.Popen] = {}

    class Host:
        def __init__(self, name: str) -> None:
            self.name = name

        def popen(self, cmd: list[str], **kwargs) -> subprocess.Popen:
            code = "import sys; sys.exit(3)" if self.name == "t" else "import time; time.sleep(600)"
            procs[self.name] = subprocess.Popen([sys.executable, "-c", code], **kwargs)
            return procs[self.name]

    with pytest.raises(LaunchError) as exc:
        run_on_fabric(FakeFabric(tmp_path, Host), Job(ranks=TWO_SERVERS, workload=Workload(op="sendrecv")),
                      tmp_path / "run", timeout=120)
    assert exc.value.failed_ranks == {"t": (1,)}
    assert "t (ranks 1) exited with 3" in str(exc.value)
    assert procs["s"].poll() is not None, "the surviving agent was left running"
