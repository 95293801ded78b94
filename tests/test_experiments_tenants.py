"""The two-tenant scenario without a fabric: the tenants' jobs, the collision their
libraries plan without knowing each other, and the scenario's ratios."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from experiments.tenants import TENANTS, _uplinks, coordinated_job, ratios, tenant_job
from tccl import collectives as C
from tccl.agent import port_function
from tccl.trace import load_trace
from topo.addressing import AddressPlan
from topo.hashmodel import FiveTuple, predict_path
from topo.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "topo" / "fabrics" / "default.yaml"
TRACE = ROOT / "traces" / "dp_tp_pp.yaml"


def uplinks(plan: AddressPlan, tenant: str) -> Counter:
    """Leaf -> spine links of the tenant's planned flows (one per QP), counted."""
    job = tenant_job(SPEC, TRACE, tenant, seed=1)
    _, planned = port_function(job, C.ring_order(job.ranks, job.workload.order), load_trace(TRACE))
    ranks = {r.rank: r for r in job.ranks}
    used: Counter = Counter()
    for key, sport in planned.items():
        a, b = (ranks[int(x)] for x in key.split("->"))
        path = predict_path(plan, FiveTuple(a.ip, b.ip, sport=sport))
        used[(path[1], path[2])] += 1
    return used


def test_each_tenant_has_a_server_of_every_block_and_all_its_rails():
    plan = AddressPlan(load_spec(SPEC))
    jobs = {t: tenant_job(SPEC, TRACE, t, seed=1) for t in TENANTS}
    assert {r.server for r in jobs["a"].ranks} == {"b0h0", "b1h0"}
    assert {r.server for r in jobs["b"].ranks} == {"b0h1", "b1h1"}
    for job in jobs.values():
        assert [r.rank for r in job.ranks] == list(range(2 * plan.spec.rails))
        assert job.transport.ports == "orthogonal" and job.transport.qps == 1


def test_the_tenants_plans_are_balanced_alone_and_collide_together():
    plan = AddressPlan(load_spec(SPEC))
    a, b = uplinks(plan, "a"), uplinks(plan, "b")
    # Alone, every leaf sends one flow up: no link carries two of a tenant's flows.
    assert max(a.values()) == max(b.values()) == 1
    # Together, both libraries chose the same spine on every leaf.
    both = a + b
    assert set(both.values()) == {2} and {spine for _, spine in both} == {"sp0"}


def test_ratios_per_tenant_and_their_mean():
    rows = {"alone:a": {"busbw_frac": 0.9}, "alone:b": {"busbw_frac": 0.8},
            "shared:a": {"busbw_frac": 0.45}, "shared:b": {"busbw_frac": 0.5},
            "shared-gor:a": {"busbw_frac": 0.81}, "shared-gor:b": {"busbw_frac": 0.8}}
    r = ratios(rows)
    assert r["a"] == {"gor_over_shared": 1.8, "gor_over_alone": 0.9, "gor_over_planned": None}
    assert r["b"] == {"gor_over_shared": 1.6, "gor_over_alone": 1.0, "gor_over_planned": None}
    assert r["mean_gor_over_shared"] == pytest.approx(1.7) and r["mean_gor_over_alone"] == pytest.approx(0.95)
    assert ratios({})["mean_gor_over_shared"] is None


def test_the_coordinated_plan_keeps_tenant_b_off_tenant_as_links():
    plan = AddressPlan(load_spec(SPEC))
    trace = load_trace(TRACE)
    a = _uplinks(plan, tenant_job(SPEC, TRACE, "a", seed=1), trace)
    b = _uplinks(plan, coordinated_job(SPEC, TRACE, seed=1), trace)
    assert a and b and not a & b
    assert {link for link in b if link[0].startswith("b")} == {(leaf, "sp1") for leaf, _ in a if leaf.startswith("b")}
