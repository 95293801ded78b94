"""The model's output: a text table per configuration, the link-load histogram per
placement and busbw against GPU count (matplotlib, files only: no display)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from scale.model import Evaluation

HEADER = ("config", "GPUs", "iteration s", "busbw/link", "collisions", "max flows/link",
          "GOR moves", "fabric util p50/p99/max")


def fabric_util(ev: Evaluation) -> np.ndarray:
    """Utilisation of every fabric link in every network step of the iteration."""
    loads = [s.link_util for s in ev.steps if s.flows]
    return np.concatenate(loads) if loads else np.zeros(0)


def format_table(evaluations: Mapping[str, Evaluation]) -> str:
    """Aligned text: a header line, a rule, one line per configuration."""
    rows = [list(HEADER)]
    for name, ev in evaluations.items():
        util = fabric_util(ev)
        p50, p99, top = np.percentile(util, [50, 99, 100]) if len(util) else (0.0, 0.0, 0.0)
        rows.append([name, str(ev.gpus), f"{ev.iteration_s:.4g}", f"{ev.busbw_frac:.2f}", str(ev.collisions),
                     str(ev.max_flows_per_link), str(ev.moves), f"{p50:.2f}/{p99:.2f}/{top:.2f}"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def plot_link_loads(evaluations: Mapping[str, Evaluation], path: Path) -> Path:
    """One histogram per placement: fabric links by utilisation over the iteration's
    network steps (idle links included: an uneven placement leaves some empty)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(evaluations), figsize=(3.2 * len(evaluations), 3), sharey=True,
                             squeeze=False)
    bins = np.linspace(0, 1, 21)
    for ax, (name, ev) in zip(axes[0], evaluations.items()):
        ax.hist(np.minimum(fabric_util(ev), 1.0), bins=bins, color="tab:blue")
        ax.set_title(f"{name} (busbw {ev.busbw_frac:.2f})", fontsize=9)
        ax.set_xlabel("fabric link utilisation")
    axes[0][0].set_ylabel("links x steps")
    fig.suptitle(f"{next(iter(evaluations.values())).gpus} GPUs", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_busbw_vs_gpus(points: Mapping[str, Sequence[tuple[int, float]]], path: Path) -> Path:
    """busbw / link of every configuration against the job's GPU count."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name, series in points.items():
        gpus, busbw = zip(*sorted(series))
        ax.plot(gpus, busbw, marker="o", label=name)
    ax.set_xscale("log")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("busbw / link (model)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
