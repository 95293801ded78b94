"""Importers: SimAI/AICB workloads, AICB CSVs and Chakra ETs written by the project's
own writers (tests/importer_fixtures.py) become traces whose bytes per (op, group) are
the file's, scaled; malformed files are refused naming file:line (or node / byte)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import importer_fixtures as F
from tccl.importers import aicb_csv, chakra, simai
from tccl.importers.common import ImportRefused, fabric_shape, scaled
from tccl.importers.registry import detect, import_trace
from tccl.job import Workload, job_from_fabric
from tccl.trace import EpShape, load_trace, parse_trace, trace_document
from tccl.traffic import expected_bytes
from topo.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
FABRIC = ROOT / "topo" / "fabrics" / "default.yaml"
SCALE = load_spec(FABRIC).links.host_mbps / 400e3    # the default fabric's rate / 400 Gbit/s


def check_totals(imported, count: int) -> None:
    """Every (op, group) of the summary: bytes here = the file's, scaled per step."""
    assert sum(imported.steps.values()) == count
    got = imported.imported_bytes()
    for label, source in imported.source_bytes.items():
        assert got[label] == pytest.approx(source * imported.scale, abs=imported.steps[label]), label
    assert set(got) == set(imported.source_bytes)
    # What the agents will count on the wire follows from the same steps.
    ranks = job_from_fabric(FABRIC, Workload()).ranks
    assert set(expected_bytes(imported.trace.steps, ranks)) == set(got)
    doc = trace_document(imported.trace)
    assert parse_trace(doc) == imported.trace


def test_simai_moe_workload(tmp_path):
    imported = import_trace("simai", F.simai_moe(tmp_path / "moe.txt"), FABRIC)
    assert imported.scale == pytest.approx(SCALE)
    check_totals(imported, 12)
    assert imported.source_bytes["alltoall/ep"] == 4 * F.MIB
    assert imported.steps == {"allreduce/tp": 2, "alltoall/ep": 4, "allreduce/dp": 2, "allreduce/ranks": 1,
                              "allgather/tp": 1, "reducescatter/tp": 1, "broadcast/dp": 1}
    trace = imported.trace
    assert trace.ep is not None and (trace.ep.size, trace.ep.layout) == (2, "rail")
    # The expert gradients' DP x EP groups: one rail, servers 2 apart.
    dp_ep = next(s for s in trace.steps if s.group == "ranks")
    assert dp_ep.ranks == ((0, 8), (1, 9), (2, 10), (3, 11), (4, 12), (5, 13), (6, 14), (7, 15))
    # Forward in layer order, then backward in reverse: the first collective is the
    # attention's TP AllReduce, the last the embedding's DP one; compute is ns -> ms.
    ops = [(s.op, s.group) for s in trace.steps if s.op]
    assert ops[0] == ("allreduce", "tp") and ops[-1] == ("allreduce", "dp")
    assert sum(s.compute_ms for s in trace.steps if s.op is None) == pytest.approx(9.06)
    assert "allreduce/ranks" in imported.summary()


def test_aicb_csv_set(tmp_path):
    imported = import_trace("aicb", F.aicb_set(tmp_path / "set.csv"), FABRIC)
    check_totals(imported, 10)
    assert imported.steps["sendrecv/pp"] == 1 and imported.steps["alltoall/ep"] == 1
    assert any("skipped 1 set-up (init) rows, 2 barrier/receive rows" in n for n in imported.notes)
    # PP 2 = the blocks, so the DP groups are a rail inside a block: explicit ranks.
    dp = next(s for s in imported.trace.steps if s.group == "ranks")
    assert dp.ranks[0] == (0, 4)


def test_chakra_ddp_trace_in_dependency_order(tmp_path):
    imported = import_trace("chakra", F.chakra_ddp(tmp_path / "ddp.0.et"), FABRIC)
    check_totals(imported, 2)
    steps = [(s.op, s.compute_ms) for s in imported.trace.steps]
    assert steps == [(None, 50.0), ("allreduce", 0.0), (None, 20.0), ("allreduce", 0.0), (None, 5.0)]
    assert imported.steps == {"allreduce/all": 2}


def test_size_scale_and_iterations(tmp_path):
    imported = import_trace("chakra", F.chakra_ddp(tmp_path / "ddp.0.et"), FABRIC, size_scale=0.001, iterations=3)
    assert imported.trace.iterations == 3
    assert {s.size for s in imported.trace.steps if s.op} == {scaled(F.MIB, 0.001)} == {1049}
    assert scaled(3, 1e-9) == 1


