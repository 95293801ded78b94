"""``p4sim stf PROG.p4 TEST.stf``: compile a program and run an STF test against it.

The counterpart of p4c's ``run-bmv2-test.py`` (compile with p4c, run ``bmv2stf.py``
on simple_switch), in one process. PROG may also be a BMv2 JSON file (as
``bmv2stf.py`` takes), to test JSON produced by real p4c. Exit status: 0 when every
expectation held, 1 otherwise (including a program or test that does not load), 2 for
a bad command line. The last line of output is the verdict: ``PASS: ...`` or
``FAIL: ...``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from p4sim.compiler import CompileError, compile_file
from p4sim.stf.program import UnknownName
from p4sim.stf.runner import StfResult, StfRunner
from p4sim.stf.syntax import StfSyntaxError, parse_stf_file
from p4sim.switch.errors import ProgramError


def load_pipeline(program: str, include_dirs: list[str], defines: dict[str, str]) -> dict:
    """BMv2 JSON for ``program``: compiled from P4 source, or read if it is ``.json``."""
    if program.endswith(".json"):
        with open(program, encoding="utf-8") as f:
            return json.load(f)
    return compile_file(program, include_dirs, defines or None).bmv2_json


def run_stf(program: str, stf: str, *, include_dirs: list[str] | None = None,
            defines: dict[str, str] | None = None, out: TextIO = sys.stdout,
            verbose: bool = False, engine: str = "python") -> StfResult:  # fmt: skip
    """Compile/load ``program``, run the STF file ``stf``; failures are in the result.

    Raises `CompileError`, `StfSyntaxError`, `OSError`, `UnknownName` or `ProgramError`
    (a BMv2 JSON the engine cannot load) when the program or test cannot be loaded at
    all -- there is no run to report on then (`Unsupported`, a ProgramError, when
    ``engine`` is "native" and the C engine does not run the program).
    """
    commands = parse_stf_file(stf)
    pipeline = load_pipeline(program, include_dirs or [], defines or {})
    result = StfRunner(pipeline, out=out, verbose=verbose, engine=engine).run(commands)
    for failure in result.failures:
        print(failure.render(), file=out)
    return result


def _defines(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        out[name] = value or "1"
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="p4sim stf", description="Run an STF test against a P4 program.")
    parser.add_argument("program", help="P4-16 v1model source (or BMv2 JSON, *.json)")
    parser.add_argument("stf", help="STF test file")
    parser.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR",
                        help="add an include directory for the preprocessor")  # fmt: skip
    parser.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]",
                        help="define a preprocessor macro")  # fmt: skip
    parser.add_argument("-v", "--verbose", action="store_true", help="trace every command and output packet")
    parser.add_argument("--engine", choices=("python", "native", "auto"), default="python",
                        help="switch engine: python (the reference, default), native (the pipeline "
                             "generated in C; refuses a program it does not run), auto (native when "
                             "it runs the program, else python)")
    args = parser.parse_args(argv)
    try:
        result = run_stf(args.program, args.stf, include_dirs=args.include_dirs,
                         defines=_defines(args.defines), verbose=args.verbose,
                         engine=args.engine)  # fmt: skip
    except (CompileError, StfSyntaxError, UnknownName) as e:
        print(str(e), file=sys.stderr)
        print("FAIL: the test could not be loaded")
        return 1
    except ProgramError as e:
        print(f"p4sim stf: {args.program}: the switch cannot load this program: {e}", file=sys.stderr)
        print("FAIL: the test could not be loaded")
        return 1
    except json.JSONDecodeError as e:
        print(f"p4sim stf: {args.program}: not valid JSON: {e}", file=sys.stderr)
        print("FAIL: the test could not be loaded")
        return 1
    except OSError as e:
        print(f"p4sim stf: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        print("FAIL: the test could not be loaded")
        return 1
    print(result.summary())
    return 0 if result.passed else 1
