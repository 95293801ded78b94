"""The demo's report as a person sees it: ``report.html`` rendered by headless
Chromium (Debian's ``chromium``) to a PNG, and the page parsed for its sections and
embedded images.

A real demo run takes minutes, so the run directory is made here by the demo's own
writers from recorded-shaped inputs: `experiments.runner.prepare` (run directory,
fabric and trace copies, jobs, the hash model), per run a `Recording` of switch
counter rounds (its `write_log` writes telemetry.jsonl, its intervals give the link
numbers), agents' iteration times through `repeat_numbers`, GOR's events through
`EventLog`, and `write_summary` (summary.json, the plots) -- the same code paths a
demo takes after its jobs, for a configs run and for the failure scenario."""

from __future__ import annotations

import base64
import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from controller.events import EventLog
from controller.telemetry import LinkMap
from emulation.clock import EmulationClock
from emulation.fidelity import BOUNDS, Fidelity, LatenessHistogram
from experiments.configs import CONFIGS
from experiments.failure import format_failure_table
from experiments.recorder import Recording, Round
from experiments.report import REPORT, write_report
from experiments.runner import Settings, _util_series, prepare, write_summary
from experiments.summary import link_numbers, repeat_numbers
from insight.plots import plt
from topo.addressing import AddressPlan
from topo.spec import load_spec

ROUNDS = 24
INTERVAL_S = 0.25
SECTIONS = ("table", "busbw", "iterations", "heatmaps", "gor", "failure")


def _rounds(plan: AddressPlan, base_ts: float, util: dict[str, float], dip: range) -> list[Round]:
    """Counter rounds every INTERVAL_S: every link at its utilisation (leaf-spine links
    by name, host links the mean), host links nearly silent during ``dip``."""
    tx = LinkMap(plan).tx
    capacity = LinkMap(plan).capacity
    counters = {key: 0 for key in tx}
    hosts = {s.name for s in plan.servers}
    rounds = []
    for k in range(ROUNDS):
        switches: dict[str, dict[int, dict[str, int]]] = {}
        for (switch, port), (a, b) in tx.items():
            u = util.get(f"{a}->{b}", 0.5 if b in hosts else 0.0)
            if k in dip and b in hosts:
                u = 0.02
            counters[(switch, port)] += int(u * capacity[(a, b)] / 8 * INTERVAL_S) if k else 0
            switches.setdefault(switch, {})[port] = {"sent_bytes": counters[(switch, port)],
                                                    "sent_packets": counters[(switch, port)] // 4154,
                                                    "drops": 0, "qdepth": int(10 * u)}
        rounds.append(Round(t=k * INTERVAL_S, ts=base_ts + k * INTERVAL_S, switches=switches))
    return rounds


def make_run(out: Path, failure: bool) -> Path:
    """A run directory as `make demo` (or SCENARIO=failure) leaves it, two repeats of
    orthogonal and gor."""
    configs = (CONFIGS["orthogonal"], CONFIGS["gor"])
    exp = prepare(Settings(configs=configs, repeats=2, iterations=3, size_scale=0.25, out=out),
                  log=lambda _line: None)
    plan = AddressPlan(load_spec(out / "fabric.yaml"))
    leaves, spines = {l.name for l in plan.leaves}, {s.name for s in plan.spines}
    hosts = {s.name for s in plan.servers}
    uplinks = sorted(f"{l}->{s}" for l in leaves for s in spines)
    extra: dict[str, dict[str, float | None]] = {}
    for rep in (1, 2):
        for n, config in enumerate(configs):
            run_dir = out / config.name / f"rep{rep}"
            run_dir.mkdir(parents=True)
            clock = EmulationClock.start()
            base = time.time()
            # orthogonal: half the uplinks busy; gor: all of them evenly.
            util = {link: (0.9 if i % 2 else 0.1) if config.name == "orthogonal" else 0.55
                    for i, link in enumerate(uplinks)}
            recording = Recording(plan, _rounds(plan, base, util, range(8, 12) if failure and n == 0 else range(0)))
            recording.write_log(run_dir / "telemetry.jsonl")
            intervals = recording.intervals()
            events = []
            if config.gor:
                log = EventLog(run_dir / "gor-events.jsonl", clock.now)
                names = (("link_down", 2.0), ("repaired", 2.2), ("link_up", 5.0)) if failure else \
                    (("alarm_raised", 1.0), ("detect", 1.0), ("command", 1.3), ("moved", 1.8), ("cleared", 2.5))
                for name, t in names:
                    events.append(log.emit(name, t=clock.now() + t, loop=1))
                log.close()
            iters = [exp.compute_s + exp.ideal_comm_s / f for f in (0.5, 0.6 + 0.05 * n, 0.55 + 0.1 * n)]
            results = {s: {"iteration_s": iters, "flows": [{"cnps": 3 - n, "ce_marked_rx": 5 - n}]} for s in hosts}
            numbers = repeat_numbers(results, exp.ideal_comm_s, exp.compute_s,
                                     link_numbers(intervals, leaves, spines, hosts), events)
            late = [0] * (len(BOUNDS) + 1)
            late[0], late[20 + 10 * n] = 980, 20
            numbers["fidelity"] = Fidelity(LatenessHistogram(late, BOUNDS[20 + 10 * n])).to_json()
            numbers["series"] = _util_series(intervals, plan)
            numbers["intervals"] = intervals
            exp.repeats.setdefault(config.name, []).append(numbers)
            if failure:
                extra[config.name] = {"impact_s": 1.2 - n, "recovery_s": 1.0 - n, "repair_s": 0.2 if n else None,
                                      "max_iteration_s": max(iters)}
    if failure:
        write_summary(exp, {"scenario": "failure", "cable": ["b0l0", "sp0"], "configs": extra},
                      table=format_failure_table)
    else:
        write_summary(exp)
    plt.close("all")
    return out


