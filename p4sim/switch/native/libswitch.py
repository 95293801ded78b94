"""The native switch library -- the device loop, traffic manager, ports, PAUSE frames,
captures, clock (loop.c, tm.c, ports.c, pause.c, pcap.c, clock.c, pfc.c) -- compiled
with the system compiler, once, into a cache, and loaded through cffi.

The generated pipelines are separate libraries (build.py), reached through the
function table pipeline.h defines. A library is built from sources in this directory
into ``build/native/<name>-<key>.so``,
where the key hashes the sources, every header beside them, the flags and the
compiler's version: ten switches started together compile once (the first takes the
library's lock file and compiles; the others wait on the lock and find it), and an
edited source or a new compiler makes a new library rather than loading a stale one. cffi loads it in ABI mode (`ffi.dlopen`), declared from the part of a header
between its ``/* cdef begin */`` and ``/* cdef end */`` markers, so the declarations
have one owner: the header the C is compiled against.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any

import cffi

HERE = Path(__file__).resolve().parent
CACHE = HERE.parents[2] / "build" / "native"
CC = os.environ.get("CC", "cc")
CFLAGS = ("-O2", "-g", "-std=gnu11", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror")
CDEF_BEGIN = "/* cdef begin */"
CDEF_END = "/* cdef end */"


class NativeBuildError(RuntimeError):
    """The C compiler is missing or refused the sources (its messages are included)."""


@lru_cache(maxsize=None)
def _compiler_version() -> str:
    if shutil.which(CC) is None:
        raise NativeBuildError(f"no C compiler '{CC}' on PATH: the native engine needs gcc and "
                               f"libc6-dev (make setup installs them)")
    return subprocess.run([CC, "--version"], capture_output=True, text=True, check=True).stdout


def compile_library(name: str, sources: tuple[str, ...], extra_flags: tuple[str, ...] = ()) -> Path:
    """The shared library built from ``sources`` (file names in this directory) with
    ``extra_flags`` (e.g. sanitizers), compiled now unless the cache has it."""
    flags = CFLAGS + extra_flags
    digest = hashlib.sha256()
    digest.update(_compiler_version().encode())
    digest.update("\0".join(flags).encode())
    for path in sorted(HERE.glob("*.h")) + [HERE / s for s in sources]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    out = CACHE / f"{name}-{digest.hexdigest()[:16]}.so"
    if out.exists():
        return out
    CACHE.mkdir(parents=True, exist_ok=True)
    # A fabric's switches start together: one compiles, the others wait for its
    # library rather than running the compiler ten times on two cores.
    with open(out.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.exists():
            return out
        tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
        cmd = [CC, *flags, "-o", str(tmp), *(str(HERE / s) for s in sources)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            tmp.unlink(missing_ok=True)
            raise NativeBuildError(f"compiling {name} failed ({' '.join(cmd)}):\n{done.stderr}")
        os.replace(tmp, out)
    return out


def cdef_of(header: str) -> str:
    """The declarations between the cdef markers of ``header`` (a file in this directory)."""
    text = (HERE / header).read_text()
    begin, end = text.find(CDEF_BEGIN), text.find(CDEF_END)
    if begin < 0 or end < begin:
        raise NativeBuildError(f"{HERE / header}: no '{CDEF_BEGIN}' ... '{CDEF_END}' section")
    return text[begin + len(CDEF_BEGIN):end]


SOURCES = ("loop.c", "tm.c", "pfc.c", "ports.c", "pause.c", "pcap.c", "clock.c")
# Headers whose cdef sections Python calls, in the order their types are needed.
API = ("tm.h", "pause.h", "ports.h", "loop.h")


@lru_cache(maxsize=None)
def load(extra_flags: tuple[str, ...] = ()) -> tuple[cffi.FFI, Any]:
    """The switch library compiled with ``extra_flags`` (compiled now unless cached),
    opened once per process: its ffi and lib."""
    ffi = cffi.FFI()
    ffi.cdef("".join(cdef_of(h) for h in API))
    return ffi, ffi.dlopen(str(compile_library("switch", SOURCES, extra_flags + ("-pthread",))))
