"""GOR's placement at scale: a flow's choice of spine (or of super-spine) as the colour
of an edge of a bipartite multigraph, repaired rather than recomputed.

On one tier a flow is an edge from the switch it goes up from to the switch it comes
down to (source leaf -> destination leaf for the choice of spine; source pod's spine
-> destination pod's spine for the choice of super-spine), and its choice is the
edge's colour. A link carries ``slots`` flows of the largest demand under its bar, so
every colour is split into ``slots`` slot colours, and a placement in which no slot
colour repeats at a vertex loads no link beyond its bar. Bipartite multigraphs are
edge-colourable with as many colours as their largest degree (Koenig), so with
``slots`` raised to ceil(degree / colours) such a placement always exists -- the
even placement of `controller.placement` when every flow has the same demand, without
its search over every flow's every path.

Only the alarmed region is re-planned: every flow keeps its colour where its slot is
free at both ends (a vectorised pass), the others -- the flows beyond their links' bars
-- are inserted into a slot colour free at both ends (of their own spine first: no
move), many at once over numpy rounds, and the few left one by one by swapping two
colours along an alternating path (Kempe chain, as `tccl.ports.color_bipartite`
colours a job's flows from scratch). A 100k-GPU stock job in under a second.
"""

from __future__ import annotations

import numpy as np

from controller.fairness import NONE


