"""The controls, ingress and egress: one function per control node (table, conditional,
action call), ``N_<pipeline>_<node>(F, S) -> next node``, which `V1Switch` runs in a
loop until a node returns None.

Fusion: when a node's successor is known at compile time (a branch of a conditional, an
action call, a table miss running a const default entry -- p4c's key-less ``tbl_act``
tables are always that) and nothing else leads to the successor, its code continues
inside the node instead of returning it; where the two branches of a conditional meet
again, the code after the join follows the ``if`` (see `Controls.join_of`). A run of
such nodes then costs one call instead of one per node.
"""

from __future__ import annotations

from .actions import Actions
from .context import Context
from .expressions import Expressions
from .tables import Tables

#: Control nodes continued inside their predecessor at most this deep: bounds the
#: nesting of fused conditionals and the code a long chain of nodes repeats (each
#: node's function continues into at most this many successors).
MAX_FUSE_DEPTH = 8


class Controls:
    """The control-node functions of one program, one pipeline at a time."""

    def __init__(self, ctx: Context, exprs: Expressions, actions: Actions,
                 tables: Tables) -> None:
        self.ctx = ctx
        self.exprs = exprs
        self.actions = actions
        self.tables = tables

    def pipeline(self, p: dict) -> None:
        """Emit one function per control node of pipeline `p` that something refers
        to at run time: the pipeline start, a table's next node, or a `return` in
        generated code (every other node is fused into its predecessor)."""
        self._pipeline = p["name"]
        self._tables = {t["name"]: t for t in p.get("tables", [])}
        self._conds = {c["name"]: c for c in p.get("conditionals", [])}
        self._calls = {a["name"]: a for a in p.get("action_calls", [])}
        preds: dict[str | None, set[str]] = {}

        def edge(src: str, dst: str | None) -> None:
            preds.setdefault(dst, set()).add(src)

        edge("<start>", p.get("init_table"))
        for t in self._tables.values():
            for n in list(t.get("next_tables", {}).values()) + [t.get("base_default_next")]:
                edge(t["name"], n)
        for c in self._conds.values():
            edge(c["name"], c.get("true_next"))
            edge(c["name"], c.get("false_next"))
        for a in self._calls.values():
            edge(a["name"], a.get("next_node"))
        self._preds = preds
        self._wanted: list[str] = [n for n in [p.get("init_table")] if n is not None]
        for t in self._tables.values():
            self._wanted += [n for n in list(t.get("next_tables", {}).values()) + [t.get("base_default_next")]
                             if n is not None]
        done: set[str] = set()
        while self._wanted:
            name = self._wanted.pop()
            if name in done:
                continue
            done.add(name)
            self.ctx.emit(f"def {self.ctx.symbols.node(self._pipeline, name)}(F, S):")
            self.node_body(name, 1, 0, None, frozenset())
            self.ctx.emit("")

    def static_next(self, name: str) -> tuple[bool, str | None]:
        """(True, successor) for a node whose successor is fixed at compile time."""
        if name in self._calls:
            return True, self._calls[name].get("next_node")
        t = self._tables.get(name)
        if t is not None and not t.get("key") and self.tables.fixed_default(t) is not None:
            return True, self.tables.miss_next(t)
        return False, None

    def chain(self, start: str | None) -> list[str | None]:
        """`start` and the nodes its fixed successors lead to, in order."""
        out: list[str | None] = []
        n = start
        while n not in out and len(out) < MAX_FUSE_DEPTH:
            out.append(n)
            if n is None:
                break
            fixed, nxt = self.static_next(n)
            if not fixed:
                break
            n = nxt
        return out

    def join_of(self, t: str | None, f: str | None) -> tuple[str | None, frozenset]:
        """Where the branches of a conditional meet (`t`, `f` successors), if they
        surely do: the first node on `t`'s fixed chain that is on `f`'s; and the nodes
        leading to it from the conditional (its predecessors, if they are all among
        these, let the join's code be inlined after the ``if``)."""
        ct, cf = self.chain(t), self.chain(f)
        for i, n in enumerate(ct):
            if n is not None and n in cf:
                return n, frozenset(ct[:i] + cf[:cf.index(n)])
        return None, frozenset()

    def flow(self, target: str | None, ind: int, depth: int, stop: str | None,
             owned: frozenset) -> None:
        """Continue with node `target`: nothing when it is `stop` (the code after an
        ``if`` follows), its code inline (see the module docstring), or return it.
        `owned` are the predecessors fused into this function (a node whose
        predecessors all are may be inlined)."""
        if target is not None and target == stop:
            return
        preds = self._preds.get(target, set())
        inline = target is not None and depth < MAX_FUSE_DEPTH and (len(preds) == 1 or preds <= owned)
        if inline:
            self.node_body(target, ind, depth + 1, stop, owned)
        elif target is None:
            self.ctx.emit("return None", ind)
        else:
            self.ctx.emit(f"return {self.ctx.symbols.node(self._pipeline, target)}", ind)
            self._wanted.append(target)

    def branch(self, target: str | None, ind: int, depth: int, join: str | None,
               owned: frozenset) -> None:
        """One branch of a conditional (`flow` to `target`, up to the `join`), ``pass``
        when it is empty."""
        mark = len(self.ctx.lines)
        self.flow(target, ind, depth, join, owned)
        if len(self.ctx.lines) == mark:
            self.ctx.emit("pass", ind)

    def node_body(self, name: str, ind: int, depth: int, stop: str | None, owned: frozenset) -> None:
        """Statements running control node `name` and continuing after it."""
        owned = owned | {name}
        if name in self._conds:
            c = self._conds[name]
            t, f = c.get("true_next"), c.get("false_next")
            join, via = self.join_of(t, f)
            self.ctx.emit(f"if {self.exprs.expr(c['expression'])}:", ind)
            self.branch(t, ind + 1, depth, join, owned | via)
            if join is None:
                self.flow(f, ind, depth, stop, owned)
                return
            if f != join:
                self.ctx.emit("else:", ind)
                self.branch(f, ind + 1, depth, join, owned | via)
            self.flow(join, ind, depth, stop, owned | via)
        elif name in self._calls:
            a = self._calls[name]
            self.ctx.emit(f"{self.ctx.symbols.action(a['action_id'])}(F, S, ())", ind)
            self.flow(a.get("next_node"), ind, depth, stop, owned)
        else:
            table = self._tables[name]
            fixed = self.tables.apply(table, ind)
            if fixed is not None:
                self.actions.run(fixed[0], fixed[1], ind)
                self.flow(self.tables.miss_next(table), ind, depth, stop, owned)
