"""Conformance sweep over p4c's own corpora: what p4c accepts, p4sim must accept;
what p4c refuses, p4sim must refuse at file:line:col.

    .venv/bin/python tests/p4c_corpus.py P4C/testdata [--jobs N] [--stf [--engine E]] [--verbose]

P4C/testdata is p4c's ``testdata`` folder (fetched outside this repository, never
copied into it). Two populations, chosen as the issue measured them:

* samples: ``p4_16_samples/*-bmv2.p4`` that include ``v1model.p4`` -- the
  programs p4c's bmv2 suite compiles for v1model (its CMake selects them with the
  pattern ``include.*v1model.p4``); those in p4c's bmv2 XFAIL list
  (``XFAIL_SAMPLES``) may stay refused, with a diagnostic. The ``-bmv2`` samples
  with neither v1model nor PSA/PNA (core.p4 and a package of their own, which
  p4c runs only through its front end) are listed apart, as ``core_samples``;
* errors: ``p4_16_errors/*.p4`` and ``p4_16_bmv_errors/*.p4`` that include
  ``core.p4`` and/or ``v1model.p4`` and nothing of another architecture -- p4c
  refuses each of them.

Each program is compiled in a worker process of its own (a hang or a crash costs
one program, not the sweep), exactly as ``p4sim compile`` does. A compiler bug
(an internal error, a Python exception) is counted apart from a refusal. Exit
status 0 when both lists are closed. The project's own regression programs
(tests/p4/good, tests/p4/bad) are the shipped sample: tests/test_p4c_corpus.py
runs this checker on them, laid out as p4c's corpora are.

``--engine native`` runs the STF tests on the switch engine generated in C (``python``,
the reference, by default): a program the C engine does not run is counted apart, as
falling back to Python, with the construct that makes it.
"""

from __future__ import annotations

import argparse
import glob
import multiprocessing
import os
import re
import sys
from dataclasses import dataclass
from typing import Iterable, Optional, TextIO

# p4c backends/bmv2/CMakeLists.txt: XFAIL_TESTS of the bmv2 suite (programs p4c's
# bmv2 back end or simple_switch cannot run), and extern-funcs-bmv2, which p4c runs
# only in a suite of its own (--emit-externs with a C++ module). p4sim may refuse these.
XFAIL_SAMPLES = frozenset({
    "issue907-bmv2", "issue986-bmv2", "issue1062-bmv2", "issue1193-bmv2", "issue1205-bmv2",
    "issue692-bmv2", "issue1765-bmv2", "issue1765-1-bmv2", "issue1882-bmv2", "issue1882-1-bmv2",
    "issue2664-bmv2", "hashing-non-tuple-bmv2", "issue584-1-bmv2", "extern-funcs-bmv2",
})

OTHER_ARCHS = ("psa.p4", "pna.p4", "ebpf_model.p4", "ubpf_model.p4", "tna.p4", "t2na.p4", "xdp_model.p4")
_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
TIMEOUT_S = 120.0


def includes(path: str) -> list[str]:
    """The files a program names in ``#include`` (its architecture, mostly)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return _INCLUDE.findall(f.read())


def _other_arch(incs: Iterable[str]) -> bool:
    return any(os.path.basename(i) in OTHER_ARCHS for i in incs)


def _bmv2_samples(testdata: str) -> list[str]:
    return sorted(glob.glob(os.path.join(testdata, "p4_16_samples", "*-bmv2.p4")))


def samples(testdata: str) -> list[str]:
    """The v1model ``-bmv2`` samples p4c's bmv2 suite compiles."""
    return [p for p in _bmv2_samples(testdata) if any(os.path.basename(i) == "v1model.p4" for i in includes(p))]


def core_samples(testdata: str) -> list[str]:
    """The ``-bmv2`` samples of no architecture p4c knows (core.p4 and a package of their own)."""
    return [p for p in _bmv2_samples(testdata)
            if not any(os.path.basename(i) in ("v1model.p4",) + OTHER_ARCHS for i in includes(p))]


