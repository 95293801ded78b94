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
only hops that cross a spine are the two between blocks. Hops inside a server use the
emulated NVLink when the job has one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Generator, Iterable, Sequence

from tccl.engine import Engine
from tccl.job import RankInfo


@dataclass(frozen=True)
class Send:
    peer: int
    data: bytes | memoryview


@dataclass(frozen=True)
class Recv:
    peer: int


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

def _ring_reduce_scatter(ring: Sequence[int], me: int, parts: list[bytes]) -> Program:
    """Ring reduce-scatter over ``parts`` (one per ring position): at step s position i
    sends part (i-s) mod n and reduces part (i-s-1) mod n into what it receives, so
    after n-1 steps position i holds part (i+1) mod n reduced over all ranks."""
    n = len(ring)
    i = ring.index(me)
    nxt, prv = ring[(i + 1) % n], ring[(i - 1) % n]
    for step in range(n - 1):
        s, r = (i - step) % n, (i - step - 1) % n
        yield Send(nxt, parts[s])
        got = yield Recv(prv)
        parts[r] = xor(parts[r], got)
    yield Drain()
    return parts


def _ring_all_gather(ring: Sequence[int], me: int, parts: list[bytes], own: int) -> Program:
    """Ring all-gather where position i starts with part (i+own) mod n valid; after n-1
    steps every position holds every part."""
    n = len(ring)
    i = ring.index(me)
    nxt, prv = ring[(i + 1) % n], ring[(i - 1) % n]
    for step in range(n - 1):
        s, r = (i + own - step) % n, (i + own - step - 1) % n
        yield Send(nxt, parts[s])
        parts[r] = yield Recv(prv)
    yield Drain()
    return parts


def ring_all_reduce(ring: Sequence[int], me: int, buf: bytes) -> Program:
    """Reduce-scatter then all-gather: each rank sends 2(n-1)/n of the buffer."""
    n = len(ring)
    parts = [buf[a:b] for a, b in chunks(len(buf), n)]
    if n > 1:
        parts = yield from _ring_reduce_scatter(ring, me, parts)
        parts = yield from _ring_all_gather(ring, me, parts, own=1)
    return b"".join(parts)


def ring_reduce_scatter(ring: Sequence[int], me: int, buf: bytes, order: Sequence[int]) -> Program:
    """ReduceScatter: the k-th rank of ``order`` ends with reduced chunk k of the buffer."""
    n = len(ring)
    sl = chunks(len(buf), n)
    slot = {r: k for k, r in enumerate(order)}
    # Position i finishes owning part (i+1) mod n: make that part its rank's chunk.
    parts: list[bytes] = [b""] * n
    for pos, r in enumerate(ring):
        a, b = sl[slot[r]]
        parts[(pos + 1) % n] = buf[a:b]
    if n > 1:
        parts = yield from _ring_reduce_scatter(ring, me, parts)
    return parts[(ring.index(me) + 1) % n]


def ring_all_gather(ring: Sequence[int], me: int, mine: bytes, order: Sequence[int]) -> Program:
    """AllGather: every rank contributes ``mine``; the result is them in ``order``."""
    n = len(ring)
    parts: list[bytes] = [b""] * n
    parts[ring.index(me)] = mine
    if n > 1:
        parts = yield from _ring_all_gather(ring, me, parts, own=0)
    by_rank = dict(zip(ring, parts))
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


def send_recv(sender: int, receiver: int, me: int, buf: bytes) -> Program:
    """Point to point: ``sender``'s buffer ends up at ``receiver``."""
    if me == sender:
        yield Send(receiver, buf)
        yield Drain()
        return buf
    if me == receiver:
        return (yield Recv(sender))
    return b""


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
    ordered = sorted(servers.values(), key=lambda rs: (rs[0].block, rs[0].server))
    ring: list[int] = []
    for k, members in enumerate(ordered):
        by_rail = sorted(members, key=lambda r: r.rail, reverse=bool(k % 2))
        ring.extend(r.rank for r in by_rail)
    return ring


def ring_hops(ring: Sequence[int], ranks: dict[int, RankInfo]) -> dict[str, int]:
    """How many ring hops stay in a server, stay on one leaf, or cross a spine."""
    out = {"intra_server": 0, "same_leaf": 0, "spine": 0}
    for k, a in enumerate(ring):
        ra, rb = ranks[a], ranks[ring[(k + 1) % len(ring)]]
        if ra.server == rb.server:
            out["intra_server"] += 1
        elif (ra.block, ra.rail) == (rb.block, rb.rail):
            out["same_leaf"] += 1
        else:
            out["spine"] += 1
    return out


def ring_flows(ring: Sequence[int]) -> list[tuple[int, int]]:
    """The (src, dst) rank pairs a ring uses."""
    return [(a, ring[(k + 1) % len(ring)]) for k, a in enumerate(ring)] if len(ring) > 1 else []


