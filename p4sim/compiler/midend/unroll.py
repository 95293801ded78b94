"""Loop unrolling: ``for`` loops BMv2 cannot run as loops become straight-line code.

BMv2 has loops only inside actions (``_jump``/``_jump_if_zero`` primitives): its
control graph and its parser states cannot loop. So, as p4c's mid-end pass
``UnrollLoops`` does, a loop with compile-time bounds is replaced by one copy of its
body per iteration, the index replaced by its value in each; ``break`` and
``continue`` become boolean flags that guard what follows them. The policy says
which loops must go, and leaves the others to the back end's jump lowering, so a
program whose loops BMv2 already runs compiles to the same JSON:

* in a control's apply block, a loop whose body applies a table or a control (such
  a loop cannot live in the synthesized action of its run);
* in a parser state (only inside an ``if``: P4-16's parser statements have no
  ``for``), every loop;
* ``for (T x in stack)`` everywhere: the stack's size bounds it, ``x`` is a copy of
  each element in turn; ``for (T x in (list<T>) {a, b})`` too: the elements are
  evaluated once, in order, before the first iteration (as p4test does), ``x`` takes
  each value.

Bounds, as p4c finds them: ``for (T x in a..b)`` with constant ``a``, ``b``; or
``for (init; i REL k; update)`` with constant ``k``, ``i`` set to a constant by the
init and changed by exactly one update assignment, never written by the body; the
values are found by running the condition and that update at compile time (with
``i``'s width), up to 1000 iterations. A loop that must be unrolled but has no such
bounds is refused (p4c warns "Can't unroll loop" and BMv2 cannot load the result).

`unroll_loops` rewrites the program in place; it runs first in the mid end, so every
later pass sees the copies as ordinary statements (each a node of its own).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable, Optional

from p4sim.compiler import ast
from p4sim.compiler import types as T
from p4sim.compiler.consteval import const_value
from p4sim.compiler.diagnostics import CompileError

#: p4c's limit: a loop with more iterations is not unrolled.
MAX_ITERATIONS = 1000

#: Fields that annotate a node rather than hold its children (shared by copies).
_SHARED = ("pos", "ref", "type", "enum", "member_pos")

#: A policy: why this loop (found where the policy applies) must be unrolled, as
#: (what the loop is, why BMv2 needs it unrolled); None: leave it to the back end.
Policy = Callable[[ast.ForStmt], Optional[tuple[str, str]]]


def unroll_loops(program: ast.Program) -> None:
    """Unroll, in place, every loop the policy above says BMv2 cannot run."""
    for d in program.decls:
        _unroll_decl(d)


def _unroll_decl(d: ast.Decl) -> None:
    if isinstance(d, (ast.ActionDecl, ast.FunctionDecl)):
        d.body = _Unroller(_in_action).block(d.body)
    elif isinstance(d, ast.ControlDecl):
        for loc in d.locals:
            _unroll_decl(loc)
        d.apply = _Unroller(_in_apply_block).block(d.apply)
    elif isinstance(d, ast.ParserDecl):
        for s in d.states:
            s.stmts = _Unroller(_in_parser_state).stmts(s.stmts)


def _in_action(loop: ast.ForStmt) -> Optional[tuple[str, str]]:
    return None  # BMv2 actions loop with jumps


def _in_apply_block(loop: ast.ForStmt) -> Optional[tuple[str, str]]:
    if _applies_anything(loop):
        return "a for loop that applies a table or a control", "BMv2 has loops only inside actions"
    return None


def _in_parser_state(loop: ast.ForStmt) -> Optional[tuple[str, str]]:
    return "a for loop in a parser state", "a BMv2 parser state cannot loop"


def _applies_anything(node: Any) -> bool:
    """Whether ``.apply(...)`` (a table or a control) is called anywhere in ``node``."""
    if isinstance(node, ast.CallExpr) and isinstance(node.target, ast.MemberExpr) \
            and node.target.member == "apply":
        return True
    if isinstance(node, ast.Node):
        return any(_applies_anything(getattr(node, f.name)) for f in dataclasses.fields(node)
                   if f.name not in _SHARED)
    if isinstance(node, (list, tuple)):
        return any(_applies_anything(x) for x in node)
    return False


class _Unroller:
    def __init__(self, must_unroll: Policy):
        self.must_unroll = must_unroll

    def block(self, b: ast.BlockStmt) -> ast.BlockStmt:
        b.stmts = self.stmts(b.stmts)
        return b

    def stmts(self, stmts: list[ast.Stmt]) -> list[ast.Stmt]:
        return [self.stmt(s) for s in stmts]

    def stmt(self, s: ast.Stmt) -> ast.Stmt:
        """``s`` with the loops inside it unrolled where the policy says so; an
        unrolled loop's copies are walked again, for the loops nested in it."""
        if isinstance(s, ast.BlockStmt):
            return self.block(s)
        if isinstance(s, ast.IfStmt):
            s.then = self.stmt(s.then)
            if s.else_ is not None:
                s.else_ = self.stmt(s.else_)
        elif isinstance(s, ast.SwitchStmt):
            for c in s.cases:
                if c.body is not None:
                    c.body = self.block(c.body)
        elif isinstance(s, ast.ForInStmt):
            return self.stmt(_unroll_list(s) if isinstance(s.collection, ast.CastExpr) else _unroll_stack(s))
        elif isinstance(s, ast.ForStmt):
            why = self.must_unroll(s)
            if why is None:
                s.body = self.stmt(s.body)
                return s
            bounds = _range_bounds(s) if s.in_range else _counted_bounds(s)
            if isinstance(bounds, str):
                what, need = why
                raise CompileError(f"{what} must be unrolled ({need}), but {bounds}", s.pos, "unsupported")
            index, values = bounds
            kept = not s.in_range  # the range's bookkeeping goes; init and updates stay
            return self.stmt(_unroll(s.pos, s.body, index, values, s.init if kept else [], s.update if kept else []))
        return s


