"""Which importer reads a file, and importing it for a fabric.

`detect` recognises a foreign file by its content (a Chakra ET by its ``.et`` name
and a metadata record that parses), so ``make demo TRACE=file`` takes any of them
as it takes a testbed trace (None: a testbed YAML trace).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tccl.importers import aicb_csv, chakra, simai
from tccl.importers.common import Imported, default_size_scale, fabric_shape

FORMATS: dict[str, ModuleType] = {m.FORMAT: m for m in (simai, aicb_csv, chakra)}


def detect(path: str | Path) -> str | None:
    """The format of ``path`` (a key of `FORMATS`), None for anything else."""
    path = Path(path)
    if path.suffix == ".et":
        return chakra.FORMAT
    try:
        with path.open(encoding="utf-8") as f:
            first = f.readline()
    except (OSError, UnicodeDecodeError):
        return None
    words = first.replace(",", " ").split()
    if words and words[0] in simai.POLICIES:
        return simai.FORMAT
    if all(c in words for c in aicb_csv.REQUIRED):
        return aicb_csv.FORMAT
    return None


def import_trace(fmt: str, path: str | Path, fabric: str | Path, size_scale: float | None = None,
                 iterations: int = 1) -> Imported:
    """``path`` (in ``fmt``) as a trace for the fabric spec ``fabric``; sizes x
    ``size_scale`` (default: the fabric's rate factor)."""
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: one of {', '.join(FORMATS)}")
    if size_scale is not None and size_scale <= 0:
        raise ValueError(f"--size-scale must be > 0, got {size_scale}")
    scale = default_size_scale(fabric) if size_scale is None else size_scale
    return FORMATS[fmt].import_file(path, fabric_shape(fabric), scale, iterations)
