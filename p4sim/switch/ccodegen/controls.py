"""The controls in C: one function per control node (table, conditional, action call),
``N_<n>(p, F, S) -> next node number`` (-1: the control ends), and ``p4n_control``
dispatching on the number; the driver runs nodes until -1 or `exit` -- the twin of
`codegen.controls`. Unlike the Python generator nothing is fused: a C call costs
nanoseconds, so the one-node-per-function shape is kept for readability.
"""

from __future__ import annotations

from .actions import CActions
from .context import CContext
from .expressions import CExpressions
from .tables import CTables


class CControls:
    """The control-node functions of every pipeline of one program."""

    def __init__(self, ctx: CContext, exprs: CExpressions, actions: CActions,
                 tables: CTables) -> None:
        self.ctx = ctx
        self.exprs = exprs
        self.actions = actions
        self.tables = tables
        self.nodes: list[tuple[str, str]] = []   # (pipeline, node) by number
        self.init: dict[str, int] = {}           # pipeline -> number of its first node

    def number(self, pipeline: dict) -> dict[str | None, int]:
        """Number the nodes of `pipeline`; the map from node name (None: end) to number."""
        names = ([t["name"] for t in pipeline.get("tables", [])]
                 + [c["name"] for c in pipeline.get("conditionals", [])]
                 + [a["name"] for a in pipeline.get("action_calls", [])])
        out: dict[str | None, int] = {None: -1}
        for n in names:
            out[n] = len(self.nodes)
            self.nodes.append((pipeline["name"], n))
        return out

    def pipeline(self, p: dict) -> None:
        """Emit the node functions of pipeline `p`."""
        ctx, emit = self.ctx, self.ctx.emit
        num = self.number(p)

        def nxt(name: str | None) -> int:
            if name not in num:
                raise ctx.unsupported(f"unknown next node {name!r}")
            return num[name]

        class Next(dict):
            def __missing__(self, key: str | None) -> int:
                return nxt(key)
        next_node = Next()
        self.init[p["name"]] = nxt(p.get("init_table"))
        with ctx.at(f"pipeline {p['name']!r}"):
            for t in p.get("tables", []):
                with ctx.at(f"table {t['name']!r}"):
                    self.tables.configure(t)
                    emit(f"static int N_{num[t['name']]}(p4n_pipeline *p, uint64_t *F, p4n_state *S) {{")
                    self.tables.apply(t, next_node, 1)
                    emit("}")
                    emit("")
            for c in p.get("conditionals", []):
                with ctx.at(f"conditional {c['name']!r}"):
                    emit(f"static int N_{num[c['name']]}(p4n_pipeline *p, uint64_t *F, p4n_state *S) {{")
                    emit("(void)p; (void)S;", 1)
                    emit(f"return ({self.exprs.expr(c['expression'])}) ? {nxt(c.get('true_next'))} "
                         f": {nxt(c.get('false_next'))};", 1)
                    emit("}")
                    emit("")
            for a in p.get("action_calls", []):
                with ctx.at(f"action call {a['name']!r}"):
                    emit(f"static int N_{num[a['name']]}(p4n_pipeline *p, uint64_t *F, p4n_state *S) {{")
                    emit(f"{self.actions.name(a['action_id'])}(p, F, S, NULL);", 1)
                    emit(f"return {nxt(a.get('next_node'))};", 1)
                    emit("}")
                    emit("")

    def emit_dispatch(self) -> None:
        """Emit `p4n_control`, running node number `n`."""
        emit = self.ctx.emit
        emit("static int p4n_control(p4n_pipeline *p, uint64_t *F, p4n_state *S, int n) {")
        emit("switch (n) {", 1)
        for i in range(len(self.nodes)):
            emit(f"case {i}: return N_{i}(p, F, S);", 1)
        emit("default: return -1;", 1)
        emit("}", 1)
        emit("}")
        emit("")