def test_detect_and_cli(tmp_path):
    moe, csv, et = F.simai_moe(tmp_path / "moe.txt"), F.aicb_set(tmp_path / "s.csv"), F.chakra_ddp(tmp_path / "d.0.et")
    assert [detect(p) for p in (moe, csv, et)] == ["simai", "aicb", "chakra"]
    assert detect(ROOT / "traces" / "dp_tp_pp.yaml") is None
    out = tmp_path / "moe.yaml"
    run = subprocess.run([sys.executable, "-m", "tccl.importers", "auto", str(moe), "-o", str(out)],
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "alltoall/ep" in run.stdout and f"wrote {out}" in run.stdout
    assert load_trace(out).ep is not None
    bad = subprocess.run([sys.executable, "-m", "tccl.importers", "simai", str(csv), "-o", str(out)],
                         cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and f"{csv}:1: policy" in bad.stderr


def simai_lines(tmp_path, edit) -> Path:
    path = F.simai_moe(tmp_path / "w.txt")
    lines = path.read_text().splitlines()
    edit(lines)
    path.write_text("\n".join(lines) + "\n")
    return path


def _set(lines, n, column, value):
    cols = lines[n - 1].split()
    cols[simai.COLUMNS.index(column)] = value
    lines[n - 1] = " ".join(cols)


@pytest.mark.parametrize("edit,message", [
    (lambda L: _set(L, 4, "fwd_size", "0"), r"w.txt:4: fwd_comm: ALLREDUCE of 0 bytes"),
    (lambda L: _set(L, 5, "ig_comm", "ALLREDUCEALLTOALL_EP"), r"w.txt:5: ig_comm: 'ALLREDUCEALLTOALL_EP' has no"),
    (lambda L: _set(L, 6, "wg_compute", "1.5"), r"w.txt:6: wg_compute: an integer, found '1.5'"),
    (lambda L: L.__setitem__(3, "short -1 1 NONE 0"), r"w.txt:4: a layer has 12 columns"),
    (lambda L: L.__setitem__(1, "7"), r"w.txt:2: 7 layers announced, 5 layer lines follow"),
    (lambda L: L.__setitem__(0, L[0].replace("model_parallel_NPU_group: 4", "model_parallel_NPU_group: 2")),
     r"w.txt:1: TP size 2: TP runs inside a server"),
    (lambda L: L.__setitem__(0, L[0].replace("all_gpus: 16", "all_gpus: 32")),
     r"w.txt:1: the workload has 32 GPUs, the fabric 16"),
    (lambda L: L.__setitem__(0, L[0].replace("ep: 2", "ep: 1")), r"w.txt:5: fwd_comm: ALLTOALL_EP over ep groups of one rank"),
    (lambda L: L.__setitem__(0, L[0].replace("pp: 1", "pp: 2")), r"w.txt:1: pp_comm: PP 2 needs the bytes"),
    (lambda L: L.__setitem__(0, "DLRM_X " + L[0]), r"w.txt:1: policy 'DLRM_X'"),
])
def test_simai_refusals_name_file_and_line(tmp_path, edit, message):
    path = simai_lines(tmp_path, edit)
    with pytest.raises(ImportRefused, match=message.replace("w.txt", str(path))):
        import_trace("simai", path, FABRIC)


@pytest.mark.parametrize("row,message", [
    (aicb_csv.Row("all_reduce", "tp", 8, F.MIB), r"s.csv:17: comm_group_size 8: earlier tp rows had 4"),
    (aicb_csv.Row("all_reduce", "dp", 2, 0), r"s.csv:17: msg_size 0"),
    (aicb_csv.Row("gather", "dp", 2, 8), r"s.csv:17: comm_type 'gather' has no testbed collective"),
    (aicb_csv.Row("all_reduce", "moe", 2, 8), r"s.csv:17: comm_group 'moe'"),
    (aicb_csv.Row("isend", "dp", 2, 8), r"s.csv:17: isend in dp: sends go to the next pipeline stage only"),
])
def test_aicb_refusals_name_file_and_line(tmp_path, row, message):
    path = F.aicb_set(tmp_path / "s.csv")
    text = path.read_text()
    extra = tmp_path / "x.csv"
    aicb_csv.write(extra, [row])
    path.write_text(text + extra.read_text().splitlines()[1] + "\n")
    with pytest.raises(ImportRefused, match=message.replace("s.csv", str(path))):
        import_trace("aicb", path, FABRIC)


def test_aicb_csv_too_big_for_the_fabric(tmp_path):
    path = aicb_csv.write(tmp_path / "big.csv", [aicb_csv.Row("all_reduce", "dp", 8, 64)])
    with pytest.raises(ImportRefused, match=rf"{path}:1: the workload has 8 GPUs, the fabric 16"):
        import_trace("aicb", path, FABRIC)


def chakra_with(tmp_path, node: chakra.NodeSpec, groups=None) -> Path:
    nodes = [chakra.NodeSpec(1, "fwd", chakra.COMP, duration_us=10), node]
    return chakra.write(tmp_path / "t.0.et", nodes, groups or {"0": list(range(16)), "tp": [0, 1, 2, 3],
                                                                  "odd": [0, 6]})


@pytest.mark.parametrize("node,message", [
    (chakra.NodeSpec(2, "ar", chakra.COLL, comm_type=0, comm_size=0, pg_name="0"), r"node 2 \(ar\): comm_size 0"),
    (chakra.NodeSpec(2, "ar", chakra.COLL, comm_type=0, comm_size=8, pg_name="9"), r"node 2 \(ar\): pg_name '9': no such"),
    (chakra.NodeSpec(2, "ar", chakra.COLL, comm_type=0, comm_size=8, pg_name="odd"),
     r"node 2 \(ar\): process group 'odd' \(ranks \[0, 6\]\) is none of the fabric's groups"),
    (chakra.NodeSpec(2, "g", chakra.COLL, comm_type=3, comm_size=8, pg_name="0"), r"node 2 \(g\): comm_type 3 has no"),
    (chakra.NodeSpec(2, "s", chakra.SEND, comm_size=8, comm_dst=3), r"node 2 \(s\): a send from rank 0 to 3"),
    (chakra.NodeSpec(2, "c", chakra.COMP, duration_us=5, deps=(3,)), r"no collective or send"),
])
def test_chakra_refusals_name_the_node(tmp_path, node, message):
    path = chakra_with(tmp_path, node)
    with pytest.raises(ImportRefused, match=message):
        import_trace("chakra", path, FABRIC)


def test_chakra_tp_group_and_pipeline_send_map(tmp_path):
    path = chakra.write(tmp_path / "t.0.et", [
        chakra.NodeSpec(1, "ar", chakra.COLL, comm_type=0, comm_size=4000, pg_name="tp"),
        chakra.NodeSpec(2, "send", chakra.SEND, comm_size=4000, comm_dst=8, deps=(1,))],
        {"0": list(range(16)), "tp": [0, 1, 2, 3]})
    imported = import_trace("chakra", path, FABRIC, size_scale=1.0)
    assert [(s.op, s.group, s.size) for s in imported.trace.steps] == [("allreduce", "tp", 4000),
                                                                       ("sendrecv", "pp", 4000)]
    # Ranks 0 and 5: servers 0 and 1 on rails 0 and 1 -- an EP group spread over rails.
    spread = chakra.write(tmp_path / "e.0.et", [chakra.NodeSpec(1, "a2a", chakra.COLL, comm_type=6, comm_size=64,
                                                                pg_name="e")], {"0": list(range(16)), "e": [0, 5]})
    (step,) = import_trace("chakra", spread, FABRIC, size_scale=1.0).trace.steps
    assert (step.group, step.ep) == ("ep", EpShape(2, "spread"))


def test_chakra_damaged_files(tmp_path):
    good = F.chakra_ddp(tmp_path / "d.0.et").read_bytes()
    cut = tmp_path / "cut.0.et"
    cut.write_bytes(good[:-3])
    with pytest.raises(ImportRefused, match=rf"{cut}: byte \d+: node #\d+: not a Chakra record"):
        import_trace("chakra", cut, FABRIC)
    junk = tmp_path / "junk.0.et"
    junk.write_bytes(b"\xff" * 12)
    with pytest.raises(ImportRefused, match=rf"{junk}: byte 0: the GlobalMetadata"):
        import_trace("chakra", junk, FABRIC)
    world = chakra.write(tmp_path / "w.0.et", [chakra.NodeSpec(1, "ar", chakra.COLL, comm_type=0, comm_size=8,
                                                               pg_name="0")], {"0": list(range(32))})
    with pytest.raises(ImportRefused, match="the process groups span 32 ranks, the fabric has 16"):
        import_trace("chakra", world, FABRIC)


def test_chakra_reads_the_field_numbers_of_et_def_proto(tmp_path):
    """Our schema's wire format, checked by hand against et_def.proto's numbers: a
    Node's name is field 2 (tag 0x12), type field 3 (0x18), duration_micros field 7
    (0x38), attr field 10 (0x52); an attribute's int64_val is field 9 (0x48)."""
    node = chakra.SCHEMA["Node"](id=7, name="n", type=chakra.COLL, duration_micros=5)
    node.attr.append(chakra.SCHEMA["AttributeProto"](name="comm_size", int64_val=300))
    wire = node.SerializeToString()
    assert wire.startswith(bytes([0x08, 7, 0x12, 1]) + b"n" + bytes([0x18, 7, 0x38, 5, 0x52]))
    assert bytes([0x48, 0xAC, 0x02]) in wire            # 300 as a varint
    assert fabric_shape(FABRIC).gpus == 16


def test_the_demo_takes_a_foreign_file_directly(tmp_path):
    """`make demo TRACE=file`: experiments.configs.prepare_trace recognises the file,
    imports it for the run's fabric and logs the summary."""
    from experiments.configs import prepare_trace

    logged: list[str] = []
    moe = F.simai_moe(tmp_path / "moe.txt")
    path = prepare_trace(moe, tmp_path / "trace.yaml", iterations=2, fabric=FABRIC, log=logged.append)
    assert load_trace(path) == import_trace("simai", moe, FABRIC, iterations=2).trace
    assert "alltoall/ep" in logged[0]
    with pytest.raises(ValueError, match="a simai file is imported for a fabric"):
        prepare_trace(moe, tmp_path / "t2.yaml")