# ---------------------------------------------------------------- bounds


#: A loop's index variable and the values it takes, in order.
Bounds = tuple[ast.VarDecl, list[int]]

def _range_bounds(loop: ast.ForStmt) -> "Bounds | str":
    """``for (T x in a..b)`` (built as `ast.ForStmt` with ``in_range``); a string
    says why it cannot be unrolled."""
    index, last = loop.init[0], loop.init[1]
    assert isinstance(index, ast.VarDecl) and isinstance(last, ast.VarDecl)
    lo = const_value(index.init) if index.init is not None else None
    hi = const_value(last.init) if last.init is not None else None
    if lo is None or hi is None:
        return "its range's bounds must be compile-time constants to unroll it"
    if _writes(loop.body, index):
        return f"its body writes the loop variable '{index.name}'"
    if hi - lo + 1 > MAX_ITERATIONS:
        return f"it has more than {MAX_ITERATIONS} iterations"
    return index, list(range(lo, hi + 1))


def _counted_bounds(loop: ast.ForStmt) -> "Bounds | str":
    """p4c's rule for ``for (init; i REL k; update)``; a string says why it
    cannot be unrolled."""
    not_constant = "its bounds must be compile-time constants to unroll it (the condition must compare the " \
                   "loop variable with a constant, the variable be set to a constant by the loop's init and " \
                   "changed only by one update assignment)"
    cond = loop.cond
    if not (isinstance(cond, ast.BinaryExpr) and cond.op in ("<", "<=", ">", ">=", "==", "!=")):
        return not_constant
    var = next((side.ref for side, other in ((cond.left, cond.right), (cond.right, cond.left))
                if isinstance(side, ast.PathExpr) and isinstance(side.ref, ast.VarDecl)
                and const_value(other) is not None), None)
    if var is None:
        return not_constant
    start: Optional[int] = None
    for s in loop.init:
        if s is var:
            start = const_value(s.init) if s.init is not None else None
        elif _writes(s, var):
            start = const_value(s.rhs) if isinstance(s, ast.AssignStmt) and _names(s.lhs, var) else None
    steps = [u for u in loop.update if _writes(u, var)]
    if start is None or len(steps) != 1 or not isinstance(steps[0], ast.AssignStmt) \
            or not _names(steps[0].lhs, var) or _writes(loop.body, var):
        return not_constant
    values: list[int] = []
    value: Optional[int] = start
    while value is not None and const_value(_substitute(cond, var, value)):
        if len(values) == MAX_ITERATIONS:
            return f"it has more than {MAX_ITERATIONS} iterations"
        values.append(value)
        value = const_value(_substitute(steps[0].rhs, var, value))
    if value is None:
        return not_constant
    return var, values


