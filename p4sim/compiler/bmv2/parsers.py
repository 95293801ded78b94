"""The v1model parser -> BMv2 ``parsers[0]`` (parse states), plus ``parse_vsets``.

Each state's statements become parser ops (``extract``, ``extract_VL``, ``advance``,
``set``, ``verify``, ``primitive``); its ``select`` becomes a ``transition_key`` and
``transitions`` whose values/masks are the byte-padded concatenation of the key
fields (JSON_format.md). ``transition accept`` (and ``reject``, as p4c emits it) has
``next_state`` null. Ranges are expanded into value/mask pairs; a key that is not a
field or a lookahead is first copied into a ``scalars`` temporary by a ``set`` op.
A sub-parser applied in a state is inlined: the state is split around the call and
the sub-parser's states are added with its ``accept`` leading to the continuation.
"""

from __future__ import annotations

import dataclasses
from itertools import product
from typing import Any, Optional

from p4sim.compiler import ast
from p4sim.compiler import types as T
from p4sim.compiler.bmv2.context import (
    BlockValue, Context, PacketValue, Scope, direct_instance, instantiate, ordered_args,
)
from p4sim.compiler.bmv2.controls import bind_ctor_params
from p4sim.compiler.bmv2.expressions import lookahead_field, sub_expressions
from p4sim.compiler.bmv2.jsonutil import as_param, bool_node, hex_node, mask, nbytes
from p4sim.compiler.bmv2.statements import StmtLowerer
from p4sim.compiler.bmv2.storage import ConstLoc, FieldLoc, HeaderLoc, StackLoc, UnionStackLoc, scalar_width
from p4sim.compiler.bmv2.unionstacks import is_union_stack, union_last
from p4sim.compiler.consteval import const_value
from p4sim.compiler.diagnostics import CompileError
from p4sim.compiler.midend.controlplane import CPValueSet
from p4sim.compiler.midend.names import control_plane_name


class ParserStmtLowerer(StmtLowerer):
    def __init__(self, scope: Scope):
        super().__init__(scope, parser=True)

    def packet_call(self, pkt: PacketValue, method: str, c: ast.CallExpr) -> None:
        if pkt.direction != "in":
            raise CompileError(f"packet_out.{method} is only allowed in the deparser", c.pos)
        args = [a.value for a in c.args]
        if method == "extract":
            target = self.extract_target(args[0])
            if len(args) == 1:
                self.out.append({"op": "extract", "parameters": [target]})
            else:
                self.out.append({"op": "extract_VL", "parameters": [
                    target, {"type": "expression", "value": self.data(args[1])}]})
        elif method == "advance":
            self.out.append({"op": "advance", "parameters": [as_param(self.data(args[0]))]})
        elif method == "lookahead":
            # its value is unused, but it still fails on a packet too short for it
            # (PacketTooShort): p4c's back end assigns it to a temporary too
            w = T.width_of(c.type)
            if w:
                tmp = self.temp(T.BitT(w, False))
                self.set_field(tmp, {"type": "lookahead", "value": [0, w]})
        else:
            raise CompileError(f"packet_in.{method} is not supported by the BMv2 back end", c.pos, "unsupported")

    def extract_target(self, e: ast.Expr) -> dict:
        if isinstance(e, ast.MemberExpr) and e.member == "next":
            base = self.loc(e.expr)
            if isinstance(base, StackLoc):
                return {"type": "stack", "value": base.name}
        if isinstance(e, ast.DontCareExpr):  # extract<H>(_): into a header nothing reads
            loc = self.ctx.layout.storage("tmp_hdr", e.type, e.pos)
        else:
            loc = self.loc(e)
        if isinstance(loc, HeaderLoc):
            return {"type": "regular", "value": loc.name}
        raise CompileError("extract needs a header", e.pos)


