"""The p4sim P4-16 compiler: v1model source -> BMv2 JSON + P4Info, like p4c.

The pipeline has p4c's shape, one package per stage:

* front end (`frontend.load_program`): preprocess, parse, resolve names, type-check;
  the result is a typed `ast.Program`;
* mid end (`midend/`): the rewrites BMv2 needs first (unrolling the ``for`` loops
  it cannot run as loops), then target-independent facts about the typed program --
  the v1model blocks and their instances, control-plane names;
* back end (`bmv2/`): lowering to the BMv2 JSON pipeline, one module per job, each
  importing only those before it (and `jsonutil`) --
  `storage` (headers, stacks, unions, ``scalars``), `context` (program-wide arrays,
  scopes, instances), `expressions` (P4 width semantics), `primitives` (the
  primitive list and field writes), `externs` (extern calls), `unionstacks`
  (push/pop and ``last`` on stacks of header unions, kept flat), `statements`
  (inlining of actions and functions), `actions`, `tables`, `controls` (apply
  blocks -> tables/conditionals, ``tbl_act`` synthesized tables, sub-control
  inlining), `parsercalls` (calls in parser states to functions that need states
  of their own), `parsers` (parse states: split at ifs, such calls and sub-parser
  calls, which are inlined), `ordering` (p4c's reading order and names), `program`
  (the whole document);
* `consteval` evaluates constant expressions for every stage (one evaluator, so a
  constant has one value from the type checker to the JSON);
* `p4info.py` builds the P4Runtime schema from the control-plane inventory the back
  end records (`midend.controlplane`), so JSON and P4Info always agree.

Everyone else uses only `compile_file` / `compile_program` and `CompileResult`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from p4sim.compiler.diagnostics import CompileError, SrcPos

__all__ = ["CompileError", "CompileResult", "compile_file", "compile_program"]


@dataclass
class CompileResult:
    """The two artefacts p4c writes for ``--target bmv2 --arch v1model``.

    ``bmv2_json`` is the pipeline as a JSON-ready dict (behavioral-model's
    docs/JSON_format.md); ``p4info`` is a ``p4.config.v1.P4Info`` message.
    """

    bmv2_json: dict
    p4info: Any


def compile_program(program: Any, source_name: str = "program.p4") -> CompileResult:
    """Back half of the compiler: typed `ast.Program` -> `CompileResult`.

    Split from `compile_file` so that tests can feed a program the front end built
    from a string, and so that the benchmark can time the back end alone.
    """
    from p4sim.compiler.bmv2.program import build_bmv2_json
    from p4sim.compiler.midend import analyse
    from p4sim.compiler.p4info import build_p4info

    design = analyse(program)
    bmv2_json, control_plane = build_bmv2_json(design, source_name)
    p4info = build_p4info(control_plane)
    return CompileResult(bmv2_json=bmv2_json, p4info=p4info)


def compile_file(
    path: str,
    include_dirs: Sequence[str] = (),
    defines: Optional[Mapping[str, str]] = None,
) -> CompileResult:
    """Compile the P4-16 v1model program at ``path``.

    Raises `CompileError` (with file:line:col) for any program p4c would reject or
    that p4sim does not support, and for a compiler bug (an internal error naming the
    file); never returns a partial result.
    """
    import os

    from p4sim.compiler.frontend import load_program

    try:
        program = load_program(path, include_dirs, defines)
        return compile_program(program, os.path.basename(path))
    except CompileError as e:
        raise e.in_file(path) from None  # an error about the whole program names its file
    except RecursionError:
        raise CompileError("program is nested too deeply to compile", SrcPos(path, 0, 0),
                           "unsupported") from None
    except Exception as e:  # a back-end bug: still a diagnostic, never a traceback
        raise CompileError(f"internal compiler error ({type(e).__name__}: {e}); "
                           "please report it with the program", SrcPos(path, 0, 0)) from e
