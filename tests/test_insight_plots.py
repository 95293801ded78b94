"""insight's plots render from a headless run: every PNG exists, is a real image and
is not blank; queue depths come from GOR's telemetry log, else from sampled PacketIns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from matplotlib.image import imread  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.utils import PcapWriter  # noqa: E402

from insight import plots  # noqa: E402
from insight.analyse import summarise  # noqa: E402
from test_insight_summary import T0, Scenario, roce  # noqa: E402
from topo.addressing import AddressPlan  # noqa: E402
from topo.headers import PACKET_IN  # noqa: E402
from topo.spec import load_spec  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = {"stock": {"busbw_frac": 0.42}, "rail": {"busbw_frac": 0.61},
           "orthogonal": {"busbw_frac": 0.85}, "gor": {"busbw_frac": 0.9}}
# Sampled PacketIns: (seconds after T0, switch id, egress port, queue depth).
SAMPLES = [(0.01, 1, 3, 2), (0.05, 1, 3, 9), (0.09, 1, 3, 4), (0.02, 9, 5, 17)]


@pytest.fixture(scope="module")
def plan() -> AddressPlan:
    return AddressPlan(load_spec(ROOT / "topo" / "fabrics" / "default.yaml"))


@pytest.fixture(scope="module")
def run(plan: AddressPlan, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("run")
    sc = Scenario(plan)
    sc.wire.write(run / "pcap")
    w = PcapWriter(str(run / "pcap" / "cpu_out.pcap"), linktype=1, sync=True)
    frame = roce(sc.a_src.ip, sc.a_dst.ip, sc.a_sport, sc.a_qpn, 0)
    for dt, switch_id, port, depth in SAMPLES:
        # packet_in header (ingress, egress port, qdepth, switch id) before the frame.
        pkt = Ether(PACKET_IN.struct().pack(1, port, depth, switch_id, 1, 0, 0, bytes(6)) + frame)
        pkt.time = T0 + dt
        w.write(pkt)
    w.close()
    events = [{"ts": T0 + 0.55, "t": 1.0, "event": "decide", "loop": 1},
              {"ts": T0 + 0.6, "t": 1.05, "event": "moved", "loop": 1}]
    (run / "gor-events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (run / "summary.json").write_text(json.dumps({"configs": CONFIGS}))
    return run


def assert_picture(path: Path) -> None:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = imread(str(path))
    assert pixels.shape[0] > 200 and pixels.shape[1] > 300
    assert pixels.std() > 0.01, f"{path.name} is blank"


def test_queue_depths_come_from_packet_ins_by_switch_id_and_port(plan: AddressPlan, run: Path) -> None:
    q = summarise(run, plan)["queues"]
    assert q["source"] == "packet_in"
    # switch 1 = b0l0, port 3 = uplink to sp0; switch 9 = sp0, port 5 = to b1l0.
    assert q["series"]["b0l0->sp0"] == [[pytest.approx(0.01), 2], [pytest.approx(0.05), 9],
                                        [pytest.approx(0.09), 4]]
    assert q["series"]["sp0->b1l0"] == [[pytest.approx(0.02), 17]]


def test_telemetry_log_is_preferred_over_samples(plan: AddressPlan, run: Path, tmp_path: Path) -> None:
    log = run / "gor-telemetry.jsonl"
    log.write_text(json.dumps({"ts": T0 + 0.3, "links": {"b0l0->sp0": {"queue_depth": 12, "util": 0.9}}}) + "\n")
    try:
        q = summarise(run, plan)["queues"]
    finally:
        log.unlink()
    assert q["source"] == "telemetry"
    assert q["series"] == {"b0l0->sp0": [[pytest.approx(0.3), 12]]}


def test_each_plot_renders_a_picture(plan: AddressPlan, run: Path, tmp_path: Path) -> None:
    summary = summarise(run, plan)
    for fn, name in ((plots.link_heatmap, "heat.png"), (plots.queue_depth, "queues.png"),
                     (plots.flow_rates, "rates.png")):
        assert_picture(fn(summary, tmp_path / name))
    assert_picture(plots.busbw_bars(CONFIGS, tmp_path / "busbw.png"))


def test_a_plot_without_data_says_why(plan: AddressPlan, run: Path, tmp_path: Path) -> None:
    summary = summarise(run, plan)
    summary["queues"] = {"source": None, "series": {}}
    with pytest.raises(plots.PlotError, match="no queue depth"):
        plots.queue_depth(summary, tmp_path / "q.png")
    with pytest.raises(plots.PlotError, match="gor"):
        plots.busbw_bars({**CONFIGS, "gor": {"busbw_frac": None}}, tmp_path / "b.png")


def test_command_renders_every_plot_without_a_display(run: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MPLBACKEND")}
    out = tmp_path / "plots"
    proc = subprocess.run([sys.executable, "-m", "insight", str(run), "--plots", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "CONFIGURATIONS" in proc.stdout
    names = sorted(p.name for p in out.iterdir())
    assert names == ["busbw.png", "flow_rates.png", "link_util.png", "queue_depth.png"]
    for p in out.iterdir():
        assert_picture(p)


def test_an_experiment_directory_without_captures_gives_the_table_and_bars(tmp_path: Path, capsys) -> None:
    from insight.cli import main
    (tmp_path / "summary.json").write_text(json.dumps({"configs": CONFIGS}))
    assert main([str(tmp_path), "--plots", str(tmp_path / "plots")]) == 0
    out = capsys.readouterr().out
    assert "CONFIGURATIONS" in out and "orthogonal" in out
    assert [p.name for p in (tmp_path / "plots").iterdir()] == ["busbw.png"]
    assert_picture(tmp_path / "plots" / "busbw.png")
    (tmp_path / "summary.json").write_text(json.dumps({"configs": {}}))
    assert main([str(tmp_path)]) == 2
    assert "at least one config" in capsys.readouterr().err
