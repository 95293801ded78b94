"""Imported workloads on the default fabric in Mininet (root): a SimAI MoE workload,
an AICB CSV and a Chakra DDP trace written by the tests' own writers, imported, run
for one iteration by the agents with every result checked; the bytes the agents count
per (op, group) are the ones the imported steps call for (the file's sizes, scaled).
Then a spread expert-parallel all-to-all, skewed, with PXN relays: right bytes, and
none of them on a spine inside a block."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterator

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mnexec") is None,
                                reason="needs root and Mininet")

import yaml  # noqa: E402

import importer_fixtures as F  # noqa: E402
from controller.routes import program_fabric  # noqa: E402
from tccl.importers.registry import import_trace  # noqa: E402
from tccl.job import Transport, Workload, job_from_fabric  # noqa: E402
from tccl.launch import run_on_fabric  # noqa: E402
from tccl.trace import load_trace, trace_document  # noqa: E402
from tccl.traffic import expected_bytes, merged  # noqa: E402
from topo.freeports import free_port_base  # noqa: E402
from topo.net import Fabric  # noqa: E402
from topo.spec import load_spec  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def fabric(tmp_path_factory) -> Iterator[tuple[Fabric, Path]]:
    tmp = tmp_path_factory.mktemp("importers-fabric")
    text = (ROOT / "topo" / "fabrics" / "default.yaml").read_text()
    spec_path = tmp / "fabric.yaml"
    spec_path.write_text(text.replace("grpc_port_base: 50051", f"grpc_port_base: {free_port_base(16)}")
                         + f"node_prefix: i{os.getpid() % 1000}\n")
    with Fabric(load_spec(spec_path), run_dir=tmp / "run", program=program_fabric) as fab:
        yield fab, spec_path


def run_trace(fab: Fabric, spec_path: Path, trace_path: Path, run_dir: Path, **transport) -> dict:
    job = job_from_fabric(spec_path, Workload(trace=str(trace_path), check=True),
                          Transport(nvlink_gbps=1.0, **transport), name=trace_path.stem)
    results = run_on_fabric(fab, job, run_dir, timeout=150)
    assert len(results) == len(fab.plan.servers)
    for server, res in results.items():
        assert res["trace_wrong"] == 0, server
    return merged(r["traffic"] for r in results.values())


@pytest.mark.parametrize("fmt,write,name", [("simai", F.simai_moe, "moe.txt"), ("aicb", F.aicb_set, "set.csv"),
                                            ("chakra", F.chakra_ddp, "ddp.0.et")])
def test_imported_workload_runs_with_the_files_bytes(fabric, tmp_path, fmt, write, name):
    fab, spec_path = fabric
    imported = import_trace(fmt, write(tmp_path / name), spec_path)
    trace_path = tmp_path / "trace.yaml"
    trace_path.write_text(yaml.safe_dump(trace_document(imported.trace)))
    traffic = run_trace(fab, spec_path, trace_path, tmp_path / "run")
    ranks = job_from_fabric(spec_path, Workload()).ranks
    assert traffic["bytes_by_step"] == expected_bytes(imported.trace.steps, ranks)
    assert set(traffic["bytes_by_step"]) == set(imported.source_bytes)
    # TP steps never leave their servers (NVLink).
    for label, chans in traffic["bytes_by_step_channel"].items():
        if label.endswith("/tp"):
            assert set(chans) == {"nvlink"}, label


def test_pxn_all_to_all_stays_on_its_rails(fabric, tmp_path):
    fab, spec_path = fabric
    path = tmp_path / "a2a.yaml"
    path.write_text(yaml.safe_dump({"name": "a2a", "iterations": 1, "ep": {"size": 2, "layout": "spread"},
                                    "steps": [{"op": "alltoall", "group": "ep", "size": 24_000,
                                               "weights": [3, 1]}]}))
    traffic = run_trace(fab, spec_path, path, tmp_path / "run", pxn=True)
    # EP pairs are the two servers of one block: PXN relays each cross-rail message
    # over NVLink and sends it on its destination's rail (one leaf), never a spine.
    chans = traffic["bytes_by_channel"]
    assert chans["spine"] == 0 and chans["leaf"] > 0 and chans["nvlink"] == chans["leaf"]
    assert load_trace(path).ep.layout == "spread"