def error_programs(testdata: str) -> list[str]:
    """The core/v1model programs of p4c's error corpora (p4c refuses each)."""
    paths = sorted(glob.glob(os.path.join(testdata, "p4_16_errors", "*.p4"))
                   + glob.glob(os.path.join(testdata, "p4_16_bmv_errors", "*.p4")))
    out = []
    for p in paths:
        incs = includes(p)
        names = {os.path.basename(i) for i in incs}
        if names & {"core.p4", "v1model.p4"} and not _other_arch(incs):
            out.append(p)
    return out


@dataclass(frozen=True)
class Outcome:
    """What ``p4sim compile`` did with one program.

    ``verdict`` is "accepted", "refused" (a diagnostic; ``positioned`` when it names
    file:line:col), "bug" (an internal compiler error or a Python exception) or
    "timeout"; ``message`` is the first line of the diagnostic or the exception.
    """

    path: str
    verdict: str
    message: str = ""
    positioned: bool = False
    stf: Optional[str] = None  # with --stf, for an accepted sample that has one: "pass" or why not


#: The start of an STF verdict for a program the chosen engine does not run
#: (``--engine native``: the C engine refuses a construct; Python would run it).
FALLBACK = "falls back to python: "


def run_its_stf(path: str, engine: str = "python") -> Optional[str]:
    """Run ``NAME.stf`` next to ``NAME.p4`` (None: there is none) on ``engine``:
    "pass", `FALLBACK` and the construct the engine does not run, or the first line
    of what went wrong, as ``p4sim stf`` reports it."""
    import io

    from p4sim.stf.command import run_stf
    from p4sim.switch.ccodegen import Unsupported

    stf = os.path.splitext(path)[0] + ".stf"
    if not os.path.exists(stf):
        return None
    out = io.StringIO()
    try:
        result = run_stf(path, stf, out=out, engine=engine)
    except Unsupported as e:
        return FALLBACK + str(e).splitlines()[0]
    except Exception as e:  # noqa: BLE001 -- a test that cannot run is a result too
        return f"cannot run: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    if result.passed:
        return "pass"
    return next((ln for ln in out.getvalue().splitlines() if "FAIL" in ln), result.summary())


def classify(path: str, stf: bool = False, engine: str = "python") -> Outcome:
    """Compile ``path`` as ``p4sim compile`` does (BMv2 JSON and P4Info) and say how
    it went; with ``stf``, also run the program's STF test when it has one, on ``engine``."""
    from p4sim.compiler import compile_file
    from p4sim.compiler.command import serialize_p4info
    from p4sim.compiler.diagnostics import CompileError

    try:
        result = compile_file(path)
        serialize_p4info(result.p4info, "text")
    except CompileError as e:
        first = e.render().split("\n")[0]
        if e.message.startswith("internal compiler error"):
            return Outcome(path, "bug", first)
        return Outcome(path, "refused", first, positioned=e.pos.line > 0)
    except Exception as e:  # noqa: BLE001 -- a traceback is what the sweep counts
        return Outcome(path, "bug", f"{type(e).__name__}: {e}")
    return Outcome(path, "accepted", stf=run_its_stf(path, engine) if stf else None)


def _classify_all(paths: list[str], jobs: int, stf_of: set[str], engine: str) -> list[Outcome]:
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(jobs, maxtasksperchild=20) as pool:
        pending = [(p, pool.apply_async(classify, (p, p in stf_of, engine))) for p in paths]
        out = []
        for p, res in pending:
            try:
                out.append(res.get(TIMEOUT_S))
            except multiprocessing.TimeoutError:
                out.append(Outcome(p, "timeout", f"no answer in {TIMEOUT_S:.0f} s"))
        return out


def p4c_error_lines(path: str) -> list[int]:
    """The lines of ``path`` p4c's expected stderr (``*_outputs/NAME.p4-stderr``)
    reports errors at; empty when p4c's corpus stores none for it."""
    folder, base = os.path.split(path)
    stderr = os.path.join(folder + "_outputs", base + "-stderr")
    if not os.path.exists(stderr):
        return []
    with open(stderr, encoding="utf-8", errors="replace") as f:
        found = re.findall(rf"^{re.escape(base)}\((\d+)\):.*\berror\b", f.read(), re.M)
    return [int(n) for n in found]


def _refused_line(o: Outcome) -> Optional[int]:
    m = re.search(rf"{re.escape(os.path.basename(o.path))}:(\d+):\d+:", o.message)
    return int(m.group(1)) if m else None