class Page(HTMLParser):
    """Sections (by id), their images and the table's rows, as a browser parses them."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, list[str]] = {}
        self.notes: dict[str, list[str]] = {}
        self.rows: list[list[str]] = []
        self._section: str | None = None
        self._cell: list[str] | None = None
        self._note = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section":
            self._section = a["id"]
            self.sections[self._section] = []
        elif tag == "img" and self._section:
            self.sections[self._section].append(a["src"] or "")
        elif tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "p" and a.get("class") == "note":
            self._note = True

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "p":
            self._note = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._note and self._section:
            self.notes.setdefault(self._section, []).append(data)


def png_bytes(src: str) -> bytes:
    assert src.startswith("data:image/png;base64,"), src[:40]
    data = base64.b64decode(src.split(",", 1)[1])
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000
    return data


def screenshot(page: Path, tmp_path: Path) -> Path:
    """What a person sees: Chromium renders the page (headless) to a PNG."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("chromium is not installed (make setup installs it)")
    shot = tmp_path / "page.png"
    done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                           "--no-first-run", "--disable-background-networking", "--disable-component-update",
                           "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
                           f"--screenshot={shot}", "--window-size=1200,3000", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    return shot


def inked_rows(shot: Path) -> list[float]:
    """Per band of 100 pixel rows, the share of pixels that are not (near) white."""
    image = plt.imread(shot)[:, :, :3]
    dark = (image.min(axis=2) < 0.85)
    return [float(dark[i:i + 100].mean()) for i in range(0, dark.shape[0], 100)]


def test_report_of_a_configs_run_in_chromium(tmp_path: Path) -> None:
    out = make_run(tmp_path / "run", failure=False)
    page = out / REPORT
    assert not page.exists()          # write_summary does not write it: the demo's end does
    write_report(out)
    parsed = Page()
    parsed.feed(page.read_text())
    assert tuple(parsed.sections) == SECTIONS
    header, *rows = parsed.rows
    assert header[0] == "config" and "fidelity (p99 late)" in header
    assert [r[0] for r in rows] == ["orthogonal", "gor"]
    fidelity = {r[0]: r[header.index("fidelity (p99 late)")] for r in rows}
    assert fidelity["orthogonal"].startswith("ok") and fidelity["gor"].startswith("UNFAITHFUL 2/2")
    for section in ("busbw", "iterations", "gor"):
        assert len(parsed.sections[section]) == 1, section
    assert len(parsed.sections["heatmaps"]) == 2          # one per configuration
    for images in parsed.sections.values():
        for src in images:
            png_bytes(src)
    assert "SCENARIO=failure" in page.read_text()         # the failure section says where it comes from
    assert "<img" not in page.read_text().split('id="failure"')[1]
    assert "src=\"data:" in page.read_text() and "plots/" not in page.read_text()   # self-contained
    ink = inked_rows(screenshot(page, tmp_path))
    # The table and five images down the page: ink in most of the page's bands.
    assert sum(share > 0.03 for share in ink) >= 12, ink


def test_report_of_the_failure_scenario_in_chromium(tmp_path: Path) -> None:
    out = make_run(tmp_path / "run", failure=True)
    page = write_report(out)
    parsed = Page()
    parsed.feed(page.read_text())
    assert tuple(parsed.sections) == SECTIONS
    header = parsed.rows[0]
    for column in ("impact s", "recovery s", "repair s", "fidelity (p99 late)"):
        assert column in header
    assert len(parsed.sections["failure"]) == 1
    png_bytes(parsed.sections["failure"][0])
    assert "b0l0-sp0" in page.read_text()
    ink = inked_rows(screenshot(page, tmp_path))
    assert sum(share > 0.03 for share in ink) >= 12, ink
