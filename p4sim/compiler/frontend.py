"""The compiler front end: P4-16 source file -> resolved, typed `ast.Program`.

Stages, each in its own module: `preprocess` (system cpp, line map back to the
sources), `lexer` + `parse` (LALR grammar `p4_16.lark` -> AST), `typecheck` +
`exprcheck` (name resolution with `resolve`, types, constant widths via `consteval`), then
`programchecks` (what only the whole program shows). The contract the
back end relies on is documented in `typecheck`.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

from p4sim.compiler import ast
from p4sim.compiler.diagnostics import CompileError, SrcPos
from p4sim.compiler.parse import parse
from p4sim.compiler.preprocess import preprocess
from p4sim.compiler.programchecks import check_whole_program
from p4sim.compiler.typecheck import check_program


def load_program(
    path: str,
    include_dirs: Sequence[str] = (),
    defines: Optional[Mapping[str, str]] = None,
) -> ast.Program:
    """Preprocess, parse, resolve and type-check the program at ``path``.

    Raises `CompileError` (position in the original file, source line for the caret)
    for every rejected program; any other exception is a compiler bug and is reported
    as an internal error at the program's file rather than as a traceback.
    """
    pre = preprocess(path, include_dirs, defines)
    try:
        program = parse(pre)
        check_program(program)
        check_whole_program(program)
    except CompileError:
        raise
    except RecursionError:
        raise CompileError("program is nested too deeply to compile", SrcPos(path, 0, 0), "unsupported") from None
    except Exception as e:  # a compiler bug: still a diagnostic, not a traceback
        raise CompileError(f"internal compiler error ({type(e).__name__}: {e}); "
                           "please report it with the program", SrcPos(path, 0, 0)) from e
    return program
