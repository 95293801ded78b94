"""Compile a generated pipeline with the system C compiler and load it through cffi.

The shared object is cached under ``build/native/`` of the project, keyed by the hash
of the C source (itself a function of the BMv2 JSON and of
`ccodegen.GENERATOR_VERSION`), of the runtime headers it includes and of the compiler
flags: ten switches of one program compile once, and a change of the generator or of
the headers never reuses a stale object. The object is written under a temporary name
and renamed, so switches starting together never load a half-written file.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import cffi

from ..errors import ProgramError

HERE = Path(__file__).resolve().parent
CACHE = HERE.parents[2] / "build" / "native"
HEADERS = ("pipeline.h", "runtime.h", "headers.h", "driver.h", "api.h")
CFLAGS = ("-O2", "-std=gnu11", "-fPIC", "-shared", "-Wall", "-Wno-unused-function",
          "-Wno-unused-label", "-Wno-unused-variable", "-fno-strict-aliasing")
#: The flags of the sanitizer build the tests push fuzzed frames through.
SANITIZE = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g", "-O1",
            "-DP4N_EXACT_FRAMES")

#: What Python calls: pipeline.h's contract (read from the header itself, without its
#: preprocessor lines) and api.h's control-plane functions.
CDEFS = "\n".join(line for line in (HERE / "pipeline.h").read_text().splitlines()
                  if not line.startswith("#")) + """
p4n_pipeline *p4n_new(void);
void p4n_free(p4n_pipeline *p);
int p4n_table_add(p4n_pipeline *p, int t, uint32_t handle, const uint64_t *lo, const uint64_t *hi,
                  const uint8_t *range, int plen, int64_t priority, int action, const uint64_t *args,
                  int nargs, int mbr, int grp);
int p4n_table_set_action(p4n_pipeline *p, int t, uint32_t handle, int action,
                         const uint64_t *args, int nargs);
int p4n_table_delete(p4n_pipeline *p, int t, uint32_t handle);
int p4n_table_set_default(p4n_pipeline *p, int t, int action, const uint64_t *args, int nargs,
                          int grp);
int p4n_entry_counter(p4n_pipeline *p, int t, uint32_t handle, uint64_t *pkts, uint64_t *bytes,
                      int write);
int p4n_meter_set(p4n_pipeline *p, int mid, int t, uint32_t idx, int configured, int packets,
                  int n, int64_t t0, const double *rate, const int64_t *burst,
                  const int64_t *tokens, const int64_t *last, const int *color);
int p4n_member_set(p4n_pipeline *p, int prof, uint32_t mbr, int action, const uint64_t *args,
                   int nargs);
int p4n_group_set(p4n_pipeline *p, int prof, uint32_t grp, int n, const uint32_t *members);
int p4n_counter(p4n_pipeline *p, int c, uint32_t idx, uint64_t *pkts, uint64_t *bytes, int write);
int p4n_register(p4n_pipeline *p, int r, uint32_t idx, uint64_t *value, int write);
int p4n_session_set(p4n_pipeline *p, uint32_t session, int port, int mgrp);
int p4n_mgrp_set(p4n_pipeline *p, uint32_t mgrp, int n, const uint32_t *ports, const uint32_t *rids);
int p4n_vset_set(p4n_pipeline *p, int v, int n, const uint64_t *values, const uint64_t *masks);
int p4n_crc_params(p4n_pipeline *p, int calc, uint64_t poly, uint64_t init, uint64_t xor_out,
                   int refin, int refout);
int p4n_digest_take(p4n_pipeline *p, uint64_t *out, int max);
int p4n_rng_state(p4n_pipeline *p, const uint32_t *mt, uint32_t index);
int p4n_egress_sent(p4n_pipeline *p);
int64_t p4n_run_batch(p4n_pipeline *p, uint32_t port, const uint8_t *frames, uint32_t len, int n,
                      uint64_t now_us);
int p4n_last_error(p4n_pipeline *p);
uint64_t p4n_dropped_passes(p4n_pipeline *p);
"""

ffi = cffi.FFI()
ffi.cdef(CDEFS)
_loaded: dict[Path, object] = {}


def _key(source: str, flags: tuple[str, ...]) -> str:
    h = hashlib.sha256(source.encode())
    for name in HEADERS:
        h.update((HERE / name).read_bytes())
    h.update(" ".join(flags).encode())
    return h.hexdigest()[:32]


def compile_pipeline(source: str, sanitize: bool = False, cache: Path = CACHE) -> Path:
    """The shared object of C `source`, compiled now unless the cache has it."""
    flags = CFLAGS + (SANITIZE if sanitize else ())
    so = cache / f"p4n-{_key(source, flags)}{'-asan' if sanitize else ''}.so"
    if so.exists():
        return so
    cache.mkdir(parents=True, exist_ok=True)
    # a fabric's switches start together with one program: one compiles, the others
    # wait for its object instead of running gcc ten times on two cores
    with open(so.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not so.exists():
            _compile(source, flags, so)
    return so


def _compile(source: str, flags: tuple[str, ...], so: Path) -> None:
    fd, tmp_c = tempfile.mkstemp(suffix=".c", dir=so.parent)
    with os.fdopen(fd, "w") as f:
        f.write(source)
    tmp_so = tmp_c[:-2] + ".so"
    try:
        cmd = ["gcc", *flags, "-I", str(HERE), "-o", tmp_so, tmp_c]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode:
            raise ProgramError(f"internal: the generated C does not compile ({tmp_c}):\n"
                               f"{res.stderr[-4000:]}")
        os.replace(tmp_so, so)
        os.unlink(tmp_c)
    finally:
        if os.path.exists(tmp_so):
            os.unlink(tmp_so)


def load(so: Path) -> object:
    """The cffi library of a compiled pipeline (each object is loaded once)."""
    lib = _loaded.get(so)
    if lib is None:
        lib = _loaded[so] = ffi.dlopen(str(so))
    return lib
