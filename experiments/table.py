"""The comparison table the demo prints (plain text, one row per configuration), then
every repeat's busbw per iteration.

The `fidelity` column says whether every repeat of a configuration was faithful
(emulation/fidelity.py), with its worst p99 lateness in packet times; a configuration
with an unfaithful repeat says UNFAITHFUL and how many (and the most the host's
hypervisor stole during one, emulation/host.py), so no figure from a run whose
numbers came from the CPU rather than the modelled network passes unmarked."""

from __future__ import annotations

from typing import Any, Mapping

COLUMNS = (
    # header, key, format
    ("config", None, ""),
    ("iter s (min-max)", "iteration_s", ""),
    ("busbw/link (min-max)", "busbw_frac", ""),
    ("it 2..N", "busbw_frac_rest", ".2f"),
    ("model", "model_busbw_frac", ".2f"),
    ("collisions (random avg)", "collisions", ""),
    ("max util", "max_link_util", ".2f"),
    ("mean util", "mean_link_util", ".2f"),
    ("ECN marks", "ecn_marks", "d"),
    ("CNPs", "cnps", "d"),
    ("drops", "drops", "d"),
    ("GOR moves", "gor_moves", "d"),
    ("loop s p50/p99", "gor_loop_s", ""),
    ("verified s p50/p99", "gor_verified_s", ""),
    ("fidelity (p99 late)", "fidelity", ""),
)


def _cell(row: Mapping[str, Any], key: str, fmt: str) -> str:
    if key in ("iteration_s", "busbw_frac"):
        s = row.get(f"{key}_spread")
        digits = 3 if key == "iteration_s" else 2
        if s and s.get("n", 1) > 1:
            return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}-{s['max']:.{digits}f})"
        return f"{row[key]:.{digits}f}"
    if key == "fidelity":
        f = row.get("fidelity")
        if not f:
            return "-"
        if f["faithful"]:
            return f"ok ({f['p99_lateness_pkt']:.2f} pkt)"
        steal = f.get("unfaithful_host_steal")
        stolen = f", steal {100 * steal:.0f} %" if steal is not None else ""
        needed = f.get("dilation_needed")
        fits = f", fits at dilation {needed:g}" if needed and needed > f["dilation"] else ""
        return f"UNFAITHFUL {f['unfaithful_repeats']}/{f['repeats']} ({f['p99_lateness_pkt']:.2f} pkt{stolen}{fits})"
    if key in ("gor_loop_s", "gor_verified_s"):
        p50, p99 = row.get(key), row.get(f"{key}_p99")
        return "-" if p50 is None else f"{p50:.2f}/{p99:.2f}" if p99 is not None else f"{p50:.2f}"
    if key == "collisions":
        c, e = row.get("collisions"), row.get("collisions_expected_random")
        if c is None:
            return "-"
        return f"{c} ({e:.1f})" if isinstance(e, (int, float)) else str(c)
    value = row.get(key)
    if value is None:
        return "-"
    if fmt == "d":
        return str(int(round(value)))
    return format(value, fmt)


def format_table(configs: Mapping[str, Mapping[str, Any]]) -> str:
    """Aligned text: a header line, a rule, one line per configuration."""
    rows = [[h for h, _, _ in COLUMNS]]
    for name, row in configs.items():
        rows.append([name] + [_cell(row, key, fmt) for _, key, fmt in COLUMNS[1:]])
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines + iteration_lines(configs))


def iteration_lines(configs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """busbw / link of every iteration, per configuration and repeat: the iteration
    in which GOR's moves landed, and what came after."""
    out = []
    for name, row in configs.items():
        for k, rep in enumerate(row.get("repeats", []), 1):
            its = rep.get("busbw_per_iteration")
            if its:
                out.append(f"  {name} rep{k} busbw per iteration: {' '.join(f'{b:.2f}' for b in its)}"
                           + (f"  (GOR moves {rep['gor_moves']})" if rep.get("gor_moves") else ""))
    return ["", "busbw / link per iteration:"] + out if out else []
