"""Session-wide hooks: how `make test` lays the suite out over pytest-xdist workers,
p4runtime-shell's venv made in the background, and the fuzz and fault tests' closing
note (tests/fuzzkit.py).

The suite's wall time is the modules that bring up namespaces, Mininet or a fabric:
they wait on dilated emulated time and leave the CPUs mostly idle, while the unit tests
are CPU work. `make test` runs ``-n 2 --dist loadgroup`` with the groups below: each of
NETNS_GROUPS is one work unit (its modules one after another on one worker, so module
fixtures and node names behave as in a serial run), every other module a unit of its
own (its module fixtures built once). The namespace groups are scheduled first: they
are the long poles. Switches and agents run SCHED_RR (emulation/realtime.py), so the
unit tests beside them take the CPU only when the fabric does not need it; each fabric
test still checks that its run was faithful.

The groups are applied by a scheduler of our own, not by ``xdist_group`` marks: xdist
3.8 marks a test's group by rewriting ``item._nodeid``, which pytest 9 no longer reads.

p4runtime-shell's venv (`testbed.clients`, a minute of pip on a fresh clone) is made on
a thread of the first worker from the session's start, so its test, late in its
namespace group (NETNS_GROUPS' order is the run order), finds it ready instead of holding
that group up.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

from fuzzkit import closing_note
from testbed.clients import p4runtime_shell

# Modules that create network namespaces: one group, one fabric at a time. Two groups
# side by side (3 workers) took the suite to 7 min but left fabric runs unfaithful on 2
# cores (a switch's p99 lateness 16 packet times, GOR's gain lost under the load); with
# the native switches and NICs again (2026-12-06, -n 2, load ~3-5 from other work): 7:00
# instead of 8:56, but 8 failures (p99 lateness 3-20 packet times, stock+GOR 0.33).
# A second group of the fabrics that carry little traffic (the prompt, pings, P4Runtime,
# captures) beside the first saved ~1.5 min, but the fabrics it brings up start their
# switches and agents under SCHED_RR at the first group's own priorities, so their
# start-up (a second of imports each) competes with the first group's switches (one
# suite run beside it, 2026-12-07: the three-tier ring's switch departures p99 10.8
# packet times, load 6; stop 36's CI failed beside it too): one group again. Agents now
# set up before they turn real-time; the switches' shared process doing the same, with
# the quiet group back, was no faster and was backed out (docs/architecture.md).
NETNS_GROUPS: dict[str, tuple[str, ...]] = {
    "netns": (
        "test_tccl_fabric", "test_gor_fabric", "test_faults_fabric", "test_gor_repl",
        "test_topo_cluster", "test_fabric_run", "test_insight_tshark",
        "test_fabric_bringup", "test_insight_fabric", "test_switch_device_loop",
        "test_switch_device_net", "test_switch_device_p4rt", "test_switch_fuzz_frames",
        "test_gor_gain", "test_experiments_failure", "test_experiments_moe",
        "test_experiments_pcap", "test_experiments_demo", "test_compat_p4runtime_shell",
        "test_threetier_fabric", "test_tccl_agent_net", "test_validity_fabric",
        "test_pfc_incast", "test_emulation_fidelity", "test_native_loop",
        "test_topo_namespaces",
    ),
}
_GROUP_OF = {module: group for group, modules in NETNS_GROUPS.items() for module in modules}
_RANK = {group: rank for rank, group in enumerate(NETNS_GROUPS)}
# A namespace module's place in its group's run: the order listed above, not pytest's
# alphabetical one (which put test_compat_p4runtime_shell first, waiting on its venv).
_PLACE = {module: place for modules in NETNS_GROUPS.values() for place, module in enumerate(modules)}


def group_of(nodeid: str) -> str:
    """The work unit of test ``nodeid``: its namespace group, or its module's file."""
    path = nodeid.split("::", 1)[0]
    return _GROUP_OF.get(Path(path).stem, path)


class SuiteScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with `group_of` as the scope, units handed out in
    collection order (which `pytest_collection_modifyitems` starts with the groups)."""

    def __init__(self, config: pytest.Config, log=None) -> None:
        super().__init__(config, log)
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log) -> LoadScopeScheduling | None:
    """``--dist loadgroup``: the groups above (other modes as xdist has them)."""
    return SuiteScheduling(config, log) if config.getvalue("dist") == "loadgroup" else None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """An xdist worker's temporary directories one level below the run's, named by the
    worker's number: xdist's ``popen-gwN`` would lengthen every tmp_path by 10
    characters, and the agents' control sockets in run directories there would pass
    the 107 a Unix socket path may have."""
    worker = getattr(config, "workerinput", None)
    if worker is not None and config.option.basetemp:
        config.option.basetemp = str(Path(config.option.basetemp).parent / worker["workerid"].removeprefix("gw"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker, the namespace groups' tests first, the groups and each
    group's modules in NETNS_GROUPS' order (a stable sort: a module's tests, and the
    rest, keep their order); a serial run keeps pytest's order."""
    if hasattr(config, "workerinput"):
        def key(item: pytest.Item) -> tuple[int, int]:
            module = Path(item.nodeid.split("::", 1)[0]).stem
            return _RANK.get(group_of(item.nodeid), len(_RANK)), _PLACE.get(module, 0)
        items.sort(key=key)


# The module that uses p4runtime-shell's venv (its fixture waits for the venv's lock).
CLIENT_VENV_MODULE = "test_compat_p4runtime_shell"
_client_venv: threading.Thread | None = None


def _make_client_venv() -> None:
    """p4runtime-shell's venv, made ahead of its test. A failure is left to the test's
    fixture: its own `p4runtime_shell` call tries again and reports pip's output."""
    try:
        p4runtime_shell()
    except (RuntimeError, subprocess.TimeoutExpired):
        pass


def pytest_collection_finish(session: pytest.Session) -> None:
    """On the first worker (or a serial run), when the p4runtime-shell test is among the
    tests, start making its venv on a thread (`testbed.clients` locks it, so the test's
    fixture waits for this build rather than starting another)."""
    global _client_venv
    worker = getattr(session.config, "workerinput", None)
    if worker is not None and worker["workerid"] != "gw0":
        return
    if any(Path(item.nodeid.split("::", 1)[0]).stem == CLIENT_VENV_MODULE for item in session.items):
        _client_venv = threading.Thread(target=_make_client_venv, name="client-venv", daemon=True)
        _client_venv.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Let a venv still being made finish (a pip killed halfway would leave it to be
    made again from scratch next time)."""
    if _client_venv is not None:
        _client_venv.join()


def pytest_terminal_summary(terminalreporter) -> None:
    lines = closing_note()
    if lines:
        terminalreporter.section("fuzz and fault figures")
        for line in lines:
            terminalreporter.write_line(line)
