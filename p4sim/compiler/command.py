"""``p4sim compile``: the p4c command line for the bmv2/v1model target.

    p4sim compile --target bmv2 --arch v1model \\
        --p4runtime-files build/prog.p4info.txtpb[,build/prog.p4info.binpb] \\
        -o build [-I DIR] [-D NAME[=VALUE]] prog.p4

writes ``build/prog.json`` (BMv2 JSON; ``-o x.json`` names the file, as with
p4c-bm2-ss) and each P4Info file in the format its
extension says (``.txt``/``.txtpb`` text, ``.bin``/``.binpb`` binary, ``.json``
JSON), or in ``--p4runtime-format``'s for any other extension, like p4c. A rejected
program prints p4c-style diagnostics on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Optional

from p4sim.compiler.diagnostics import CompileError

FORMATS = {".txt": "text", ".txtpb": "text", ".bin": "binary", ".binpb": "binary", ".json": "json"}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="p4sim compile", description="Compile P4-16 (v1model) to BMv2 JSON + P4Info.")
    ap.add_argument("source", help="the P4-16 program")
    ap.add_argument("--target", default="bmv2", choices=["bmv2"])
    ap.add_argument("--arch", default="v1model", choices=["v1model"])
    ap.add_argument("--std", default="p4-16", choices=["p4-16", "p4_16"])
    ap.add_argument("--p4v", default="16", choices=["16"], help="(p4c-bm2-ss) language version")
    ap.add_argument("-o", "--output", dest="outdir", default=".",
                    help="output directory (default: .); a path ending in .json names the JSON file "
                         "itself, as p4c-bm2-ss -o does")
    ap.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR")
    ap.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]")
    ap.add_argument("--p4runtime-files", default="", help="comma-separated P4Info output files")
    ap.add_argument("--p4runtime-file", default="", help="(older p4c) one P4Info output file")
    ap.add_argument("--p4runtime-format", default="binary", choices=["text", "binary", "json"],
                    help="format for --p4runtime-file(s) whose extension says nothing")
    return ap


def _defines(items: list[str]) -> dict[str, str]:
    out = {}
    for d in items:
        name, _, value = d.partition("=")
        out[name] = value if _ else "1"
    return out


def serialize_p4info(p4info: object, fmt: str) -> bytes:
    from google.protobuf import json_format, text_format

    if fmt == "text":
        return text_format.MessageToString(p4info).encode()  # type: ignore[arg-type]
    if fmt == "json":
        return json_format.MessageToJson(p4info).encode()  # type: ignore[arg-type]
    return p4info.SerializeToString()  # type: ignore[attr-defined]


def main(argv: Optional[list[str]] = None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    from p4sim.compiler import compile_file

    try:
        result = compile_file(args.source, args.include_dirs, _defines(args.defines))
    except CompileError as e:
        print(e.render(), file=sys.stderr)
        return 1
    try:
        if args.outdir.endswith(".json"):
            json_path = args.outdir
        else:
            base = os.path.splitext(os.path.basename(args.source))[0]
            json_path = os.path.join(args.outdir, base + ".json")
        os.makedirs(os.path.dirname(json_path) or ".", exist_ok=True)
        with open(json_path, "w") as f:
            json.dump(result.bmv2_json, f, indent=2)
            f.write("\n")
        files = [p for p in (args.p4runtime_files.split(",") + [args.p4runtime_file]) if p]
        for path in files:
            fmt = FORMATS.get(os.path.splitext(path)[1], args.p4runtime_format)
            d = os.path.dirname(path)
            if d:
                os.makedirs(d, exist_ok=True)
            with open(path, "wb") as f:
                f.write(serialize_p4info(result.p4info, fmt))
    except OSError as e:
        print(f"p4sim compile: error: {e}", file=sys.stderr)
        return 1
    return 0
