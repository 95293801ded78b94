"""What the tests share: waiting on a condition with a timeout, a thread's wake-ups, a
switch device's loop on a thread, and the small fabric the GOR integration tests run on, with a GOR on it and the two
tenants' jobs.

`wait_for` is the one way a test waits: it polls, returns as soon as the condition
holds, and fails the test naming what it waited for -- never a fixed sleep followed by
hope. The fabric helpers need root and Mininet; they import the product when called, so
unit tests that only wait do not pay for it.

The small fabric: 2 blocks x 2 servers x 1 rail, 2 spines, NICs and uplinks at
10 Mbit/s: two 6 Mbit/s flows overload an uplink, one does not. Sampling 1-in-4: at
RoCE MTU 4096 a flow sends a quarter of the frames it sent at MTU 1024, so this keeps
the samples per second GOR verifies a move from (was 1-in-16). Node names carry
``letter`` and this process's id, so parallel runs do not collide; everything is
stopped when the block ends, by PID.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, TypeVar

import pytest

from emulation.host import NOISY_STEAL, cpu_ticks, steal_share, wait_for_quiet_host

if TYPE_CHECKING:
    from controller.gor import Gor
    from emulation.fidelity import Fidelity
    from tccl.job import Job
    from topo.addressing import AddressPlan
    from topo.net import Fabric

T = TypeVar("T")
# The most a stolen run's second measurement is dilated (`again_if_stolen`): the host's
# stalls of 2-8 ms asked for 2.75-4 on 10 Mbit/s fabrics (docs/fabric.md); a run that
# asks for far more was late for another reason, and its second run would only be long.
MAX_STOLEN_DILATION = 6.0
UPLINK_MBPS = 10.0     # one 6 Mbit/s flow fits (60 % < 75 % safety), two do not


def wait_for(what: str, condition: Callable[[], T], timeout: float, step: float = 0.02,
             detail: Callable[[], str] | None = None) -> T:
    """Poll ``condition`` every ``step`` seconds until it returns something true, and
    return that; after ``timeout`` seconds fail the test, naming ``what`` (and adding
    ``detail()``, e.g. the tail of a log, to the message)."""
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}" + (f"\n{detail()}" if detail else ""))
        time.sleep(step)


def again_if_stolen(measure: Callable[[], T], runs: Callable[[T], Iterable[Mapping[str, Any]]] = lambda r: [r],
                    wait: Callable[[], object] = wait_for_quiet_host,
                    dilated: Callable[[float], T] | None = None) -> T:
    """``measure()``, measured once more when one of its runs (``runs(result)``: dicts
    with ``faithful`` and ``host_steal``, as `experiments.validity.runs` gives them) was
    unfaithful while the hypervisor stole NOISY_STEAL or more of the machine: such a
    run's rates say more about the host's neighbours than about the fabric
    (emulation/host.py). The second measurement stands, whatever it shows.

    With ``dilated`` (the same measurement on a fabric at a given dilation) and the
    stolen runs' ``dilation_needed`` (`emulation.fidelity.Fidelity.dilation_needed`),
    it is ``dilated(d)`` at the most they need (at most MAX_STOLEN_DILATION), taken at
    once: a packet time long enough to cover the stalls the first measurement met.
    Otherwise it waits for a quiet spell of the host first (``wait``, at most
    QUIET_WAIT_S) -- which, in three fresh-clone CI runs on 2026-12-07, did not come in
    two (the three-tier ring at 35 % steal, then 24 % after the wait)."""
    first = measure()
    stolen = [run for run in runs(first)
              if not run["faithful"] and (run.get("host_steal") or 0.0) >= NOISY_STEAL]
    if not stolen:
        return first
    needed = [run["dilation_needed"] for run in stolen if run.get("dilation_needed")]
    steal = max(run["host_steal"] for run in stolen)
    if dilated is not None and needed:
        dilation = min(max(needed), MAX_STOLEN_DILATION)
        warnings.warn(StolenRun(f"{len(stolen)} run(s) unfaithful at {steal:.0%} host steal: "
                                f"measured again at dilation {dilation:g}"), stacklevel=2)
        return dilated(dilation)
    warnings.warn(StolenRun(f"{len(stolen)} run(s) unfaithful at {steal:.0%} host steal: "
                            "measured again after waiting for a quiet host"), stacklevel=2)
    wait()
    return measure()


class StolenRun(UserWarning):
    """A check measured again by `again_if_stolen`: pytest's warnings summary names the
    test and why, so a CI log says which checks the host's steal made run twice (and
    longer)."""


def verdict_runs(verdict: "Fidelity") -> list[dict[str, Any]]:
    """One fidelity verdict (`emulation.fidelity.Fidelity`) as `again_if_stolen` reads
    runs: a switch counts the machine's steal over its window itself."""
    return [{"faithful": verdict.faithful, "host_steal": verdict.steal,
             "dilation_needed": verdict.dilation_needed()}]


def agents_run(results: Mapping[str, Mapping[str, Any]], since: Mapping[str, int]) -> list[dict[str, Any]]:
    """One job's agents as `again_if_stolen` reads runs: each agent's own verdict and
    the dilation its lateness asks for (`tccl.results.dilation_needed`), with what the
    hypervisor stole from this machine since ``since`` (`cpu_ticks` at the job's
    start): agents between namespaces have no switch to count it."""
    from tccl.results import dilation_needed

    steal = steal_share(since, cpu_ticks())
    return [{"faithful": r["fidelity"]["faithful"], "host_steal": steal,
             "dilation_needed": dilation_needed(r["fidelity"])} for r in results.values()]