def recolour(left: np.ndarray, right: np.ndarray, colour: np.ndarray, colours: int, slots: int) -> np.ndarray:
    """A colour in 0..colours-1 per edge ``left[e]`` -> ``right[e]`` (vertex numbers of
    the two sides, any integers) such that no colour is used more than ``slots`` times
    at a vertex -- ``slots`` raised to ceil(largest degree / colours) where the degrees
    need it -- keeping ``colour[e]`` (NONE: none yet) wherever that allows (module doc).
    Raises ValueError for fewer than one colour or a colour out of range."""
    left, right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
    colour = np.asarray(colour, dtype=np.int64)
    if colours < 1:
        raise ValueError(f"recolouring needs at least one colour, got {colours}")
    if np.any((colour != NONE) & ((colour < 0) | (colour >= colours))):
        raise ValueError(f"colour {int(colour[(colour < 0) | (colour >= colours)][0])} is not in 0..{colours - 1}")
    if not len(colour):
        return colour.copy()
    _, u = np.unique(left, return_inverse=True)
    _, v = np.unique(right, return_inverse=True)
    degree = max(np.bincount(u).max(), np.bincount(v).max())
    slots = max(1, slots, -(-int(degree) // colours))
    width = colours * slots
    slot = _kept_slots(u, v, colour, slots)
    at_u = np.full((u.max() + 1, width), NONE, dtype=np.int64)
    at_v = np.full((v.max() + 1, width), NONE, dtype=np.int64)
    kept = slot != NONE
    at_u[u[kept], slot[kept]] = np.flatnonzero(kept)
    at_v[v[kept], slot[kept]] = np.flatnonzero(kept)
    _insert_together(at_u, at_v, u, v, colour, slot, slots)
    for e in np.flatnonzero(slot == NONE).tolist():
        a, b = int(u[e]), int(v[e])
        free_u, free_v = at_u[a] == NONE, at_v[b] == NONE
        both = free_u & free_v
        # Colours with a free slot at both ends (not necessarily the same slot: a chain
        # of two slots of one colour swaps slots, no flow changes its path).
        room = free_u.reshape(colours, slots).any(axis=1) & free_v.reshape(colours, slots).any(axis=1)
        pick = int(colour[e]) if colour[e] != NONE and room[colour[e]] else int(np.argmax(room))
        if room[pick] and both[pick * slots:(pick + 1) * slots].any():
            c = pick * slots + int(np.argmax(both[pick * slots:(pick + 1) * slots]))
        else:
            if room[pick]:
                c = pick * slots + int(np.argmax(free_u[pick * slots:(pick + 1) * slots]))
                d = pick * slots + int(np.argmax(free_v[pick * slots:(pick + 1) * slots]))
            else:
                c, d = int(np.argmax(free_u)), int(np.argmax(free_v))
            _swap_chain(at_u, at_v, u, v, slot, b, c, d)
        slot[e] = c
        at_u[a, c] = at_v[b, c] = e
    return slot // slots


def _kept_slots(u: np.ndarray, v: np.ndarray, colour: np.ndarray, slots: int) -> np.ndarray:
    """Per edge the slot colour it keeps (NONE: it must be inserted): its colour's k-th
    slot when it is the k-th edge of that colour at its left vertex, k < ``slots``, and
    the first edge with that slot colour at its right vertex."""
    n = len(u)
    out = np.full(n, NONE, dtype=np.int64)
    has = np.flatnonzero(colour != NONE)
    if not len(has):
        return out
    order = has[np.lexsort((has, colour[has], u[has]))]
    key = u[order] * (colour.max() + 1) + colour[order]
    first = np.r_[True, key[1:] != key[:-1]]
    rank = np.arange(len(order)) - np.flatnonzero(first)[np.cumsum(first) - 1]
    order, rank = order[rank < slots], rank[rank < slots]
    slot = colour[order] * slots + rank
    _, unique_at_v = np.unique(v[order] * (slots * (colour.max() + 1)) + slot, return_index=True)
    out[order[unique_at_v]] = slot[unique_at_v]
    return out


def _insert_together(at_u: np.ndarray, at_v: np.ndarray, u: np.ndarray, v: np.ndarray, colour: np.ndarray,
                     slot: np.ndarray, slots: int) -> None:
    """Insert the edges without a slot colour that have one free at both ends, many at
    once: each takes such a slot of its own colour if it can (no move), else the first;
    where several take one slot at a vertex the first keeps it and the others try again
    next round. Whatever is left needs a chain (`recolour`'s loop)."""
    width = at_u.shape[1]
    own = np.arange(width) // slots
    while True:
        todo = np.flatnonzero(slot == NONE)
        if not len(todo):
            return
        both = (at_u[u[todo]] == NONE) & (at_v[v[todo]] == NONE)
        mine = both & (own[None, :] == colour[todo][:, None])
        pick = np.where(mine.any(axis=1), np.argmax(mine, axis=1), np.argmax(both, axis=1))
        ok = both[np.arange(len(todo)), pick]
        todo, pick = todo[ok], pick[ok]
        _, first_u = np.unique(u[todo] * width + pick, return_index=True)
        take = np.zeros(len(todo), dtype=bool)
        take[first_u] = True
        _, first_v = np.unique(v[todo][take] * width + pick[take], return_index=True)
        chosen = np.flatnonzero(take)[first_v]
        if not len(chosen):
            return
        e, c = todo[chosen], pick[chosen]
        slot[e] = c
        at_u[u[e], c] = e
        at_v[v[e], c] = e


def _swap_chain(at_u: np.ndarray, at_v: np.ndarray, u: np.ndarray, v: np.ndarray, slot: np.ndarray,
                start: int, c: int, d: int) -> None:
    """Swap slot colours ``c`` and ``d`` along the c/d-alternating path that leaves right
    vertex ``start`` on ``c`` (it never reaches a left vertex where ``c`` is free and
    ``d`` is used, Koenig's argument): afterwards ``c`` is free at ``start``."""
    path, side, node, want = [], "v", start, c
    while True:
        e = int((at_v if side == "v" else at_u)[node, want])
        if e == NONE:
            break
        path.append(e)
        side, node = ("u", int(u[e])) if side == "v" else ("v", int(v[e]))
        want = d if want == c else c
    for e in path:
        at_u[u[e], slot[e]] = at_v[v[e], slot[e]] = NONE
    for e in path:
        slot[e] = d if slot[e] == c else c
        at_u[u[e], slot[e]] = at_v[v[e], slot[e]] = e
