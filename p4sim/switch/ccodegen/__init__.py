"""Turn a BMv2 JSON program into C: the native engine's pipeline (p4sim/switch/native/).

The twin of `codegen` (which writes Python), with the same one-module-per-construct
shape, in the order of a packet's way:

* `parser`       -- parse states and header extraction (``p4n_parse``);
* `controls`     -- the ingress and egress control nodes (``p4n_control``);
* `tables`       -- a table's key, lookup, hit and miss inside a control;
* `actions`      -- actions and the primitives they are made of;
* `deparser`     -- the deparser and the checksums verified and updated around the pipeline;

and what they share: `expressions` (BMv2 expressions in 128-bit C), `calculations`
(hashes and checksums, bit-exact with `hashes`), `layout` (the PHV, the standard
metadata, field and learn lists: what the driver reads), `context` (the program, the
file being written, `Unsupported`).

The file includes native/runtime.h (values, tables, externs) at the top,
native/headers.h (operations on headers chosen at run time) after the layout, and
native/driver.h (simple_switch's ingress/egress around the pipeline, the p4n_ops of
pipeline.h) and native/api.h (the control-plane functions) at the end. A construct
outside what the C engine runs raises `Unsupported` naming it and its place in the JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ProgramError
from ..program import Layout
from . import layout
from .actions import CActions
from .calculations import CCalculations
from .context import CContext, Unsupported
from .controls import CControls
from .deparser import CDeparser
from .expressions import CExpressions, arg_layout
from .parser import CParser
from .tables import CTables

__all__ = ["GENERATOR_VERSION", "CProgram", "Unsupported", "generate_c"]

#: Part of the build cache's key (native/build.py): change it with any change of the
#: generated code's meaning.
GENERATOR_VERSION = "3"


@dataclass
class CProgram:
    """A program's C file and the indexes its control-plane functions take."""

    source: str
    context: CContext

    @property
    def table_ix(self) -> dict[str, int]:
        """Table name -> index in p4n_pipeline.tables."""
        return self.context.table_ix

    @property
    def profile_ix(self) -> dict[str, int]:
        """Action profile name -> index in p4n_pipeline.profiles."""
        return self.context.profile_ix

    @property
    def counter_ix(self) -> dict[str, int]:
        """Indirect counter array name -> index."""
        return self.context.counter_ix

    @property
    def meter_ix(self) -> dict[str, int]:
        """Indirect meter array name -> index."""
        return self.context.meter_ix

    @property
    def register_ix(self) -> dict[str, int]:
        """Register array name -> index."""
        return self.context.register_ix

    @property
    def vset_ix(self) -> dict[str, int]:
        """Parser value set name -> index."""
        return self.context.vset_ix

    @property
    def calc_ix(self) -> dict[str, int]:
        """Calculation (or selector's action profile) name -> index of its CRC state."""
        return self.context.calc_ix


def _named(items: list[dict], name: str, what: str) -> dict:
    if not items:
        raise ProgramError(f"the program has no {what}")
    return next((i for i in items if i["name"] == name), items[0])


