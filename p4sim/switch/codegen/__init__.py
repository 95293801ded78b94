"""Turn a BMv2 JSON program into Python source, compiled once at load time.

Every parse state, action, conditional, table node, calculation, checksum and the
deparser becomes a plain Python function working on the flat PHV list `F` (see
`program.Layout`), so the per-packet work is straight-line code with constant slot
indexes: no expression tree is walked per packet. `V1Switch` executes the source in a
namespace holding the constants it refers to and the run-time objects (tables, extern
arrays) it names, both under the names `Symbols` gives.

One module per construct, as p4c's ``backends/bmv2/common`` has one converter per
construct; in the order of a packet's way through the switch:

* `parser`      -- parse states and header extraction (``PARSE``);
* `controls`    -- the ingress and egress control graphs, nodes fused into few calls;
* `tables`      -- a table's key, lookup, hit and miss inside a control;
* `actions`     -- actions and the primitives they are made of;
* `deparser`    -- the deparser, and the checksums verified after the parser and
  updated before the deparser;

and what they share: `expressions` (BMv2 expressions as Python), `calculations` (hashes
and checksums), `structs` (byte images through `struct`), `symbols` (every generated
name), `context` (the program and the module being written).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ProgramError
from ..program import Layout
from .actions import DROP_PORT, Actions
from .calculations import Calculations
from .context import Context
from .controls import Controls
from .deparser import Deparser
from .expressions import Expressions
from .parser import Parser
from .structs import Structs
from .symbols import Symbols
from .tables import Tables

__all__ = ["DROP_PORT", "Generated", "Symbols", "generate"]


@dataclass
class Generated:
    """A program's generated module, before it runs."""

    source: str
    #: objects the code refers to by name (structs, hash functions, layout tables...)
    constants: dict[str, Any]
    #: calculation or action-profile name -> its hash object (for set_crc_parameters)
    hashes: dict[str, Any]
    #: parser value set -> widths of the key fields it is matched against
    vset_keys: dict[str, list[int]]


def _named(items: list[dict], name: str, what: str) -> dict:
    """The item called `name`, else the first one; ProgramError when there is none."""
    if not items:
        raise ProgramError(f"the program has no {what}")
    return next((i for i in items if i["name"] == name), items[0])


def generate(js: dict[str, Any], layout: Layout, symbols: Symbols) -> Generated:
    """The Python module for BMv2 JSON program `js` (its layout: `layout`)."""
    ctx = Context(js, layout, symbols)
    exprs = Expressions(ctx)
    structs = Structs(ctx)
    calcs = Calculations(ctx, structs)
    actions = Actions(ctx, exprs, calcs)
    parser = Parser(ctx, exprs, structs, actions)
    deparser = Deparser(ctx, exprs, structs, actions, calcs)
    controls = Controls(ctx, exprs, actions, Tables(ctx))

    calcs.emit_all()
    for p in js.get("pipelines", []):
        for profile in p.get("action_profiles", []):
            calcs.emit_selector(profile)
    for act in js.get("actions", []):
        actions.action(act)
    parser.emit(_named(js.get("parsers", []), "parser", "parser"))
    deparser.emit(_named(js.get("deparsers", []), "deparser", "deparser"))
    deparser.emit_checksums()
    pipelines = {p["name"]: p for p in js.get("pipelines", [])}
    if "ingress" not in pipelines or "egress" not in pipelines:
        raise ProgramError("the program needs pipelines named 'ingress' and 'egress'")
    for p in pipelines.values():
        controls.pipeline(p)
    return Generated(ctx.source(), ctx.constants, calcs.named, parser.vset_keys)