# --- running ------------------------------------------------------------------------------

class CollectiveError(RuntimeError):
    """A collective that did not finish (timeout) or broke its protocol."""


def run_collective(engine: Engine, programs: dict[int, Program], timeout: float) -> dict[int, bytes]:
    """Drive the local ranks' programs to completion on ``engine``; their results by rank."""
    results: dict[int, bytes] = {}
    waiting: dict[int, object] = {}
    pending_sends: dict[int, int] = {r: 0 for r in programs}

    def sent(rank: int) -> Callable[[], None]:
        def done() -> None:
            pending_sends[rank] -= 1
        return done

    def step(rank: int, value: bytes | None) -> None:
        prog = programs[rank]
        while True:
            try:
                op = prog.send(value)
            except StopIteration as stop:
                results[rank] = stop.value
                waiting.pop(rank, None)
                return
            value = None
            if isinstance(op, Send):
                pending_sends[rank] += 1
                engine.send(rank, op.peer, op.data, sent(rank))
                continue
            if isinstance(op, Recv):
                got = engine.take(rank, op.peer)
                if got is not None:
                    value = got
                    continue
            elif isinstance(op, Drain):
                if pending_sends[rank] == 0:
                    continue
            else:
                raise CollectiveError(f"rank {rank}: program yielded {op!r}")
            waiting[rank] = op
            return

    for rank in programs:
        step(rank, None)

    def advance() -> bool:
        for rank, op in list(waiting.items()):
            if isinstance(op, Recv):
                got = engine.take(rank, op.peer)
                if got is not None:
                    step(rank, got)
            elif pending_sends[rank] == 0:
                step(rank, None)
        return len(results) == len(programs)

    if not engine.run_until(advance, timeout):
        stuck = {r: repr(op) for r, op in waiting.items()}
        raise CollectiveError(f"collective did not finish in {timeout:.1f}s; waiting: {stuck}")
    return results


def programs_for(op: str, engine: Engine, ring: Sequence[int], size: int, seed: int,
                 peers: tuple[int, int] = (0, 1)) -> tuple[dict[int, Program], dict[int, bytes]]:
    """The local ranks' programs for one run of ``op`` with ``size`` bytes, and their inputs.

    ``size`` is nccl-tests' size: the AllReduce buffer, the AllGather output, the
    ReduceScatter input, the AllToAll buffer per rank, the SendRecv message.
    """
    n = len(ring)
    order = sorted(ring)
    progs: dict[int, Program] = {}
    inputs: dict[int, bytes] = {}
    for rank in engine.local:
        if rank not in ring:
            continue
        if op == "allgather":
            per = chunks(size, n)[order.index(rank)]
            data = input_data(seed, rank, per[1] - per[0])
            progs[rank] = ring_all_gather(ring, rank, data, order)
        else:
            data = input_data(seed, rank, size)
            if op == "allreduce":
                progs[rank] = ring_all_reduce(ring, rank, data)
            elif op == "reducescatter":
                progs[rank] = ring_reduce_scatter(ring, rank, data, order)
            elif op == "alltoall":
                progs[rank] = all_to_all(order, rank, data)
            elif op == "sendrecv":
                progs[rank] = send_recv(peers[0], peers[1], rank, data)
            else:
                raise ValueError(f"unknown collective {op!r}")
        inputs[rank] = data
    return progs, inputs


def expected(op: str, ring: Sequence[int], rank: int, size: int, seed: int,
             peers: tuple[int, int] = (0, 1)) -> bytes:
    """What rank ``rank`` must hold after ``op`` (computed from every rank's input)."""
    order = sorted(ring)
    n = len(order)
    if op == "allgather":
        sl = chunks(size, n)
        return b"".join(input_data(seed, r, sl[k][1] - sl[k][0]) for k, r in enumerate(order))
    inputs = {r: input_data(seed, r, size) for r in order} if op != "sendrecv" else {}
    if op == "allreduce":
        return _xor_all(inputs.values())
    if op == "reducescatter":
        total = _xor_all(inputs.values())
        a, b = chunks(size, n)[order.index(rank)]
        return total[a:b]
    if op == "alltoall":
        sl = chunks(size, n)
        k = order.index(rank)
        return b"".join(inputs[r][sl[k][0]:sl[k][1]] for r in order)
    if op == "sendrecv":
        if rank == peers[1]:
            return input_data(seed, peers[0], size)
        return input_data(seed, rank, size) if rank == peers[0] else b""
    raise ValueError(f"unknown collective {op!r}")


def _xor_all(bufs: Iterable[bytes]) -> bytes:
    acc = 0
    n = 0
    for b in bufs:
        acc ^= int.from_bytes(b, "little")
        n = len(b)
    return acc.to_bytes(n, "little")
