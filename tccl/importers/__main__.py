"""``python -m tccl.importers FORMAT FILE -o traces/NAME.yaml``: a SimAI/AICB workload,
an AICB CSV or a Chakra ET as a testbed trace for a fabric; prints what it imported."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from tccl.importers.registry import FORMATS, detect, import_trace
from tccl.ranks import JobError
from tccl.trace import load_trace, trace_document
from topo.spec import SpecError

DEFAULT_FABRIC = Path(__file__).resolve().parents[2] / "topo" / "fabrics" / "default.yaml"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tccl.importers", description=__doc__.split("\n\n")[0])
    ap.add_argument("format", choices=(*FORMATS, "auto"), help="the file's format (auto: recognise it)")
    ap.add_argument("file", type=Path)
    ap.add_argument("-o", "--out", type=Path, required=True, help="the trace to write (YAML)")
    ap.add_argument("--fabric", type=Path, default=DEFAULT_FABRIC, help="fabric spec (default %(default)s)")
    ap.add_argument("--size-scale", type=float,
                    help="bytes here per byte of the file (default: the fabric's rate factor, host link / 400G)")
    ap.add_argument("--iterations", type=int, default=1, help="iterations of the trace (default %(default)s)")
    args = ap.parse_args(argv)
    try:
        fmt = detect(args.file) if args.format == "auto" else args.format
        if fmt is None:
            raise ValueError(f"{args.file}: not a format this reads ({', '.join(FORMATS)})")
        imported = import_trace(fmt, args.file, args.fabric, args.size_scale, args.iterations)
        args.out.write_text(yaml.safe_dump(trace_document(imported.trace), sort_keys=False), encoding="utf-8")
        load_trace(args.out)
    except (JobError, SpecError, ValueError) as e:
        print(f"tccl.importers: {e}", file=sys.stderr)
        return 2
    print(imported.summary())
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
