"""Safe path planning for one flow: project the link loads with the flow moved and
accept only paths that keep every link it would newly cross under the safety threshold
and make no other alarmed link worse; rank the accepted ones.

Loads are the measured rates (bit/s) of the last telemetry interval; the flow's rate
is the elephant estimate. Only links that the move changes are judged: a flow's own
NIC links carry it on every path, so they cannot decide between paths (and an elephant
alone fills its NIC link, which would otherwise veto every move).
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.paths import LinkId, links_of

# Default safety threshold: a link planned above 75 % of its capacity leaves too little
# headroom for the bursts of a collective (the Astral design's figure).
SAFETY = 0.75


@dataclass(frozen=True)
class Candidate:
    """An accepted path with its projected utilisation (worst newly crossed link)."""

    path: tuple[str, ...]
    max_util: float
    projected: dict[LinkId, float]


@dataclass(frozen=True)
class Rejection:
    path: tuple[str, ...]
    reason: str


def plan_move(current: list[str], candidates: list[list[str]], flow_bps: float,
              loads: dict[LinkId, float], capacity: dict[LinkId, float],
              alarmed: set[LinkId], safety: float = SAFETY
              ) -> tuple[list[Candidate], list[Rejection]]:
    """Accepted candidates (best first: lowest projected worst-link utilisation, then
    path order) and the rejected ones with the reason, for moving a flow of
    ``flow_bps`` off ``current``."""
    if not 0 < safety <= 1:
        raise ValueError(f"safety threshold must be in (0, 1], got {safety}")
    old = set(links_of(current))
    accepted, rejected = [], []
    for path in candidates:
        if path == current:
            continue
        new = [link for link in links_of(path) if link not in old]
        projected = {}
        reason = ""
        for link in new:
            cap = capacity.get(link)
            if not cap:
                reason = f"link {'->'.join(link)} has no capacity (down?)"
                break
            projected[link] = (loads.get(link, 0.0) + flow_bps) / cap
            if link in alarmed:
                reason = f"link {'->'.join(link)} is alarmed and would get worse"
                break
            if projected[link] > safety:
                reason = (f"link {'->'.join(link)} would reach {projected[link]:.0%} "
                          f"> safety {safety:.0%}")
                break
        if reason:
            rejected.append(Rejection(tuple(path), reason))
        else:
            accepted.append(Candidate(tuple(path), max(projected.values(), default=0.0), projected))
    accepted.sort(key=lambda c: c.max_util)
    return accepted, rejected
