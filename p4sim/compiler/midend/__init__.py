"""Mid end: target-independent facts about a typed program, computed once.

Passes, each one job:

* `unroll`     -- ``for`` loops BMv2 cannot run as loops (around tables and controls,
  in parser states, over header stacks) become one copy of the body per iteration;
  it rewrites the program, so it runs first;
* `blocks`     -- find ``main`` and the six v1model blocks it is built from;
* `typeref`    -- semantic types of declarations (parameters, locals, instances);
* `names`      -- control-plane names (``@name``, qualification by control);
* `copyinout`  -- which call arguments are copied in and out rather than bound to
  the caller's storage (P4-16's calling convention, where the difference shows).

Values of constant expressions come from `p4sim.compiler.consteval`, the evaluator
the front end uses too, so a constant has the same value in every stage.

`analyse` runs them and returns a `Design`, the input of the BMv2 back end.
`controlplane` holds the inventory the back end fills for the P4Info builder.
"""

from __future__ import annotations

from dataclasses import dataclass

from p4sim.compiler import ast
from p4sim.compiler.midend.blocks import V1Blocks, v1model_blocks
from p4sim.compiler.midend.copyinout import CopyPlan, plan_copies
from p4sim.compiler.midend.typeref import TypeResolver
from p4sim.compiler.midend.unroll import unroll_loops


@dataclass
class Design:
    program: ast.Program
    types: TypeResolver
    blocks: V1Blocks
    errors: list[str]  # every error constant, program-wide declaration order
    copies: CopyPlan  # arguments to copy in and out


def collect_errors(program: ast.Program) -> list[str]:
    out: list[str] = []
    for d in program.decls:
        if isinstance(d, ast.ErrorDecl):
            out.extend(m for m in d.members if m not in out)
    return out


def analyse(program: ast.Program) -> Design:
    unroll_loops(program)
    types = TypeResolver(program)
    return Design(program, types, v1model_blocks(program, types), collect_errors(program),
                  plan_copies(program))
