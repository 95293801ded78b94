"""Compile the fabric's P4 program into the artefacts the switches are given.

`build_pipeline(spec)` compiles p4src/astral.p4 with the spec's ECMP hash algorithms
(``-DECMP_HASH_ALGO=... -DSPINE_HASH_ALGO=...``, `topo.hashmodel.tier_algorithm`) into
``build/pipeline/<compiler>-<algorithm>/`` -- with p4sim's
compiler, or with p4c when asked (BACKEND=bmv2) -- and reuses the output while it is
newer than the program and the compiler, so a second `make run` does not recompile.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format

from p4sim.compiler import compile_file
from topo.hashmodel import tier_algorithm
from topo.spec import FabricSpec

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "p4src" / "astral.p4"
BUILD = ROOT / "build" / "pipeline"
COMPILERS = ("p4sim", "p4c")


@dataclass(frozen=True)
class Pipeline:
    """The compiled program: P4Info (text format) and the device config (BMv2 JSON)."""

    p4info: Path
    device_config: Path


def _newest_input(compiler: str) -> float:
    inputs = list(PROGRAM.parent.glob("*.p4"))
    if compiler == "p4sim":
        inputs += list((ROOT / "p4sim" / "compiler").rglob("*.py"))
        inputs += list((ROOT / "p4sim" / "compiler").rglob("*.p4"))
    return max(p.stat().st_mtime for p in inputs)


def build_pipeline(spec: FabricSpec, out_dir: Path = BUILD, compiler: str = "p4sim") -> Pipeline:
    """Compile (or reuse) the program for ``spec``; raises `CompileError` or
    `RuntimeError` (p4c) with the compiler's message."""
    if compiler not in COMPILERS:
        raise ValueError(f"unknown compiler {compiler!r}; one of {', '.join(COMPILERS)}")
    target = Path(out_dir) / f"{compiler}-{spec.ecmp_hash}"
    pipeline = Pipeline(target / "astral.p4info.txtpb", target / "astral.json")
    if all(p.exists() and p.stat().st_mtime > _newest_input(compiler)
           for p in (pipeline.p4info, pipeline.device_config)):
        return pipeline
    target.mkdir(parents=True, exist_ok=True)
    defines = hash_defines(spec)
    if compiler == "p4c":
        p4c = shutil.which("p4c")
        if p4c is None:
            raise RuntimeError("p4c is not on PATH")
        done = subprocess.run([p4c, "--target", "bmv2", "--arch", "v1model",
                               *(f"-D{k}={v}" for k, v in defines.items()),
                               "--p4runtime-files", str(pipeline.p4info), "-o", str(target),
                               str(PROGRAM)], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"p4c failed on {PROGRAM}:\n{done.stderr}")
        return pipeline
    result = compile_file(str(PROGRAM), defines=defines)
    _write_atomically(pipeline.device_config, json.dumps(result.bmv2_json, indent=1))
    _write_atomically(pipeline.p4info, text_format.MessageToString(result.p4info))
    return pipeline


def hash_defines(spec: FabricSpec) -> dict[str, str]:
    """The preprocessor defines that pick each tier's HashAlgorithm in astral.p4."""
    return {"ECMP_HASH_ALGO": tier_algorithm(spec, "leaf"),
            "SPINE_HASH_ALGO": tier_algorithm(spec, "spine")}


def _write_atomically(path: Path, text: str) -> None:
    """Two launchers compiling at once must never see each other's half-written file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