def _names(e: ast.Expr, var: ast.VarDecl) -> bool:
    return isinstance(e, ast.PathExpr) and e.ref is var


def _root(e: Any) -> Any:
    while isinstance(e, (ast.MemberExpr, ast.IndexExpr, ast.SliceExpr)):
        e = e.expr
    return e.ref if isinstance(e, ast.PathExpr) else None


def _writes(node: Any, var: ast.VarDecl) -> bool:
    """Whether ``node`` may write ``var``: an assignment to it (or part of it), or an
    ``out``/``inout`` argument naming it."""
    if isinstance(node, ast.AssignStmt) and _root(node.lhs) is var:
        return True
    if isinstance(node, ast.CallExpr):
        params = _params(node)
        for i, a in enumerate(node.args):
            p = next((q for q in params if q.name == a.name), None) if a.name is not None \
                else (params[i] if i < len(params) else None)
            if _root(a.value) is var and p is not None and p.direction in ("out", "inout"):
                return True
    if isinstance(node, ast.Node):
        return any(_writes(getattr(node, f.name), var) for f in dataclasses.fields(node) if f.name not in _SHARED)
    if isinstance(node, (list, tuple)):
        return any(_writes(x, var) for x in node)
    return False


def _params(call: ast.CallExpr) -> list[ast.Param]:
    """The parameters a call binds its arguments to; [] for built-in methods
    (``push_front(n)``...), whose arguments are all read only."""
    t = call.target
    ref = getattr(t, "ref", None)
    if isinstance(ref, ast.ExternFunctionDecl):
        return ref.proto.params
    if isinstance(ref, (ast.ActionDecl, ast.FunctionDecl, ast.MethodProto)):
        return ref.params
    if isinstance(t, ast.MemberExpr) and t.member == "apply":
        block = t.expr.type
        if isinstance(block, (T.ControlT, T.ParserT)) and block.decl is not None:
            return block.decl.params
    return []


# ---------------------------------------------------------------- rewriting


def _unroll(pos: Any, body: ast.Stmt, index: ast.VarDecl, values: list[int], init: list[ast.Stmt],
            updates: list[ast.Stmt], each: Callable[[int], list[ast.Stmt]] = lambda v: []) -> ast.BlockStmt:
    """The loop as p4c's ``doUnroll`` writes it: the init; then per value, ``each``
    of it, the body and the updates with the index replaced by the value; when the
    body has a ``break``, each next iteration (starting with the updates) inside
    ``if (!break_flag)``."""
    flags = _JumpFlags(pos)
    body = flags.strip(body)
    out: list[ast.Stmt] = list(init) + flags.declarations()
    block = out
    for v in values:
        block.extend(each(v))
        block.append(_substitute(body, index, v))
        if flags.brk is not None:
            rest: list[ast.Stmt] = []
            block.append(ast.IfStmt(pos, flags.not_set(flags.brk), ast.BlockStmt(pos, rest)))
            block = rest
        block.extend(_substitute(u, index, v) for u in updates)
    return ast.BlockStmt(pos, out)


