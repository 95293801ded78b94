"""Collectives as per-rank programs over messages, and the ring orders they run on.

Each collective is a generator per rank that yields `Send` (non-blocking), `Recv`
(suspends until the next message from that peer is in) and `Drain` (suspends until
every message this rank sent is acknowledged). `run_collective` steps the local ranks'
generators from the engine's event loop, so one agent drives all its ranks at once.

The data are real bytes; the reduction is bitwise XOR (MPI's ``MPI_BXOR``): it runs at
C speed on whole chunks (numpy, which the port planner imports anyway) and makes the
result checkable -- an AllReduce must equal the XOR of every rank's input.

Ring orders (`ring_order`): ``input`` keeps the job's rank order; ``rail`` walks the
servers block by block and, inside each server, snakes over the rails so that every
hop between two servers stays on one rail (one leaf, no spine inside a block): the
only hops that cross a spine are the ones from one block to the next (one per block). Hops inside a server use the
emulated NVLink when the job has one.

Tree AllReduce (`tree_all_reduce`, ``workload.algo: tree``) reduces up a tree and
broadcasts back down it, pipelined in slices. Its trees (`tree_order`): ``input`` is a
binary heap over the job's rank order; ``rail`` is hierarchical -- a binary tree over the
servers of each block whose edges each stay on one rail (one leaf), the block roots
joined by a binary tree over blocks (the only spine crossings: blocks - 1 edges), and
inside each server the other ranks hang off the rank that carries its server's edges.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import Callable, Generator, Hashable, Sequence

import numpy as np

from tccl.engine import NET, NVLINK, Engine
from tccl.job import RankInfo


@dataclass(frozen=True)
class Send:
    peer: int
    data: bytes | memoryview
    via: str | None = None        # channel (engine.NET / engine.NVLINK); None: default path


@dataclass(frozen=True)
class Recv:
    peer: int
    via: str | None = None


@dataclass(frozen=True)
class Drain:
    pass


Program = Generator[object, "bytes | None", bytes]


def xor(a: bytes | memoryview, b: bytes | memoryview) -> bytes:
    """Bytewise XOR of two equal-length buffers (the reduction operator), in numpy: a
    16 KiB slice in 1.7 us, where Python's big integers took 30 (docs/tccl.md)."""
    if len(a) != len(b):
        raise ValueError(f"cannot reduce buffers of {len(a)} and {len(b)} bytes")
    return np.bitwise_xor(np.frombuffer(a, np.uint8), np.frombuffer(b, np.uint8)).tobytes()


def input_data(seed: int, rank: int, size: int) -> bytes:
    """The synthetic input buffer of ``rank`` (same on every agent: checkable)."""
    return random.Random(f"{seed}/{rank}/{size}").randbytes(size)


# Inputs `rank_input` keeps: every local rank of an agent (8 rails) for the size a job
# is at and the one before it.
INPUTS_KEPT = 16


@functools.lru_cache(maxsize=INPUTS_KEPT)
def rank_input(seed: int, rank: int, size: int) -> bytes:
    """`input_data`, kept for the next iteration: a rank sends the same buffer every
    iteration, and generating it costs ~2.4 ms of the library's CPU per MiB -- a fifth
    of the library's CPU with 100 Mbit/s links. What a rank must end with (`expected`)
    regenerates every rank's input instead, one at a time, uncached."""
    return input_data(seed, rank, size)


def chunks(size: int, n: int) -> list[tuple[int, int]]:
    """``n`` contiguous (start, end) slices covering ``size`` bytes, sizes differing by <= 1."""
    base, extra = divmod(size, n)
    out, start = [], 0
    for i in range(n):
        end = start + base + (1 if i < extra else 0)
        out.append((start, end))
        start = end
    return out


# --- per-rank programs ------------------------------------------------------------------

# Ring steps are pipelined in slices of about this size (NCCL's "slices"): a rank
# forwards each slice as soon as it has it, instead of waiting for the whole chunk, so
# the ring's hops overlap. 16 KiB is 4 frames at RoCE MTU 4096: several slices of each
# part are in flight at once, and the pipeline fill (one slice per step, 13 ms at
# 10 Mbit/s) stays small against a step.
SLICE_BYTES = 16 * 1024
MAX_SLICES = 8


