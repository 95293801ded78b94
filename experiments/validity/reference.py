"""The published models the fabric is checked against, written from the papers'
equations -- never from the agents' code (`tccl.dcqcn`), which they check.

DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015,
section 3, the reaction point; the equations as its authors restate them in "ECN or
Delay", CoNEXT 2016, section 3 -- the SIGCOMM text itself was not readable here,
docs/validation.md):

* a CNP cuts: ``Rt = Rc, Rc = Rc (1 - alpha/2), alpha = (1 - g) alpha + g`` (eq. 1);
* without CNPs alpha decays by ``(1 - g)`` every alpha timer K (eq. 2);
* each rate-increase event (timer T, or B bytes) runs fast recovery ``Rc = (Rt + Rc)/2``
  for the first F events after a cut, then additive increase ``Rt += R_AI`` first
  (QCN's increase, which CoNEXT 2016 section 3 names: "five stages of so-called fast
  recovery ... and then a gradual additive increase"); hyper increase needs both
  counters past F, which a window of a few T without a byte-counter event never
  reaches.

PFC (section 2 of the same paper, "PFC unfairness"): a congested egress queue pauses
its ingress ports, each on its own bytes, so a port is resumed as often as any other
whatever number of flows it carries: the queue's capacity is shared per ingress port,
then again per ingress port at the switch upstream. DCQCN, acting per flow, gives each
flow its max-min fair share instead. The same section's victim flow: a flow bound to an
idle egress that shares a paused link with an incast is paused with it under PFC alone;
with DCQCN it keeps its max-min share.
"""

from __future__ import annotations

from typing import Mapping, Union


def cut(rate: float, alpha: float) -> float:
    """The rate after one CNP (eq. 1)."""
    return rate * (1 - alpha / 2)


def alpha_after_cnp(alpha: float, g: float) -> float:
    """alpha's update on a CNP (eq. 1)."""
    return (1 - g) * alpha + g


def alpha_decayed(alpha: float, g: float, periods: int) -> float:
    """alpha after ``periods`` alpha timers without a CNP (eq. 2)."""
    return alpha * (1 - g) ** periods


def recovery(rt: float, rc: float, events: int, fast_recovery_steps: int, rate_ai: float,
             line_rate: float) -> list[float]:
    """Rc after 0, 1, ..., ``events`` quiet increase events following a cut from ``rt``
    to ``rc``: F events of fast recovery, then additive increase (QCN's), the target
    never above the line rate."""
    out = [rc]
    for k in range(1, events + 1):
        if k > fast_recovery_steps:
            rt = min(rt + rate_ai, line_rate)
        rc = (rt + rc) / 2
        out.append(rc)
    return out


# An egress queue's ingress ports: each a flow's name, or the ingress ports of the
# switch upstream whose egress feeds it.
PortTree = Mapping[str, Union[str, "PortTree"]]


def pfc_shares(ports: PortTree, share: float = 1.0) -> dict[str, float]:
    """Each flow's share of a congested egress under PFC alone: equal per ingress port,
    split again per ingress port upstream (DCQCN paper, section 2)."""
    out: dict[str, float] = {}
    for node in ports.values():
        if isinstance(node, str):
            out[node] = share / len(ports)
        else:
            out.update(pfc_shares(node, share / len(ports)))
    return out


def dcqcn_shares(ports: PortTree) -> dict[str, float]:
    """Each flow's share of the same egress with DCQCN: per flow, equal."""
    flows = pfc_shares(ports)
    return {name: 1 / len(flows) for name in flows}


def victim_fair_shares(incast: int = 3, sharing: int = 2) -> dict[str, float]:
    """Max-min fair shares (fractions of one line rate, every link alike) of the victim
    check: ``incast`` flows into one NIC, ``sharing`` of them on the victim's links. The
    incast's flows are held to 1/incast by the NIC's link; the victim takes the rest of
    the links it shares with them (DCQCN paper, section 2: what DCQCN should give)."""
    each = 1 / incast
    return {"incast": each, "victim": 1 - sharing * each}