def _unroll_stack(loop: ast.ForInStmt) -> ast.BlockStmt:
    """``for (T x in s)``: per element ``k``, ``T x = s[k];`` then the body (the
    stack is an l-value without side effects, so evaluating it once or per
    element is the same)."""
    stack_t = loop.collection.type
    assert isinstance(stack_t, T.StackT)
    pos = loop.pos
    index_t = T.BitT(32)
    index = ast.VarDecl(pos, f"__{loop.var.name}_index", ast.BitTypeRef(pos, "bit", _constant(pos, 32, index_t)))
    index.type_ref.type = index_t
    element = ast.IndexExpr(loop.collection.pos, loop.collection, _ref(pos, index))
    element.type = stack_t.element
    loop.var.init = element
    body = ast.BlockStmt(loop.body.pos, [loop.var, loop.body])
    return _unroll(pos, body, index, list(range(stack_t.size)), [], [])


def _unroll_list(loop: ast.ForInStmt) -> ast.BlockStmt:
    """``for (T x in (list<T>) {e0, e1})``: ``T x__0 = e0; T x__1 = e1; T x;`` first
    (each element evaluated once, in order, before the first iteration: a body that
    changes what an element reads does not change the values), then per element
    ``k``, ``x = x__k;`` and the body."""
    cast = loop.collection
    assert isinstance(cast, ast.CastExpr) and isinstance(cast.expr, ast.ListExpr)
    pos, var = loop.pos, loop.var
    values = [ast.VarDecl(e.pos, f"__{var.name}_{k}", var.type_ref, e) for k, e in enumerate(cast.expr.elements)]
    unused = ast.VarDecl(pos, f"__{var.name}_index", var.type_ref)  # nothing reads it: the values do

    def assign(k: int) -> list[ast.Stmt]:
        return [ast.AssignStmt(pos, _ref(pos, var), _ref(pos, values[k]))]

    return _unroll(pos, loop.body, unused, list(range(len(values))), [*values, var], [], assign)


