"""Global placement of elephant flows on their ECMP paths (after Hedera's Global First
Fit, NSDI 2010 sec. 4.2), judged on the projected load of their estimated demands.

Every flow has a demand (`controller.demand`: its natural rate, not its throttled one),
a current path and its candidate paths. Flows that may not move (no agent, pinned,
cooling down, being moved) keep their path and their demand loads it. The movable ones
are placed together, largest first:

1. **Global First Fit** against the safety threshold: a flow keeps its current path if
   every judged link of it stays at or under the threshold with the flow added, else
   it takes the first candidate that does; a candidate that would newly cross an
   alarmed link is never taken (no secondary congestion on a link already in trouble).
2. Where that fails -- the demand itself leaves no placement under the threshold, as in
   a ring where every flow wants its NIC's line rate and a leaf sends more than 75 % of
   its uplinks' capacity -- the most even placement is computed instead (largest flow
   first onto the path whose worst link is least loaded, then single-flow moves while
   one lowers a peak: a bipartite edge colouring when every flow has the same demand),
   and the bar of every link becomes the larger of the threshold and that placement's
   load on it. Global First Fit is run again against those bars (so flows stay where
   they are whenever they can: fewer moves), and the even placement itself is taken if
   First Fit still fails.

Nothing moves unless the result is better than leaving every flow where it is: its
projected link utilisations, highest first, must be lower at the first place they
differ (so a peak the movers can lower counts, although a higher one elsewhere stays). Only the links in ``capacity`` are judged (GOR
passes the switch-to-switch links that are up): a flow's own NIC links carry it on every
path, so they cannot decide between paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Mapping, Sequence

from controller.paths import LinkId, links_of

# Default safety threshold: a link planned above 75 % of its capacity leaves too little
# headroom for the bursts of a collective (the Astral design's figure).
SAFETY = 0.75
# Two loads closer than this (fraction of a link) are equal: below what a 0.25 s
# telemetry interval or a sampled demand can tell apart, so a "better" placement by
# less is not worth a move.
EPSILON = 1e-3
# Rounds of single-flow improving moves of the even placement; each round that changes
# nothing ends it early, so the bound only matters on inputs far larger than a fabric.
MAX_IMPROVE_ROUNDS = 50


@dataclass(frozen=True)
class FlowToPlace:
    """One flow: its demand (bit/s), current path and candidate paths (current
    included or not), and whether it may be moved."""

    key: Hashable
    demand_bps: float
    current: tuple[str, ...]
    candidates: tuple[tuple[str, ...], ...]
    movable: bool = True


@dataclass
class Placement:
    """The result: every flow's path, the moves (key -> new path), the projected
    utilisation of every judged link, each link's bar, the worst link before and after."""

    paths: dict[Hashable, tuple[str, ...]]
    moves: dict[Hashable, tuple[str, ...]]
    projected: dict[LinkId, float]
    bars: dict[LinkId, float]
    worst_before: float
    worst_after: float
    method: str                            # "first-fit", "first-fit (even bars)", "even", "stay"
    unplaced: list[Hashable] = field(default_factory=list)   # first fit found no path for these


def place(flows: Sequence[FlowToPlace], capacity: Mapping[LinkId, float], alarmed: set[LinkId],
          safety: float) -> Placement:
    """Place ``flows`` (module docstring). Raises ValueError for a threshold outside
    (0, 1], a negative demand, a link capacity that is not positive, duplicate keys or
    a movable flow with no path."""
    if not 0 < safety <= 1:
        raise ValueError(f"safety threshold must be in (0, 1], got {safety}")
    keys = [f.key for f in flows]
    if len(set(keys)) != len(keys):
        raise ValueError("placement: flow keys must be unique")
    bad_caps = [link for link, c in capacity.items() if not c > 0]
    if bad_caps:
        raise ValueError(f"placement: link capacity must be > 0, not for {bad_caps}")
    for f in flows:
        if f.demand_bps < 0:
            raise ValueError(f"placement: flow {f.key!r} has a negative demand {f.demand_bps}")
        if f.movable and not _options(f, alarmed):
            raise ValueError(f"placement: movable flow {f.key!r} has no candidate path")
    current = {f.key: f.current for f in flows}
    before = _utilisation(flows, current, capacity)
    worst_before = max(before.values(), default=0.0)
    movers = sorted((f for f in flows if f.movable), key=lambda f: (-f.demand_bps, str(f.key)))
    fixed = [f for f in flows if not f.movable]
    base = _loads(fixed, current, capacity)

    flat = {link: safety for link in capacity}
    paths, unplaced = _first_fit(movers, base, capacity, flat, alarmed, current)
    method = "first-fit"
    if unplaced:
        even = _even(movers, base, capacity, alarmed, current)
        even_util = _utilisation(flows, {**current, **even}, capacity)
        if not _better(even_util, before):
            # No placement found beats the one in place: nothing to gain from moving.
            even, even_util = {}, before
        bars = {link: max(safety, even_util.get(link, 0.0) + EPSILON) for link in capacity}
        paths, unplaced = _first_fit(movers, base, capacity, bars, alarmed, current)
        method = "first-fit (even bars)"
        if unplaced:
            paths, method = even, "even"
    else:
        bars = flat
    chosen = {**current, **paths}
    projected = _utilisation(flows, chosen, capacity)
    worst_after = max(projected.values(), default=0.0)
    moves = {k: p for k, p in chosen.items() if p != current[k]}
    if moves and not _better(projected, before) and not _fixes_a_bar(before, bars):
        chosen, moves, projected, worst_after, method = dict(current), {}, before, worst_before, "stay"
    return Placement(chosen, moves, projected, bars, worst_before, worst_after, method, unplaced)


