"""Foreign workload files for the importers' tests, written by the project's own
writers (`tccl.importers.*.write`) for the default fabric (16 GPUs: 4 servers of 4
rails in 2 blocks). Nothing here is copied from SimAI, AICB or Chakra."""

from __future__ import annotations

from pathlib import Path

from tccl.importers import aicb_csv, chakra, simai

MIB = 1 << 20


def simai_moe(path: Path, **header) -> Path:
    """A small MoE SimAI workload: TP 4 in the servers, EP 2 inside the rail groups, DP
    4; attention AllReduce over TP, expert dispatch/combine AllToAll over EP, expert
    gradients over DP x EP, the rest over DP."""
    P = simai.Phase
    layers = (
        simai.Layer("embedding", P(200_000), P(100_000), P(100_000, "ALLREDUCE", MIB), 10_000),
        simai.Layer("attention", P(1_000_000, "ALLREDUCE", MIB), P(900_000, "ALLREDUCE", MIB),
                    P(800_000, "ALLREDUCE", 2 * MIB), 20_000),
        simai.Layer("moe_dispatch", P(300_000, "ALLTOALL_EP", MIB), P(300_000, "ALLTOALL_EP", MIB),
                    P(0), 0),
        simai.Layer("experts", P(2_000_000, "ALLTOALL_EP", MIB), P(1_500_000, "ALLTOALL_EP", MIB),
                    P(1_500_000, "ALLREDUCE_DP_EP", 3 * MIB), 30_000),
        simai.Layer("head", P(100_000, "ALLGATHER", MIB), P(100_000, "REDUCESCATTER", MIB),
                    P(100_000, "BROADCAST", MIB), 0),
    )
    w = simai.Workload(layers, **{"tp": 4, "ep": 2, "pp": 1, "gpus": 16, **header})
    return simai.write(path, w)


def aicb_set(path: Path) -> Path:
    """AICB's CSV with a 1 MiB collective of every kind AICB writes in each group, a
    pipeline send, compute rows, a set-up row and a barrier."""
    R = aicb_csv.Row
    rows = [R("broadcast", "dp", 4, 8, stage="init.model_setup"),
            R("computation", stage="forward.layer0", elapsed_ms=1.5)]
    for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"):
        rows.append(R(op, "tp", 4, MIB, stage="forward.layer0"))
    rows.append(R("all_to_all", "ep", 2, MIB, stage="forward.moe"))
    rows.append(R("computation", stage="backward.layer0", elapsed_ms=2.5))
    rows.append(R("isend", "pp", 2, MIB, stage="forward.pp"))
    rows.append(R("irecv", "pp", 2, MIB, stage="backward.pp"))
    rows.append(R("barrier", "dp", 2, 0, stage="step"))
    for op in ("all_reduce", "reduce_scatter", "all_gather"):
        rows.append(R(op, "dp", 2, MIB, stage="backward.grads"))
    return aicb_csv.write(path, rows)


def chakra_ddp(path: Path) -> Path:
    """Rank 0 of a 16-rank DDP step as a Chakra ET: forward, backward in two buckets
    whose AllReduces depend on their compute (listed out of order in the file), the
    optimizer step after both."""
    N = chakra.NodeSpec
    nodes = [
        N(1, "forward", chakra.COMP, duration_us=30_000),
        N(5, "optimizer", chakra.COMP, duration_us=5_000, deps=(3, 4)),
        N(3, "allreduce_bucket0", chakra.COLL, comm_type=0, comm_size=MIB, pg_name="0", deps=(2,)),
        N(2, "backward0", chakra.COMP, duration_us=20_000, deps=(1,)),
        N(4, "allreduce_bucket1", chakra.COLL, comm_type=0, comm_size=MIB, pg_name="0", deps=(6,)),
        N(6, "backward1", chakra.COMP, duration_us=20_000, deps=(2,)),
        N(7, "recv_nothing", chakra.RECV, deps=(5,)),
    ]
    return chakra.write(path, nodes, {"0": list(range(16)), "1": [0, 1, 2, 3]})
