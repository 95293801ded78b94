"""Job files: round trip, fabric-derived ranks, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from topo.spec import load_spec
from tccl.job import Transport, Workload, job_from_fabric, load_job, parse_job, qpn, qpn_ranks
from tccl.ranks import JobError

FABRIC = Path(__file__).resolve().parent.parent / "topo" / "fabrics" / "default.yaml"
RANK = {"server": "h", "block": 0, "rail": 0, "iface": "eth0", "ip": "10.0.0.1",
        "mac": "02:00:00:00:00:01", "gateway_mac": "02:ff:00:00:00:01"}


def test_round_trip_through_yaml(tmp_path):
    job = job_from_fabric(FABRIC, Workload(op="sendrecv", sizes=(10, 20), pairs=((0, 5), (3, 1))),
                          Transport(ports="orthogonal"), name="rt")
    path = tmp_path / "job.yaml"
    job.save(path)
    back = load_job(path)
    assert back == job
    spec = load_spec(FABRIC)
    assert len(job.ranks) == 16 and job.transport.line_mbps == spec.links.host_mbps
    assert job.ranks[5].server == "b0h1" and job.ranks[5].rail == 1
    assert job.ranks[0].gateway_mac == "02:ff:00:00:00:01"


@pytest.mark.parametrize("doc,message", [
    ({"ranks": []}, "ranks: a non-empty list"),
    ({"ranks": [RANK], "colour": 1}, "colour: unknown key"),
    ({"ranks": [{**RANK, "gpu": 1}]}, r"ranks\[0\]: missing \[\] / unknown \['gpu'\]"),
    ({"ranks": [RANK], "transport": {"mtu": 9}}, "transport.mtu: must be 64..4096"),
    ({"ranks": [RANK], "transport": {"ports": "best"}}, "transport.ports: one of random, orthogonal"),
    ({"ranks": [RANK], "transport": {"speed": 1}}, "transport.speed: unknown key"),
    ({"ranks": [RANK], "workload": {"op": "bcast"}}, "workload.op: one of"),
    ({"ranks": [RANK], "workload": {"sizes": [0]}}, "workload.sizes"),
    ({"ranks": [RANK, {**RANK, "server": "g"}]}, r"ranks\[1\].ip: 10.0.0.1 already used by rank 0"),
    ({"ranks": [RANK, {**RANK, "ip": "10.0.0.2"}], "workload": {"op": "sendrecv", "pairs": [[0, 0]]}},
     r"workload.pairs\[0\]: two different ranks"),
    ({"ranks": [RANK], "workload": {"algo": "butterfly"}}, "workload.algo: one of ring, tree"),
    ({"ranks": [RANK], "workload": {"algo": "tree", "op": "alltoall"}},
     "workload.algo: tree runs allreduce only"),
    ({"ranks": [RANK], "transport": {"nvlink_gbps": -1}},
     "transport: nvlink_gbps and nvlink_latency_us must be >= 0"),
    ({"ranks": [RANK], "fabric": "/nonexistent/fabric.yaml"}, "j.yaml: fabric: the job's NVLink settings"),
])
def test_bad_jobs_name_the_key(doc, message):
    with pytest.raises(JobError, match=message):
        parse_job(doc, "j.yaml")


def test_unknown_server_and_missing_file(tmp_path):
    job = parse_job({"ranks": [RANK]})
    with pytest.raises(JobError, match="server 'x' has no ranks.*servers: h"):
        job.server_ranks("x")
    with pytest.raises(JobError, match="cannot read the job file"):
        load_job(tmp_path / "nope.yaml")


def test_qp_numbers_encode_both_ranks():
    assert qpn_ranks(qpn(17, 1023)) == (17, 1023)
    assert qpn_ranks(0x42) is None
    assert len({qpn(a, b) for a in range(40) for b in range(40)}) == 1600


def test_job_from_a_prompt_command():
    from tccl.launch import job_from_command, parse_size

    assert (parse_size("64K"), parse_size("1M"), parse_size("4096"), parse_size("2kb")) == \
        (65536, 1 << 20, 4096, 2048)
    job = job_from_command("allreduce 64K,1M --ports random --order input --algo tree --iters 2", FABRIC)
    assert job.workload.sizes == (65536, 1 << 20) and job.workload.order == "input"
    assert job.workload.algo == "tree"
    assert job.transport.ports == "random" and job.workload.iters == 2
    with pytest.raises(ValueError, match="usage: tccl"):
        job_from_command("bcast 1K", FABRIC)
    with pytest.raises(ValueError, match="not a size"):
        parse_size("lots")


def test_time_factor_comes_from_the_fabric_unless_the_job_sets_it(tmp_path):
    assert job_from_fabric(FABRIC, Workload()).transport.time_factor == load_spec(FABRIC).time_factor == 200.0
    slow = tmp_path / "slow.yaml"
    slow.write_text(FABRIC.read_text().replace("time_factor: 200 ", "time_factor: 50 "))
    job = job_from_fabric(slow, Workload())
    assert job.transport.time_factor == 50.0 and isinstance(job.transport.time_factor, float)
    # DCQCN's timers follow: the CNP interval is 50 us x the factor.
    assert job.transport.dcqcn().cnp_interval == pytest.approx(50e-6 * 50)
    assert job_from_fabric(slow, Workload(), Transport(time_factor=400)).transport.time_factor == 400
    assert parse_job({"ranks": [RANK], "fabric": str(slow)}).transport.time_factor == 50.0
    assert parse_job({"ranks": [RANK]}).transport.time_factor == 200.0


def test_nvlink_comes_from_the_fabric_unless_the_job_sets_it(tmp_path):
    spec = load_spec(FABRIC)
    default = job_from_fabric(FABRIC, Workload())
    assert (default.transport.nvlink_gbps, default.transport.nvlink_latency_us) == \
        (spec.nvlink.gbps, spec.nvlink.latency_us) == (0.0, 5.0)
    fast = tmp_path / "fast.yaml"
    fast.write_text(FABRIC.read_text().replace("  gbps: 0 ", "  gbps: 3 ")
                    .replace("latency_us: 5", "latency_us: 2"))
    job = job_from_fabric(fast, Workload())
    assert (job.transport.nvlink_gbps, job.transport.nvlink_latency_us) == (3.0, 2.0)
    mine = job_from_fabric(fast, Workload(), Transport(nvlink_gbps=0.5))
    assert (mine.transport.nvlink_gbps, mine.transport.nvlink_latency_us) == (0.5, 2.0)
    # A hand-written job file that names the fabric and leaves NVLink out gets the spec's.
    doc = {"ranks": [RANK], "fabric": str(fast), "transport": {"nvlink_latency_us": 9}}
    parsed = parse_job(doc)
    assert (parsed.transport.nvlink_gbps, parsed.transport.nvlink_latency_us) == (3.0, 9.0)
    # No fabric: no NVLink, the built-in latency.
    assert parse_job({"ranks": [RANK]}).transport.nvlink_gbps == 0.0
    mine.save(tmp_path / "job.yaml")
    assert load_job(tmp_path / "job.yaml") == mine
