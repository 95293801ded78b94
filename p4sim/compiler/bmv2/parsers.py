"""The v1model parser -> BMv2 ``parsers[0]`` (parse states), plus ``parse_vsets``.

Each state's statements become parser ops (``extract``, ``extract_VL``, ``advance``,
``set``, ``verify``, ``primitive``); its ``select`` becomes a ``transition_key`` and
``transitions`` whose values/masks are the byte-padded concatenation of the key
fields (JSON_format.md). ``transition accept`` (and ``reject``, as p4c emits it) has
``next_state`` null. Ranges are expanded into value/mask pairs; a key that is not a
field or a lookahead is first copied into a ``scalars`` temporary by a ``set`` op.

A BMv2 state cannot branch, so a P4 state is split where it does (see
`ParserLowerer.lower_state`): at an ``if``, at a call to a function with ``if``
statements or an early return (whose body is inlined into the state first), at a
sub-parser call (the sub-parser's states are inlined, its ``accept`` leading to the
continuation). The statements being split are `Item`s: each carries the `Frame` it is
lowered in (the parser's scope, or an inlined function's).
"""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from itertools import product
from typing import Any, Callable, Iterator, Optional

from p4sim.compiler import ast
from p4sim.compiler import types as T
from p4sim.compiler.bmv2.context import (
    BlockValue, Context, PacketValue, Scope, direct_instance, instantiate, ordered_args,
)
from p4sim.compiler.bmv2.controls import bind_ctor_params
from p4sim.compiler.bmv2.expressions import lookahead_field, sub_expressions
from p4sim.compiler.bmv2.jsonutil import as_param, bool_node, hex_node, mask, nbytes
from p4sim.compiler.bmv2.parsercalls import (called_function, key_call_reorders, key_skips_a_call, operands_first,
                                             returns_early, short_circuit, skipping_operator, stateful_call,
                                             stateful_key_call)
from p4sim.compiler.bmv2.statements import StmtLowerer
from p4sim.compiler.bmv2.storage import ConstLoc, FieldLoc, HeaderLoc, StackLoc, UnionStackLoc, scalar_width
from p4sim.compiler.bmv2.unionstacks import is_union_stack, union_last
from p4sim.compiler.consteval import const_value
from p4sim.compiler.diagnostics import CompileError
from p4sim.compiler.midend.controlplane import CPValueSet
from p4sim.compiler.midend.copyinout import overlapping_arguments
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


@dataclasses.dataclass
class Frame:
    """Where a statement of a parser state is lowered: the scope its names are bound
    in and, in the body of a function inlined into the state, where the function's
    value goes and the state its early returns continue at."""

    scope: Scope
    result: Any = None
    ret_state: Optional[str] = None


