"""P4 statements -> BMv2 primitives (action bodies) or parser operations.

Action bodies become a flat primitive list; ``if`` becomes ``_jump_if_zero``/``_jump``
with absolute offsets, as p4c emits it. Calls to actions and functions are inlined:
their body is lowered in a scope whose parameters are bound to the arguments
(``in`` arguments copied into temporaries unless constant, ``out``/``inout`` aliased),
``return`` jumps to the end of the inlined body. In a parser state the same lowering
produces parser ops: assignments are ``set``, everything else a ``primitive`` op.
"""

from __future__ import annotations

from typing import Any, Optional

from p4sim.compiler import ast
from p4sim.compiler import types as T
from p4sim.compiler.bmv2.context import (
    ActionValue, BlockValue, ExternValue, FunctionValue, PacketValue, Scope, TableValue, ordered_args,
)
from p4sim.compiler.bmv2.expressions import const_node, has_call, sub_expressions, to_data
from p4sim.compiler.bmv2.externs import extern_function, extern_method, extern_method_value
from p4sim.compiler.bmv2.jsonutil import as_param, expr_node, hex_node
from p4sim.compiler.bmv2.primitives import PrimitiveLowerer
from p4sim.compiler.bmv2.storage import (
    ConstLoc, DynFieldLoc, DynHeaderLoc, FieldLoc, HeaderLoc, ParamLoc, StackLoc, StructLoc, UnionLoc,
    UnionStackLoc, ValueLoc, base_type, scalar_width,
)
from p4sim.compiler.bmv2.unionstacks import invalidate_union, pop_front, push_front
from p4sim.compiler.consteval import const_value
from p4sim.compiler.diagnostics import CompileError