def _name(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def report(sample_out: list[Outcome], error_out: list[Outcome], core_out: list[Outcome], verbose: bool,
           out: Optional[TextIO] = None) -> bool:
    """Print the two lists and the counts (on stdout by default); True when both are closed."""
    out = out or sys.stdout

    def show(title: str, items: list[Outcome]) -> None:
        print(f"{title}: {len(items)}", file=out)
        for o in items:
            print(f"  {_name(o.path)}: {o.verdict}: {o.message}", file=out)

    accepted = [o for o in sample_out if o.verdict == "accepted"]
    xfail = [o for o in sample_out if o.verdict == "refused" and _name(o.path) in XFAIL_SAMPLES]
    wrongly_refused = [o for o in sample_out if o.verdict != "accepted" and o not in xfail]
    refused = [o for o in error_out if o.verdict == "refused"]
    wrongly_accepted = [o for o in error_out if o.verdict == "accepted"]
    unpositioned = [o for o in refused if not o.positioned] + [o for o in xfail if not o.positioned]
    bugs = [o for o in sample_out + error_out + core_out if o.verdict in ("bug", "timeout")]
    n = len(sample_out)
    print(f"samples compiled: {len(accepted)} of {n} ({100.0 * len(accepted) / max(n, 1):.1f} %); "
          f"p4c XFAILs refused: {len(xfail)}", file=out)
    print(f"error programs refused: {len(refused)} of {len(error_out)}; "
          f"accepted: {len(wrongly_accepted)}", file=out)
    print(f"refusals without file:line: {len(unpositioned)}; compiler bugs/timeouts: {len(bugs)}", file=out)
    compared = [(o, p4c_error_lines(o.path)) for o in refused]
    compared = [(o, lines) for o, lines in compared if lines]
    elsewhere = [o for o, lines in compared if _refused_line(o) not in lines]
    print(f"error programs refused at a line p4c's stored stderr names: {len(compared) - len(elsewhere)} of "
          f"{len(compared)} with a stored stderr", file=out)
    show("samples refused (not p4c XFAILs)", wrongly_refused)
    show("error programs accepted", wrongly_accepted)
    show("refusals without file:line", unpositioned)
    show("compiler bugs", bugs)
    show("core-only samples (not v1model; p4c's bmv2 suite does not compile them)", core_out)
    tested = [o for o in sample_out if o.stf is not None and _name(o.path) not in XFAIL_SAMPLES]
    if tested:
        passed = [o for o in tested if o.stf == "pass"]
        fallback = [o for o in tested if o.stf.startswith(FALLBACK)]
        print(f"STF tests of the accepted samples (less p4c's XFAILs): {len(passed)} of {len(tested)} pass "
              f"({100.0 * len(passed) / len(tested):.1f} %); {len(fallback)} fall back to python", file=out)
        for o in tested:
            if o.stf != "pass":
                print(f"  {_name(o.path)}: {o.stf}", file=out)
    if verbose:
        show("error programs refused at another line than p4c's", elsewhere)
        show("p4c XFAILs refused", xfail)
        show("error programs refused", refused)
    return not (wrongly_refused or wrongly_accepted or unpositioned or bugs)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("testdata", help="p4c's testdata folder")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("--verbose", action="store_true", help="also list the expected refusals")
    ap.add_argument("--only", default="", help="only programs whose name contains this")
    ap.add_argument("--stf", action="store_true", help="also run the STF test of each accepted sample")
    ap.add_argument("--engine", choices=("python", "native"), default="python",
                    help="the switch engine the STF tests run on (default python, the reference)")
    args = ap.parse_args(argv)
    groups = [samples(args.testdata), error_programs(args.testdata), core_samples(args.testdata)]
    groups = [[p for p in g if args.only in _name(p)] for g in groups]
    if not groups[0] and not groups[1]:
        print(f"{args.testdata}: no p4_16_samples or p4_16_errors programs", file=sys.stderr)
        return 2
    results = _classify_all([p for g in groups for p in g], args.jobs, set(groups[0]) if args.stf else set(),
                           args.engine)
    n0, n1 = len(groups[0]), len(groups[0]) + len(groups[1])
    closed = report(results[:n0], results[n0:n1], results[n1:], args.verbose)
    return 0 if closed else 1


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