def slices(data: bytes) -> list[bytes]:
    """``data`` cut into the pipeline's slices (the same cut on every rank)."""
    n = max(1, min(MAX_SLICES, -(-len(data) // SLICE_BYTES)))
    return [data[a:b] for a, b in chunks(len(data), n)]


def _ring(ring: Sequence[int], me: int, parts: list[list[bytes]], offset: int, steps: int,
          reduce_steps: int, via: str | None = None) -> Program:
    """The ring engine: at step t position i sends part (i+offset-t) mod n and receives
    part (i+offset-t-1) mod n -- reducing it into its own copy during the first
    ``reduce_steps`` steps, replacing it after -- and forwards each received slice at
    once, since the part received at step t is the one sent at step t+1.

    Reduce-scatter is (offset 0, n-1 steps, all reducing): position i ends with part
    i+1 reduced. All-gather from part i+offset is (offset, n-1 steps, none reducing).
    AllReduce is both in one pipeline: (0, 2(n-1) steps, n-1 reducing).
    """
    n = len(ring)
    i = ring.index(me)
    nxt, prv = ring[(i + 1) % n], ring[(i - 1) % n]
    for piece in parts[(i + offset) % n]:
        yield Send(nxt, piece, via)
    for t in range(steps):
        r = (i + offset - t - 1) % n
        for j in range(len(parts[r])):
            got = yield Recv(prv, via)
            parts[r][j] = xor(parts[r][j], got) if t < reduce_steps else got
            if t < steps - 1:
                yield Send(nxt, parts[r][j], via)
    yield Drain()
    return parts


def ring_all_reduce(ring: Sequence[int], me: int, buf: bytes, via: str | None = None) -> Program:
    """Reduce-scatter then all-gather: each rank sends 2(n-1)/n of the buffer."""
    n = len(ring)
    parts = [slices(buf[a:b]) for a, b in chunks(len(buf), n)]
    if n > 1:
        parts = yield from _ring(ring, me, parts, offset=0, steps=2 * (n - 1), reduce_steps=n - 1,
                                 via=via)
    return b"".join(b"".join(p) for p in parts)


Tree = dict[int, int | None]     # rank -> parent rank (the root: None)


def tree_children(tree: Tree) -> dict[int, list[int]]:
    """Each rank's children, in the tree's insertion order (the same on every agent)."""
    kids: dict[int, list[int]] = {r: [] for r in tree}
    for r, p in tree.items():
        if p is not None:
            kids[p].append(r)
    return kids


def tree_all_reduce(tree: Tree, me: int, buf: bytes, via: str | None = None) -> Program:
    """Reduce up ``tree`` then broadcast down it: each slice goes to the parent as soon
    as every child's copy of it is folded in, and down to the children as soon as it
    arrives, so the levels of the tree overlap (NCCL's pipelined tree)."""
    parent = tree[me]
    kids = tree_children(tree)[me]
    parts = slices(buf)
    for j in range(len(parts)):
        for child in kids:
            parts[j] = xor(parts[j], (yield Recv(child, via)))
        if parent is not None:
            yield Send(parent, parts[j], via)
    for j in range(len(parts)):
        if parent is not None:
            parts[j] = yield Recv(parent, via)
        for child in kids:
            yield Send(child, parts[j], via)
    yield Drain()
    return b"".join(parts)


def split_point(size: int, nvlink_share: float) -> int:
    """Bytes of a ``size``-byte buffer that go over NVLink when it carries
    ``nvlink_share`` of the traffic (the rest goes over the NICs)."""
    if not 0.0 <= nvlink_share <= 1.0:
        raise ValueError(f"an NVLink share is a fraction in [0, 1], got {nvlink_share}")
    return round(size * nvlink_share)


def ring_reduce_scatter(ring: Sequence[int], me: int, buf: bytes, order: Sequence[int]) -> Program:
    """ReduceScatter: the k-th rank of ``order`` ends with reduced chunk k of the buffer."""
    n = len(ring)
    sl = chunks(len(buf), n)
    slot = {r: k for k, r in enumerate(order)}
    # Position i finishes owning part (i+1) mod n: make that part its rank's chunk.
    parts: list[list[bytes]] = [[]] * n
    for pos, r in enumerate(ring):
        a, b = sl[slot[r]]
        parts[(pos + 1) % n] = slices(buf[a:b])
    if n > 1:
        parts = yield from _ring(ring, me, parts, offset=0, steps=n - 1, reduce_steps=n - 1)
    return b"".join(parts[(ring.index(me) + 1) % n])


def ring_all_gather(ring: Sequence[int], me: int, mine: bytes, order: Sequence[int],
                    sizes: dict[int, int]) -> Program:
    """AllGather: every rank contributes ``mine`` (rank r: ``sizes[r]`` bytes); the
    result is the contributions in ``order``."""
    n = len(ring)
    parts = [slices(bytes(sizes[r])) for r in ring]
    parts[ring.index(me)] = slices(mine)
    if n > 1:
        parts = yield from _ring(ring, me, parts, offset=0, steps=n - 1, reduce_steps=0)
    by_rank = {r: b"".join(p) for r, p in zip(ring, parts)}
    return b"".join(by_rank[r] for r in order)


def shares(size: int, weights: Sequence[float]) -> list[tuple[int, int]]:
    """Contiguous (start, end) slices of ``size`` bytes in proportion to ``weights``
    (alltoallv's per-destination counts); without weights, equal `chunks`."""
    if not weights:
        raise ValueError("shares needs at least one weight")
    total = float(sum(weights))
    if total <= 0 or min(weights) < 0:
        raise ValueError(f"weights must be >= 0 with a positive sum, got {list(weights)}")
    bounds, acc = [0], 0.0
    for w in weights:
        acc += w
        bounds.append(round(size * acc / total))
    return list(zip(bounds, bounds[1:]))


def _a2a_slices(size: int, n: int, weights: Sequence[float]) -> list[tuple[int, int]]:
    if weights and len(weights) != n:
        raise ValueError(f"{len(weights)} weights for an all-to-all of {n} ranks")
    return shares(size, weights) if weights else chunks(size, n)


def all_to_all(ranks: Sequence[int], me: int, buf: bytes, weights: Sequence[float] = ()) -> Program:
    """Rank k's chunk j goes to rank j; the result holds chunk k of every rank, in
    order. ``weights`` (one per rank of ``ranks``) size the chunks: alltoallv with
    every sender skewed alike, e.g. towards a hot expert."""
    n = len(ranks)
    sl = _a2a_slices(len(buf), n, weights)
    k = ranks.index(me)
    # Staggered start (peer k+1 first) so that not every rank hits the same peer at once.
    for step in range(1, n):
        j = (k + step) % n
        yield Send(ranks[j], buf[sl[j][0]:sl[j][1]])
    got: list[bytes] = [b""] * n
    got[k] = buf[sl[k][0]:sl[k][1]]
    for step in range(1, n):
        j = (k - step) % n
        got[j] = yield Recv(ranks[j])
    yield Drain()
    return b"".join(got)


@dataclass(frozen=True)
class PxnPlan:
    """Who sends what to whom in an all-to-all with PXN relays (`pxn_plan`).

    ``sends[x]``: x's own messages in send order, (next hop, final destination, channel);
    ``relays[x]``: what x forwards, (origin, final destination), received over NVLink
    and sent on over the network; ``incoming[y][x]``: every message x sends y, in x's
    send order, as (origin, final destination, channel) -- a receiver takes each
    peer's messages in the order that peer sent them (one FIFO per peer and channel);
    ``order[x]``: the ranks of x's group (the all-to-all's rank order)."""

    sends: dict[int, list[tuple[int, int, str]]]
    relays: dict[int, list[tuple[int, int]]]
    incoming: dict[int, dict[int, list[tuple[int, int, str]]]]
    order: dict[int, list[int]]

    @property
    def ranks(self) -> list[int]:
        """Every rank with a part in it: group members and relays."""
        return sorted(set(self.order) | set(self.relays))

    def net_flows(self) -> list[tuple[int, int]]:
        """The (src, dst) pairs that cross the network."""
        out: dict[tuple[int, int], None] = {}
        for y, peers in self.incoming.items():
            for x, items in peers.items():
                if any(via == NET for _, _, via in items):
                    out[(x, y)] = None
        return list(out)


def pxn_plan(groups: Sequence[Sequence[RankInfo]], ranks: Sequence[RankInfo]) -> PxnPlan:
    """The all-to-all of ``groups`` (at once) with NCCL's PXN: a message to a rank of
    another server on another rail goes over NVLink to the sender's server-mate on the
    destination's rail, which sends it on from its own NIC -- so it stays on that rail
    (one leaf in a block) instead of crossing a spine. Messages within a server take
    NVLink; same-rail ones (or with no server-mate on that rail) go straight out.

    Every rank sends its relayed messages first, then its direct ones (so a relay's
    NVLink FIFO from a sender holds the relayed ones first); a relay forwards after
    its own sends. ``ranks``: every rank of the job (a relay may be in no group)."""
    at = {(r.server, r.rail): r.rank for r in ranks}
    info = {r.rank: r for r in ranks}
    sends: dict[int, list[tuple[int, int, str]]] = {}
    relays: dict[int, list[tuple[int, int]]] = {}
    order: dict[int, list[int]] = {}
    for group in groups:
        members = sorted(r.rank for r in group)
        for k, o in enumerate(members):
            order[o] = members
            src = info[o]
            relayed, direct = [], []
            for step in range(1, len(members)):
                d = members[(k + step) % len(members)]
                dst = info[d]
                relay = at.get((src.server, dst.rail))
                if dst.server == src.server:
                    direct.append((d, d, NVLINK))
                elif dst.rail == src.rail or relay is None:
                    direct.append((d, d, NET))
                else:
                    relayed.append((relay, d, NVLINK))
                    relays.setdefault(relay, []).append((o, d))
            sends[o] = relayed + direct
    incoming: dict[int, dict[int, list[tuple[int, int, str]]]] = {}
    for x in sorted(set(sends) | set(relays)):
        for hop, d, via in sends.get(x, []):
            incoming.setdefault(hop, {}).setdefault(x, []).append((x, d, via))
        for o, d in relays.get(x, []):
            incoming.setdefault(d, {}).setdefault(x, []).append((o, d, NET))
    return PxnPlan(sends, relays, incoming, order)


def pxn_all_to_all(plan: PxnPlan, me: int, buf: bytes, weights: Sequence[float] = ()) -> Program:
    """Rank ``me``'s part of a PXN all-to-all (`pxn_plan`): its own messages, then its
    relay duty, then what it receives. The result is `all_to_all`'s (empty for a
    rank that only relays)."""
    members = plan.order.get(me, [])
    sl = _a2a_slices(len(buf), len(members), weights) if members else []
    for hop, d, via in plan.sends.get(me, []):
        a, b = sl[members.index(d)]
        yield Send(hop, buf[a:b], via)
    for origin, d in plan.relays.get(me, []):
        yield Send(d, (yield Recv(origin, NVLINK)), NET)
    got: dict[int, bytes] = {}
    for x, items in plan.incoming.get(me, {}).items():
        for origin, d, via in items:
            if d == me:                  # relay-bound ones came first and are forwarded
                got[origin] = yield Recv(x, via)
    yield Drain()
    if not members:
        return b""
    a, b = sl[members.index(me)]
    got[me] = buf[a:b]
    return b"".join(got[r] for r in members)


def send_recv(pairs: Sequence[tuple[int, int]], me: int, buf: bytes) -> Program:
    """Point to point, every (src, dst) pair at once: each sender sends its buffer to
    each of its receivers; a rank's result is what it received, in ``pairs`` order."""
    for src, dst in pairs:
        if src == me:
            yield Send(dst, buf)
    got = []
    for src, dst in pairs:
        if dst == me:
            got.append((yield Recv(src)))
    yield Drain()
    return b"".join(got)


def chain_broadcast(chain: Sequence[int], me: int, buf: bytes) -> Program:
    """Broadcast from ``chain[0]`` down the chain, pipelined in slices: each rank
    forwards a slice as soon as it has it. Every rank ends with the root's buffer."""
    i = chain.index(me)
    parts = slices(buf)
    for j in range(len(parts)):
        if i > 0:
            parts[j] = yield Recv(chain[i - 1])
        if i + 1 < len(chain):
            yield Send(chain[i + 1], parts[j])
    yield Drain()
    return b"".join(parts)


def chain_reduce(chain: Sequence[int], me: int, buf: bytes) -> Program:
    """Reduce up the chain to ``chain[0]``, pipelined in slices: each rank folds the
    next one's partial slice into its own and passes it on. The root ends with the
    XOR of every buffer; the others keep their own input."""
    i = chain.index(me)
    parts = slices(buf)
    for j in range(len(parts)):
        if i + 1 < len(chain):
            parts[j] = xor(parts[j], (yield Recv(chain[i + 1])))
        if i > 0:
            yield Send(chain[i - 1], parts[j])
    yield Drain()
    return b"".join(parts) if i == 0 else buf


def rooted_chain(ring: Sequence[int]) -> list[int]:
    """``ring`` rotated to start at its root, the lowest rank (broadcast and reduce)."""
    k = list(ring).index(min(ring))
    return list(ring[k:]) + list(ring[:k])


# --- ordering ---------------------------------------------------------------------------

def ring_order(ranks: Sequence[RankInfo], mode: str) -> list[int]:
    """The ring through ``ranks``: ``input`` order or ``rail``-aware (see module doc)."""
    if mode == "input":
        return [r.rank for r in ranks]
    if mode != "rail":
        raise ValueError(f"unknown ring order {mode!r} (rail, input)")
    servers: dict[str, list[RankInfo]] = {}
    for r in ranks:
        servers.setdefault(r.server, []).append(r)
    # Stable: servers of a block keep the job's order (names like b0h10 sort badly).
    ordered = sorted(servers.values(), key=lambda rs: rs[0].block)
    ring: list[int] = []
    for k, members in enumerate(ordered):
        by_rail = sorted(members, key=lambda r: r.rail, reverse=bool(k % 2))
        ring.extend(r.rank for r in by_rail)
    return ring


def tree_order(ranks: Sequence[RankInfo], mode: str) -> Tree:
    """The AllReduce tree over ``ranks``: ``input`` or ``rail``-aware (see module doc)."""
    if mode == "input":
        order = [r.rank for r in ranks]
        return {r: (order[(k - 1) // 2] if k else None) for k, r in enumerate(order)}
    if mode != "rail":
        raise ValueError(f"unknown tree order {mode!r} (rail, input)")
    servers: dict[str, list[RankInfo]] = {}
    for r in ranks:
        servers.setdefault(r.server, []).append(r)
    blocks: dict[int, list[list[RankInfo]]] = {}
    for members in servers.values():
        blocks.setdefault(members[0].block, []).append(sorted(members, key=lambda r: r.rail))
    # Server edges: (child server, parent server, index of the edge among its kind) --
    # binary heaps over the servers of a block and over the blocks' first servers.
    edges: list[tuple[list[RankInfo], list[RankInfo], int]] = []
    block_roots = [blocks[b][0] for b in sorted(blocks)]
    for k, srv in enumerate(block_roots[1:], 1):
        edges.append((srv, block_roots[(k - 1) // 2], k))
    for members in blocks.values():
        for k, srv in enumerate(members[1:], 1):
            edges.append((srv, members[(k - 1) // 2], k))
    tree: Tree = {block_roots[0][0].rank: None}
    up: dict[str, RankInfo] = {block_roots[0][0].server: block_roots[0][0]}
    for child, parent, k in edges:
        # Spread the edges over the rails both servers have; both ends on one rail.
        shared = sorted({r.rail for r in child} & {r.rail for r in parent})
        rail = shared[k % len(shared)] if shared else None
        c = next((r for r in child if r.rail == rail), child[0])
        p = next((r for r in parent if r.rail == rail), parent[0])
        tree[c.rank] = p.rank
        up[c.server] = c
    for members in servers.values():
        head = up[members[0].server]
        for r in members:
            if r.rank != head.rank:
                tree[r.rank] = head.rank
    return tree


def tree_hops(tree: Tree, ranks: dict[int, RankInfo]) -> dict[str, int]:
    """How many tree edges stay in a server, stay on one leaf, or cross a spine, and
    how many of those cross between blocks."""
    out = {"intra_server": 0, "same_leaf": 0, "spine": 0, "cross_block": 0}
    for c, p in tree.items():
        if p is None:
            continue
        out[_hop_kind(ranks[c], ranks[p])] += 1
        out["cross_block"] += ranks[c].block != ranks[p].block
    return out


def tree_flows(tree: Tree) -> list[tuple[int, int]]:
    """The (src, dst) rank pairs a tree AllReduce uses: every edge, both ways."""
    return [f for c, p in tree.items() if p is not None for f in ((c, p), (p, c))]


def _hop_kind(a: RankInfo, b: RankInfo) -> str:
    if a.server == b.server:
        return "intra_server"
    if (a.block, a.rail) == (b.block, b.rail):
        return "same_leaf"
    return "spine"


def ring_hops(ring: Sequence[int], ranks: dict[int, RankInfo]) -> dict[str, int]:
    """How many ring hops stay in a server, stay on one leaf, or cross a spine."""
    out = {"intra_server": 0, "same_leaf": 0, "spine": 0}
    for k, a in enumerate(ring):
        out[_hop_kind(ranks[a], ranks[ring[(k + 1) % len(ring)]])] += 1
    return out


def ring_flows(ring: Sequence[int]) -> list[tuple[int, int]]:
    """The (src, dst) rank pairs a ring uses."""
    return [(a, ring[(k + 1) % len(ring)]) for k, a in enumerate(ring)] if len(ring) > 1 else []


# --- running ------------------------------------------------------------------------------

class CollectiveError(RuntimeError):
    """A collective that did not finish (timeout) or broke its protocol."""


Task = Hashable     # a rank, or (rank, tag) when one rank runs several programs at once


def task_rank(task: Task) -> int:
    return task if isinstance(task, int) else task[0]


def run_collective(engine: Engine, programs: dict[Task, Program], timeout: float,
                   finished: dict[Task, float] | None = None,
                   sent: dict[tuple[int, int, str], int] | None = None) -> dict[Task, bytes]:
    """Drive the local programs to completion on ``engine``; their results by task.

    A task is a rank, or (rank, tag) for a rank running several programs at once (e.g.
    one per channel); ``finished`` receives each task's completion time (engine clock);
    ``sent`` adds up the bytes the programs sent, by (src, dst, channel) (`tccl.traffic`).
    """
    results: dict[Task, bytes] = {}
    waiting: dict[Task, object] = {}
    pending_sends: dict[Task, int] = {t: 0 for t in programs}

    def acked(task: Task) -> Callable[[], None]:
        def done() -> None:
            pending_sends[task] -= 1
        return done

    def step(task: Task, value: bytes | None) -> None:
        prog = programs[task]
        rank = task_rank(task)
        while True:
            try:
                op = prog.send(value)
            except StopIteration as stop:
                results[task] = stop.value
                waiting.pop(task, None)
                if finished is not None:
                    finished[task] = engine.clock()
                return
            value = None
            if isinstance(op, Send):
                pending_sends[task] += 1
                engine.send(rank, op.peer, op.data, acked(task), op.via)
                if sent is not None:
                    key = (rank, op.peer, op.via or engine.path(rank, op.peer))
                    sent[key] = sent.get(key, 0) + len(op.data)
                continue
            if isinstance(op, Recv):
                got = engine.take(rank, op.peer, op.via)
                if got is not None:
                    value = got
                    continue
            elif isinstance(op, Drain):
                if pending_sends[task] == 0:
                    continue
            else:
                raise CollectiveError(f"task {task}: program yielded {op!r}")
            waiting[task] = op
            return

    for task in programs:
        step(task, None)

    def advance() -> bool:
        for task, op in list(waiting.items()):
            if isinstance(op, Recv):
                got = engine.take(task_rank(task), op.peer, op.via)
                if got is not None:
                    step(task, got)
            elif pending_sends[task] == 0:
                step(task, None)
        return len(results) == len(programs)

    if not engine.run_until(advance, timeout):
        stuck = {t: repr(op) for t, op in waiting.items()}
        raise CollectiveError(f"collective did not finish in {timeout:.1f}s; waiting: {stuck}")
    return results


def net_latency_s(mtu: int, line_bps: float) -> float:
    """A ring step's fixed cost over the NICs before any measurement: one frame's
    store-and-forward over the two links of a rail (NIC -> leaf -> NIC)."""
    return 2 * mtu * 8 / line_bps


class SplitBalancer:
    """The NVLink share of split AllReduces, chosen so that both channels finish at
    once. A channel's time for ``b`` bytes per rank is modelled as ``steps x latency
    + b / bandwidth`` (a ring AllReduce of n ranks runs 2(n-1) steps, each paying the
    channel's latency once): small messages go mostly to the low-latency channel,
    large ones in proportion to bandwidth. The model starts from the configured rates
    and latencies; each run's measured (bytes, seconds) per channel refine it -- a
    least-squares line through the channel's last samples once their sizes differ
    (the share moves, so they do), else the bandwidth alone (averaged with the
    previous estimate, the latency kept)."""

    SAMPLES = 6              # per channel, for the line fit

    def __init__(self, nvlink_bps: float, net_bps: float, nvlink_latency_s: float = 0.0,
                 net_latency_s: float = 0.0) -> None:
        if nvlink_bps <= 0 or net_bps <= 0:
            raise ValueError(f"channel rates must be > 0, got {nvlink_bps}, {net_bps}")
        if nvlink_latency_s < 0 or net_latency_s < 0:
            raise ValueError(f"channel latencies must be >= 0, got {nvlink_latency_s}, {net_latency_s}")
        self.bw = {NVLINK: nvlink_bps, NET: net_bps}
        self.lat = {NVLINK: nvlink_latency_s, NET: net_latency_s}
        self.samples: dict[str, list[tuple[float, float]]] = {NVLINK: [], NET: []}

    @property
    def share(self) -> float:
        """The share for a message so large that latency does not count."""
        return self.bw[NVLINK] / (self.bw[NVLINK] + self.bw[NET])

    def share_for(self, size: int, n: int) -> float:
        """The share for an AllReduce of ``size`` bytes over ``n`` ranks: both
        channels' modelled times equal, clamped to [0, 1]."""
        if n < 2 or size <= 0:
            return 1.0
        steps, bits = 2 * (n - 1), size * 2 * (n - 1) / n * 8
        s = (bits / self.bw[NET] + steps * (self.lat[NET] - self.lat[NVLINK])) / \
            (bits / self.bw[NVLINK] + bits / self.bw[NET])
        return min(1.0, max(0.0, s))

    def update(self, channel: str, nbytes: int, seconds: float, steps: int = 1) -> None:
        """Fold in one measurement of ``channel``: ``nbytes`` per rank in ``seconds``
        over ``steps`` ring steps (ignored if it carried nothing)."""
        if nbytes <= 0 or seconds <= 0:
            return
        samples = self.samples[channel]
        samples.append((float(nbytes), seconds))
        del samples[:-self.SAMPLES]
        fit = _line(samples)
        if fit is not None:
            self.lat[channel], self.bw[channel] = fit[0] / steps, 8 / fit[1]
            return
        rest = seconds - steps * self.lat[channel]
        measured = nbytes * 8 / (rest if rest > 0 else seconds)
        self.bw[channel] = (self.bw[channel] + measured) / 2


def _line(samples: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """(intercept, slope) of the least-squares line through (bytes, seconds) samples,
    or None when their sizes are too alike (within 10 %) or the line is not a
    latency >= 0 plus a positive time per byte."""
    xs = [x for x, _ in samples]
    if len(samples) < 2 or max(xs) < 1.1 * min(xs):
        return None
    mx = sum(xs) / len(xs)
    my = sum(y for _, y in samples) / len(samples)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in samples) / sxx
    intercept = my - slope * mx
    return (intercept, slope) if slope > 0 and intercept >= 0 else None


def split_all_reduce(engine: Engine, ring: Sequence[int], size: int, seed: int, nvlink_share: float
                     ) -> tuple[dict[Task, Program], int]:
    """AllReduce among ranks of this server split over both channels at once: the first
    `split_point` bytes ring over NVLink, the rest over the NICs. Tasks are
    (rank, "nvlink") and (rank, "net"); returns them and the split point."""
    cut = split_point(size, nvlink_share)
    progs: dict[Task, Program] = {}
    for rank in ring:
        if rank not in engine.local:
            raise CollectiveError(f"split AllReduce needs every rank on this server; {rank} is not")
        data = rank_input(seed, rank, size)
        if cut:
            progs[(rank, NVLINK)] = ring_all_reduce(ring, rank, data[:cut], NVLINK)
        if cut < size:
            progs[(rank, NET)] = ring_all_reduce(ring, rank, data[cut:], NET)
    return progs, cut


def programs_for(op: str, engine: Engine, ring: Sequence[int], size: int, seed: int,
                 pairs: Sequence[tuple[int, int]] = ((0, 1),), tree: Tree | None = None,
                 weights: Sequence[float] = ()) -> tuple[dict[int, Program], dict[int, bytes]]:
    """The local ranks' programs for one run of ``op`` with ``size`` bytes, and their inputs.

    ``size`` is nccl-tests' size: the AllReduce buffer, the AllGather output, the
    ReduceScatter input, the AllToAll buffer per rank (cut by ``weights`` when
    given), the Broadcast and Reduce buffer (rooted at the lowest rank, down or up the
    ring from there), the SendRecv message. With a ``tree`` (over the ranks of
    ``ring``) an AllReduce runs as a tree instead.
    """
    if tree is not None and op != "allreduce":
        raise ValueError(f"only allreduce runs as a tree, not {op!r}")
    if tree is not None and set(tree) != set(ring):
        raise ValueError(f"the tree's ranks {sorted(tree)} are not the collective's {sorted(ring)}")
    n = len(ring)
    order = sorted(ring)
    progs: dict[int, Program] = {}
    inputs: dict[int, bytes] = {}
    for rank in engine.local:
        if rank not in ring:
            continue
        if op == "allgather":
            sizes = {r: b - a for r, (a, b) in zip(order, chunks(size, n))}
            data = rank_input(seed, rank, sizes[rank])
            progs[rank] = ring_all_gather(ring, rank, data, order, sizes)
        else:
            data = rank_input(seed, rank, size)
            if op == "allreduce":
                progs[rank] = ring_all_reduce(ring, rank, data) if tree is None else \
                    tree_all_reduce(tree, rank, data)
            elif op == "reducescatter":
                progs[rank] = ring_reduce_scatter(ring, rank, data, order)
            elif op == "alltoall":
                progs[rank] = all_to_all(order, rank, data, weights)
            elif op == "broadcast":
                progs[rank] = chain_broadcast(rooted_chain(ring), rank, data)
            elif op == "reduce":
                progs[rank] = chain_reduce(rooted_chain(ring), rank, data)
            elif op == "sendrecv":
                progs[rank] = send_recv(pairs, rank, data)
            else:
                raise ValueError(f"unknown collective {op!r}")
        inputs[rank] = data
    return progs, inputs


def expected(op: str, ring: Sequence[int], rank: int, size: int, seed: int,
             pairs: Sequence[tuple[int, int]] = ((0, 1),), weights: Sequence[float] = ()) -> bytes:
    """What rank ``rank`` must hold after ``op`` (computed from every rank's input).

    Inputs are regenerated one at a time, never all held at once: a 32 MiB AllReduce
    over 16 ranks would otherwise need half a gigabyte to check.
    """
    order = tuple(sorted(ring))
    n = len(order)
    if op == "allgather":
        sl = chunks(size, n)
        return b"".join(input_data(seed, r, sl[k][1] - sl[k][0]) for k, r in enumerate(order))
    if op == "allreduce":
        return _xor_of_inputs(seed, order, size)
    if op == "reducescatter":
        a, b = chunks(size, n)[order.index(rank)]
        return _xor_of_inputs(seed, order, size)[a:b]
    if op == "alltoall":
        a, b = _a2a_slices(size, n, weights)[order.index(rank)]
        return b"".join(input_data(seed, r, size)[a:b] for r in order)
    if op == "broadcast":
        return input_data(seed, order[0], size)
    if op == "reduce":
        return _xor_of_inputs(seed, order, size) if rank == order[0] else input_data(seed, rank, size)
    if op == "sendrecv":
        return b"".join(input_data(seed, src, size) for src, dst in pairs if dst == rank)
    raise ValueError(f"unknown collective {op!r}")


@functools.lru_cache(maxsize=1)
def _xor_of_inputs(seed: int, ranks: tuple[int, ...], size: int) -> bytes:
    """XOR of the inputs of ``ranks`` (cached: every local rank checks the same)."""
    acc = np.zeros(size, np.uint8)
    for r in ranks:
        np.bitwise_xor(acc, np.frombuffer(input_data(seed, r, size), np.uint8), out=acc)
    return acc.tobytes()
