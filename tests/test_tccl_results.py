"""nccl-tests style results: bus bandwidth formulas, the printed row, the JSON file."""

from __future__ import annotations

import json

import pytest

from tccl import fidelity
from tccl.fidelity import Lateness
from tccl.results import HEADER, Row, bus_factor, format_fidelity, format_row, save


@pytest.mark.parametrize("op,n,factor", [
    ("allreduce", 8, 2 * 7 / 8), ("allgather", 4, 3 / 4), ("reducescatter", 2, 1 / 2),
    ("alltoall", 16, 15 / 16), ("sendrecv", 2, 1.0), ("allreduce", 1, 0.0), ("broadcast", 4, 1.0),
    ("reduce", 4, 1.0),
])
def test_bus_factors_follow_nccl_tests(op, n, factor):
    assert bus_factor(op, n) == pytest.approx(factor)


def test_bad_bus_factor_arguments():
    with pytest.raises(ValueError, match="no bus bandwidth formula"):
        bus_factor("gather", 2)
    with pytest.raises(ValueError, match="at least one rank"):
        bus_factor("allreduce", 0)


def test_row_measures_and_prints_like_nccl_tests(tmp_path):
    row = Row.measure("allreduce", 1 << 20, 16, 2.0, wrong=0)
    assert row.algbw_mbps == pytest.approx((1 << 20) * 8 / 2.0 / 1e6)
    assert row.busbw_mbps == pytest.approx(row.algbw_mbps * 30 / 16)
    assert (row.count, row.type, row.redop, row.time_us) == (1 << 20, "uint8", "bxor", 2e6)
    line = format_row(row)
    assert line.split() == ["1048576", "1048576", "uint8", "bxor", "2000000.0", "4.194", "7.864", "0"]
    assert HEADER.splitlines()[0].split()[1:8] == ["size", "count", "type", "redop", "time",
                                                  "algbw", "busbw"]
    assert format_row(Row.measure("sendrecv", 10, 2, 1.0, wrong=-1)).split()[-1] == "N/A"
    save(tmp_path / "r.json", {"job": "j"}, [row])
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["job"] == "j" and data["rows"][0]["busbw_mbps"] == pytest.approx(row.busbw_mbps)


def test_fidelity_line():
    tx, rx = Lateness(0.001), Lateness(0.001)
    for late in (0.0001, 0.0002):
        tx.add(late)
    rx.add(0.003)
    fid = {**fidelity.report({"0": (tx, rx, 2)}, 0.001), "dilation": 2.0, "wakeups": 10}
    line = format_fidelity(fid)
    assert line.startswith("# fidelity (UNFAITHFUL, dilation 2): departures on time 100.0%")
    assert "p99 lateness 0.20 ms (0.20 frame times)" in line   # capped at the maximum
    assert "frames handled p99 3.00 ms (3.00 frame times) after arrival; kernel drops 2" in line
    # 3 frame times late at dilation 2: 2 x 3 x 1.26 = 7.56, up to a quarter.
    assert line.endswith("; as late in wall time, it would fit at dilation 7.75")
    assert "would fit" not in format_fidelity({**fidelity.report({"0": (tx, tx, 2)}, 0.001), "dilation": 2.0})
