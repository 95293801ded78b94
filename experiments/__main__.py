"""``python -m experiments`` (``make demo``): run the configurations, print the table,
write results/<run>/summary.json, plots and report.html; ``--scenario failure`` runs the
failures (a cable, a spine, a super-spine cable) instead, ``--scenario tenants`` two tenants' jobs on one fabric,
``--scenario incast`` N senders to one receiver without and with PFC, ``--scenario
moe`` expert-parallel all-to-all and the NVLink + RoCE split (docs/experiments.md)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from experiments.configs import CONFIGS, parse_configs
from experiments.moe import RUNS, parse_runs, run_moe
from experiments.recorder import RecorderError
from experiments.report import write_report
from experiments.runner import (DEFAULT_FABRIC, DEFAULT_TRACE, DEMO_ITERATIONS, DEMO_SAMPLE_RATE, RESULTS,
                                Settings, prepare, run)
from tccl.job import JobError
from tccl.launch import LaunchError
from topo.net import FabricError
from topo.spec import SpecError


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m experiments", description=__doc__.split("\n\n")[0])
    ap.add_argument("--fabric", type=Path, default=DEFAULT_FABRIC, help="fabric spec (default %(default)s)")
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="trace (default %(default)s)")
    ap.add_argument("--seed", type=int, default=1, help="seeds random ports and data (default %(default)s)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per configuration (default %(default)s)")
    ap.add_argument("--configs", help=f"comma-separated subset of {','.join(CONFIGS)} "
                                       f"(--scenario moe: of {','.join(RUNS)})")
    ap.add_argument("--iterations", type=int, default=DEMO_ITERATIONS,
                    help="iterations per job (default %(default)s)")
    ap.add_argument("--size-scale", type=float, default=1.0, help="scale the trace's message sizes")
    ap.add_argument("--sample-rate", type=int, default=DEMO_SAMPLE_RATE,
                    help="sample 1 in N frames leaving by fabric links (default %(default)s; "
                         "-1: the fabric spec's own rate)")
    ap.add_argument("--out", type=Path, help="run directory (default results/<date-time>)")
    ap.add_argument("--scenario", choices=("configs", "failure", "tenants", "incast", "moe"), default="configs",
                    help="configs: the comparison (default); failure: a cable, a spine, a super-spine cable fail mid-job; "
                         "tenants: two jobs planned apart share the fabric, without and with GOR; "
                         "incast: N senders to one receiver, without and with PFC; "
                         "moe: expert-parallel all-to-all (rail, spread, PXN, hot expert, GOR) and "
                         "the TP split over NVLink and RoCE")
    ap.add_argument("--pcap", action="store_true",
                    help="per-port captures into each run's pcap/ (a fabric per run; for python -m insight)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if os.geteuid() != 0:
        print("experiments: the fabric runs in Mininet: run as root (make demo)", file=sys.stderr)
        return 2
    try:
        settings = Settings(fabric=args.fabric, trace=args.trace, seed=args.seed, repeats=args.repeats,
                            configs=tuple(parse_configs(args.configs if args.configs and args.scenario != "moe"
                                                        else ",".join(CONFIGS))),
                            out=args.out or RESULTS / time.strftime("%Y%m%d-%H%M%S"),
                            iterations=args.iterations, size_scale=args.size_scale, pcap=args.pcap,
                            sample_rate=None if args.sample_rate == -1 else args.sample_rate)
        if args.scenario == "failure":
            if args.pcap:
                raise ValueError("--pcap: captures are for --scenario configs (a fabric per run); "
                                 "the failure scenario keeps one fabric")
            from experiments.failure import FAILURE_KINDS, run_failures
            run_failures(settings)
            # Each kind's summary and plots are in a directory of its own (the report
            # reads one run's summary.json, which the failure run's top has none of).
            print(f"wrote {', '.join(str(settings.out / kind / 'summary.json') for kind in FAILURE_KINDS)}")
            return 0
        elif args.scenario == "tenants":
            if args.pcap:
                raise ValueError("--pcap: captures are for --scenario configs (a fabric per run); "
                                 "the tenants scenario keeps one fabric")
            from experiments.tenants import run_tenants
            run_tenants(settings)
        elif args.scenario == "moe":
            if args.pcap:
                raise ValueError("--pcap: captures are for --scenario configs (a fabric per run); "
                                 "the moe scenario keeps one fabric")
            run_moe(settings, parse_runs(args.configs) if args.configs else tuple(RUNS.values()))
        elif args.scenario == "incast":
            if args.pcap:
                raise ValueError("--pcap: captures are for --scenario configs (a fabric per run); "
                                 "the incast scenario keeps one fabric")
            from experiments.incast import run_incast
            run_incast(args.fabric, settings.out, settings.repeats, seed=args.seed)
            print(f"wrote {settings.out / 'summary.json'}")
            return 0
        else:
            run(prepare(settings))
        print(f"wrote {write_report(settings.out)}")
    except (ValueError, SpecError, JobError) as e:
        print(f"experiments: {e}", file=sys.stderr)
        return 2
    except (LaunchError, RecorderError, FabricError) as e:
        print(f"experiments: the run failed: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