class ParserLowerer:
    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.states: list[dict] = []
        self.state_names = ctx.names  # unique across the JSON file

    def lower(self, decl: ast.ParserDecl, scope: Scope) -> dict:
        self.declare_locals(decl, scope)
        start = self.lower_states(decl, scope, "", None)
        return {"name": "parser", "id": 0, "init_state": start, "parse_states": self.states}

    def declare_locals(self, decl: ast.ParserDecl, scope: Scope) -> None:
        for d in decl.locals:
            if isinstance(d, ast.VarDecl):
                loc = self.ctx.layout.storage(d.name, self.ctx.types.resolve(d.type_ref), d.pos)
                scope.bind(d, loc)
            elif isinstance(d, ast.ConstDecl):
                v = const_value(d.value)
                if v is None:
                    raise CompileError("constant needs a compile-time value", d.value.pos)
                scope.bind(d, ConstLoc(v, self.ctx.types.resolve(d.type_ref)))
            elif isinstance(d, ast.InstantiationDecl):
                scope.bind(d, instantiate(scope, d))
            elif isinstance(d, ast.ValueSetDecl):
                scope.bind(d, self.value_set(d, scope))
            else:
                raise CompileError(f"'{d.name}' is not supported in a parser", d.pos, "unsupported")

    def value_set(self, d: ast.ValueSetDecl, scope: Scope) -> "ValueSetValue":
        name = control_plane_name(d, scope.prefix)
        t = self.ctx.types.resolve(d.element)
        fields = getattr(t, "fields", None)
        match = [(f.name, scalar_width(f.type) or 0) for f in fields] if fields else [("", scalar_width(t) or 0)]
        size = const_value(d.size)
        if size is None:
            raise CompileError("value_set size must be a compile-time constant", d.size.pos)
        self.ctx.parse_vsets.append({"name": name, "id": len(self.ctx.parse_vsets),
                                     "compressed_bitwidth": sum(w for _, w in match)})
        self.ctx.cp.add("value_sets", CPValueSet(name, d, match, size))
        return ValueSetValue(name)

    def lower_states(self, decl: ast.ParserDecl, scope: Scope, prefix: str, accept: Optional[str]) -> Optional[str]:
        names = {s.name: self.state_names.fresh(prefix + s.name) for s in decl.states}
        if "start" not in names:
            raise CompileError(f"parser '{decl.name}' has no start state", decl.pos)

        def target(n: str) -> Optional[str]:
            if n == "accept":
                return accept
            if n == "reject":
                return None
            if n not in names:
                raise CompileError(f"no parser state '{n}'", decl.pos)
            return names[n]

        # parser-local variables with an initializer are set on entry, in start
        inits: list[ast.Stmt] = []
        for d in decl.locals:
            if isinstance(d, ast.VarDecl) and d.init is not None:
                lhs = ast.PathExpr(d.pos, d.name)
                lhs.ref, lhs.type = d, self.ctx.types.resolve(d.type_ref)
                inits.append(ast.AssignStmt(d.pos, lhs, d.init))
        for s in decl.states:
            stmts = (inits if s.name == "start" else []) + list(s.stmts)
            self.lower_state(scope, names[s.name], stmts, s.transition, target)
        return names["start"]

    def lower_state(self, scope: Scope, name: str, stmts: list[ast.Stmt], transition: Any, target: Any) -> None:
        """Emit state ``name``. BMv2 parser states are straight-line operations and
        one select, so a state is split where that cannot hold: at a sub-parser
        call (its states are inlined between the halves) and at an ``if`` (a select
        on the condition into ``<name>_true``/``<name>_false``, both continuing at
        ``<name>_join``, as p4c's parser control-flow pass does)."""
        stmts = _flatten_blocks(stmts)
        for i, st in enumerate(stmts):
            if isinstance(st, ast.IfStmt):
                c = const_value(st.cond)
                if c is not None:
                    branch = st.then if c else st.else_
                    self.lower_state(scope, name, stmts[:i] + ([branch] if branch else []) + stmts[i + 1:],
                                     transition, target)
                    return
                yes = self.state_names.fresh(f"{name}_true")
                no = self.state_names.fresh(f"{name}_false")
                join = self.state_names.fresh(f"{name}_join")
                self.emit_branch(scope, name, stmts[:i], st.cond, yes, no)
                self.lower_state(scope, yes, [st.then], join, lambda n: n)
                self.lower_state(scope, no, [st.else_] if st.else_ is not None else [], join, lambda n: n)
                self.lower_state(scope, join, stmts[i + 1:], transition, target)
                return
            next_of = self.union_next_extract(scope, st)
            if next_of is not None:
                self.extract_union_next(scope, name, stmts, i, next_of, transition, target)
                return
            last = union_last(_expressions_of(st), self.ctx.hoisted)
            if last is not None:
                self.read_union_last(scope, name, stmts, i, last, transition, target)
                return
            bv = self.sub_parser_call(scope, st)
            if bv is None:
                continue
            cont = self.state_names.fresh(f"{name}_cont")
            for d in stmts[:i]:  # the call's arguments may name variables declared before it
                if isinstance(d, ast.VarDecl) and scope.find(d) is None:
                    scope.bind(d, self.ctx.layout.storage(d.name, self.ctx.types.resolve(d.type_ref), d.pos))
            sub_start, entry_ops = self.inline_parser(scope, bv, st.call, cont)  # type: ignore[attr-defined]
            self.emit_state(scope, name, stmts[:i], None, lambda _: sub_start, goto=sub_start, then=entry_ops)
            self.lower_state(scope, cont, stmts[i + 1:], transition, target)
            return
        if isinstance(transition, ast.SelectExpr) \
                and any(union_last(k, self.ctx.hoisted) for k in transition.keys):
            self.lower_state(scope, name, *self.keys_first(transition, stmts), target)
            return
        self.emit_state(scope, name, stmts, transition, target)

    def keys_first(self, transition: ast.SelectExpr,
                   stmts: list[ast.Stmt]) -> tuple[list[ast.Stmt], ast.SelectExpr]:
        """``select(u.last.h.f, ...)`` on a stack of header unions: each such key is
        computed into a temporary by a statement at the end of the state (which is
        then split on the next index, `read_union_last`), and the select reads it."""
        keys: list[ast.Expr] = []
        stmts = list(stmts)
        for k in transition.keys:
            if union_last(k, self.ctx.hoisted) is None:
                keys.append(k)
                continue
            ref = ast.PathExpr(k.pos, "tmp")
            ref.type = k.type
            self.ctx.hoisted[id(ref)] = self.ctx.layout.scalar("tmp", k.type, k.pos)
            stmts.append(ast.AssignStmt(k.pos, ref, k))
            keys.append(ref)
        return stmts, dataclasses.replace(transition, keys=keys)

    def union_next_extract(self, scope: Scope, st: ast.Stmt) -> Optional[tuple[UnionStackLoc, str]]:
        """``pkt.extract(u.next.m)`` on a stack of header unions: (the stack, ``m``)."""
        if not (isinstance(st, ast.CallStmt) and isinstance(st.call.target, ast.MemberExpr)
                and st.call.target.member == "extract" and len(st.call.args) == 1):
            return None
        arg = st.call.args[0].value
        if isinstance(arg, ast.MemberExpr) and isinstance(arg.expr, ast.MemberExpr) and arg.expr.member == "next":
            stack = ParserStmtLowerer(scope).loc(arg.expr.expr)
            if isinstance(stack, UnionStackLoc):
                return stack, arg.member
        return None

    def extract_union_next(self, scope: Scope, name: str, stmts: list[ast.Stmt], i: int,
                           next_of: tuple[UnionStackLoc, str], transition: Any, target: Any) -> None:
        """``extract(u.next.m)``: p4sim keeps a stack of header unions as one union per
        element, so the state is split on the stack's next index (a metadata field,
        0 for each packet): ``<state>_next<k>`` extracts element ``k``'s member and
        counts it, a full stack fails with StackOutOfBounds (as BMv2's extract on a
        full stack does)."""
        stack, member = next_of
        counter = self.ctx.layout.union_stack_next(stack)
        elements: list[tuple[int, list[dict]]] = []
        for k, union in enumerate(stack.elements):
            if member not in union.members:
                raise CompileError(f"header union has no member '{member}'", stmts[i].pos)
            elements.append((k, [
                {"op": "extract", "parameters": [{"type": "regular", "value": union.members[member].name}]},
                {"op": "set", "parameters": [counter.node(), as_param(hex_node(k + 1, 32))]}]))
        self.split_on_next(scope, name, stmts, i, stack, ("next", "full"), elements, transition, target)

    def read_union_last(self, scope: Scope, name: str, stmts: list[ast.Stmt], i: int, last: ast.MemberExpr,
                        transition: Any, target: Any) -> None:
        """A statement reading ``u.last`` (element ``nextIndex - 1``) of a stack of
        header unions, unrolled over the elements as p4c's parser unrolling makes the
        index constant: ``<state>_last<k>`` runs it with element ``k`` for a next
        index of ``k + 1``; an empty stack fails with StackOutOfBounds (P4-16 8.18)."""
        stack = ParserStmtLowerer(scope).loc(last.expr)
        same = [n for n in sub_expressions(_expressions_of(stmts[i])) if n is last or (
            isinstance(n, ast.MemberExpr) and n.member == "last" and is_union_stack(n.expr.type)
            and ParserStmtLowerer(scope).loc(n.expr) is stack)]  # every u.last of the statement
        elements: list[tuple[int, list[dict]]] = []
        for k, union in enumerate(stack.elements):
            lw = ParserStmtLowerer(scope)
            self.ctx.hoisted.update((id(n), union) for n in same)
            try:
                lw.stmt(stmts[i])
            finally:
                for n in same:
                    del self.ctx.hoisted[id(n)]
            elements.append((k + 1, lw.out))
        self.split_on_next(scope, name, stmts, i, stack, ("last", "empty"), elements, transition, target)

    def split_on_next(self, scope: Scope, name: str, stmts: list[ast.Stmt], i: int, stack: UnionStackLoc,
                      suffixes: tuple[str, str], elements: list[tuple[int, list[dict]]], transition: Any,
                      target: Any) -> None:
        """State ``name`` runs ``stmts[:i]`` and selects on ``stack``'s next index:
        for each (value, ops) of ``elements``, state ``<name>_<suffix><k>`` runs the
        ops; any other value goes to ``<name>_<fail suffix>``, which fails with
        StackOutOfBounds; all continue at ``<name>_join`` with ``stmts[i + 1:]``."""
        counter = self.ctx.layout.union_stack_next(stack)
        each, fail = suffixes
        join = self.state_names.fresh(f"{name}_join")
        failed = self.state_names.fresh(f"{name}_{fail}")
        lw = ParserStmtLowerer(scope)
        lw.stmts(stmts[:i])
        cases = []
        for k, (value, ops) in enumerate(elements):
            state = self.state_names.fresh(f"{name}_{each}{k}")
            cases.append({"type": "hexstr", "value": f"0x{value:08x}", "mask": None, "next_state": state})
            self.states.append({"name": state, "id": len(self.states), "parser_ops": ops,
                                "transitions": [_default(join)], "transition_key": []})
        self.states.append({"name": name, "id": len(self.states), "parser_ops": lw.out,
                            "transitions": cases + [_default(failed)], "transition_key": [counter.node()]})
        verify = [{"op": "verify", "parameters": [
            bool_node(False), hex_node(self.ctx.error_value("StackOutOfBounds", stmts[i].pos), 32)]}]
        self.states.append({"name": failed, "id": len(self.states), "parser_ops": verify,
                            "transitions": [_default(join)], "transition_key": []})
        self.lower_state(scope, join, stmts[i + 1:], transition, target)

    def sub_parser_call(self, scope: Scope, st: ast.Stmt) -> Optional[BlockValue]:
        if isinstance(st, ast.CallStmt) and isinstance(st.call.target, ast.MemberExpr) \
                and st.call.target.member == "apply":
            if isinstance(st.call.target.expr, ast.TypeNameExpr):
                return direct_instance(scope, st.call.target.expr)
            v = ParserStmtLowerer(scope).loc(st.call.target.expr)
            if isinstance(v, BlockValue):
                return v
        return None

    def inline_parser(self, scope: Scope, bv: BlockValue, c: ast.CallExpr,
                      accept: str) -> tuple[Optional[str], list[dict]]:
        """Inline sub-parser ``bv``'s states, continuing at ``accept``. Returns its
        start state and the operations the calling state ends with: the headers of
        ``out`` arguments start invalid (P4-16 6.8)."""
        decl = bv.decl
        if not isinstance(decl, ast.ParserDecl):
            raise CompileError("only parsers can be applied in a parser", c.pos)
        sub = Scope(self.ctx, bv.name, self.ctx.globals, block=scope.block)
        lw = ParserStmtLowerer(scope)
        for p, a in zip(decl.params, ordered_args(decl.params, c.args, c.pos)):
            if a is None:
                raise CompileError(f"missing argument for '{p.name}'", c.pos)
            if isinstance(a, (ast.PathExpr, ast.MemberExpr, ast.IndexExpr)):
                loc = lw.loc(a)
                if p.direction == "out":
                    lw.invalidate(loc)
                sub.bind(p, loc)
            elif const_value(a) is not None:
                sub.bind(p, ConstLoc(const_value(a), self.ctx.types.resolve(p.type_ref)))
            elif p.direction in ("", "in") and scalar_width(a.type) is not None:
                tmp = lw.temp(a.type)  # a value computed by the calling state, at its end
                lw.set_field(tmp, lw.data(a))
                sub.bind(p, tmp)
            else:
                raise CompileError(f"argument for '{p.name}' must be a storage location or a value",
                                   a.pos, "unsupported")
        bind_ctor_params(bv.scope, sub, decl.ctor_params, bv.args)
        self.declare_locals(decl, sub)
        local = bv.name.rsplit(".", 1)[-1]
        return self.lower_states(decl, sub, f"{local}_", accept), lw.out

    def emit_state(self, scope: Scope, name: str, stmts: list[ast.Stmt], transition: Any, target: Any,
                   goto: Optional[str] = None, then: Optional[list[dict]] = None) -> None:
        lw = ParserStmtLowerer(scope)
        lw.stmts(stmts)
        lw.out.extend(then or [])
        keys: list[dict] = []
        transitions: list[dict] = []
        if goto is not None or isinstance(transition, str):
            nxt = goto if goto is not None else target(transition)
            transitions.append(_default(nxt))
        else:
            widths = []
            for k in transition.keys:
                node, w = self.key(lw, k)
                keys.append(node)
                widths.append(w)
            for case in transition.cases:
                transitions.extend(self.case(lw, case, widths, target(case.next_state)))
        self.states.append({"name": name, "id": len(self.states), "parser_ops": lw.out,
                            "transitions": transitions, "transition_key": keys})

    def emit_branch(self, scope: Scope, name: str, stmts: list[ast.Stmt], cond: ast.Expr,
                    yes: str, no: str) -> None:
        """State ``name``: ``stmts``, then ``select (cond) { true: yes; default: no; }``."""
        lw = ParserStmtLowerer(scope)
        lw.stmts(stmts)
        node, _ = self.key(lw, cond)
        transitions = [{"type": "hexstr", "value": "0x01", "mask": None, "next_state": yes}, _default(no)]
        self.states.append({"name": name, "id": len(self.states), "parser_ops": lw.out,
                            "transitions": transitions, "transition_key": [node]})

    def key(self, lw: ParserStmtLowerer, e: ast.Expr) -> tuple[dict, int]:
        w = scalar_width(e.type)
        if isinstance(e, ast.CallExpr) and isinstance(e.target, ast.MemberExpr) and e.target.member == "lookahead":
            return lw.rv(e), w or 0
        if isinstance(e, ast.MemberExpr) and lookahead_field(e) is not None:
            return lookahead_field(e), w or 0
        if isinstance(e, ast.MemberExpr) and isinstance(e.expr, ast.MemberExpr) and e.expr.member == "last":
            base = lw.loc(e.expr.expr)
            if isinstance(base, StackLoc):
                return {"type": "stack_field", "value": [base.name, e.member]}, w or 0
        if isinstance(e, (ast.PathExpr, ast.MemberExpr)):
            loc = lw.loc(e)
            if isinstance(loc, FieldLoc) and w is not None:
                return loc.node(), w
        if w is None:
            raise CompileError("select key must have a bit, int or bool type", e.pos)
        tmp = lw.temp(e.type, "tmp")
        lw.set_field(tmp, lw.data(e))
        return tmp.node(), w

    def case(self, lw: ParserStmtLowerer, case: ast.SelectCase, widths: list[int], nxt: Optional[str]) -> list[dict]:
        ks = case.keyset
        if len(ks) == 1 and len(widths) > 1 and isinstance(ks[0], ast.ListExpr):
            ks = ks[0].elements
        if all(isinstance(k, (ast.DefaultExpr, ast.DontCareExpr)) for k in ks):
            return [_default(nxt)]
        if len(ks) == 1 and isinstance(ks[0], ast.PathExpr):
            v = lw.scope.find(ks[0].ref)
            if isinstance(v, ValueSetValue):
                return [{"type": "parse_vset", "value": v.name, "mask": None, "next_state": nxt}]
        if len(ks) != len(widths):
            raise CompileError(f"select case has {len(ks)} values for {len(widths)} keys", case.pos)
        options = [_value_masks(k, w) for k, w in zip(ks, widths)]
        out = []
        for combo in product(*options):
            value = "".join(format(v, "x").rjust(2 * nbytes(w), "0") for (v, _), w in zip(combo, widths))
            full = all(m == mask(w) for (_, m), w in zip(combo, widths))
            m = None if full else "0x" + "".join(format(m, "x").rjust(2 * nbytes(w), "0")
                                                 for (_, m), w in zip(combo, widths))
            out.append({"type": "hexstr", "value": "0x" + value, "mask": m, "next_state": nxt})
        return out