class StmtLowerer(PrimitiveLowerer):
    def __init__(self, scope: Scope, parser: bool = False):
        super().__init__(scope, parser)
        # one frame per inlined body: (jumps to patch at its end, result location)
        self.returns: list[tuple[list[dict], Any]] = []
        # one frame per enclosing for loop: (break jumps, continue jumps) to patch
        self.loops: list[tuple[list[dict], list[dict]]] = []
        # BMv2's exit primitive only marks the packet; the action's later primitives
        # would still run. An exit with code after it jumps to the action's end
        # (`finish_exits`); ``tail`` says the statement being lowered ends the action.
        self.tail = False
        self.exit_jumps: list[dict] = []
        # Inside an action called from here (``call_depth`` > 0), an exit first
        # leaves that action so that its copy-outs run (P4-16 12.5), recording it in
        # ``exited``; after the call, a set flag keeps leaving.
        self.call_depth = 0
        self.exited: Optional[FieldLoc] = None

    # ------------------------------------------------------------------ statements
    def stmts(self, stmts: list[ast.Stmt]) -> None:
        tail = self.tail
        for i, s in enumerate(stmts):
            self.tail = tail and i == len(stmts) - 1
            self.stmt(s)
        self.tail = tail

    def finish_exits(self) -> None:
        """Point the jumps after non-final exits at the current end of the code."""
        for j in self.exit_jumps:
            j["parameters"][0] = hex_node(len(self.out))
        self.exit_jumps = []

    def stmt(self, s: ast.Stmt) -> None:
        self.pos = s.pos
        if isinstance(s, (ast.AssignStmt, ast.CallStmt)) and not self.parser:
            ix = runtime_index(s, self.ctx.hoisted, skip=_in_call_arguments(s))
            if ix is not None:
                self.unroll_index(s, ix)
                return
        if isinstance(s, ast.AssignStmt):
            self.assign(s.lhs, s.rhs)
        elif isinstance(s, ast.CallStmt):
            self.call(s.call)
        elif isinstance(s, ast.BlockStmt):
            self.stmts(s.stmts)
        elif isinstance(s, ast.IfStmt):
            self.if_(s)
        elif isinstance(s, ast.VarDecl):
            self.var_decl(s)
        elif isinstance(s, ast.ConstDecl):
            self.scope.bind(s, ConstLoc(self.require_const(s.value), self.ctx.types.resolve(s.type_ref)))
        elif isinstance(s, ast.ExitStmt):
            if self.parser:
                raise CompileError("exit is not allowed in a parser", s.pos)
            self.prim("exit", [])
            if self.call_depth:
                self.set_field(self.exit_flag(), hex_node(1, 1))
                self.returns[-1][0].append(self.prim("_jump", [hex_node(0)]))
            elif not self.tail:
                self.exit_jumps.append(self.prim("_jump", [hex_node(0)]))
        elif isinstance(s, ast.ReturnStmt):
            self.return_(s)
        elif isinstance(s, ast.EmptyStmt):
            pass
        elif isinstance(s, ast.SwitchStmt):
            self.switch_on_value(s)
        elif isinstance(s, ast.ForStmt):
            self.for_(s)
        elif isinstance(s, ast.BreakStmt):
            self.loops[-1][0].append(self.prim("_jump", [hex_node(0)]))
        elif isinstance(s, ast.ContinueStmt):
            self.loops[-1][1].append(self.prim("_jump", [hex_node(0)]))
        else:
            raise CompileError(f"statement not supported here ({type(s).__name__})", s.pos, "unsupported")

    def unroll_index(self, s: ast.Stmt, ix: ast.IndexExpr) -> None:
        """A statement using stack element ``ix`` (a header or a header union) chosen
        at run time, as p4c's HSIndexSimplifier writes it: the index is evaluated once,
        then the statement runs with the one element it names (``if (i == 0) s[0]
        else if (i == 1) ...``), so a stack of unions is reached at constant indexes.
        An index past the stack's end runs none of them; an assignment that only
        reads such an element gets an undefined value (a temporary nothing writes),
        as p4c's ``hsVar`` does. BMv2's ``dereference_header_stack`` would instead
        fail on an out-of-range index."""
        stack = self.loc(ix.expr)
        idx = self.temp(ix.index.type)
        self.set_field(idx, self.data(ix.index))
        w = scalar_width(ix.index.type)
        tail, self.tail = self.tail, False
        ends: list[dict] = []
        for k, element in enumerate(stack.elements):
            if k >= 1 << w:
                break
            test = expr_node("b2d", None, expr_node("==", idx.node(), hex_node(k, w)))
            skip = self.prim("_jump_if_zero", [as_param(test), hex_node(0)])
            self.ctx.hoisted[id(ix)] = element
            try:
                self.stmt(s)
            finally:
                del self.ctx.hoisted[id(ix)]
            ends.append(self.prim("_jump", [hex_node(0)]))
            skip["parameters"][1] = hex_node(len(self.out))
        if isinstance(s, ast.AssignStmt) and not any(x is ix for x in sub_expressions(s.lhs)):
            if isinstance(s.lhs, ast.SliceExpr):
                self.write_slice(s.lhs, self.temp(s.lhs.type, "undefined").node())
            elif not isinstance(s.lhs, ast.DontCareExpr):
                dst = self.loc(s.lhs)
                if isinstance(dst, (FieldLoc, DynFieldLoc)):
                    self.set_field(dst, self.temp(dst.type, "undefined").node())
        for j in ends:
            j["parameters"][0] = hex_node(len(self.out))
        self.tail = tail

    def var_decl(self, s: ast.VarDecl) -> None:
        loc = self.scope.find(s)  # control-flow lowering pre-allocates its locals
        if loc is None:
            loc = self.ctx.layout.storage(s.name, self.ctx.types.resolve(s.type_ref), s.pos)
            self.scope.bind(s, loc)
        if s.init is not None:
            self.assign_value(loc, s.init)

    def assign_value(self, dst: Any, e: ast.Expr) -> None:
        """``dst = e`` for a declaration, a return, a condition: a stack element chosen
        at run time in ``e`` is unrolled as in an assignment statement
        (`unroll_index`), so that a stack of header unions is reached too."""
        if self.parser or runtime_index(e, self.ctx.hoisted) is None:
            self.assign_to(dst, e)
            return
        self.assign_with(dst, e, loc_is_target=True)

    def value(self, e: ast.Expr, base: str = "tmp") -> dict:
        """The value of ``e`` as a data node, for a condition or a ``switch``: a stack
        element chosen at run time in it is first computed into a temporary by an
        unrolled statement (`assign_value`), so past the end nothing is dereferenced."""
        if self.parser or runtime_index(e, self.ctx.hoisted) is None:
            return self.data(e)
        tmp = self.temp(e.type, base)
        self.assign_with(tmp, e, loc_is_target=True)
        return tmp.node()

    def assign_with(self, loc: Any, e: ast.Expr, loc_is_target: bool) -> None:
        """``loc = e`` or ``e = loc`` for a location ``loc``, lowered as an assignment
        statement (``loc`` stands in as a path), so that a stack element chosen at run
        time in ``e`` is unrolled (`unroll_index`)."""
        ref = ast.PathExpr(e.pos, "tmp")
        ref.type = e.type
        self.ctx.hoisted[id(ref)] = loc
        try:
            self.stmt(ast.AssignStmt(e.pos, ref, e) if loc_is_target else ast.AssignStmt(e.pos, e, ref))
        finally:
            del self.ctx.hoisted[id(ref)]

    def if_(self, s: ast.IfStmt) -> None:
        c = const_value(s.cond)
        if c is not None:
            branch = s.then if c else s.else_
            if branch is not None:
                self.stmt(branch)
            return
        if self.parser:  # `parsers` splits the state at an if, also in an inlined function
            raise CompileError("if statements here are not supported in a parser state", s.pos, "unsupported")
        jz = self.prim("_jump_if_zero", [as_param(self.value(s.cond, "cond")), hex_node(0)])
        self.stmt(s.then)
        if s.else_ is not None:
            j = self.prim("_jump", [hex_node(0)])
            jz["parameters"][1] = hex_node(len(self.out))
            self.stmt(s.else_)
            j["parameters"][0] = hex_node(len(self.out))
        else:
            jz["parameters"][1] = hex_node(len(self.out))

    def for_(self, s: ast.ForStmt) -> None:
        """A loop as p4c's BMv2 back end writes it in an action: the condition at
        the top (``_jump_if_zero`` to the end), the body, the updates, a ``_jump``
        back; ``continue`` jumps to the updates, ``break`` to the end."""
        if self.parser:  # in a function called from a parser state (the mid end unrolls loops in states)
            raise CompileError("a for loop in a function called from a parser state is not supported by the "
                               "BMv2 back end (a parser state cannot loop)", s.pos, "unsupported")
        self.stmts(s.init)
        top = len(self.out)
        exit_test = None
        if s.cond is not None:
            c = const_value(s.cond)
            if c is not None and not c:
                return
            if c is None:
                exit_test = self.prim("_jump_if_zero", [as_param(to_data(self.rv(s.cond), T.BoolT())),
                                                        hex_node(0)])
        breaks: list[dict] = []
        continues: list[dict] = []
        self.loops.append((breaks, continues))
        tail, self.tail = self.tail, False  # the loop may run again after its body
        self.stmt(s.body)
        self.loops.pop()
        for j in continues:
            j["parameters"][0] = hex_node(len(self.out))
        self.stmts(s.update)
        self.tail = tail
        self.prim("_jump", [hex_node(top)])
        for j in breaks + ([exit_test] if exit_test is not None else []):
            j["parameters"][-1] = hex_node(len(self.out))

    def switch_on_value(self, s: ast.SwitchStmt) -> None:
        """``switch (x) { 1: {...} 2: {...} default: {...} }`` as an if-chain."""
        if isinstance(s.expr.type, (T.ActionEnumT,)):
            raise CompileError("switch on action_run is only allowed in a control's apply block", s.pos)
        ends: list[dict] = []
        pending: list[ast.Expr] = []
        key = self.value(s.expr)
        for case in s.cases:
            pending.append(case.label)
            if case.body is None:
                continue
            labels, pending = pending, []
            if any(isinstance(l, ast.DefaultExpr) for l in labels):
                self.stmt(case.body)
                break
            cond: Optional[dict] = None
            for l in labels:
                c = expr_node("==", key, self.data(l))
                cond = c if cond is None else expr_node("or", cond, c)
            jz = self.prim("_jump_if_zero", [as_param(expr_node("b2d", None, cond)), hex_node(0)])
            self.stmt(case.body)
            ends.append(self.prim("_jump", [hex_node(0)]))
            jz["parameters"][1] = hex_node(len(self.out))
        for j in ends:
            j["parameters"][0] = hex_node(len(self.out))

    def return_(self, s: ast.ReturnStmt) -> None:
        if not self.returns:
            raise CompileError("return outside of an action or function", s.pos)
        jumps, result = self.returns[-1]
        if s.value is not None:
            if result is None:
                raise CompileError("this return must not have a value", s.pos)
            self.assign_value(result, s.value)
        if self.parser:  # a function's last statement: parser states have no jumps (see `parsers`)
            return
        jumps.append(self.prim("_jump", [hex_node(0)]))

    # ------------------------------------------------------------------ control flow in expressions
    def short_circuit(self, e: ast.BinaryExpr) -> dict:
        """``a && f()`` / ``a || f()``: ``f`` runs only when ``a`` does not decide,
        as p4c's side-effect ordering arranges: ``t = a; if (t is undecided) t = f();``."""
        tmp = self.temp(T.BoolT())
        self.set_field(tmp, to_data(self.rv(e.left), T.BoolT()))
        skip = tmp.node() if e.op == "&&" else expr_node("^", tmp.node(), hex_node(1, 1))
        self.guarded(skip, lambda: self.set_field(tmp, to_data(self.rv(e.right), T.BoolT())), e)
        return expr_node("d2b", None, tmp.node())

    def conditional_value(self, e: ast.TernaryExpr) -> dict:
        """``c ? x : y`` with calls in a branch: only the chosen branch runs."""
        tmp = self.ctx.layout.storage("tmp", e.type, e.pos)
        cond = self.temp(T.BoolT())
        self.set_field(cond, to_data(self.rv(e.cond), T.BoolT()))
        self.guarded(cond.node(), lambda: self.assign_to(tmp, e.then), e)
        self.guarded(expr_node("^", cond.node(), hex_node(1, 1)), lambda: self.assign_to(tmp, e.else_), e)
        return self.loc_value(tmp, e)

    def guarded(self, run_if_nonzero: dict, lower: Any, e: ast.Expr) -> None:
        """Emit what ``lower()`` emits, skipped at run time when the data value
        ``run_if_nonzero`` is 0."""
        if self.parser:
            raise CompileError("a call that may be skipped (in '&&', '||' or '?:') is not supported in a "
                               "parser state by the BMv2 back end", e.pos, "unsupported")
        jz = self.prim("_jump_if_zero", [as_param(run_if_nonzero), hex_node(0)])
        lower()
        jz["parameters"][1] = hex_node(len(self.out))

    # ------------------------------------------------------------------ assignment
    def assign(self, lhs: ast.Expr, rhs: ast.Expr) -> None:
        if isinstance(lhs, ast.SliceExpr):
            self.assign_slice(lhs, rhs)
            return
        if isinstance(lhs, ast.DontCareExpr):
            return
        self.assign_to(self.loc(lhs), rhs)

    def assign_slice(self, lhs: ast.SliceExpr, rhs: ast.Expr) -> None:
        self.write_slice(lhs, self.data(rhs))

    def assign_to(self, dst: Any, rhs: ast.Expr) -> None:
        if isinstance(dst, (FieldLoc, DynFieldLoc)):
            self.set_field(dst, to_data(self.rv(rhs), dst.type))
            return
        if isinstance(rhs, (ast.ListExpr, ast.StructInitExpr)):
            self.assign_aggregate(dst, rhs)
            return
        if isinstance(rhs, ast.CallExpr) and isinstance(rhs.target, ast.MemberExpr) \
                and rhs.target.member == "lookahead" and isinstance(dst, (HeaderLoc, StackLoc, StructLoc)):
            self.lookahead_aggregate(dst, rhs)
            return
        if isinstance(rhs, ast.CallExpr) and id(rhs) not in self.ctx.hoisted:
            src = self.call_result_loc(rhs)
        else:  # also a call whose value was computed before the statement
            src = self.loc(rhs)
        self.copy(dst, src, rhs)

    def copy(self, dst: Any, src: Any, where: ast.Node) -> None:
        if isinstance(dst, (FieldLoc, DynFieldLoc)):
            if isinstance(src, (FieldLoc, DynFieldLoc, ParamLoc, ValueLoc)):
                self.set_field(dst, src.node())
            elif isinstance(src, ConstLoc):
                self.set_field(dst, to_data(const_node(src.value, src.type), src.type))
            else:
                raise CompileError("cannot assign this value to a field", where.pos)
        elif isinstance(dst, (HeaderLoc, DynHeaderLoc)) and isinstance(src, (HeaderLoc, DynHeaderLoc)):
            self.prim("assign_header", [as_param(dst.node()), as_param(src.node())])
        elif isinstance(dst, StackLoc) and isinstance(src, StackLoc):
            self.prim("assign_header_stack", [dst.node(), src.node()])
        elif isinstance(dst, UnionLoc) and isinstance(src, UnionLoc):
            self.prim("assign_union", [dst.node(), src.node()])
        elif isinstance(dst, UnionStackLoc) and isinstance(src, UnionStackLoc):
            for d, s in zip(dst.elements, src.elements):
                self.prim("assign_union", [d.node(), s.node()])
            # the next index is part of the stack's value, as BMv2's assign_union_stack copies it
            self.set_field(self.ctx.layout.union_stack_next(dst), self.ctx.layout.union_stack_next(src).node())
        elif isinstance(dst, StructLoc) and isinstance(src, StructLoc):
            for name, d in dst.fields.items():
                self.copy(d, src.fields[name], where)
        else:
            raise CompileError("unsupported assignment", where.pos, "unsupported")

    def assign_aggregate(self, dst: Any, rhs: ast.Expr) -> None:
        """``dst = { ... }``: P4 evaluates the whole right-hand side before writing.

        Writing element by element would let a later element read a field an earlier
        one already overwrote (``hdr.p = { hdr.p.y, hdr.p.x }``), so every
        non-constant element after the first is staged in a temporary first; headers
        become valid only after all elements have been read.
        """
        headers: list[HeaderLoc] = []
        pairs: list[tuple[Any, ast.Expr]] = []
        self.aggregate_pairs(dst, rhs, headers, pairs)
        staged: list[tuple[Any, Any, ast.Expr]] = []
        for i, (d, v) in enumerate(pairs):
            # the first element can be written last only if no later one runs a call
            # (which could change what it reads: elements are evaluated in order)
            first = i == 0 and not any(has_call(w) for _, w in pairs[1:])
            if first or const_value(v) is not None:
                staged.append((d, None, v))
                continue
            if isinstance(d, (FieldLoc, DynFieldLoc)):
                tmp = self.temp(d.type)
            else:
                tmp = self.ctx.layout.storage("tmp", d.type, v.pos)
            self.assign_to(tmp, v)
            staged.append((d, tmp, v))
        for h in headers:
            self.prim("add_header", [h.node()])
        for d, tmp, v in staged:
            if tmp is None:
                self.assign_to(d, v)
            else:
                self.copy(d, tmp, v)

    def aggregate_pairs(self, dst: Any, rhs: ast.Expr, headers: list[HeaderLoc],
                        pairs: list[tuple[Any, ast.Expr]]) -> None:
        """Flatten ``dst = { ... }`` (nested lists included) into (location, value) pairs."""
        if isinstance(dst, StructLoc):
            fields = dst.fields
        elif isinstance(dst, HeaderLoc):
            headers.append(dst)
            fields = {f.name: dst.field(f.name, rhs.pos) for f in dst.type.fields}
        else:
            raise CompileError("a list or struct expression can only be assigned to a struct or header",
                               rhs.pos, "unsupported")
        if isinstance(rhs, ast.ListExpr):
            if len(rhs.elements) != len(fields):
                raise CompileError(f"expected {len(fields)} values, got {len(rhs.elements)}", rhs.pos)
            given = list(zip(fields.values(), rhs.elements))
        else:
            values = dict(rhs.fields)
            missing = [n for n in fields if n not in values]
            if missing:
                raise CompileError(f"missing field '{missing[0]}' in struct expression", rhs.pos)
            given = [(fields[n], values[n]) for n in fields]
        for d, v in given:
            if isinstance(v, (ast.ListExpr, ast.StructInitExpr)) and not isinstance(d, (FieldLoc, DynFieldLoc)):
                self.aggregate_pairs(d, v, headers, pairs)
            else:
                pairs.append((d, v))

    def lookahead_aggregate(self, dst: Any, rhs: ast.CallExpr) -> None:
        """``x = pkt.lookahead<T>()`` for a header, or a struct or stack of them (and
        of bit-like fields): every field from the bits ahead, in declaration order,
        each header made valid first (as p4c's ExpandLookahead: BMv2's add_header
        zeroes the fields of a header it makes valid)."""
        if not self.parser:
            raise CompileError("lookahead is only allowed in a parser", rhs.pos)
        offset = 0

        def fill(loc: Any) -> None:
            nonlocal offset
            if isinstance(loc, HeaderLoc):
                self.prim("add_header", [loc.node()])
                for f in loc.leaves():
                    fill(f)
            elif isinstance(loc, StackLoc):
                for element in loc.elements:
                    fill(element)
            elif isinstance(loc, StructLoc):
                for f in loc.fields.values():
                    fill(f)
            else:
                w = scalar_width(loc.type) if isinstance(loc, FieldLoc) else None
                if w is None:
                    raise CompileError("lookahead into a varbit field or a header union is not supported",
                                       rhs.pos, "unsupported")
                self.set_field(loc, {"type": "lookahead", "value": [offset, w]})
                offset += w

        fill(dst)

    # ------------------------------------------------------------------ calls
    def call(self, c: ast.CallExpr) -> None:
        t = c.target
        if isinstance(t, ast.PathExpr):
            ref = t.ref
            if isinstance(ref, ast.ExternFunctionDecl):
                extern_function(self, ref, c)
                return
            v = self.scope.lookup(ref, t)
            if isinstance(v, ActionValue):
                self.inline_action(v, c)
                return
            if isinstance(v, FunctionValue):
                # a value-returning function called as a statement: the value is dropped
                rt = self.ctx.types.resolve(v.decl.return_type)
                result = None if isinstance(rt, T.VoidT) else self.ctx.layout.storage("retval", rt, c.pos)
                self.inline_function(v.decl, c, result)
                return
            raise CompileError(f"'{t.name}' cannot be called", t.pos)
        if isinstance(t, ast.MemberExpr):
            base = self.loc(t.expr)
            m = t.member
            if isinstance(base, (HeaderLoc, DynHeaderLoc)):
                if m == "setValid":
                    self.prim("add_header", [as_param(base.node())])
                elif m == "setInvalid":
                    self.prim("remove_header", [as_param(base.node())])
                elif m != "isValid":
                    raise CompileError(f"headers have no method '{m}'", t.pos)
                return
            if isinstance(base, (StackLoc, UnionStackLoc)) and m in ("push_front", "pop_front"):
                n = self.require_const(c.args[0].value) if c.args else 1
                if isinstance(base, UnionStackLoc):
                    (push_front if m == "push_front" else pop_front)(self, base, n)
                else:
                    self.prim("push" if m == "push_front" else "pop", [base.node(), hex_node(n)])
                return
            if isinstance(base, ExternValue):
                extern_method(self, base, m, c)
                return
            if isinstance(base, PacketValue):
                self.packet_call(base, m, c)
                return
            if isinstance(base, TableValue):
                raise CompileError("tables cannot be applied inside actions or functions", c.pos)
            if isinstance(base, BlockValue):
                raise CompileError("controls and parsers cannot be applied here", c.pos)
        raise CompileError("unsupported call", c.pos, "unsupported")

    def packet_call(self, pkt: PacketValue, method: str, c: ast.CallExpr) -> None:
        raise CompileError(f"packet method '{method}' is not allowed here", c.pos)

    def bind_params(self, scope: Scope, params: list[ast.Param], c: ast.CallExpr) -> list[tuple[Any, Any]]:
        """Bind callee parameters in ``scope`` to the call's arguments, evaluated here.

        Scalar ``out``/``inout`` arguments are copied in and out (P4-16 6.8): the
        callee works on a temporary, so two parameters bound to the same field, or a
        callee that also reaches the field another way, see what p4c's copies give.
        Returns those copy-outs, to do after the body (in parameter order)."""
        copy_out: list[tuple[Any, Any]] = []
        fresh: list[Any] = []  # out arguments: invalidated once every argument is evaluated
        plan = self.ctx.design.copies
        given = {id(x.value): x for x in c.args}
        for p, a in zip(params, ordered_args(params, c.args, c.pos)):
            if a is None:
                raise CompileError(f"missing argument for parameter '{p.name}'", c.pos)
            pt = self.ctx.types.resolve(p.type_ref)
            arg_id = id(given[id(a)]) if id(a) in given else None
            if p.direction in ("out", "inout"):
                if isinstance(a, ast.DontCareExpr):
                    scope.bind(p, self.ctx.layout.storage(p.name, pt))
                elif isinstance(a, ast.SliceExpr):
                    tmp = self.temp(pt)
                    if p.direction == "inout":
                        self.set_field(tmp, self.data(a))
                    scope.bind(p, tmp)
                    copy_out.append((a, tmp))
                else:
                    loc = self.stable_loc(a) if arg_id in plan.snapshot else self.loc(a)
                    if isinstance(loc, (DynFieldLoc, DynHeaderLoc)) and not self.parser:
                        # a stack element chosen at run time: copied in and out by
                        # statements that unroll the index (p4c's copies, then its
                        # HSIndexSimplifier), so past the end nothing is read or written
                        tmp = self.ctx.layout.storage(p.name, pt, a.pos)
                        if p.direction == "inout":
                            self.assign_value(tmp, a)
                        else:
                            fresh.append(tmp)
                        scope.bind(p, tmp)
                        copy_out.append((a, tmp))
                        continue
                    if isinstance(loc, (FieldLoc, DynFieldLoc)) and scalar_width(pt) is not None:
                        tmp = self.temp(pt)
                        if p.direction == "inout":
                            self.set_field(tmp, loc.node())
                        scope.bind(p, tmp)
                        copy_out.append((loc, tmp))
                        continue
                    if arg_id in plan.copied:  # the callee could tell an alias from a copy
                        tmp = self.ctx.layout.storage(p.name, pt, a.pos)
                        if p.direction == "inout":
                            self.copy(tmp, loc, a)
                        else:
                            fresh.append(tmp)
                        scope.bind(p, tmp)
                        copy_out.append((loc, tmp))
                        continue
                    if p.direction == "out":
                        fresh.append(loc)
                    scope.bind(p, loc)
                continue
            v = const_value(a) if isinstance(base_type(pt), (T.BitT, T.BoolT)) else None
            if v is not None:
                scope.bind(p, ConstLoc(v, pt))
            elif isinstance(a, (ast.PathExpr, ast.MemberExpr)) and not isinstance(base_type(pt), (T.BitT, T.BoolT)) \
                    and arg_id not in plan.copied and (self.parser or runtime_index(a, self.ctx.hoisted) is None):
                scope.bind(p, self.loc(a))  # aggregates/enums read-only: alias
            else:
                tmp = self.ctx.layout.storage(p.name, pt, a.pos)
                self.assign_value(tmp, a)
                scope.bind(p, tmp)
        for loc in fresh:
            self.invalidate(loc)
        return copy_out

    def invalidate(self, loc: Any) -> None:
        """An ``out`` argument starts uninitialized: the headers in it start invalid
        (P4-16 6.8), so a callee that does not write it leaves them invalid."""
        if isinstance(loc, (HeaderLoc, DynHeaderLoc)):
            self.prim("remove_header", [as_param(loc.node())])
        elif isinstance(loc, StackLoc):
            for h in loc.elements:
                self.prim("remove_header", [as_param(h.node())])
        elif isinstance(loc, UnionLoc):
            invalidate_union(self, loc)
        elif isinstance(loc, UnionStackLoc):
            for u in loc.elements:
                self.invalidate(u)
        elif isinstance(loc, StructLoc):
            for f in loc.fields.values():
                self.invalidate(f)

    def copy_out(self, pending: list[tuple[Any, Any]], where: ast.Node) -> None:
        for target, tmp in pending:
            if isinstance(target, ast.Expr) and not isinstance(target, ast.SliceExpr):
                self.assign_with(tmp, target, loc_is_target=False)
            elif isinstance(tmp, (FieldLoc, DynFieldLoc)):
                self.finish_dest((target, tmp))
            else:
                self.copy(target, tmp, where)

    def stable_loc(self, e: ast.Expr) -> Any:
        """The location of l-value ``e`` with its run-time indexes evaluated now, into
        temporaries: a call's copy-out goes to the element chosen when it started
        (P4-16 6.8), even if the callee changes what the index reads."""
        indexes: list[ast.Expr] = []
        x: Any = e
        while isinstance(x, (ast.MemberExpr, ast.IndexExpr)):
            if isinstance(x, ast.IndexExpr) and const_value(x.index) is None:
                indexes.append(x.index)
            x = x.expr
        for i in reversed(indexes):  # outermost stack first, as evaluation reaches them
            self.ctx.hoisted.pop(id(i), None)  # an earlier lowering of this call
            tmp = self.temp(i.type)
            self.set_field(tmp, self.data(i))
            self.ctx.hoisted[id(i)] = tmp
        return self.loc(e)

    def inline_body(self, scope: Scope, body: ast.BlockStmt, result: Any) -> None:
        saved = self.scope
        self.scope = scope
        jumps: list[dict] = []
        tail = self.tail
        body_tail = tail and not self.returns  # an inlined callee's end is not the action's
        self.returns.append((jumps, result))
        try:
            stmts = body.stmts
            for i, s in enumerate(stmts):
                self.tail = body_tail and i == len(stmts) - 1
                self.stmt(s)
        finally:
            self.returns.pop()
            self.scope = saved
            self.tail = tail
        # a return that ends the body would jump to where it already is: drop it
        if body.stmts and isinstance(body.stmts[-1], ast.ReturnStmt) and jumps \
                and self.out and self.out[-1] is jumps[-1]:
            self.out.pop()
            jumps.pop()
        for j in jumps:
            j["parameters"][0] = hex_node(len(self.out))

    def exit_flag(self) -> FieldLoc:
        if self.exited is None:
            self.exited = self.temp(T.BoolT(), "exited")
        return self.exited

    def inline_action(self, av: ActionValue, c: ast.CallExpr) -> None:
        scope = av.scope.child()
        may_exit = _may_exit(av.decl)
        if may_exit:
            self.set_field(self.exit_flag(), hex_node(0, 1))
        pending = self.bind_params(scope, av.decl.params, c)
        self.call_depth += 1
        try:
            self.inline_body(scope, av.decl.body, None)
        finally:
            self.call_depth -= 1
        self.copy_out(pending, c)
        if may_exit:  # the callee exited: keep leaving, past the caller's own copy-outs
            stay = self.prim("_jump_if_zero", [as_param(self.exit_flag().node()), hex_node(0)])
            leave = self.prim("_jump", [hex_node(0)])
            (self.returns[-1][0] if self.call_depth else self.exit_jumps).append(leave)
            stay["parameters"][1] = hex_node(len(self.out))

    def inline_function(self, f: ast.FunctionDecl, c: ast.CallExpr, result: Any) -> None:
        scope = Scope(self.ctx, "", self.ctx.globals)
        pending = self.bind_params(scope, f.params, c)
        self.inline_body(scope, f.body, result)
        self.copy_out(pending, c)

    def call_result_loc(self, c: ast.CallExpr) -> Any:
        t = c.target
        if isinstance(t, ast.PathExpr):
            v = self.scope.lookup(t.ref, t)
            if isinstance(v, FunctionValue):
                rt = self.ctx.types.resolve(v.decl.return_type)
                result = self.ctx.layout.storage("retval", rt, c.pos)
                self.inline_function(v.decl, c, result)
                return result
        return ValueLoc(self.rv(c), c.type)

    def call_with_result(self, e: ast.CallExpr) -> dict:
        t = e.target
        if isinstance(t, ast.PathExpr) and isinstance(self.scope.lookup(t.ref, t), FunctionValue):
            loc = self.call_result_loc(e)
            return self.loc_value(loc, e)
        if isinstance(t, ast.MemberExpr):
            base = self.loc(t.expr) if isinstance(t.expr, (ast.PathExpr, ast.MemberExpr)) else None
            if isinstance(base, ExternValue):
                return extern_method_value(self, base, t.member, e)
        return super().call_with_result(e)


