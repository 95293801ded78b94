"""``results/<run>/report.html``: one self-contained page a person opens after a demo.

The terminal table and the PNGs beside summary.json say everything, but spread over
a dozen files; the page puts them in the order a reader asks: the table (with the
fidelity verdict, so no number from an unfaithful run passes unmarked), busbw per
configuration, busbw per iteration, link-utilisation heat maps, GOR's moves on a
timeline and, for the failure scenario, the throughput the hosts received over time.
Every image is a matplotlib PNG embedded as base64, so the file can be mailed or
attached to an issue and still shows everything -- no directory of images beside it.

Inputs are only what a run writes (docs/experiments.md): ``summary.json``, and per
configuration the median repeat's ``telemetry.jsonl`` and ``gor-events.jsonl``. A
section whose data the run does not have says so instead of showing an empty plot.
`make demo` writes it at the end of every run; ``python -m experiments.report RUN_DIR``
writes it again for a run made before (or after changing this module).
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any, Callable, Mapping

from experiments.metrics import MetricsError, busbw_frac
from experiments.table import COLUMNS, _cell
from insight.plots import PlotError, busbw_bars, link_heatmap, plt
from insight.runfiles import read_json_lines

REPORT = "report.html"
# GOR events drawn on the timeline (rows, top to bottom) and their markers.
TIMELINE = {"alarm_raised": ("tab:orange", "^"), "detect": ("tab:red", "o"), "command": ("tab:blue", ">"),
            "moved": ("tab:green", "s"), "rolled_back": ("tab:purple", "x"), "cleared": ("black", "D"),
            "link_down": ("tab:red", "v"), "repaired": ("tab:green", "P"), "link_up": ("tab:grey", "^")}
FAILURE_COLUMNS = (("impact s", "impact_s", ".3f"), ("recovery s", "recovery_s", ".2f"),
                   ("repair s", "repair_s", ".2f"), ("max iter s", "max_iteration_s", ".3f"))
STYLE = """body{font-family:sans-serif;margin:2em;max-width:1150px;color:#222}
table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #bbb;padding:3px 7px;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#eee}.bad{color:#b00;font-weight:bold}
img{max-width:100%;display:block;margin:0.5em 0 1.5em}.note{color:#666;font-style:italic}"""


def _png(fig: Any) -> str:
    """A figure as a data: URI (closing it)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _line_chart_png(fig: Any, ax: Any, xlabel: str, ylabel: str, title: str) -> str:
    """A line chart's axes labelled from zero up, with its legend, as a data: URI."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    return _png(fig)


def _png_of(draw: Callable[[Path], Path], scratch: Path) -> str:
    """An insight plot (which writes a file) as a data: URI."""
    path = draw(scratch)
    uri = "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")
    path.unlink()
    return uri


def median_repeat(row: Mapping[str, Any]) -> int:
    """The repeat number (from 1) of a configuration's median iteration time: the one
    whose per-link numbers summary.json keeps (`experiments.summary.config_row`)."""
    reps = row["repeats"]
    order = sorted(range(len(reps)), key=lambda i: reps[i]["iteration_s"])
    return order[(len(reps) - 1) // 2] + 1


def _telemetry(out: Path, name: str, rep: int) -> list[dict[str, Any]]:
    path = out / name / f"rep{rep}" / "telemetry.jsonl"
    return read_json_lines(path) if path.is_file() else []


def _events(out: Path, name: str, rep: int) -> list[dict[str, Any]]:
    path = out / name / f"rep{rep}" / "gor-events.jsonl"
    return read_json_lines(path) if path.is_file() else []


def _fabric_links(summary: Mapping[str, Any]) -> set[str]:
    """Leaf-spine links, as every configuration's per-link numbers name them."""
    return {link for row in summary["configs"].values() for link in row.get("links", {})}


def heatmap_summary(log: list[dict[str, Any]], links: set[str], name: str) -> dict[str, Any]:
    """A telemetry log in the shape `insight.plots.link_heatmap` draws: bytes per
    round, with the round's utilisation times its length standing for capacity."""
    rounds = len(log)
    if rounds < 2:
        raise PlotError("fewer than two telemetry rounds")
    bin_s = round((log[-1]["ts"] - log[0]["ts"]) / (rounds - 1), 3)
    per_link = {}
    for link in sorted(links):
        utils = [r["links"].get(link, {}).get("util", 0.0) for r in log]
        # link_heatmap divides bytes by the link's rate: give it the rate in which the
        # recorded utilisation is exact (1 Mbit/s, bytes = util x 1e6 / 8 x bin).
        per_link[link] = {"mbps": 1.0, "packets": int(any(utils)),
                          "bytes_per_bin": [u * 1e6 / 8 * bin_s for u in utils]}
    return {"links": {"per_link": per_link, "bins": rounds}, "bin_s": bin_s, "fabric": name}


def iteration_busbw(summary: Mapping[str, Any]) -> str | None:
    """busbw fraction of every iteration of every repeat, one line per configuration."""
    fig, ax = plt.subplots(figsize=(10, 3.8))
    drawn = False
    for name, row in summary["configs"].items():
        values = []
        for rep in row["repeats"]:
            for it in rep.get("iterations_s", []):
                try:
                    values.append(busbw_frac(summary["ideal_comm_s"], it, summary["compute_s"]))
                except MetricsError:
                    values.append(0.0)
        if values:
            ax.plot(range(1, len(values) + 1), values, marker="o", label=name)
            drawn = True
    if not drawn:
        plt.close(fig)
        return None
    return _line_chart_png(fig, ax, "iteration (repeats one after another)", "busbw / bottleneck link",
                           "busbw of every iteration")


def gor_timeline(runs: Mapping[str, list[dict[str, Any]]], t0: Mapping[str, float]) -> str | None:
    """GOR's events of each run on one time axis per run (seconds since its first
    telemetry round), one row per kind of event."""
    runs = {k: [e for e in v if e.get("event") in TIMELINE] for k, v in runs.items()}
    runs = {k: v for k, v in runs.items() if v}
    if not runs:
        return None
    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 1.2 + 2.2 * len(runs)), squeeze=False)
    kinds = list(TIMELINE)
    for ax, (name, events) in zip(axes[:, 0], runs.items()):
        for kind in kinds:
            ts = [e["ts"] - t0.get(name, events[0]["ts"]) for e in events if e["event"] == kind]
            if ts:
                color, marker = TIMELINE[kind]
                ax.scatter(ts, [kinds.index(kind)] * len(ts), color=color, marker=marker, label=kind, s=36)
        ax.set_yticks(range(len(kinds)), kinds, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(f"{name}: GOR's events ({sum(e['event'] == 'moved' for e in events)} moves)", fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("seconds since the run's first telemetry round")
    fig.tight_layout()
    return _png(fig)


def delivered_mbps(log: list[dict[str, Any]], hosts_of: Callable[[str], bool]) -> list[tuple[float, float]]:
    """(seconds since the first round, Mbit/s the hosts received) per telemetry round."""
    out = []
    for prev, cur in zip(log, log[1:]):
        seconds = cur["ts"] - prev["ts"]
        if seconds <= 0:
            continue
        got = sum(v.get("bytes", 0) for link, v in cur["links"].items() if hosts_of(link.split("->")[1]))
        out.append((cur["ts"] - log[0]["ts"], got * 8 / seconds / 1e6))
    return out


def failure_throughput(logs: Mapping[str, list[dict[str, Any]]], events: Mapping[str, list[dict[str, Any]]],
                       hosts_of: Callable[[str], bool]) -> str | None:
    """Throughput the hosts received over time, per configuration, with the cable's
    failure and GOR's repair where GOR logged them."""
    series = {name: delivered_mbps(log, hosts_of) for name, log in logs.items() if len(log) > 1}
    series = {k: v for k, v in series.items() if v}
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(10, 4))
    for name, points in series.items():
        ts, mbps = zip(*points)
        ax.step(ts, mbps, where="post", label=name)
    labelled = set()
    for name, evs in events.items():
        if name not in logs or not logs[name]:
            continue
        for e in evs:
            if e.get("event") in ("link_down", "repaired", "link_up"):
                ax.axvline(e["ts"] - logs[name][0]["ts"], color=TIMELINE[e["event"]][0], linestyle="--",
                           label=f"{e['event']} ({name})" if (name, e["event"]) not in labelled else None)
                labelled.add((name, e["event"]))
    return _line_chart_png(fig, ax, "seconds since the run's first telemetry round",
                           "received by all hosts (Mbit/s)", "throughput over time through the cable failure")


def _failed(summary: Mapping[str, Any]) -> str:
    """What a failure run failed: a switch killed, or a cable down."""
    if "switch" in summary:
        return f"switch {summary['switch']} killed"
    return f"cable {'-'.join(summary.get('cable', []))} down"


def _table(summary: Mapping[str, Any]) -> str:
    columns = list(COLUMNS)
    if summary.get("scenario") == "failure":
        columns[1:1] = FAILURE_COLUMNS
    head = "".join(f"<th>{html.escape(h)}</th>" for h, _, _ in columns)
    rows = []
    for name, row in summary["configs"].items():
        cells = [f"<td>{html.escape(name)}</td>"]
        for _, key, fmt in columns[1:]:
            text = _cell(row, key, fmt)
            cls = ' class="bad"' if key == "fidelity" and text.startswith("UNFAITHFUL") else ""
            cells.append(f"<td{cls}>{html.escape(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _section(key: str, title: str, body: str) -> str:
    return f'<section id="{key}"><h2>{html.escape(title)}</h2>\n{body}\n</section>'


def _image(uri: str | None, alt: str, missing: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="{uri}">' if uri else f'<p class="note">{html.escape(missing)}</p>'


def render(out: str | Path) -> str:
    """The page for the run in ``out`` (its summary.json and run directories)."""
    out = Path(out)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    configs = summary["configs"]
    reps = {name: median_repeat(row) for name, row in configs.items()}
    logs = {name: _telemetry(out, name, rep) for name, rep in reps.items()}
    events = {name: _events(out, name, rep) for name, rep in reps.items()}
    t0 = {name: log[0]["ts"] for name, log in logs.items() if log}
    scratch = out / ".report-scratch.png"
    try:
        bars = _png_of(lambda p: busbw_bars(configs, p), scratch)
    except PlotError as e:
        bars, bars_note = None, str(e)
    else:
        bars_note = ""
    heat = []
    links = _fabric_links(summary)
    for name, log in logs.items():
        try:
            uri = _png_of(lambda p: link_heatmap(heatmap_summary(log, links, f"{name}, repeat {reps[name]}"), p),
                          scratch)
        except PlotError as e:
            heat.append(f'<p class="note">{html.escape(name)}: no heat map ({html.escape(str(e))})</p>')
            continue
        heat.append(f"<h3>{html.escape(name)} (repeat {reps[name]})</h3>"
                    + _image(uri, f"link utilisation {name}", ""))
    servers = _servers(out)
    failure = summary.get("scenario") == "failure"
    load = summary.get("load_avg", {})
    fidelity = [row.get("fidelity") or {} for row in configs.values()]
    verdict = ("every configuration ran faithfully" if all(f.get("faithful") for f in fidelity)
               else "UNFAITHFUL runs are marked in the table: their numbers came from the CPU, not the network")
    parts = [
        f"<h1>astral-testbed run {html.escape(str(summary.get('run', out.name)))}</h1>",
        f"<p>{'failure scenario: ' + html.escape(_failed(summary)) + ', ' if failure else ''}"
        f"trace {html.escape(str(summary.get('trace_name')))} on {html.escape(str(summary.get('fabric')))}, "
        f"{summary.get('iterations')} iteration(s), seed {summary.get('seed')}, {summary.get('repeats')} repeat(s); "
        f"machine load {load.get('start', '?')} -> {load.get('end', '?')} on {summary.get('cpus')} CPUs. "
        f"{html.escape(verdict)}.</p>",
        _section("table", "Configurations", _table(summary)),
        _section("busbw", "Bus bandwidth per configuration", _image(bars, "busbw per configuration", bars_note)),
        _section("iterations", "Bus bandwidth per iteration",
                 _image(iteration_busbw(summary), "busbw per iteration", "summary.json has no iteration times")),
        _section("heatmaps", "Link utilisation (leaf-spine links, median repeat)", "\n".join(heat)),
        _section("gor", "GOR's moves",
                 _image(gor_timeline(events, t0), "GOR events timeline",
                        "GOR logged no alarm, move or repair in this run")),
        _section("failure", "Throughput through the cable failure",
                 _image(failure_throughput(logs, events, lambda node: node in servers), "throughput over time",
                        "no telemetry of the failure runs") if failure else
                 '<p class="note">not part of this run: <code>make demo SCENARIO=failure</code></p>'),
    ]
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>astral-testbed "
            f"{html.escape(str(summary.get('run', out.name)))}</title><style>{STYLE}</style></head>\n"
            f"<body>\n" + "\n".join(parts) + "\n</body></html>\n")


def _servers(out: Path) -> set[str]:
    """The run's server names (receivers on host links), from its logical fabric."""
    from topo.addressing import AddressPlan
    from topo.spec import load_spec

    return {s.name for s in AddressPlan(load_spec(out / "fabric.yaml")).servers}


def write_report(out: str | Path) -> Path:
    """Write ``<out>/report.html`` and return its path."""
    path = Path(out) / REPORT
    path.write_text(render(out), encoding="utf-8")
    return path


def _main() -> None:
    import sys

    for run in sys.argv[1:] or ["."]:
        print(f"wrote {write_report(run)}")


if __name__ == "__main__":
    _main()

