"""The summary as text tables: flows, their paths, links, queues, the cross-check."""

from __future__ import annotations

from typing import Any


def _table(header: list[str], rows: list[list[Any]]) -> str:
    """Columns padded to their widest cell; numbers right-aligned, text left-aligned."""
    numeric = [all(isinstance(r[i], (int, float)) or _looks_numeric(r[i]) for r in rows)
               for i in range(len(header))]
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(r, widths, numeric)).rstrip()
             for r in cells]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def _looks_numeric(cell: Any) -> bool:
    if cell in ("-", ""):       # a missing number keeps its column numeric
        return True
    try:
        float(str(cell).rstrip("%"))
        return True
    except ValueError:
        return False


def _mb(n: int) -> str:
    return f"{n / 1e6:.3f}"


def flows_table(summary: dict[str, Any], top: int | None = None) -> str:
    flows = sorted(summary["flows"], key=lambda f: -f["bytes"])[:top]
    rows = [[f"{f['src']}:{f['sport']} -> {f['dst']}:{f['dport']}", f["proto"],
             "" if f["qpn"] is None else f"0x{f['qpn']:06x}", f["packets"], _mb(f["bytes"]),
             f["delivered_packets"], f["retransmits"], f["psn_gaps"], f"{f['ce_pct']:.1f}", f["cnps"]]
            for f in flows]
    return _table(["flow (src:sport -> dst:dport)", "proto", "qpn", "packets", "MB", "delivered",
                   "retx", "gaps", "CE%", "CNPs"], rows)


def paths_table(summary: dict[str, Any], top: int | None = None) -> str:
    flows = sorted(summary["flows"], key=lambda f: -f["bytes"])[:top]
    rows = []
    for f in flows:
        hops = " > ".join(f"{h['switch']}[{h['in_port']}>{h['out_port']}"
                          + (f" CE+{h['marked']}" if h["marked"] else "") + "]" for h in f["hops"])
        more = f" (+{len(f['paths']) - 1} other)" if len(f["paths"]) > 1 else ""
        rows.append([f"{f['src']}:{f['sport']} -> {f['dst']}", (hops or "(no path)") + more])
    return _table(["flow", "switches [in port > out port]"], rows)


# Sparkline levels: utilisation 0 .. 100 % of line rate in eight steps.
SPARK = " \u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"
SPARK_WIDTH = 40


def sparkline(bytes_per_bin: list[int], capacity_per_bin: float, width: int = SPARK_WIDTH) -> str:
    """Utilisation over time in at most ``width`` characters (bins averaged in groups)."""
    if not bytes_per_bin:
        return ""
    group = -(-len(bytes_per_bin) // width)
    out = []
    for i in range(0, len(bytes_per_bin), group):
        chunk = bytes_per_bin[i:i + group]
        util = sum(chunk) / len(chunk) / capacity_per_bin
        out.append(SPARK[min(len(SPARK) - 1, round(util * (len(SPARK) - 1)))])
    return "".join(out)


def links_table(summary: dict[str, Any]) -> str:
    per = summary["links"]["per_link"]
    bin_s = summary["bin_s"]
    rows = [[name, f"{l['mbps']:g}", l["packets"], _mb(l["bytes"]), f"{100 * l['mean_util']:.1f}",
             f"{100 * l['max_util']:.1f}", l["ce_marked"],
             "|" + sparkline(l["bytes_per_bin"], l["mbps"] * 1e6 / 8 * bin_s) + "|"]
            for name, l in per.items() if l["packets"]]
    return _table(["link", "Mbit/s", "packets", "MB", "mean%", "max%", "CE", "load over time"], rows)


def crosscheck_table(summary: dict[str, Any]) -> str:
    cc = summary["crosscheck"]
    rows = [[r["server"], f"{r['src']} -> {r['dst']}", r["reported_bytes"], r["captured_bytes"],
             f"{r['diff_pct']:+.2f}", "yes" if r["bytes_match"] else "NO",
             ",".join(str(s["sport"]) for s in r["segments"]) or "-",
             "yes" if r["path_match"] else "NO"] for r in cc["flows"]]
    head = (f"agents' flows: {cc['checked']}, found in captures: {cc['found']}, bytes within "
            f"{cc['tolerance_pct']:g}%: {cc['bytes_match']}, path = hash model: {cc['path_match']}")
    return head + "\n" + _table(["server", "flow", "agent bytes", "captured", "diff%", "bytes ok",
                                 "sports", "path ok"], rows)


def render(summary: dict[str, Any], top: int | None = None) -> str:
    """Every table the summary has data for."""
    c = summary["captures"]
    parts = [f"run {summary['run_dir']} (fabric {summary['fabric']}): {c['files']} port captures, "
             f"{c['frames']} frames, {len(summary['flows'])} flows, bins of {summary['bin_s']:g} s"]
    for problem in c["problems"] + c["ignored"]:
        parts.append(f"warning: {problem}")
    parts += ["", "FLOWS", flows_table(summary, top), "", "PATHS", paths_table(summary, top),
              "", "LINKS (busy ones)", links_table(summary)]
    if summary["unattributed_cnps"]:
        parts.append(f"CNPs not matched to a data flow: {summary['unattributed_cnps']}")
    q = summary["queues"]
    if q["source"]:
        deepest = sorted(((max(d for _, d in s), link) for link, s in q["series"].items() if s), reverse=True)[:5]
        parts += ["", f"QUEUES (from {q['source']}), deepest: "
                  + ", ".join(f"{link} {d:g}" for d, link in deepest)]
    if summary["events"]:
        parts += ["", f"GOR events: {len(summary['events'])} ("
                  + ", ".join(sorted({e['event'] for e in summary['events']})) + ")"]
    if "crosscheck" in summary:
        parts += ["", "CROSS-CHECK", crosscheck_table(summary)]
    return "\n".join(parts)


# Columns of the experiment comparison, in the order the issue lists them.
CONFIG_COLUMNS = ("iteration_s", "busbw_frac", "max_link_util", "mean_link_util", "ecn_marks",
                  "cnps", "drops", "gor_moves")


def configs_table(configs: dict[str, dict[str, Any]]) -> str:
    """One row per configuration of an experiment summary."""
    def cell(v: Any) -> str:
        return f"{v:.3f}" if isinstance(v, float) else ("-" if v is None else str(v))
    rows = [[name] + [cell(numbers.get(c)) for c in CONFIG_COLUMNS] for name, numbers in configs.items()]
    return _table(["config", *CONFIG_COLUMNS], rows)
