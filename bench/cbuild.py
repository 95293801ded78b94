"""The benchmarks' small C programs (the paced sender, the wake-up probe), compiled by
the system's C compiler once per source version into build/bench."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

CACHE = Path(__file__).resolve().parents[1] / "build" / "bench"


def compiled(source: Path) -> Path:
    """The executable of ``source`` (bench/NAME.c), built if its text changed."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    binary = CACHE / f"{source.stem}-{digest}"
    if not binary.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = binary.with_name(f"{binary.name}.{os.getpid()}.tmp")
        subprocess.run(["cc", "-O2", "-Wall", "-Werror", "-o", str(tmp), str(source)], check=True)
        os.replace(tmp, binary)
    return binary
