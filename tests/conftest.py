"""Session-wide hooks: how `make test` lays the suite out over pytest-xdist workers, and
the fuzz and fault tests' closing note (tests/fuzzkit.py).

The suite's wall time is the modules that bring up namespaces, Mininet or a fabric:
they wait on dilated emulated time and leave the CPUs mostly idle, while the unit tests
are CPU work. `make test` runs ``-n 3 --dist loadgroup``: the namespace modules in the
NETNS_GROUPS below, each group one work unit (its modules one after another on one
worker, so module fixtures and node names behave as in a serial run), every other
module a unit of its own (its module fixtures built once). Switches and agents run
SCHED_RR (emulation/realtime.py), so the unit tests beside them take the CPU only when
the fabric does not need it; each fabric test still checks its run was faithful.
"""

from __future__ import annotations

import pytest

from fuzzkit import closing_note

# Modules that create network namespaces, by group; a group's total wall time (measured
# with --durations) is about even, so the groups end together. The demo-like modules
# whose fabrics share node names (experiments' "" prefix, threetier's and the runner's
# "x<pid>") stay in one group.
NETNS_GROUPS: dict[str, tuple[str, ...]] = {
    "netns-tccl-gor": (
        "test_tccl_fabric", "test_gor_fabric", "test_faults_fabric", "test_gor_repl",
        "test_topo_cluster", "test_fabric_run", "test_insight_tshark", "test_fabric_bringup",
        "test_insight_fabric", "test_switch_device_loop", "test_switch_device_net",
        "test_switch_device_p4rt", "test_switch_fuzz_frames",
    ),
    "netns-experiments": (
        "test_experiments_failure", "test_experiments_moe", "test_experiments_pcap",
        "test_experiments_demo", "test_compat_p4runtime_shell", "test_threetier_fabric",
        "test_tccl_agent_net", "test_validity_fabric", "test_pfc_incast",
        "test_emulation_fidelity", "test_native_loop", "test_topo_namespaces",
    ),
}
_GROUP_OF = {module: group for group, modules in NETNS_GROUPS.items() for module in modules}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test's xdist group: its namespace group, or its module (read by
    ``--dist loadgroup`` only; a plain run ignores the marks)."""
    for item in items:
        module = item.module.__name__ if item.module is not None else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(_GROUP_OF.get(module, module)))


def pytest_terminal_summary(terminalreporter) -> None:
    lines = closing_note()
    if lines:
        terminalreporter.section("fuzz and fault figures")
        for line in lines:
            terminalreporter.write_line(line)
