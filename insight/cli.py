"""``python -m insight RUN_DIR``: summarise a run's captures, print tables, write JSON
and plots. ``main(argv)`` is the console-script entry point (``astral-inspect``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from insight.analyse import DEFAULT_BIN_S, InspectError, summarise
from insight.pcapfile import PcapError
from insight.report import configs_table, render
from insight.runfiles import EXPERIMENT_SUMMARY, RunFileError, find_spec, read_experiment_summary
from topo.addressing import AddressPlan
from topo.spec import SpecError


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m insight",
                                 description="Summarise a testbed run's packet captures "
                                             "(docs/inspection.md).")
    ap.add_argument("run_dir", type=Path, help="run directory (captures in RUN_DIR/pcap or RUN_DIR)")
    ap.add_argument("--fabric", help="fabric spec YAML (default: RUN_DIR/gor-fabric.yaml or "
                                     "fabric.yaml, else topo/fabrics/default.yaml)")
    ap.add_argument("--pcap-dir", help="directory of the captures, if not RUN_DIR/pcap or RUN_DIR")
    ap.add_argument("--bin", type=float, default=DEFAULT_BIN_S, help="time bin in seconds (default %(default)s)")
    ap.add_argument("--agents", nargs="*", type=Path,
                    help="TCCL results files to cross-check (default: RUN_DIR/results-*.json)")
    ap.add_argument("--json", metavar="PATH", help="write the summary as JSON to PATH ('-': stdout)")
    ap.add_argument("--plots", metavar="DIR", type=Path, help="render the PNG plots into DIR")
    ap.add_argument("--experiment", metavar="SUMMARY", type=Path,
                    help=f"experiment summary for the busbw bars (default: RUN_DIR/{EXPERIMENT_SUMMARY})")
    ap.add_argument("--top", type=int, default=None, help="print only the N largest flows")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    run_dir: Path = args.run_dir
    if not run_dir.is_dir():
        print(f"inspect: {run_dir}: no such run directory", file=sys.stderr)
        return 2
    experiment = args.experiment or (run_dir / EXPERIMENT_SUMMARY)
    try:
        configs = read_experiment_summary(experiment) if experiment.is_file() else None
        if args.experiment and configs is None:
            raise RunFileError(f"{experiment}: no such file")
        plan = AddressPlan(find_spec(run_dir, args.fabric))
        has_captures = args.pcap_dir or any((run_dir / "pcap").glob("*.pcap")) or any(run_dir.glob("*.pcap"))
        summary = None
        if has_captures or configs is None:
            summary = summarise(run_dir, plan, args.bin, args.pcap_dir, args.agents)
    except (InspectError, PcapError, RunFileError, SpecError) as e:
        print(f"inspect: {e}", file=sys.stderr)
        return 2
    out_json = sys.stdout if args.json == "-" else None
    if summary is not None:
        print(render(summary, args.top), file=sys.stderr if out_json else sys.stdout)
        if args.json:
            text = json.dumps(summary, indent=1)
            if out_json:
                out_json.write(text + "\n")
            else:
                try:
                    Path(args.json).write_text(text + "\n", encoding="utf-8")
                except OSError as e:
                    print(f"inspect: cannot write {args.json}: {e.strerror}", file=sys.stderr)
                    return 2
    if configs is not None:
        print("\nCONFIGURATIONS\n" + configs_table(configs), file=sys.stderr if out_json else sys.stdout)
    if args.plots:
        from insight.plots import render_all
        written = render_all(args.plots, summary, configs)
        for path in written:
            print(f"wrote {path}", file=sys.stderr)
    return 0