class _JumpFlags:
    """p4c's ``RemoveBreakContinue``: ``break``/``continue`` (of this loop, not of
    loops nested in it) set a flag; whatever follows a statement that may have set
    one runs only if neither is set. The break flag also guards the next iterations;
    the continue flag is cleared at the start of each."""

    def __init__(self, pos: Any):
        self.pos = pos
        self.brk: Optional[ast.VarDecl] = None
        self.cont: Optional[ast.VarDecl] = None

    def declarations(self) -> list[ast.Stmt]:
        """The flags, declared before the first iteration, both false."""
        return [f for f in (self.brk, self.cont) if f is not None]

    def strip(self, body: ast.Stmt) -> ast.Stmt:
        stripped, _ = self._stmt(body)
        if self.cont is not None:
            return ast.BlockStmt(body.pos, [self.set(self.cont, False), stripped])
        return stripped

    def _flag(self, which: str) -> ast.VarDecl:
        if getattr(self, which) is None:
            tref = ast.BaseTypeRef(self.pos, "bool")
            tref.type = T.BoolT()
            setattr(self, which, ast.VarDecl(self.pos, f"__{which}_flag", tref, _bool(self.pos, False)))
        return getattr(self, which)

    def set(self, flag: ast.VarDecl, value: bool) -> ast.Stmt:
        return ast.AssignStmt(self.pos, _ref(self.pos, flag), _bool(self.pos, value))

    def not_set(self, flag: ast.VarDecl) -> ast.Expr:
        e = ast.UnaryExpr(self.pos, "!", _ref(self.pos, flag))
        e.type = T.BoolT()
        return e

    def _stmts(self, stmts: list[ast.Stmt]) -> tuple[list[ast.Stmt], bool]:
        out: list[ast.Stmt] = []
        for i, s in enumerate(stmts):
            stripped, jumps = self._stmt(s)
            out.append(stripped)
            if jumps:
                rest, _ = self._stmts(stmts[i + 1:])
                if rest:
                    out.append(ast.IfStmt(s.pos, self._neither(), ast.BlockStmt(s.pos, rest)))
                return out, True
        return out, False

    def _neither(self) -> ast.Expr:
        """``!brk && !cont`` over the flags set so far."""
        tests = [self.not_set(f) for f in (self.brk, self.cont) if f is not None]
        e = tests[0]
        for t in tests[1:]:
            e = ast.BinaryExpr(self.pos, "&&", e, t)
            e.type = T.BoolT()
        return e

    def _stmt(self, s: ast.Stmt) -> tuple[ast.Stmt, bool]:
        """``s`` without this loop's jumps, and whether it may have jumped."""
        if isinstance(s, ast.BreakStmt):
            return self.set(self._flag("brk"), True), True
        if isinstance(s, ast.ContinueStmt):
            return self.set(self._flag("cont"), True), True
        if isinstance(s, ast.BlockStmt):
            stmts, jumps = self._stmts(s.stmts)
            return ast.BlockStmt(s.pos, stmts), jumps
        if isinstance(s, ast.IfStmt):
            then, j1 = self._stmt(s.then)
            else_, j2 = self._stmt(s.else_) if s.else_ is not None else (None, False)
            return ast.IfStmt(s.pos, s.cond, then, else_), j1 or j2
        if isinstance(s, ast.SwitchStmt):
            cases, jumps = [], False
            for c in s.cases:
                body, j = self._stmt(c.body) if c.body is not None else (None, False)
                cases.append(ast.SwitchCase(c.pos, c.label, body))
                jumps = jumps or j
            return ast.SwitchStmt(s.pos, s.expr, cases), jumps
        return s, False


def _bool(pos: Any, value: bool) -> ast.Expr:
    e = ast.BoolLit(pos, value)
    e.type = T.BoolT()
    return e


def _ref(pos: Any, decl: ast.VarDecl) -> ast.PathExpr:
    e = ast.PathExpr(pos, decl.name)
    e.ref, e.type = decl, decl.type_ref.type
    return e


def _substitute(node: Any, var: ast.VarDecl, value: int) -> Any:
    """A copy of ``node`` (a statement or expression) with every read of ``var`` the
    constant ``value`` (p4c's ``ReplaceIndexRefs``); the declarations inside are copied too, and the names that
    denote them denote the copies, so each copy has variables of its own."""
    copies: dict[int, Any] = {}

    def clone(n: Any) -> Any:
        if isinstance(n, list):
            return [clone(x) for x in n]
        if isinstance(n, tuple):
            return tuple(clone(x) for x in n)
        if not isinstance(n, ast.Node) or isinstance(n, ast.TypeRef):
            return n  # type syntax and plain values are shared
        if isinstance(n, ast.PathExpr) and n.ref is var:
            return _constant(n.pos, value, n.type)
        if isinstance(n, ast.AssignStmt) and _names(n.lhs, var):  # the update: writes stay writes
            return ast.AssignStmt(n.pos, copy.copy(n.lhs), clone(n.rhs))
        c = copy.copy(n)
        copies[id(n)] = c
        for f in dataclasses.fields(n):
            if f.name not in _SHARED:
                setattr(c, f.name, clone(getattr(n, f.name)))
        ref = getattr(n, "ref", None)
        if ref is not None and id(ref) in copies:
            c.ref = copies[id(ref)]
        return c

    return clone(node)


def _constant(pos: Any, value: int, t: Any) -> ast.IntLit:
    lit = ast.IntLit(pos, value, t.width, t.signed) if isinstance(t, T.BitT) else ast.IntLit(pos, value)
    lit.type = t
    return lit
