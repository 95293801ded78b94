"""Control blocks -> BMv2 pipelines (tables + conditionals), actions and their tables.

The apply block becomes a graph, as p4c builds it: each table application is a table
node whose ``next_tables`` say where each action (or ``__HIT__``/``__MISS__``) leads,
each ``if`` a conditional node, and every run of plain statements (assignments, extern
calls) a synthesized action ``act``/``act_0``... applied by a key-less table
``tbl_act`` with that action as its const default. A direct action call with constant
arguments gets its own table ``tbl_<action>``. Sub-controls are inlined where applied:
their tables become ``<Outer>.<instance>.<table>``.

The graph is built back to front: lowering a statement takes the name of the node
that follows it and returns the name of its own first node, so ``return`` and
``exit`` are just "continue at the end".
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional

from p4sim.compiler import ast
from p4sim.compiler import types as T
from p4sim.compiler.bmv2.actions import action_id, synthesized_action
from p4sim.compiler.bmv2.context import (
    ActionValue, BlockValue, Context, Scope, TableValue, direct_instance, instantiate, ordered_args,
)
from p4sim.compiler.bmv2.expressions import ExprLowerer
from p4sim.compiler.bmv2.jsonutil import hex_node, hexstr, source_info
from p4sim.compiler.bmv2.statements import StmtLowerer, runtime_index
from p4sim.compiler.bmv2.storage import ConstLoc, scalar_width
from p4sim.compiler.bmv2.tables import DEFAULT_TABLE_SIZE, convert_table
from p4sim.compiler.consteval import const_value
from p4sim.compiler.midend.copyinout import overlapping_arguments
from p4sim.compiler.diagnostics import CompileError


class ControlLowerer:
    """Builds one BMv2 pipeline (``ingress`` or ``egress``) from a control instance."""

    def __init__(self, ctx: Context, name: str, first_ids: dict[str, int]):
        self.ctx = ctx
        self.name = name
        self.tables: list[dict] = []
        self.conditionals: list[dict] = []
        self.action_profiles: list[dict] = []
        self.ids = first_ids  # shared counters: ids unique across pipelines
        self.returns: list[Optional[str]] = []
        self.applied: dict[str, tuple[tuple, str]] = {}  # table -> (its successors, its first node)

    # ------------------------------------------------------------------ scopes
    def enter(self, decl: ast.ControlDecl, prefix: str, bindings: dict[int, Any], ctor_args: list[ast.Argument],
              ctor_scope: Scope) -> Scope:
        scope = Scope(self.ctx, prefix, self.ctx.globals, block=self.name)
        scope.bindings.update(bindings)
        bind_ctor_params(ctor_scope, scope, decl.ctor_params, ctor_args)
        for d in decl.locals:
            if isinstance(d, ast.ActionDecl):
                scope.bind(d, ActionValue(d, scope))
            elif isinstance(d, ast.TableDecl):
                scope.bind(d, TableValue(d, scope))
            elif isinstance(d, ast.InstantiationDecl):
                v = instantiate(scope, d)
                if isinstance(v, BlockValue) and isinstance(v.decl, ast.ControlDecl):
                    # create its instances now, in declaration order; parameters are
                    # bound where it is applied
                    v.inner = self.enter(v.decl, v.name, {}, v.args, scope)
                scope.bind(d, v)
            elif isinstance(d, ast.ConstDecl):
                v = const_value(d.value)
                if v is None:
                    raise CompileError("constant needs a compile-time value", d.value.pos)
                scope.bind(d, ConstLoc(v, self.ctx.types.resolve(d.type_ref)))
            elif isinstance(d, ast.VarDecl):
                scope.bind(d, self.ctx.layout.storage(d.name, self.ctx.types.resolve(d.type_ref), d.pos))
            else:
                raise CompileError(f"'{d.name}' is not allowed in a control", d.pos)
        return scope

    def lower_control(self, decl: ast.ControlDecl, scope: Scope, next_: Optional[str]) -> Optional[str]:
        inits: list[ast.Stmt] = [ast.AssignStmt(d.pos, _path_to(d, scope), d.init)
                                 for d in decl.locals if isinstance(d, ast.VarDecl) and d.init is not None]
        self.returns.append(next_)
        try:
            return self.block(scope, inits + list(decl.apply.stmts), next_)
        finally:
            self.returns.pop()

    # ------------------------------------------------------------------ statements
    def block(self, scope: Scope, stmts: list[ast.Stmt], next_: Optional[str]) -> Optional[str]:
        for s in stmts:
            if isinstance(s, ast.VarDecl) and scope.find(s) is None:
                scope.bind(s, self.ctx.layout.storage(s.name, self.ctx.types.resolve(s.type_ref), s.pos))
            elif isinstance(s, ast.ConstDecl):
                v = const_value(s.value)
                if v is None:
                    raise CompileError("constant needs a compile-time value", s.value.pos)
                scope.bind(s, ConstLoc(v, self.ctx.types.resolve(s.type_ref)))
        segments: list[tuple[bool, Any]] = []
        run: list[ast.Stmt] = []
        for s in stmts:
            if self.is_plain(scope, s):
                run.append(s)
            else:
                if run:
                    segments.append((True, run))
                    run = []
                segments.append((False, s))
        if run:
            segments.append((True, run))
        nxt = next_
        for plain, item in reversed(segments):
            nxt = self.run(scope, item, nxt) if plain else self.control_stmt(scope, item, nxt)
        return nxt

    def is_plain(self, scope: Scope, s: ast.Stmt) -> bool:
        tests, conditional = _table_results(s, self.ctx.hoisted)
        if tests or conditional is not None:
            return False
        if isinstance(s, (ast.AssignStmt, ast.VarDecl, ast.ConstDecl, ast.EmptyStmt)):
            return True
        if isinstance(s, ast.ForStmt):
            # BMv2 has loops only inside actions (jumps): a loop runs in the synthesized
            # action of its run; the mid end unrolled those that apply a table or control
            return True
        if isinstance(s, ast.CallStmt):
            t = s.call.target
            if isinstance(t, ast.MemberExpr) and t.member == "apply":
                return False
            av = scope.find(t.ref) or _maybe_global(scope, t) if isinstance(t, ast.PathExpr) else None
            if isinstance(av, ActionValue):
                # an action called with constants gets its own table (tbl_<action>),
                # otherwise it is inlined into the synthesized action of its run
                return not (all(p.direction is None for p in av.decl.params)
                            and all(const_value(a.value) is not None for a in s.call.args))
            return True
        return False

    def run(self, scope: Scope, stmts: list[ast.Stmt], next_: Optional[str]) -> Optional[str]:
        lw = StmtLowerer(scope)
        lw.tail = True
        lw.stmts(stmts)
        lw.finish_exits()
        if not lw.out:
            return next_
        name, aid = synthesized_action(self.ctx, "act", lw.out)
        return self.synth_table(f"tbl_{name}", name, aid, [], next_)

    def synth_table(self, tname: str, aname: str, aid: int, data: list[str], next_: Optional[str]) -> str:
        name = self.ctx.names.fresh(tname)
        self.ctx.synth_tables.add(name)
        self.tables.append({
            "name": name, "id": self.new_id("tables"), "key": [], "match_type": "exact", "type": "simple",
            "max_size": DEFAULT_TABLE_SIZE, "with_counters": False, "support_timeout": False,
            "direct_meters": None, "action_ids": [aid], "actions": [aname], "base_default_next": next_,
            "next_tables": {aname: next_},
            "default_entry": {"action_id": aid, "action_const": True, "action_data": data, "action_entry_const": True},
        })
        return name

    def new_id(self, kind: str) -> int:
        n = self.ids.get(kind, 0)
        self.ids[kind] = n + 1
        return n

    def control_stmt(self, scope: Scope, s: ast.Stmt, next_: Optional[str]) -> Optional[str]:
        tests, conditional = _table_results(s, self.ctx.hoisted)
        if conditional is not None:
            return self.hoist_conditional(scope, s, conditional, next_)
        if tests:
            return self.hoist_table_results(scope, s, tests, next_)
        if isinstance(s, ast.BlockStmt):
            return self.block(scope, s.stmts, next_)
        if isinstance(s, ast.IfStmt):
            return self.if_(scope, s, next_)
        if isinstance(s, ast.SwitchStmt):
            return self.switch(scope, s, next_)
        if isinstance(s, ast.ReturnStmt):
            if s.value is not None:
                raise CompileError("return in a control must not have a value", s.pos)
            return self.returns[-1]
        if isinstance(s, ast.ExitStmt):
            lw = StmtLowerer(scope)
            lw.tail = True
            lw.stmt(s)
            name, aid = synthesized_action(self.ctx, "act", lw.out)
            return self.synth_table(f"tbl_{name}", name, aid, [], None)
        if isinstance(s, ast.CallStmt):
            return self.call(scope, s.call, next_)
        raise CompileError(f"statement not supported in an apply block ({type(s).__name__})", s.pos, "unsupported")

    def hoist_conditional(self, scope: Scope, s: ast.Stmt, e: ast.Expr, next_: Optional[str]) -> Optional[str]:
        """``a || t.apply().miss``, ``a && t.apply().hit``, ``c ? t.apply().hit : x``
        inside a statement, as p4c's side-effect ordering writes them: the value goes
        to a temporary computed by an ``if`` first (``if (a) tmp = true; else tmp =
        t.apply().miss;``), so the table is applied only when evaluation reaches it;
        the statement then reads the temporary."""
        tmp = self.ctx.layout.scalar("tmp", e.type, e.pos)
        self.ctx.hoisted[id(e)] = tmp
        nxt = self.block(scope, [s], next_)

        def set_tmp(value: ast.Expr) -> ast.Stmt:
            return ast.AssignStmt(e.pos, e, value)  # `e` now denotes the temporary

        def const(v: bool) -> ast.Expr:
            lit = ast.BoolLit(e.pos, v)
            lit.type = T.BoolT()
            return lit

        if isinstance(e, ast.TernaryExpr):
            test = ast.IfStmt(e.pos, e.cond, set_tmp(e.then), set_tmp(e.else_))
        else:
            assert isinstance(e, ast.BinaryExpr)
            then, else_ = (e.right, const(False)) if e.op == "&&" else (const(True), e.right)
            test = ast.IfStmt(e.pos, e.left, set_tmp(then), set_tmp(else_))
        return self.if_(scope, test, nxt)

    def hoist_table_results(self, scope: Scope, s: ast.Stmt, tests: list[ast.MemberExpr],
                            next_: Optional[str]) -> Optional[str]:
        """A statement using ``t.apply().hit``/``.miss`` as a value (p4c's side-effect
        ordering): apply each table first, in order, record the result in a 1-bit
        temporary (a ``tbl_act`` on each outcome), then run the statement reading it."""
        temps = []
        for m in tests:
            tmp = self.ctx.layout.scalar("tmp", T.BoolT(), m.pos)
            self.ctx.hoisted[id(m)] = tmp
            temps.append(tmp)
        applies = isinstance(s, ast.CallStmt) and isinstance(s.call.target, ast.MemberExpr) \
            and s.call.target.member == "apply"
        nxt = self.call(scope, s.call, next_) if applies else self.run(scope, [s], next_)
        for m, tmp in reversed(list(zip(tests, temps))):
            call = m.expr
            assert isinstance(call, ast.CallExpr) and isinstance(call.target, ast.MemberExpr)
            tv = ExprLowerer(scope).loc(call.target.expr)
            if not isinstance(tv, TableValue):
                raise CompileError(f"'{m.member}' needs a table", m.pos)
            outcome = {}
            for value in (1, 0):
                lw = StmtLowerer(scope)
                lw.set_field(tmp, hex_node(value, 1))
                aname, aid = synthesized_action(self.ctx, "act", lw.out)
                outcome[value] = self.synth_table(f"tbl_{aname}", aname, aid, [], nxt)
            yes, no = (outcome[1], outcome[0]) if m.member == "hit" else (outcome[0], outcome[1])
            nxt = self.table(tv, {"__HIT__": yes, "__MISS__": no}, nxt, nxt, pos=call.pos)
        return nxt

    def stmt(self, scope: Scope, s: Optional[ast.Stmt], next_: Optional[str]) -> Optional[str]:
        if s is None:
            return next_
        return self.block(scope, s.stmts if isinstance(s, ast.BlockStmt) else [s], next_)

    def call(self, scope: Scope, c: ast.CallExpr, next_: Optional[str]) -> Optional[str]:
        t = c.target
        if isinstance(t, ast.MemberExpr) and t.member == "apply":
            if isinstance(t.expr, ast.TypeNameExpr):
                bv = direct_instance(scope, t.expr)
                if not isinstance(bv.decl, ast.ControlDecl):
                    raise CompileError("only controls can be applied in a control", c.pos)
                bv.inner = self.enter(bv.decl, bv.name, {}, [], scope)
                return self.inline_control(scope, bv, c, next_)
            target = ExprLowerer(scope).loc(t.expr)
            if isinstance(target, TableValue):
                return self.table(target, {}, next_, next_, pos=c.pos)
            if isinstance(target, BlockValue):
                return self.inline_control(scope, target, c, next_)
            raise CompileError("only tables and controls can be applied here", c.pos)
        if isinstance(t, ast.PathExpr):
            av = scope.find(t.ref) or _maybe_global(scope, t)
            if isinstance(av, ActionValue):
                aid = action_id(self.ctx, av)
                data = []
                for p, a in zip(av.decl.params, ordered_args(av.decl.params, c.args, c.pos)):
                    w = scalar_width(self.ctx.types.resolve(p.type_ref))
                    data.append(hexstr(const_value(a), w))
                return self.synth_table(f"tbl_{av.decl.name}", av.name, aid, data, next_)
        raise CompileError("unsupported call in an apply block", c.pos, "unsupported")

    def if_(self, scope: Scope, s: ast.IfStmt, next_: Optional[str]) -> Optional[str]:
        c = const_value(s.cond)
        if c is not None:
            return self.stmt(scope, s.then if c else s.else_, next_)
        if runtime_index(s.cond, self.ctx.hoisted) is not None and not _applies_table(s.cond):
            return self.value_first(scope, s, s.cond, "cond", lambda ref: self.if_(
                scope, ast.IfStmt(s.pos, ref, s.then, s.else_), next_))
        then_n = self.stmt(scope, s.then, next_)
        else_n = self.stmt(scope, s.else_, next_)
        return self.branch(scope, s.cond, then_n, else_n, next_)

    def value_first(self, scope: Scope, s: ast.Stmt, e: ast.Expr, name: str,
                    rest: Callable[[ast.PathExpr], Optional[str]]) -> Optional[str]:
        """``if (hs[i].f == 1)`` or ``switch (hs[i].f)`` with ``i`` known only at run
        time: the value is computed first into a temporary by a statement, which
        unrolls the index over the stack's elements (`StmtLowerer.unroll_index`), so an
        index past the end writes nothing (an ``if`` takes its ``else`` branch) as in
        p4c's HSIndexSimplifier, instead of a ``dereference_header_stack`` in the
        condition node, which fails there. ``rest`` builds the test on the temporary."""
        tmp = self.ctx.layout.scalar(name, e.type, s.pos)
        ref = ast.PathExpr(e.pos, name)
        ref.type = e.type
        self.ctx.hoisted[id(ref)] = tmp
        return self.run(scope, [ast.AssignStmt(s.pos, ref, e)], rest(ref))

    def branch(self, scope: Scope, e: ast.Expr, then_n: Optional[str], else_n: Optional[str],
               next_: Optional[str]) -> Optional[str]:
        """The node testing condition `e`, continuing at `then_n` or `else_n`.

        A condition that applies a table inside ``&&``, ``||`` or ``!``
        (``hdr.x.isValid() && t.apply().hit``) becomes a graph of tests, as p4c
        splits it: the table is applied only when evaluation gets that far.
        """
        c = const_value(e)
        if c is not None:
            return then_n if c else else_n
        hit = _hit_test(e)
        if hit is not None:
            apply_call, is_hit = hit
            tv = ExprLowerer(scope).loc(apply_call.target.expr)
            if not isinstance(tv, TableValue):
                raise CompileError("hit/miss needs a table", e.pos)
            on_hit, on_miss = (then_n, else_n) if is_hit else (else_n, then_n)
            return self.table(tv, {"__HIT__": on_hit, "__MISS__": on_miss}, next_, next_, pos=apply_call.pos)
        if _applies_table(e):
            if isinstance(e, ast.UnaryExpr):  # "!"
                return self.branch(scope, e.expr, else_n, then_n, next_)
            assert isinstance(e, ast.BinaryExpr)
            if e.op == "&&":
                right = self.branch(scope, e.right, then_n, else_n, next_)
                return self.branch(scope, e.left, right, else_n, next_)
            right = self.branch(scope, e.right, then_n, else_n, next_)
            return self.branch(scope, e.left, then_n, right, next_)
        lw = StmtLowerer(scope)
        cond = lw.rv(e)
        name = self.ctx.node_name()
        node = {"name": name, "id": self.new_id("conditionals"),
                "source_info": source_info(e.pos, _cond_text(e.pos)),
                "expression": cond, "true_next": then_n, "false_next": else_n}
        if node["source_info"] is None:
            del node["source_info"]
        self.conditionals.append(node)
        if lw.out:  # the condition called a function: compute it first
            aname, aid = synthesized_action(self.ctx, "act", lw.out)
            return self.synth_table(f"tbl_{aname}", aname, aid, [], name)
        return name

    def switch(self, scope: Scope, s: ast.SwitchStmt, next_: Optional[str]) -> Optional[str]:
        e = s.expr
        if isinstance(e, ast.MemberExpr) and e.member == "action_run" and isinstance(e.expr, ast.CallExpr):
            tv = ExprLowerer(scope).loc(e.expr.target.expr)
            if not isinstance(tv, TableValue):
                raise CompileError("action_run needs a table", e.pos)
            nexts: dict[str, Optional[str]] = {}
            pending: list[ast.Expr] = []
            default_next = next_
            for case in s.cases:
                pending.append(case.label)
                if case.body is None:
                    continue
                body = self.stmt(scope, case.body, next_)
                for label in pending:
                    if isinstance(label, ast.DefaultExpr):
                        default_next = body
                    else:
                        av = ExprLowerer(scope).loc(label)
                        if not isinstance(av, ActionValue):
                            raise CompileError("switch label must be an action of the table", label.pos)
                        nexts[av.name] = body
                pending = []
            return self.table(tv, nexts, next_, default_next, pos=e.pos)
        if runtime_index(e, self.ctx.hoisted) is not None:
            return self.value_first(scope, s, e, "switch_value", lambda ref: self.switch(
                scope, ast.SwitchStmt(s.pos, ref, s.cases), next_))
        # switch on a value: a chain of conditionals, built from the last case back
        groups: list[tuple[list[ast.Expr], ast.BlockStmt]] = []
        pending = []
        for case in s.cases:
            pending.append(case.label)
            if case.body is not None:
                groups.append((pending, case.body))
                pending = []
        nxt = next_
        lw = ExprLowerer(scope)
        key = lw.data(e)
        for labels, body in reversed(groups):
            body_n = self.stmt(scope, body, next_)
            if any(isinstance(l, ast.DefaultExpr) for l in labels):
                nxt = body_n
                continue
            cond: Optional[dict] = None
            for l in labels:
                c = {"type": "expression", "value": {"op": "==", "left": key, "right": lw.data(l)}}
                cond = c if cond is None else {"type": "expression", "value": {"op": "or", "left": cond, "right": c}}
            name = self.ctx.node_name()
            self.conditionals.append({"name": name, "id": self.new_id("conditionals"), "expression": cond,
                                      "true_next": body_n, "false_next": nxt})
            nxt = name
        return nxt

    def inline_control(self, scope: Scope, bv: BlockValue, c: ast.CallExpr, next_: Optional[str]) -> Optional[str]:
        decl = bv.decl
        if not isinstance(decl, ast.ControlDecl):
            raise CompileError("only controls can be applied in a control", c.pos)
        # Applied again (as p4c allows), the control is inlined again; only a table
        # inside it cannot appear twice in a BMv2 pipeline, which `table` reports.
        lw = StmtLowerer(scope)
        bindings: dict[int, Any] = {}
        args = ordered_args(decl.params, c.args, c.pos)
        overlapping = overlapping_arguments(decl.params, args)
        copy_out = StmtLowerer(scope)
        for p, a in zip(decl.params, args):
            if a is None:
                raise CompileError(f"missing argument for '{p.name}'", c.pos)
            pt = self.ctx.types.resolve(p.type_ref)
            v = const_value(a) if p.direction in (None, "in") else None
            if v is not None:
                bindings[id(p)] = ConstLoc(v, pt)
            elif runtime_index(a, self.ctx.hoisted) is not None:
                # a stack element chosen at run time: copied in and out by statements
                # that unroll the index (p4c inlines with copies, then HSIndexSimplifier
                # unrolls them), so past the end nothing is read or written back
                tmp = self.ctx.layout.storage(p.name, pt, a.pos)
                if p.direction != "out":
                    lw.assign_value(tmp, a)
                if p.direction in ("out", "inout"):
                    copy_out.assign_with(tmp, a, loc_is_target=False)
                bindings[id(p)] = tmp
            elif id(a) in overlapping:  # copied in and out, as P4-16 6.8 says, so the two do not alias
                loc = lw.loc(a)
                tmp = self.ctx.layout.storage(p.name, pt, a.pos)
                if p.direction != "out":
                    lw.copy(tmp, loc, a)
                if p.direction in ("out", "inout"):
                    copy_out.copy(loc, tmp, a)
                bindings[id(p)] = tmp
            elif isinstance(a, (ast.PathExpr, ast.MemberExpr, ast.IndexExpr)):
                bindings[id(p)] = lw.loc(a)
                if p.direction == "out":  # its headers start invalid (P4-16 6.8)
                    lw.invalidate(bindings[id(p)])
            else:
                tmp = self.ctx.layout.storage(p.name, pt, a.pos)
                lw.assign_to(tmp, a)
                bindings[id(p)] = tmp
        if copy_out.out:
            aname, aid = synthesized_action(self.ctx, "act", copy_out.out)
            next_ = self.synth_table(f"tbl_{aname}", aname, aid, [], next_)
        sub = bv.inner
        sub.bindings.update(bindings)
        first = self.lower_control(decl, sub, next_)
        if lw.out:
            aname, aid = synthesized_action(self.ctx, "act", lw.out)
            return self.synth_table(f"tbl_{aname}", aname, aid, [], first)
        return first

    # ------------------------------------------------------------------ tables
    def table(self, tv: TableValue, nexts: dict[str, Optional[str]], next_: Optional[str],
              default_next: Optional[str], pos: Any = None) -> str:
        """The node applying table ``tv``: after action ``a`` it goes to ``nexts[a]``
        (or the hit/miss pair), after the other actions to ``default_next`` (None: the
        end of the pipeline, e.g. a `default: { return; }` of a switch), then
        ``next_`` as its base default."""
        name = tv.name
        successors = (nexts, next_, default_next)
        if name in self.applied:
            # a BMv2 table is one node of the pipeline graph: applying it again is only
            # that node again when everything after it is the same (`if (c) t.apply();
            # else t.apply();`), as p4c's back end finds
            first_successors, node = self.applied[name]
            if first_successors != successors:
                raise CompileError(f"table '{name}' is applied more than once, with different statements "
                                   "after it; a BMv2 table can appear only once in a pipeline",
                                   pos or tv.decl.pos, "unsupported")
            return node
        node = self.lower_table(tv, nexts, next_, default_next)
        self.applied[name] = (successors, node)
        return node

    def lower_table(self, tv: TableValue, nexts: dict[str, Optional[str]], next_: Optional[str],
                    default_next: Optional[str]) -> str:
        name = tv.name
        pre, table = convert_table(self, tv)
        actions = table["actions"]
        if "__HIT__" in nexts:
            table["next_tables"] = {"__HIT__": nexts["__HIT__"], "__MISS__": nexts["__MISS__"]}
        else:
            table["next_tables"] = {a: nexts.get(a, default_next) for a in actions}
        table["base_default_next"] = next_
        self.tables.append(table)
        if pre:
            aname, aid = synthesized_action(self.ctx, "act", pre)
            return self.synth_table(f"tbl_{aname}", aname, aid, [], name)
        return name

    def pipeline(self, init: Optional[str], pid: int) -> dict:
        return {"name": self.name, "id": pid, "init_table": init, "tables": self.tables,
                "action_profiles": self.action_profiles, "conditionals": self.conditionals}


def _cond_text(pos: Any) -> str:
    """The condition of an ``if`` as written: up to its closing parenthesis."""
    text = getattr(pos, "text", "")[max(getattr(pos, "col", 1) - 1, 0):]
    depth = 0
    for i, ch in enumerate(text):
        depth += ch == "("
        if ch == ")":
            if depth == 0:
                return text[:i].strip()
            depth -= 1
    return text.strip()


def _maybe_global(scope: Scope, t: ast.PathExpr) -> Any:
    if isinstance(t.ref, ast.ActionDecl):
        return scope.ctx.global_value(t.ref, t)
    return None


def _hit_test(cond: ast.Expr) -> Optional[tuple[ast.CallExpr, bool]]:
    """``t.apply().hit`` / ``.miss`` / ``!t.apply().hit`` -> (apply call, tests-hit)."""
    neg = False
    while isinstance(cond, ast.UnaryExpr) and cond.op == "!":
        neg, cond = not neg, cond.expr
    if isinstance(cond, ast.MemberExpr) and cond.member in ("hit", "miss") and isinstance(cond.expr, ast.CallExpr):
        call = cond.expr
        if isinstance(call.target, ast.MemberExpr) and call.target.member == "apply":
            return call, (cond.member == "hit") != neg
    return None


def _table_results(s: ast.Stmt, done: Mapping[int, Any]) -> tuple[list[ast.MemberExpr], Optional[ast.Expr]]:
    """The ``t.apply().hit``/``.miss`` values an assignment, declaration or call
    statement always evaluates (the keys of a table it applies included), in
    evaluation order, and the first ``&&``, ``||`` or
    ``?:`` that may or may not evaluate one (applying that table first would change
    the program). Expressions in ``done`` (already computed into a temporary) and
    everything inside them are skipped."""
    if isinstance(s, ast.AssignStmt):
        roots: list[Any] = [s.lhs, s.rhs]
    elif isinstance(s, ast.VarDecl):
        roots = [s.init] if s.init is not None else []
    elif isinstance(s, ast.CallStmt):
        roots = [s.call]
    else:
        return [], None
    found: list[ast.MemberExpr] = []
    conditional: list[ast.Expr] = []

    def walk(e: Any) -> None:
        if id(e) in done:
            return
        if _is_table_result(e):
            found.append(e)
            return
        if isinstance(e, ast.BinaryExpr) and e.op in ("&&", "||"):
            if _has_table_result(e.right):
                conditional.append(e)
            walk(e.left)  # the right operand may not run
            return
        if isinstance(e, ast.TernaryExpr):
            if _has_table_result(e.then) or _has_table_result(e.else_):
                conditional.append(e)
            walk(e.cond)
            return
        if isinstance(e, ast.Argument):
            walk(e.value)
        elif isinstance(e, ast.Expr):
            table = e.target.expr.ref if isinstance(e, ast.CallExpr) and isinstance(e.target, ast.MemberExpr) \
                and e.target.member == "apply" and isinstance(e.target.expr, ast.PathExpr) else None
            if isinstance(table, ast.TableDecl):  # its keys are evaluated when it is applied
                for k in table.keys:
                    walk(k.expr)
            for f in dataclasses.fields(e):
                v = getattr(e, f.name)
                for x in (v if isinstance(v, list) else [v]):
                    if isinstance(x, (ast.Expr, ast.Argument)):
                        walk(x)

    for r in roots:
        walk(r)
    return found, conditional[0] if conditional else None


def _is_table_result(e: Any) -> bool:
    return isinstance(e, ast.MemberExpr) and e.member in ("hit", "miss") and isinstance(e.expr, ast.CallExpr) \
        and isinstance(e.expr.target, ast.MemberExpr) and e.expr.target.member == "apply"


def _has_table_result(e: Any) -> bool:
    """Whether a ``t.apply().hit``/``.miss`` is anywhere inside expression ``e``."""
    if _is_table_result(e):
        return True
    if isinstance(e, ast.Argument):
        return _has_table_result(e.value)
    if isinstance(e, ast.Expr):
        for f in dataclasses.fields(e):
            v = getattr(e, f.name)
            if any(_has_table_result(x) for x in (v if isinstance(v, list) else [v])
                   if isinstance(x, (ast.Expr, ast.Argument))):
                return True
    return False


def _applies_table(e: ast.Expr) -> bool:
    """Whether a condition built with ``&&``, ``||`` and ``!`` tests a table's
    ``apply().hit``/``.miss`` somewhere inside."""
    if _hit_test(e) is not None:
        return True
    if isinstance(e, ast.UnaryExpr) and e.op == "!":
        return _applies_table(e.expr)
    if isinstance(e, ast.BinaryExpr) and e.op in ("&&", "||"):
        return _applies_table(e.left) or _applies_table(e.right)
    return False


def _path_to(d: ast.VarDecl, scope: Scope) -> ast.PathExpr:
    p = ast.PathExpr(d.pos, d.name)
    p.ref = d
    p.type = scope.ctx.types.resolve(d.type_ref)
    return p


def bind_ctor_params(arg_scope: Scope, scope: Scope, params: list[ast.Param], args: list[ast.Argument]) -> None:
    """Constructor parameters of a control/parser: constants or extern instances."""
    for p, a in zip(params, ordered_args(params, args, None)):
        if a is None:
            raise CompileError(f"missing constructor argument '{p.name}'", p.pos)
        v = const_value(a)
        if v is not None:
            scope.bind(p, ConstLoc(v, scope.ctx.types.resolve(p.type_ref)))
        elif isinstance(a, ast.PathExpr):
            scope.bind(p, arg_scope.lookup(a.ref, a))
        else:
            raise CompileError("constructor arguments must be constants or instances", a.pos, "unsupported")