class DeviceLoop:
    """A switch device's loop (``Device`` or ``NativeDevice``) on a thread:
    ``with DeviceLoop(device) as dev`` runs it, and always stops and closes it; a loop
    that crashed fails the test when the block ends."""

    def __init__(self, device) -> None:
        self.device = device
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.device.run()
        except BaseException as e:  # reported by __exit__
            self.error = e

    def __enter__(self):
        self.thread.start()
        return self.device

    def __exit__(self, *exc) -> None:
        self.device.stop()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive(), "device loop did not stop"
        self.device.close()
        if self.error is not None:
            raise AssertionError("the device loop crashed") from self.error


def context_switches(tid: int, pid: int | str = "self") -> int:
    """Times thread ``tid`` of process ``pid`` has been switched out, voluntarily or not:
    how often it ran and stopped (``/proc``). An idle loop blocked in select adds none."""
    status = Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines()
    return sum(int(line.split(":")[1]) for line in status if "ctxt_switches" in line)


def blocked(tid: int, pid: int | str = "self") -> bool:
    """Whether thread ``tid`` of process ``pid`` is asleep (state S) right now."""
    return Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "S"


def settled(tid: int, pid: int | str = "self", quiet_s: float = 0.1) -> bool:
    """Whether thread ``tid`` of process ``pid`` is asleep and stays so, not switched in
    once, for ``quiet_s``: a wait that ends, not a loop's last timed sleep before it
    does (the native loop sleeps out a wake-up quantum after each wake-up, state S too)."""
    if not blocked(tid, pid):
        return False
    before = context_switches(tid, pid)
    time.sleep(quiet_s)
    return blocked(tid, pid) and context_switches(tid, pid) == before


# Wake-ups an idle loop may take in a second: a stray frame the kernel itself puts on a
# veth (CI saw one), where a loop that polled on its quantum would run thousands of times.
IDLE_WAKEUPS = 2


@contextmanager
def small_fabric(name: str, letter: str, run_dir: Path) -> Iterator[Fabric]:
    """The fabric, started in ``run_dir``."""
    from topo.freeports import free_port_base
    from topo.net import Fabric
    from topo.spec import FabricSpec, LinkRates

    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=2, name=name,
                      links=LinkRates(host_mbps=10, uplink_mbps=UPLINK_MBPS), sample_rate=4,
                      node_prefix=f"{letter}{os.getpid() % 1000}", grpc_port_base=free_port_base(4))
    fab = Fabric(spec, run_dir=run_dir)
    try:
        fab.start()
        yield fab
    finally:
        fab.stop()


@contextmanager
def gor_on(fabric: Fabric, run_dir: Path) -> Iterator[Gor]:
    """GOR with the default thresholds on ``fabric``, its run directory ``run_dir``."""
    from controller.config import default_config
    from controller.gor import Gor

    assert fabric.pipeline is not None
    g = Gor(fabric.plan, fabric.pipeline, run_dir, default_config(fabric.plan),
            fabric=fabric)
    try:
        g.start()
        yield g
    finally:
        g.stop()


def wait_session_settled(gor: "Gor", name: str) -> None:
    """Until switch ``name``'s P4Runtime session is past finsy's quick-failure window.

    finsy reconnects to a switch whose session failed within ``_FAIL_MIN_TIME_SECS``
    (2 s) of starting only after ``_FAIL_THROTTLE_SECS`` (10 s), its throttle of a switch
    that keeps failing; so a test that stops a switch sooner after GOR connected waits
    10 s for the re-push, and waiting out the window first costs at most 2 s."""
    from controller.switches import QUICK_FAILURE_S as quick_failure_s

    pushed_at = gor.fleet.pushed_at[name]
    wait_for(f"{name}'s session older than finsy's {quick_failure_s:g} s quick-failure window",
             lambda: time.monotonic() - pushed_at > quick_failure_s, quick_failure_s + 1)


def tenant_jobs(plan: AddressPlan, spec_file: str | Path, iters: int, sender_mbps: float,
                name: str) -> list[Job]:
    """Two tenants' jobs of one flow each (b0h0 -> b1h0 and b0h1 -> b1h1), each planned
    hash-orthogonally by its own library from the fabric's spec: alone, each flow is
    the only one on its leaf, and each library gives it the first spine -- so together
    they collide there (`experiments.tenants` on the whole fabric)."""
    from experiments.gor_loop import MESSAGE_BYTES, endpoints
    from tccl.job import Job, RankInfo, Transport, Workload

    members = endpoints(plan)
    jobs = []
    for k, (s, r) in enumerate(((0, 2), (1, 3))):
        ranks = tuple(RankInfo(i, n.server, n.block, n.rail, n.intf, n.ip, n.mac, plan.switch(n.leaf).mac)
                      for i, n in enumerate((members[s], members[r])))
        jobs.append(Job(ranks, Transport(line_mbps=sender_mbps, ports="orthogonal", qps=1),
                        Workload(op="sendrecv", sizes=(MESSAGE_BYTES,), iters=iters, warmup=0, pairs=((0, 1),)),
                        name=f"{name}-{'ab'[k]}", fabric=str(spec_file)))
    return jobs