@dataclasses.dataclass
class Item:
    """One step of a parser state: a statement (with the values of the calls in it
    that were inlined before it: call id -> location), or operations made when the
    state is lowered (``run``: argument copies of an inlined call)."""

    frame: Frame
    stmt: Optional[ast.Stmt] = None
    results: dict[int, Any] = dataclasses.field(default_factory=dict)
    run: Optional[Callable[[ParserStmtLowerer], None]] = None


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
        frame = Frame(scope)
        for s in decl.states:
            stmts = (inits if s.name == "start" else []) + list(s.stmts)
            self.lower_state(frame, names[s.name], [Item(frame, st) for st in stmts], s.transition, target)
        return names["start"]

    def lower_state(self, frame: Frame, name: str, items: list[Item], transition: Any, target: Any,
                    key_results: Optional[dict[int, Any]] = None) -> None:
        """Emit state ``name`` (``frame``: the parser's own, for the transition).
        BMv2 parser states are straight-line operations and one select, so a state
        is split where that cannot hold, as p4c's inliner and parser control-flow
        pass split it: at a call to a function with control flow (its body joins
        the state's statements, see `inline_call`), at an ``if`` (a select on the
        condition into ``<name>_true``/``<name>_false``, both continuing at
        ``<name>_join``), at a ``return`` of such a function that is not its last
        statement (a transition to the state after the call), at a sub-parser call
        (its states are inlined between the halves), at ``extract(u.next.m)`` and at
        a statement or ``select`` key reading ``u.last`` of a stack of header unions
        (a select on the stack's next index, `split_on_next`). Before such a call,
        an ``&&``/``||``/``?:`` that may skip it becomes ``if`` statements
        (`computed_first`), and what P4 evaluates ahead of either is copied first
        where the order could show (`copied_first`)."""
        items = _flatten_blocks(items)
        for i, it in enumerate(items):
            st = it.stmt
            if st is None:
                continue
            last = union_last(_expressions_of(st), {**self.ctx.hoisted, **it.results})
            if last is not None:
                self.read_union_last(frame, name, items, i, last, transition, target, key_results)
                return
            op = skipping_operator(st, it.results)
            if op is not None:
                first = operands_first(st, op, it.results)
                now = self.copied_first(it, first) if first else self.computed_first(it, op)
                self.lower_state(frame, name, items[:i] + now + items[i + 1:], transition, target, key_results)
                return
            c = stateful_call(st, it.results)
            first = operands_first(st, c, it.results) if c is not None else []
            if first:
                self.lower_state(frame, name, items[:i] + self.copied_first(it, first) + items[i + 1:],
                                 transition, target, key_results)
                return
            if c is not None:
                entry, exits, ret, result = self.inline_call(name, it, c)
                rest = [] if isinstance(st, ast.CallStmt) and st.call is c \
                    else [Item(it.frame, st, {**it.results, id(c): result})]
                self.continue_after(frame, name, items[:i] + entry, ret, exits + rest + items[i + 1:],
                                    transition, target, key_results)
                return
            if isinstance(st, ast.IfStmt):
                self.split_on_if(frame, name, items, i, transition, target, key_results)
                return
            if isinstance(st, ast.ReturnStmt) and it.frame.ret_state is not None:
                self.emit_state(frame, name, items[:i + 1], None, None, goto=it.frame.ret_state)
                return
            if isinstance(st, ast.SwitchStmt):
                raise CompileError("switch statements are not supported in parser states", st.pos, "unsupported")
            next_of = self.union_next_extract(it.frame.scope, st)
            if next_of is not None:
                self.extract_union_next(frame, name, items, i, next_of, transition, target, key_results)
                return
            bv = self.sub_parser_call(it.frame.scope, st)
            if bv is None:
                continue
            cont = self.state_names.fresh(f"{name}_cont")
            for x in items[:i]:  # the call's arguments may name variables declared before it
                d = x.stmt
                if isinstance(d, ast.VarDecl) and x.frame.scope.find(d) is None:
                    x.frame.scope.bind(d, self.ctx.layout.storage(d.name, self.ctx.types.resolve(d.type_ref), d.pos))
            with _hoisted(self.ctx, it.results):  # arguments calling functions that need states
                sub_start, entry_ops, exit_ops = self.inline_parser(it.frame.scope, bv, st.call, cont)  # type: ignore[attr-defined]
            self.emit_state(frame, name, items[:i] + [_ops(it.frame, entry_ops)], None, None, goto=sub_start)
            self.lower_state(frame, cont, [_ops(it.frame, exit_ops)] + items[i + 1:], transition, target, key_results)
            return
        if isinstance(transition, ast.SelectExpr) \
                and any(union_last(k, self.ctx.hoisted) for k in transition.keys):
            items, transition, key_results = self.keys_first(frame, items, transition, key_results or {},
                                                             lambda k: union_last(k, self.ctx.hoisted) is not None)
            self.lower_state(frame, name, items, transition, target, key_results)
            return
        c = stateful_key_call(transition, key_results or {})
        if key_skips_a_call(transition, key_results or {}) \
                or c is not None and key_call_reorders(transition, c, key_results or {}):
            # every key computed first, in order: they may read what the call writes
            items, transition, key_results = self.keys_first(frame, items, transition, key_results or {},
                                                             lambda k: True)
            self.lower_state(frame, name, items, transition, target, key_results)
            return
        if c is not None:  # a select key calls a function with control flow: its value is computed first
            entry, exits, ret, result = self.inline_call(name, Item(frame, results=key_results or {}), c)
            self.continue_after(frame, name, items + entry, ret, exits, transition, target,
                                {**(key_results or {}), id(c): result})
            return
        self.emit_state(frame, name, items, transition, target, key_results=key_results)

    def computed_first(self, it: Item, op: ast.Expr) -> list[Item]:
        """Item ``it`` with its operator ``op`` (`skipping_operator`) computed before it
        into a temporary by ``if`` statements (`short_circuit`), which it then reads."""
        tmp, loc = self.temporary(op)
        results = {**it.results, id(tmp): loc}
        return [Item(it.frame, st, results) for st in short_circuit(op, tmp)] \
            + [Item(it.frame, it.stmt, {**results, id(op): loc})]

    def copied_first(self, it: Item, parts: list[ast.Expr]) -> list[Item]:
        """Item ``it`` with ``parts`` of it (`operands_first`) computed before it, in
        order, into temporaries, which it then reads."""
        temps = [self.temporary(e) for e in parts]
        copies = [Item(it.frame, ast.AssignStmt(e.pos, tmp, e), {**it.results, id(tmp): loc})
                  for e, (tmp, loc) in zip(parts, temps)]
        return copies + [Item(it.frame, it.stmt, {**it.results, **{id(e): loc for e, (_, loc) in zip(parts, temps)}})]

    def temporary(self, e: ast.Expr) -> tuple[ast.PathExpr, Any]:
        """A fresh variable for the value of ``e``: a name that reads it, and where it is."""
        tmp = ast.PathExpr(e.pos, "tmp")
        tmp.type = e.type
        return tmp, self.ctx.layout.storage("tmp", e.type, e.pos)

    def split_on_if(self, frame: Frame, name: str, items: list[Item], i: int, transition: Any, target: Any,
                    key_results: Optional[dict[int, Any]]) -> None:
        it = items[i]
        st = it.stmt
        assert isinstance(st, ast.IfStmt)
        c = const_value(st.cond)
        if c is not None:
            branch = st.then if c else st.else_
            chosen = [Item(it.frame, branch, it.results)] if branch is not None else []
            self.lower_state(frame, name, items[:i] + chosen + items[i + 1:], transition, target, key_results)
            return
        yes = self.state_names.fresh(f"{name}_true")
        no = self.state_names.fresh(f"{name}_false")
        join = self.state_names.fresh(f"{name}_join")
        self.emit_branch(frame, name, items[:i], it, yes, no)
        # The branches see what the if's statement did (`computed_first`'s temporary).
        self.lower_state(frame, yes, [Item(it.frame, st.then, it.results)], join, _same)
        self.lower_state(frame, no, [Item(it.frame, st.else_, it.results)] if st.else_ is not None else [],
                         join, _same)
        self.lower_state(frame, join, items[i + 1:], transition, target, key_results)

    def inline_call(self, name: str, caller: Item, c: ast.CallExpr) -> tuple[list[Item], list[Item], Optional[str], Any]:
        """Inline call ``c`` to a function with control flow (p4c's function inliner,
        then its parser control-flow pass): its arguments are bound as for any call
        (`StmtLowerer.bind_params`: copies where P4-16 6.8 needs them), its body's
        statements join the state's, so that its ``if`` statements split the state
        like the state's own, and the copy-outs follow. Returns the items up to the
        body's end, the copy-out items, the state an early ``return`` continues at
        (``<name>_ret``, holding the copy-outs and what follows the call; None if
        the function has none) and where its value goes."""
        f = called_function(c)
        assert f is not None
        rt = self.ctx.types.resolve(f.return_type)
        result = None if isinstance(rt, T.VoidT) else self.ctx.layout.storage("retval", rt, c.pos)
        ret = self.state_names.fresh(f"{name}_ret") if returns_early(f.body) else None
        body = Frame(Scope(self.ctx, "", self.ctx.globals), result, ret)
        pending: list[tuple[Any, Any]] = []

        def bind(lw: ParserStmtLowerer) -> None:
            lw.pos = c.pos
            pending.extend(lw.bind_params(body.scope, f.params, c))

        def copy_out(lw: ParserStmtLowerer) -> None:
            lw.copy_out(pending, c)

        entry = [Item(caller.frame, run=bind, results=caller.results)] + [Item(body, s) for s in f.body.stmts]
        return entry, [Item(caller.frame, run=copy_out)], ret, result

    def continue_after(self, frame: Frame, name: str, head: list[Item], ret: Optional[str], tail: list[Item],
                       transition: Any, target: Any, key_results: Optional[dict[int, Any]]) -> None:
        """Lower ``head`` then ``tail`` from state ``name``; with ``ret``, ``tail``
        is state ``ret`` of its own, which the end of ``head`` transitions to."""
        if ret is None:
            self.lower_state(frame, name, head + tail, transition, target, key_results)
            return
        self.lower_state(frame, name, head, ret, _same)
        self.lower_state(frame, ret, tail, transition, target, key_results)

    def lower_items(self, lw: ParserStmtLowerer, items: list[Item]) -> None:
        for it in items:
            lw.scope = it.frame.scope
            with _hoisted(self.ctx, it.results):
                if it.run is not None:
                    it.run(lw)
                elif isinstance(it.stmt, ast.ReturnStmt):  # the end of an inlined function
                    lw.pos = it.stmt.pos
                    if it.stmt.value is not None:
                        lw.assign_value(it.frame.result, it.stmt.value)
                else:
                    lw.stmt(it.stmt)

    def keys_first(self, frame: Frame, items: list[Item], transition: ast.SelectExpr,
                   key_results: dict[int, Any], which: Callable[[ast.Expr], bool]
                   ) -> tuple[list[Item], ast.SelectExpr, dict[int, Any]]:
        """The keys ``which`` picks computed into temporaries by statements at the end
        of the state, which the select then reads: ``select(u.last.h.f, ...)`` on a
        stack of header unions (the statement splits the state on the next index,
        `read_union_last`), and keys with an operator that may skip a call to a
        function that needs states (`computed_first`). Returns the state's items, the
        new select and the key results (the temporaries included)."""
        keys: list[ast.Expr] = []
        results = dict(key_results)
        computed: list[ast.Stmt] = []
        for k in transition.keys:
            if not which(k):
                keys.append(k)
                continue
            ref, results[id(ref)] = self.temporary(k)
            computed.append(ast.AssignStmt(k.pos, ref, k))
            keys.append(ref)
        return items + [Item(frame, st, results) for st in computed], \
            dataclasses.replace(transition, keys=keys), results

    def union_next_extract(self, scope: Scope, st: ast.Stmt) -> Optional[tuple[UnionStackLoc, str]]:
        """``pkt.extract(u.next.m)`` (or ``extract(u.next.m, size)`` of a member with
        a varbit field) on a stack of header unions: (the stack, ``m``)."""
        if not (isinstance(st, ast.CallStmt) and isinstance(st.call.target, ast.MemberExpr)
                and st.call.target.member == "extract" and len(st.call.args) in (1, 2)):
            return None
        arg = st.call.args[0].value
        if isinstance(arg, ast.MemberExpr) and isinstance(arg.expr, ast.MemberExpr) and arg.expr.member == "next":
            stack = ParserStmtLowerer(scope).loc(arg.expr.expr)
            if isinstance(stack, UnionStackLoc):
                return stack, arg.member
        return None

    def extract_union_next(self, frame: Frame, name: str, items: list[Item], i: int,
                           next_of: tuple[UnionStackLoc, str], transition: Any, target: Any,
                           key_results: Optional[dict[int, Any]]) -> None:
        """``extract(u.next.m)``: p4sim keeps a stack of header unions as one union per
        element, so the state is split on the stack's next index (a metadata field,
        0 for each packet): ``<state>_next<k>`` extracts element ``k``'s member and
        counts it, a full stack fails with StackOutOfBounds (as BMv2's extract on a
        full stack does)."""
        stack, member = next_of
        counter = self.ctx.layout.union_stack_next(stack)
        call = items[i].stmt.call  # type: ignore[union-attr]
        size = call.args[1].value if len(call.args) == 2 else None
        elements: list[tuple[int, list[Item]]] = []
        for k, union in enumerate(stack.elements):
            if member not in union.members:
                raise CompileError(f"header union has no member '{member}'", call.pos)
            header = {"type": "regular", "value": union.members[member].name}
            count = {"op": "set", "parameters": [counter.node(), as_param(hex_node(k + 1, 32))]}

            def extract(lw: ParserStmtLowerer, header: dict = header, count: dict = count) -> None:
                if size is None:
                    lw.out.append({"op": "extract", "parameters": [header]})
                else:
                    lw.out.append({"op": "extract_VL",
                                   "parameters": [header, {"type": "expression", "value": lw.data(size)}]})
                lw.out.append(count)

            elements.append((k, [Item(items[i].frame, run=extract)]))
        self.split_on_next(frame, name, items, i, stack, ("next", "full"), elements, transition, target, key_results)

    def read_union_last(self, frame: Frame, name: str, items: list[Item], i: int, last: ast.MemberExpr,
                        transition: Any, target: Any, key_results: Optional[dict[int, Any]]) -> None:
        """A statement reading ``u.last`` (element ``nextIndex - 1``) of a stack of
        header unions, unrolled over the elements as p4c's parser unrolling makes the
        index constant: ``<state>_last<k>`` runs it with element ``k`` for a next
        index of ``k + 1``; an empty stack fails with StackOutOfBounds (P4-16 8.18).
        The statement is lowered in that state like any other (it may call a function
        that needs states, or read ``last`` of another stack: a split of its own)."""
        it = items[i]
        locs = ParserStmtLowerer(it.frame.scope)
        stack = locs.loc(last.expr)
        same = [n for n in sub_expressions(_expressions_of(it.stmt)) if n is last or (
            isinstance(n, ast.MemberExpr) and n.member == "last" and is_union_stack(n.expr.type)
            and locs.loc(n.expr) is stack)]  # every u.last of the statement on this stack
        elements = [(k + 1, [Item(it.frame, it.stmt, {**it.results, **{id(n): union for n in same}})])
                    for k, union in enumerate(stack.elements)]
        self.split_on_next(frame, name, items, i, stack, ("last", "empty"), elements, transition, target, key_results)

    def split_on_next(self, frame: Frame, name: str, items: list[Item], i: int, stack: UnionStackLoc,
                      suffixes: tuple[str, str], elements: list[tuple[int, list[Item]]], transition: Any,
                      target: Any, key_results: Optional[dict[int, Any]]) -> None:
        """State ``name`` runs ``items[:i]`` and selects on ``stack``'s next index:
        for each (value, items) of ``elements``, state ``<name>_<suffix><k>`` runs the
        items; any other value goes to ``<name>_<fail suffix>``, which fails with
        StackOutOfBounds; all continue at ``<name>_join`` with ``items[i + 1:]``."""
        counter = self.ctx.layout.union_stack_next(stack)
        each, fail = suffixes
        join = self.state_names.fresh(f"{name}_join")
        failed = self.state_names.fresh(f"{name}_{fail}")
        lw = ParserStmtLowerer(frame.scope)
        self.lower_items(lw, items[:i])
        cases = []
        for k, (value, body) in enumerate(elements):
            state = self.state_names.fresh(f"{name}_{each}{k}")
            cases.append({"type": "hexstr", "value": f"0x{value:08x}", "mask": None, "next_state": state})
            self.lower_state(frame, state, body, join, _same)
        self.states.append({"name": name, "id": len(self.states), "parser_ops": lw.out,
                            "transitions": cases + [_default(failed)], "transition_key": [counter.node()]})
        pos = items[i].stmt.pos  # type: ignore[union-attr]
        verify = [{"op": "verify", "parameters": [
            bool_node(False), hex_node(self.ctx.error_value("StackOutOfBounds", pos), 32)]}]
        self.states.append({"name": failed, "id": len(self.states), "parser_ops": verify,
                            "transitions": [_default(join)], "transition_key": []})
        self.lower_state(frame, join, items[i + 1:], transition, target, key_results)

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
                      accept: str) -> tuple[Optional[str], list[dict], list[dict]]:
        """Inline sub-parser ``bv``'s states, continuing at ``accept``, as p4c's
        inliner does. Returns its start state, the operations the calling state
        ends with and those the continuation starts with. Arguments are bound to
        the caller's storage but where P4-16 6.8's copies can be told apart
        (`overlapping_arguments`: two arguments sharing storage, one written):
        those are copied into fresh storage at the call and written ones back at
        the continuation, which a sub-parser ending in ``reject`` never reaches.
        The headers of ``out`` arguments start invalid (P4-16 6.8)."""
        decl = bv.decl
        if not isinstance(decl, ast.ParserDecl):
            raise CompileError("only parsers can be applied in a parser", c.pos)
        sub = Scope(self.ctx, bv.name, self.ctx.globals, block=scope.block)
        lw = ParserStmtLowerer(scope)
        copy_out = ParserStmtLowerer(scope)
        args = ordered_args(decl.params, c.args, c.pos)
        copied = overlapping_arguments(decl.params, args, may_reject=True)
        for p, a in zip(decl.params, args):
            if a is None:
                raise CompileError(f"missing argument for '{p.name}'", c.pos)
            if id(a) in copied:
                loc = lw.loc(a)
                tmp = self.ctx.layout.storage(p.name, self.ctx.types.resolve(p.type_ref), a.pos)
                if p.direction == "out":
                    lw.invalidate(tmp)
                else:
                    lw.copy(tmp, loc, a)
                if p.direction in ("out", "inout"):
                    copy_out.copy(loc, tmp, a)
                sub.bind(p, tmp)
            elif isinstance(a, (ast.PathExpr, ast.MemberExpr, ast.IndexExpr)):
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
        return self.lower_states(decl, sub, f"{local}_", accept), lw.out, copy_out.out

    def emit_state(self, frame: Frame, name: str, items: list[Item], transition: Any, target: Any,
                   goto: Optional[str] = None, key_results: Optional[dict[int, Any]] = None) -> None:
        lw = ParserStmtLowerer(frame.scope)
        self.lower_items(lw, items)
        lw.scope = frame.scope
        keys: list[dict] = []
        transitions: list[dict] = []
        if goto is not None or isinstance(transition, str):
            nxt = goto if goto is not None else target(transition)
            transitions.append(_default(nxt))
        else:
            widths = []
            with _hoisted(self.ctx, key_results or {}):
                for k in transition.keys:
                    node, w = self.key(lw, k)
                    keys.append(node)
                    widths.append(w)
            for case in transition.cases:
                transitions.extend(self.case(lw, case, widths, target(case.next_state)))
        self.states.append({"name": name, "id": len(self.states), "parser_ops": lw.out,
                            "transitions": transitions, "transition_key": keys})

    def emit_branch(self, frame: Frame, name: str, items: list[Item], cond: Item, yes: str, no: str) -> None:
        """State ``name``: ``items``, then ``select (cond) { true: yes; default: no; }``
        (``cond``: the ``if`` statement's item)."""
        lw = ParserStmtLowerer(frame.scope)
        self.lower_items(lw, items)
        lw.scope = cond.frame.scope
        assert isinstance(cond.stmt, ast.IfStmt)
        with _hoisted(self.ctx, cond.results):
            node, _ = self.key(lw, cond.stmt.cond)
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


def _flatten_blocks(items: list[Item]) -> list[Item]:
    """Block statements spliced into their state (one scope per parser or inlined
    function: the declarations in them are distinct variables already)."""
    out: list[Item] = []
    for it in items:
        if isinstance(it.stmt, ast.BlockStmt):
            out.extend(_flatten_blocks([Item(it.frame, s, it.results) for s in it.stmt.stmts]))
        else:
            out.append(it)
    return out


def _ops(frame: Frame, ops: list[dict]) -> Item:
    return Item(frame, run=lambda lw: lw.out.extend(ops))


def _same(state: str) -> str:
    return state


@contextmanager
def _hoisted(ctx: Context, results: dict[int, Any]) -> Iterator[None]:
    """Expressions read as the locations ``results`` gives while inside."""
    ctx.hoisted.update(results)
    try:
        yield
    finally:
        for k in results:
            ctx.hoisted.pop(k, None)


def _expressions_of(st: ast.Stmt) -> Any:
    """What `sub_expressions` walks for statement ``st``: a declaration's initializer,
    an ``if``'s condition (its branches are statements of their own)."""
    if isinstance(st, ast.VarDecl):
        return st.init
    return st.cond if isinstance(st, ast.IfStmt) else st


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
