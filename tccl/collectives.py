"""Collectives as per-rank programs over messages, and the ring orders they run on.

Each collective is a generator per rank that yields `Send` (non-blocking), `Recv`
(suspends until the next message from that peer is in) and `Drain` (suspends until
every message this rank sent is acknowledged). `run_collective` steps the local ranks'
generators from the engine's event loop, so one agent drives all its ranks at once.

The data are real bytes; the reduction is bitwise XOR (MPI's ``MPI_BXOR``): it runs at
C speed on whole chunks (via Python's big integers, no numpy here) and makes the result
checkable -- an AllReduce must equal the XOR of every rank's input.

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
    """Bytewise XOR of two equal-length buffers (the reduction operator)."""
    if len(a) != len(b):
        raise ValueError(f"cannot reduce buffers of {len(a)} and {len(b)} bytes")
    n = len(a)
    return (int.from_bytes(a, "little") ^ int.from_bytes(b, "little")).to_bytes(n, "little")


def input_data(seed: int, rank: int, size: int) -> bytes:
    """The synthetic input buffer of ``rank`` (same on every agent: checkable)."""
    return random.Random(f"{seed}/{rank}/{size}").randbytes(size)


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


def all_to_all(ranks: Sequence[int], me: int, buf: bytes) -> Program:
    """Rank k's chunk j goes to rank j; the result holds chunk k of every rank, in order."""
    n = len(ranks)
    sl = chunks(len(buf), n)
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
                   finished: dict[Task, float] | None = None) -> dict[Task, bytes]:
    """Drive the local programs to completion on ``engine``; their results by task.

    A task is a rank, or (rank, tag) for a rank running several programs at once (e.g.
    one per channel); ``finished`` receives each task's completion time (engine clock).
    """
    results: dict[Task, bytes] = {}
    waiting: dict[Task, object] = {}
    pending_sends: dict[Task, int] = {t: 0 for t in programs}

    def sent(task: Task) -> Callable[[], None]:
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
                engine.send(rank, op.peer, op.data, sent(task), op.via)
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


class SplitBalancer:
    """The NVLink share of split AllReduces, in proportion to the bandwidths the two
    channels achieved: starts from the configured rates, then each run's measured
    bytes/second per channel (averaged with the previous estimate) set the next share."""

    def __init__(self, nvlink_bps: float, net_bps: float) -> None:
        if nvlink_bps <= 0 or net_bps <= 0:
            raise ValueError(f"channel rates must be > 0, got {nvlink_bps}, {net_bps}")
        self.bw = {NVLINK: nvlink_bps, NET: net_bps}

    @property
    def share(self) -> float:
        return self.bw[NVLINK] / (self.bw[NVLINK] + self.bw[NET])

    def update(self, channel: str, nbytes: int, seconds: float) -> None:
        """Fold in one measurement of ``channel`` (ignored if it carried nothing)."""
        if nbytes > 0 and seconds > 0:
            self.bw[channel] = (self.bw[channel] + nbytes * 8 / seconds) / 2


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
        data = input_data(seed, rank, size)
        if cut:
            progs[(rank, NVLINK)] = ring_all_reduce(ring, rank, data[:cut], NVLINK)
        if cut < size:
            progs[(rank, NET)] = ring_all_reduce(ring, rank, data[cut:], NET)
    return progs, cut


def programs_for(op: str, engine: Engine, ring: Sequence[int], size: int, seed: int,
                 pairs: Sequence[tuple[int, int]] = ((0, 1),), tree: Tree | None = None
                 ) -> tuple[dict[int, Program], dict[int, bytes]]:
    """The local ranks' programs for one run of ``op`` with ``size`` bytes, and their inputs.

    ``size`` is nccl-tests' size: the AllReduce buffer, the AllGather output, the
    ReduceScatter input, the AllToAll buffer per rank, the SendRecv message. With a
    ``tree`` (over the ranks of ``ring``) an AllReduce runs as a tree instead.
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
            data = input_data(seed, rank, sizes[rank])
            progs[rank] = ring_all_gather(ring, rank, data, order, sizes)
        else:
            data = input_data(seed, rank, size)
            if op == "allreduce":
                progs[rank] = ring_all_reduce(ring, rank, data) if tree is None else \
                    tree_all_reduce(tree, rank, data)
            elif op == "reducescatter":
                progs[rank] = ring_reduce_scatter(ring, rank, data, order)
            elif op == "alltoall":
                progs[rank] = all_to_all(order, rank, data)
            elif op == "sendrecv":
                progs[rank] = send_recv(pairs, rank, data)
            else:
                raise ValueError(f"unknown collective {op!r}")
        inputs[rank] = data
    return progs, inputs


def expected(op: str, ring: Sequence[int], rank: int, size: int, seed: int,
             pairs: Sequence[tuple[int, int]] = ((0, 1),)) -> bytes:
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
        a, b = chunks(size, n)[order.index(rank)]
        return b"".join(input_data(seed, r, size)[a:b] for r in order)
    if op == "sendrecv":
        return b"".join(input_data(seed, src, size) for src, dst in pairs if dst == rank)
    raise ValueError(f"unknown collective {op!r}")


@functools.lru_cache(maxsize=1)
def _xor_of_inputs(seed: int, ranks: tuple[int, ...], size: int) -> bytes:
    """XOR of the inputs of ``ranks`` (cached: every local rank checks the same)."""
    acc = 0
    for r in ranks:
        acc ^= int.from_bytes(input_data(seed, r, size), "little")
    return acc.to_bytes(size, "little")