def runtime_index(s: Any, hoisted: dict[int, Any], skip: frozenset[int] = frozenset()) -> Optional[ast.IndexExpr]:
    """The first element of a stack (of headers or of header unions) in ``s`` chosen
    by a run-time index (outermost first), unless one being lowered already stands
    for it or it is one of ``skip``."""
    for n in sub_expressions(s):
        if isinstance(n, ast.IndexExpr) and id(n) not in hoisted and id(n) not in skip \
                and const_value(n.index) is None:
            st = base_type(n.expr.type) if n.expr.type is not None else None
            if isinstance(st, T.StackT) and isinstance(base_type(st.element), (T.HeaderT, T.HeaderUnionT)):
                return n
    return None


def _in_call_arguments(s: ast.Stmt) -> frozenset[int]:
    """The expressions inside the arguments of calls to functions and actions in
    ``s``. A statement is not unrolled for a stack element chosen at run time there:
    p4c inlines the call first, so only its copies in and out are unrolled
    (`bind_params`) and the call itself always runs."""
    inside: set[int] = set()
    for c in sub_expressions(s):
        if isinstance(c, ast.CallExpr) and isinstance(c.target, ast.PathExpr) \
                and isinstance(c.target.ref, (ast.FunctionDecl, ast.ActionDecl)):
            inside.update(id(x) for a in c.args for x in sub_expressions(a))
    return frozenset(inside)


def _may_exit(decl: ast.ActionDecl) -> bool:
    """Whether an action may execute ``exit``, itself or in an action it calls."""
    def walk(n: Any) -> bool:
        if isinstance(n, ast.ExitStmt):
            return True
        if isinstance(n, ast.CallExpr) and isinstance(n.target, ast.PathExpr) \
                and isinstance(n.target.ref, ast.ActionDecl) and walk(n.target.ref.body):
            return True
        if isinstance(n, ast.Node) and not isinstance(n, ast.Decl):
            return any(walk(getattr(n, f)) for f in vars(n) if f not in ("pos", "ref", "type"))
        if isinstance(n, list):
            return any(walk(x) for x in n)
        return False
    return walk(decl.body)
