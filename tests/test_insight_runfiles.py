"""insight reads an experiment run's telemetry log (``telemetry.jsonl``, written by
`experiments.recorder`) as it reads GOR's, so a demo run's directory gets queue-depth
plots; GOR's own log, when a run has both, comes first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.telemetry import LinkMap
from experiments.recorder import Recording, Round
from insight.plots import queue_depth
from insight.runfiles import RunFileError, read_telemetry
from topo.addressing import AddressPlan
from topo.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_764_500_000.0


@pytest.fixture(scope="module")
def plan() -> AddressPlan:
    return AddressPlan(load_spec(ROOT / "topo" / "fabrics" / "default.yaml"))


def recording(plan: AddressPlan, busy: tuple[str, int], depths: list[int]) -> Recording:
    """Rounds 0.25 s apart in which port ``busy`` (switch, port) sends 1000 bytes a
    round at queue depth ``depths[i]``; every other port idles."""
    ports = list(LinkMap(plan).tx)
    rounds = []
    for i, depth in enumerate([0, *depths]):
        switches: dict[str, dict[int, dict]] = {}
        for sw, port in ports:
            sent = 1000 * i if (sw, port) == busy else 0
            switches.setdefault(sw, {})[port] = {"sent_bytes": sent, "sent_packets": i, "drops": 0,
                                                 "qdepth": depth if (sw, port) == busy else 0}
        rounds.append(Round(t=100 + 0.25 * i, ts=T0 + 0.25 * i, switches=switches))
    return Recording(plan, rounds)


def test_an_experiment_runs_telemetry_log_gives_queue_depths(plan: AddressPlan, tmp_path: Path) -> None:
    busy = next(iter(LinkMap(plan).tx))
    link = "->".join(LinkMap(plan).tx[busy])
    recording(plan, busy, [3, 9, 4]).write_log(tmp_path / "telemetry.jsonl")
    series = read_telemetry(tmp_path)
    assert series is not None
    assert series[link] == [(pytest.approx(T0 + 0.25 * i), d) for i, d in ((1, 3), (2, 9), (3, 4))]
    assert all(max(d for _, d in v) == 0 for k, v in series.items() if k != link)
    summary = {"queues": {"source": "telemetry", "series": {k: [(t - T0, d) for t, d in v]
                                                          for k, v in series.items()}}}
    assert queue_depth(summary, tmp_path / "q.png").stat().st_size > 1000


def test_gors_log_comes_first(plan: AddressPlan, tmp_path: Path) -> None:
    busy = next(iter(LinkMap(plan).tx))
    recording(plan, busy, [3]).write_log(tmp_path / "telemetry.jsonl")
    (tmp_path / "gor-telemetry.jsonl").write_text(json.dumps({"ts": T0, "links": {"a->b": {"queue_depth": 5}}}) + "\n")
    assert read_telemetry(tmp_path) == {"a->b": [(T0, 5.0)]}


def test_a_bad_line_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "telemetry.jsonl").write_text('{"ts": 1, "links": {}}\nnot json\n')
    with pytest.raises(RunFileError, match=r"telemetry.jsonl:2: not JSON"):
        read_telemetry(tmp_path)
    assert read_telemetry(tmp_path / "nothing") is None
