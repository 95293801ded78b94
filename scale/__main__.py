"""``python -m scale SPEC TRACE``: the flow-level model of the demo's configurations
(stock, stock-gor, rail, orthogonal, gor) of a fabric spec running a trace.

Prints the table; ``--json`` writes the figures, ``--plots DIR`` the link-load
histograms, and ``--gpus 1000,10000`` adds busbw against GPU count: the spec with as
many blocks as give each count (the spec's own limits apply and are reported).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

from experiments.configs import parse_configs
from tccl.ranks import JobError
from topo.spec import SpecError, load_spec, validate

from scale.model import evaluate
from scale.report import format_table, plot_busbw_vs_gpus, plot_link_loads


def scaled_spec(spec_file: Path, gpus: int, out_dir: Path) -> Path:
    """A copy of the spec grown or shrunk to about ``gpus`` GPUs: whole pods of the
    spec's size where it has pods and ``gpus`` fills one, else blocks in one pod."""
    spec = load_spec(spec_file, emulated=False)
    per_block = spec.servers_per_block * spec.rails
    per_pod = per_block * spec.blocks_per_pod
    if spec.pods > 1 and gpus >= per_pod:
        pods = round(gpus / per_pod)
        blocks = pods * spec.blocks_per_pod
    else:
        pods, blocks = 1, max(1, round(gpus / per_block))
    scaled = dataclasses.replace(spec, blocks=blocks, pods=pods, name=f"{spec.name}-{blocks * per_block}")
    try:
        validate(scaled, str(spec_file), emulated=False)
    except SpecError as e:
        raise SpecError(f"{gpus} GPUs need {blocks} blocks of {per_block}: {e}") from e
    path = out_dir / f"{scaled.name}.yaml"
    path.write_text(yaml.safe_dump(dataclasses.asdict(scaled), sort_keys=False), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scale", description=__doc__.split("\n\n")[0])
    ap.add_argument("spec", type=Path, help="fabric spec (topo/fabrics/*.yaml)")
    ap.add_argument("trace", type=Path, help="trace (traces/*.yaml)")
    ap.add_argument("--configs", default="stock,stock-gor,rail,orthogonal,gor",
                    help="configurations, comma-separated (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=1, help="seed of random ports and orthogonal plans")
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--plots", type=Path, help="write the plots into this directory")
    ap.add_argument("--gpus", help="also model the spec scaled to these GPU counts (comma-separated)")
    args = ap.parse_args(argv)
    try:
        configs = parse_configs(args.configs)
        started = time.perf_counter()
        evaluations = evaluate(args.spec, args.trace, configs, args.seed)
        elapsed = time.perf_counter() - started
        print(format_table(evaluations))
        print(f"\n{len(configs)} configurations in {elapsed:.2f} s")
        doc = {"spec": str(args.spec), "trace": str(args.trace), "seconds": elapsed,
               "configs": {n: e.summary() for n, e in evaluations.items()}}
        sweep: dict[str, list[tuple[int, float]]] = {n: [] for n in evaluations}
        if args.gpus:
            counts = [int(g) for g in args.gpus.split(",") if g.strip()]
            with tempfile.TemporaryDirectory() as tmp:
                for gpus in counts:
                    for name, ev in evaluate(scaled_spec(args.spec, gpus, Path(tmp)), args.trace,
                                             configs, args.seed).items():
                        sweep[name].append((ev.gpus, ev.busbw_frac))
            doc["busbw_vs_gpus"] = sweep
            for name, series in sweep.items():
                print(f"{name}: " + "  ".join(f"{g} GPUs {b:.2f}" for g, b in series))
        if args.plots:
            args.plots.mkdir(parents=True, exist_ok=True)
            plot_link_loads(evaluations, args.plots / "link-loads.png")
            if args.gpus:
                plot_busbw_vs_gpus(sweep, args.plots / "busbw-vs-gpus.png")
        if args.json:
            args.json.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    except (SpecError, JobError, ValueError) as e:
        print(f"scale: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