class ValueSetValue:
    def __init__(self, name: str):
        self.name = name


def _flatten_blocks(stmts: list[ast.Stmt]) -> list[ast.Stmt]:
    """Block statements spliced into their state (one scope per parser: the
    declarations in them are distinct variables already)."""
    out: list[ast.Stmt] = []
    for st in stmts:
        out.extend(_flatten_blocks(st.stmts) if isinstance(st, ast.BlockStmt) else [st])
    return out


def _expressions_of(st: ast.Stmt) -> Any:
    """What `sub_expressions` walks for statement ``st`` (a declaration: its initializer)."""
    return st.init if isinstance(st, ast.VarDecl) else st


def _default(nxt: Optional[str]) -> dict:
    return {"type": "default", "value": None, "mask": None, "next_state": nxt}


def _const(e: ast.Expr, what: str) -> int:
    v = const_value(e)
    if v is None:
        raise CompileError(f"{what} must be a compile-time constant", e.pos)
    return v


def _value_masks(k: ast.Expr, w: int) -> list[tuple[int, int]]:
    full = mask(w)
    if isinstance(k, (ast.DefaultExpr, ast.DontCareExpr)):
        return [(0, 0)]
    if isinstance(k, ast.BinaryExpr) and k.op == "&&&":
        m = _const(k.right, "mask") & full
        return [(_const(k.left, "select value") & m, m)]
    if isinstance(k, ast.BinaryExpr) and k.op == "..":
        return range_to_masks(_const(k.left, "range start") & full, _const(k.right, "range end") & full, w)
    return [(_const(k, "select value") & full, full)]


def range_to_masks(lo: int, hi: int, w: int) -> list[tuple[int, int]]:
    """Cover [lo, hi] with aligned power-of-two blocks, as (value, mask) pairs."""
    out = []
    while lo <= hi:
        size = 1
        while lo % (size * 2) == 0 and lo + size * 2 - 1 <= hi and size * 2 <= (1 << w):
            size *= 2
        out.append((lo, mask(w) & ~(size - 1)))
        lo += size
    return out
