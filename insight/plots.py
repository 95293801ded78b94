"""PNG plots of a summary (matplotlib, Agg backend: no display needed).

* `link_heatmap`: utilisation of every busy directed link per time bin;
* `queue_depth`: egress queue depth over time of the deepest ports (the run's
  telemetry log -- GOR's or an experiment's --, else the sampled PacketIns' ``qdepth``);
* `flow_rates`: delivered rate of the largest flows per time bin, GOR's reroute
  events drawn as vertical lines;
* `busbw_bars`: an experiment's busbw (fraction of the bottleneck link) per configuration.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# GOR events worth a line on the flow-rate plot (a loop's decision and its outcome, link
# failures) and their line styles: black and grey, apart from the flows' colours.
MARKED_EVENTS = {"decide": ("black", ":"), "moved": ("black", "--"), "rolled_back": ("dimgrey", "-."),
                 "link_down": ("dimgrey", "-"), "link_up": ("darkgrey", "-")}
# Flows and ports drawn at most (more lines are unreadable).
MAX_LINES = 12
CONFIG_ORDER = ("stock", "rail", "orthogonal", "gor")


class PlotError(ValueError):
    """The summary holds nothing this plot can show."""


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def link_heatmap(summary: dict[str, Any], path: str | Path) -> Path:
    """Heat map: one row per link that carried traffic, one column per time bin."""
    links = summary["links"]
    per = {name: l for name, l in links["per_link"].items() if l["packets"]}
    if not per or not links["bins"]:
        raise PlotError("no link carried any frame: nothing to draw in a heat map")
    names = sorted(per)
    bin_s = summary["bin_s"]
    rows = [[b * 8 / bin_s / (per[n]["mbps"] * 1e6) for b in per[n]["bytes_per_bin"]] for n in names]
    start = 0.0
    fig, ax = plt.subplots(figsize=(10, 0.25 * len(names) + 1.8))
    image = ax.imshow(rows, aspect="auto", interpolation="nearest", cmap="inferno", vmin=0,
                      vmax=max(1.0, max(max(r) for r in rows)),
                      extent=(start, start + links["bins"] * bin_s, len(names) - 0.5, -0.5))
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.set_xlabel("time since first frame (s)")
    ax.set_title(f"link utilisation, {bin_s:g} s bins ({summary['fabric']})")
    fig.colorbar(image, ax=ax, label="utilisation (of line rate)")
    fig.tight_layout()
    return _save(fig, Path(path))


def queue_depth(summary: dict[str, Any], path: str | Path) -> Path:
    """Queue depth over time of the ports that queued deepest."""
    q = summary["queues"]
    series = {k: v for k, v in q["series"].items() if v}
    if not series:
        raise PlotError("no queue depth in the run (no telemetry log, no sampled PacketIns)")
    deepest = sorted(series, key=lambda k: -max(d for _, d in series[k]))[:MAX_LINES]
    fig, ax = plt.subplots(figsize=(10, 4))
    for link in deepest:
        ts, depth = zip(*series[link])
        ax.step(ts, depth, where="post", label=link, linewidth=1)
    ax.set_xlabel("time since first frame (s)")
    ax.set_ylabel("egress queue depth (packets)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"queue depth per port (from {q['source']})")
    ax.legend(fontsize=7, ncol=2, loc="upper right")
    fig.tight_layout()
    return _save(fig, Path(path))


def flow_rates(summary: dict[str, Any], path: str | Path) -> Path:
    """Delivered rate of the largest flows over time, with GOR's events marked."""
    flows = [f for f in summary["flows"] if f["rate_bps"]]
    if not flows:
        raise PlotError("no flow delivered or sent a frame: no rate to draw")
    flows = sorted(flows, key=lambda f: -f["bytes"])[:MAX_LINES]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    bin_s = summary["bin_s"]
    for f in flows:
        ts, bps = zip(*f["rate_bps"])
        # Each value holds for its whole bin: close the last bin with its end point.
        ax.step([*ts, ts[-1] + bin_s], [b / 1e6 for b in (*bps, bps[-1])], where="post", linewidth=1,
                label=f"{f['src']}:{f['sport']}->{f['dst']}")
    labelled = set()
    for e in summary["events"]:
        style = MARKED_EVENTS.get(e["event"])
        if style is None:
            continue
        ax.axvline(e["t_rel"], color=style[0], linestyle=style[1], linewidth=1.2,
                   label=f"GOR {e['event']}" if e["event"] not in labelled else None)
        labelled.add(e["event"])
    ax.set_xlabel("time since first frame (s)")
    ax.set_ylabel("rate (Mbit/s)")
    ax.set_ylim(bottom=0)
    ax.set_title("per-flow rate" + (" with GOR events" if labelled else ""))
    ax.legend(fontsize=7, ncol=2, loc="upper right")
    fig.tight_layout()
    return _save(fig, Path(path))


def busbw_bars(configs: dict[str, dict[str, Any]], path: str | Path) -> Path:
    """busbw as a fraction of the bottleneck link, one bar per configuration."""
    names = [n for n in CONFIG_ORDER if n in configs] + [n for n in configs if n not in CONFIG_ORDER]
    missing = [n for n in names if not isinstance(configs[n].get("busbw_frac"), (int, float))]
    if missing:
        raise PlotError(f"configs {', '.join(missing)}: no numeric busbw_frac")
    values = [float(configs[n]["busbw_frac"]) for n in names]
    fig, ax = plt.subplots(figsize=(1.4 * len(names) + 2, 4))
    bars = ax.bar(names, values, color=["tab:grey", "tab:blue", "tab:cyan", "tab:green"][:len(names)]
                  + ["tab:purple"] * max(0, len(names) - 4))
    ax.bar_label(bars, labels=[f"{v:.2f}" for v in values])
    ax.set_ylabel("busbw / bottleneck link rate")
    ax.set_ylim(0, max(1.0, max(values) * 1.15))
    ax.set_title("collective bus bandwidth per configuration")
    fig.tight_layout()
    return _save(fig, Path(path))


def render_all(directory: str | Path, summary: dict[str, Any] | None,
               configs: dict[str, dict[str, Any]] | None) -> list[Path]:
    """Every plot the inputs allow, into ``directory``; a plot without data is skipped
    with a note on stderr rather than drawn empty."""
    directory = Path(directory)
    jobs = []
    if summary is not None:
        jobs += [(link_heatmap, summary, "link_util.png"), (queue_depth, summary, "queue_depth.png"),
                 (flow_rates, summary, "flow_rates.png")]
    if configs is not None:
        jobs.append((busbw_bars, configs, "busbw.png"))
    written = []
    for fn, data, name in jobs:
        try:
            written.append(fn(data, directory / name))
        except PlotError as e:
            print(f"inspect: {name} skipped: {e}", file=sys.stderr)
    return written