def _better(after: Mapping[LinkId, float], before: Mapping[LinkId, float]) -> bool:
    """Whether ``after`` loads the links more evenly than ``before``: its utilisations,
    highest first, are lower at the first place they differ (by more than `EPSILON`).
    A peak lowered counts although a higher one the movers cannot reach stays."""
    for a, b in zip(sorted(after.values(), reverse=True), sorted(before.values(), reverse=True)):
        if abs(a - b) > EPSILON:
            return a < b
    return False


def _fixes_a_bar(before: Mapping[LinkId, float], bars: Mapping[LinkId, float]) -> bool:
    """Whether the placement in place breaks a bar (then moves that keep the worst link
    as it is but bring the others under their bars are worth making)."""
    return any(u > bars.get(link, 1.0) + EPSILON for link, u in before.items())


def _options(f: FlowToPlace, alarmed: set[LinkId]) -> list[tuple[str, ...]]:
    """The paths ``f`` may take: its current one first, then every candidate that
    crosses no alarmed link it does not cross already."""
    old = set(links_of(list(f.current)))
    out = [f.current] if f.current else []
    for p in f.candidates:
        if p != f.current and not any(l in alarmed and l not in old for l in links_of(list(p))):
            out.append(p)
    return out


def _judged(path: Sequence[str], capacity: Mapping[LinkId, float]) -> list[LinkId]:
    return [link for link in links_of(list(path)) if link in capacity]


def _loads(flows: Sequence[FlowToPlace], paths: Mapping[Hashable, tuple[str, ...]],
           capacity: Mapping[LinkId, float]) -> dict[LinkId, float]:
    """bit/s on every judged link with ``flows`` on ``paths``."""
    load = {link: 0.0 for link in capacity}
    for f in flows:
        for link in _judged(paths[f.key], capacity):
            load[link] += f.demand_bps
    return load


def _utilisation(flows: Sequence[FlowToPlace], paths: Mapping[Hashable, tuple[str, ...]],
                 capacity: Mapping[LinkId, float]) -> dict[LinkId, float]:
    return {link: bps / capacity[link] for link, bps in _loads(flows, paths, capacity).items()}


def _first_fit(movers: Sequence[FlowToPlace], base: Mapping[LinkId, float], capacity: Mapping[LinkId, float],
               bars: Mapping[LinkId, float], alarmed: set[LinkId], current: Mapping[Hashable, tuple[str, ...]]
               ) -> tuple[dict[Hashable, tuple[str, ...]], list[Hashable]]:
    """Global First Fit: each mover (largest first) on the first of its options that
    keeps every judged link at or under its bar; the ones that fit nowhere stay put
    and are returned as unplaced."""
    load = dict(base)
    paths: dict[Hashable, tuple[str, ...]] = {}
    unplaced = []
    for f in movers:
        fit = next((p for p in _options(f, alarmed)
                    if all(load[l] + f.demand_bps <= bars[l] * capacity[l] + EPSILON * capacity[l]
                           for l in _judged(p, capacity))), None)
        if fit is None:
            unplaced.append(f.key)
            fit = current[f.key]
        paths[f.key] = fit
        for l in _judged(fit, capacity):
            load[l] += f.demand_bps
    return paths, unplaced


def _even(movers: Sequence[FlowToPlace], base: Mapping[LinkId, float], capacity: Mapping[LinkId, float],
          alarmed: set[LinkId], current: Mapping[Hashable, tuple[str, ...]]) -> dict[Hashable, tuple[str, ...]]:
    """The most even placement found: largest first onto the option whose worst judged
    link would be least loaded (ties: the current path, then candidate order), then
    single-flow moves while one lowers the higher of the peaks it touches."""
    load = dict(base)
    paths: dict[Hashable, tuple[str, ...]] = {}

    def peak(path: Sequence[str], extra: float) -> float:
        return max(((load[l] + extra) / capacity[l] for l in _judged(path, capacity)), default=0.0)

    for f in movers:
        options = _options(f, alarmed)
        best = min(options, key=lambda p: (round(peak(p, f.demand_bps), 9), p != current[f.key]))
        paths[f.key] = best
        for l in _judged(best, capacity):
            load[l] += f.demand_bps
    for _ in range(MAX_IMPROVE_ROUNDS):
        improved = False
        for f in movers:
            here = paths[f.key]
            for l in _judged(here, capacity):
                load[l] -= f.demand_bps
            now = peak(here, f.demand_bps)
            better = [p for p in _options(f, alarmed) if peak(p, f.demand_bps) < now - EPSILON]
            if better:
                here = min(better, key=lambda p: peak(p, f.demand_bps))
                paths[f.key] = here
                improved = True
            for l in _judged(here, capacity):
                load[l] += f.demand_bps
        if not improved:
            break
    return paths
