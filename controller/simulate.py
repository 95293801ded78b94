"""Simulate, then act: GOR's candidate placements judged by the flow-level model.

Before it moves anything, a reroute loop simulates a few candidate placements of the
active flows with the model `scale/` runs on whole jobs: max-min fair rates
(`controller.fairness`) of the flows on their paths, each flow capped at its demand
(Hedera's estimate, `controller.demand`: what its NICs would let it send -- the cap is
a link of the flow's own whose capacity is the demand). The candidates: the
placement's (`controller.placement`), the same with one moved flow left where it is or
on each of its other ECMP paths, and the placement in force (no move). A candidate's `Prediction`: every
flow's rate, the worst judged link's utilisation, and the step factor -- the largest
demand / rate over the flows: a collective step ends with its slowest flow, so with
equal shares the step takes that many times as long as with every flow at its demand.
Candidates rank by step factor, then worst link, then fewer moves (GOR also compares
the best candidates of two placements this way: of the alarmed links' top elephants
alone, and of every movable flow -- the latter only when strictly better); each moved flow
carries its paths in the ranked candidates' order, so when a move does not relieve its
link the next one is the model's next best (`controller.moves`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from controller.fairness import NONE, max_min_rates
from controller.paths import LinkId, links_of

# Candidate placements simulated per loop at most (the placement's own and the one in
# force always): each is a few numpy passes over the active flows' links.
MAX_CANDIDATES = 32
# Two predictions closer than this (a fraction: of a link, or of a step) are equal: a
# tie goes to fewer moves.
TIE = 1e-3

Paths = Mapping[int, tuple[str, ...]]


@dataclass(frozen=True)
class Prediction:
    """What the model says of one placement: rates by flow id (bit/s), the worst
    judged link and its utilisation, the step factor (module docstring)."""

    rates: dict[int, float]
    worst_link: LinkId | None
    worst_util: float
    step_factor: float


@dataclass(frozen=True)
class Candidate:
    """A placement simulated: every active flow's path, the flows it moves (relative to
    the placement in force), and its prediction."""

    paths: dict[int, tuple[str, ...]]
    moved: tuple[int, ...]
    prediction: Prediction

    @property
    def score(self) -> tuple[int, int]:
        """Step factor, then worst link, rounded to `TIE` (lower is better): so that
        float noise does not outrank fewer moves."""
        p = self.prediction
        return round(p.step_factor / TIE), round(p.worst_util / TIE)

    def summary(self) -> dict:
        """The candidate for GOR's event log."""
        p = self.prediction
        return {"moves": len(self.moved), "step_factor": round(p.step_factor, 3),
                "worst_util": round(p.worst_util, 3),
                "worst_link": "->".join(p.worst_link) if p.worst_link else None}


def simulate(paths: Paths, demands: Mapping[int, float], capacity: Mapping[LinkId, float]) -> Prediction:
    """Max-min fair rates of the flows on ``paths``, each capped at its demand (bit/s);
    only the links in ``capacity`` are shared (a flow's NIC links are in its demand).
    A flow without demand gets no rate and does not count in the step factor."""
    keys = [k for k in paths if demands.get(k, 0.0) > 0]
    judged = sorted({link for k in keys for link in links_of(list(paths[k])) if link in capacity})
    link_id = {link: i for i, link in enumerate(judged)}
    rows = [[link_id[l] for l in links_of(list(paths[k])) if l in link_id] + [len(judged) + n]
            for n, k in enumerate(keys)]
    width = max((len(r) for r in rows), default=1)
    table = np.full((len(rows), width), NONE, dtype=np.int64)
    for n, row in enumerate(rows):
        table[n, :len(row)] = row
    caps = [capacity[l] for l in judged] + [demands[k] for k in keys]
    alloc = max_min_rates(table, dict(enumerate(caps)))
    rates = {k: float(r) for k, r in zip(keys, alloc.rates)}
    util = {judged[int(i)]: float(load) / caps[int(i)] for i, load in zip(alloc.links, alloc.load_bps)
            if i < len(judged)}
    worst = max(util, key=lambda l: (util[l], l), default=None)
    step = max((demands[k] / rates[k] for k in keys), default=1.0)
    return Prediction(rates, worst, util[worst] if worst else 0.0, step)


def rank(current: Paths, planned: Paths, options: Mapping[int, tuple[tuple[str, ...], ...]],
         demands: Mapping[int, float], capacity: Mapping[LinkId, float]) -> list[Candidate]:
    """The candidate placements (module docstring), simulated and best first. ``current``
    and ``planned``: every active flow's path now and in the placement; ``options``: the
    ECMP paths of each movable flow."""
    placements = [dict(planned), dict(current)]
    for key in sorted(k for k in planned if planned[k] != current[k]):
        for path in (current[key], *options.get(key, ())):
            variant = {**planned, key: path}
            if path != planned[key] and variant not in placements and len(placements) < MAX_CANDIDATES:
                placements.append(variant)
    out = []
    for paths in placements:
        moved = tuple(sorted(k for k in paths if paths[k] != current[k]))
        out.append(Candidate(paths, moved, simulate(paths, demands, capacity)))
    out.sort(key=lambda c: (c.score, len(c.moved)))
    return out


def ranked_paths(key: int, current: tuple[str, ...], candidates: list[Candidate]) -> dict[tuple[str, ...], float]:
    """Flow ``key``'s paths other than ``current`` in the order of the ranked
    ``candidates`` that move it (what its move tries, first to last), each with the
    flow's rate in the best candidate that puts it there (bit/s)."""
    out: dict[tuple[str, ...], float] = {}
    for c in candidates:
        path = c.paths.get(key, current)
        if path != current and path not in out:
            out[path] = c.prediction.rates.get(key, 0.0)
    return out