def generate_c(js: dict[str, Any], lay: Layout) -> CProgram:
    """The C file of BMv2 JSON program `js` (its layout: `lay`); Unsupported if the C
    engine cannot run it."""
    ctx = CContext(js, lay)
    layout.check(ctx)
    exprs = CExpressions(ctx)
    calcs = CCalculations(ctx)
    actions = CActions(ctx, exprs, calcs)
    tables = CTables(ctx, actions, calcs)
    parser = CParser(ctx, exprs, actions)
    deparser = CDeparser(ctx, exprs, actions, calcs)
    controls = CControls(ctx, exprs, actions, tables)
    pipelines = {p["name"]: p for p in js.get("pipelines", [])}
    if "ingress" not in pipelines or "egress" not in pipelines:
        raise ProgramError("the program needs pipelines named 'ingress' and 'egress'")

    for act in js.get("actions", []):
        actions.declare(act)
    ctx.emit("")
    calcs.emit_all()
    max_args = 1
    for act in js.get("actions", []):
        with ctx.at(f"actions {act['name']!r}"):
            actions.action(act)
        max_args = max(max_args, sum(n for _o, n in arg_layout(
            [int(w["bitwidth"]) for w in act.get("runtime_data", [])])))
    ctx.emit("static void p4n_action(p4n_pipeline *p, int id, uint64_t *F, p4n_state *S, "
             "const uint64_t *d) {")
    ctx.emit("switch (id) {", 1)
    for act in js.get("actions", []):
        ctx.emit(f"case {int(act['id'])}: {actions.name(act['id'])}(p, F, S, d); break;", 1)
    ctx.emit("default: break;", 1)
    ctx.emit("}", 1)
    ctx.emit("}")
    ctx.emit("")
    parser.emit(_named(js.get("parsers", []), "parser", "parser"))
    deparser.emit(_named(js.get("deparsers", []), "deparser", "deparser"))
    deparser.emit_checksums()
    for p in pipelines.values():
        controls.pipeline(p)
    controls.emit_dispatch()
    body = ctx.lines

    sizes = {
        "P4N_NSLOTS": ctx.nslots, "P4N_MAX_ARGS": max_args, "P4N_MAX_KEYS": tables.max_keys,
        "P4N_NTABLES": len(ctx.table_ix), "P4N_NPROFILES": len(ctx.profile_ix),
        "P4N_NCOUNTERS": len(ctx.counter_ix), "P4N_NREGISTERS": len(ctx.register_ix),
        "P4N_NMETERS": len(ctx.meter_ix), "P4N_NVSETS": len(ctx.vset_ix),
        "P4N_NCALCS": len(ctx.calc_ix), "P4N_HASH_BYTES": calcs.max_bytes,
        "P4N_INGRESS_INIT": controls.init["ingress"], "P4N_EGRESS_INIT": controls.init["egress"],
    }
    head = [f"/* generated by p4sim/switch/ccodegen {GENERATOR_VERSION} from "
            f"{js.get('program', 'a BMv2 JSON program')!s:.80} */"]
    head += layout.preamble(ctx, sizes)
    head.append('#include "runtime.h"')
    head += layout.tables(ctx)
    head.append('#include "headers.h"')
    head += _extern_sizes(ctx)
    setup = _setup(ctx, calcs, tables)
    tail = ['#include "driver.h"', '#include "api.h"']
    ctx.lines = head + [""] + body + setup + tail
    return CProgram(ctx.source(), ctx)


def _extern_sizes(ctx: CContext) -> list[str]:
    out = []
    for kind, ix, decl in (("counter", ctx.counter_ix, ctx.counters),
                           ("register", ctx.register_ix, ctx.registers),
                           ("meter", ctx.meter_ix, ctx.meters)):
        sizes = [str(int(decl[n]["size"])) for n in ix] or ["0"]
        out.append(f"static const uint32_t p4n_{kind}_size[] = {{{', '.join(sizes)}}};")
    words = [str(layout.register_words(ctx, n)) for n in ctx.register_ix] or ["1"]
    out.append(f"static const int p4n_register_words[] = {{{', '.join(words)}}};")
    return out


def _setup(ctx: CContext, calcs: CCalculations, tables: CTables) -> list[str]:
    """``p4n_setup(p)``: the extern arrays, the CRC tables, the C tables' shapes."""
    out = ["static int p4n_setup(p4n_pipeline *p) {"]
    for name, i in ctx.counter_ix.items():
        n = int(ctx.counters[name]["size"]) + 1
        out.append(f"    if (!(p->cnt_pkts[{i}] = calloc({n}, 8)) || !(p->cnt_bytes[{i}] = calloc({n}, 8))) return -1;")
    for name, i in ctx.register_ix.items():
        words = layout.register_words(ctx, name)
        out.append(f"    if (!(p->regs[{i}] = calloc({(int(ctx.registers[name]['size']) + 1) * words}, 8))) "
                   f"return -1;")
    for name, i in ctx.meter_ix.items():
        mj = ctx.meters[name]
        size = int(mj["size"])
        out.append(f"    if (!(p->meters[{i}] = calloc({size + 1}, sizeof(p4n_meter)))) return -1;")
        out.append(f"    for (int j = 0; j < {size}; j++) {{ p->meters[{i}][j].packets = "
                   f"{int(mj.get('type') == 'packets')}; }}")
    out += ["    " + s for s in calcs.crc_init + tables.setup]
    out += ["    return 0;", "}", ""]
    return out
