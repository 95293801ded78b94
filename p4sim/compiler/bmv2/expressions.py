"""P4 expressions -> BMv2 JSON expression trees, with P4's width semantics.

BMv2 evaluates expressions with infinite precision and only truncates when a value is
stored into a field, so every operation whose P4 result could leave the range of its
type is wrapped exactly as p4c wraps it: ``(a + b) & 0xff`` for ``bit<8>``,
``two_comp_mod(a + b, 8)`` for ``int<8>``, ``usat_cast``/``sat_cast`` for saturating
arithmetic. Booleans and data are distinct in BMv2: a ``bool`` stored in a field is
read through ``d2b`` and written through ``b2d``.

`ExprLowerer.rv` returns a type-value node (``{"type": ..., "value": ...}``) in the
natural form of the expression's type (boolean for ``bool``); `loc` returns where an
l-value lives (`storage.Loc`) or what a name denotes (`context` values).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any, Iterator, Optional

from p4sim.compiler import ast
from p4sim.compiler import types as T
from p4sim.compiler.bmv2.context import PacketValue, Scope
from p4sim.compiler.bmv2.jsonutil import bool_node, expr_node, hex_node, mask
from p4sim.compiler.bmv2.storage import (
    ConstLoc, DynFieldLoc, DynHeaderLoc, FieldLoc, HeaderLoc, ParamLoc, StackLoc, StructLoc,
    UnionLoc, UnionStackLoc, ValueLoc, base_type, scalar_width,
)
from p4sim.compiler.consteval import const_value
from p4sim.compiler.diagnostics import CompileError


# Why a run-time index on a stack of header unions is refused, by "in a parser":
# p4sim keeps such a stack as one union per element (as p4c's mid end does).
_UNION_INDEX_WHERE = {
    True: "in a parser state (p4sim keeps one union per element; p4c's FlattenHeaderUnionStack requires "
          "the same)",
    False: "outside the statements, conditions, switch values, table keys and call arguments that p4sim "
           "unrolls over the elements (it keeps one union per element)",
}


def const_node(value: int, t: T.Type) -> dict:
    bt = base_type(t)
    if isinstance(bt, T.BoolT):
        return bool_node(bool(value))
    return hex_node(value, scalar_width(bt))


def sub_expressions(root: Any) -> Iterator[ast.Expr]:
    """Every expression in ``root`` (an expression, an assignment or a call
    statement), outermost first, call arguments included."""
    todo: deque[Any] = deque([root])
    while todo:
        n = todo.popleft()
        if isinstance(n, ast.Argument):
            todo.append(n.value)
            continue
        if isinstance(n, ast.Expr):
            yield n
        elif not isinstance(n, (ast.AssignStmt, ast.CallStmt)):
            continue
        for f in dataclasses.fields(n):
            v = getattr(n, f.name)
            if isinstance(v, (ast.Expr, ast.Argument)):
                todo.append(v)
            elif isinstance(v, list):
                todo.extend(x for x in v if isinstance(x, (ast.Expr, ast.Argument)))


def has_call(e: Any) -> bool:
    """Whether evaluating ``e`` runs a call with possible effects (a function body, an
    extern method), i.e. anything but ``isValid()``: such operands must not be
    evaluated when ``&&``/``||``/``?:`` skip them."""
    return any(isinstance(n, ast.CallExpr)
               and not (isinstance(n.target, ast.MemberExpr) and n.target.member == "isValid")
               for n in sub_expressions(e))


def to_data(node: dict, t: T.Type) -> dict:
    """A node of P4 type ``t`` as BMv2 data (booleans converted with ``b2d``)."""
    if not isinstance(base_type(t), T.BoolT):
        return node
    if node["type"] == "bool":
        return hex_node(int(node["value"]), 1)
    if node["type"] == "expression" and node["value"]["op"] == "d2b":
        return node["value"]["right"]
    return expr_node("b2d", None, node)


def d2b(node: dict) -> dict:
    return expr_node("d2b", None, node)


def wrap(node: dict, t: T.Type) -> dict:
    """Reduce an infinite-precision result to the range of ``t`` (p4c's masking)."""
    bt = base_type(t)
    if not isinstance(bt, T.BitT):
        return node
    if bt.signed:
        return expr_node("two_comp_mod", node, hex_node(bt.width))
    return expr_node("&", node, hex_node(mask(bt.width), bt.width))


def valid_node(h: Any) -> dict:
    if isinstance(h, HeaderLoc):
        return d2b({"type": "field", "value": [h.name, "$valid$"]})
    if isinstance(h, UnionLoc):
        return expr_node("valid_union", None, h.node())
    if isinstance(h, DynHeaderLoc):
        return expr_node("valid", None, h.node())
    raise TypeError(h)


def _is_lookahead(e: ast.Expr) -> bool:
    return isinstance(e, ast.CallExpr) and isinstance(e.target, ast.MemberExpr) and e.target.member == "lookahead"


def lookahead_field(e: ast.MemberExpr) -> Optional[dict]:
    """``pkt.lookahead<h_t>().f`` -> ``{"type": "lookahead", "value": [offset, width]}``."""
    path: list[str] = []
    cur: ast.Expr = e
    while isinstance(cur, ast.MemberExpr):
        path.append(cur.member)
        cur = cur.expr
    if not _is_lookahead(cur):
        return None
    t, offset = cur.type, 0
    for name in reversed(path):
        bt = base_type(t)
        if not isinstance(bt, T.StructLikeT):
            return None
        for f in bt.fields:
            if f.name == name:
                t = f.type
                break
            offset += T.width_of(f.type)
    w = scalar_width(t)
    return None if w is None else {"type": "lookahead", "value": [offset, w]}


class ExprLowerer:
    """Converts expressions in one scope; subclasses add statements and inlining."""

    def __init__(self, scope: Scope, parser: bool = False):
        self.scope = scope
        self.ctx = scope.ctx
        self.parser = parser

    # ------------------------------------------------------------------ l-values
    def loc(self, e: ast.Expr) -> Any:
        if id(e) in self.ctx.hoisted:
            return self.ctx.hoisted[id(e)]
        if isinstance(e, ast.PathExpr):
            return self.scope.lookup(e.ref, e)
        if isinstance(e, ast.MemberExpr):
            base = self.loc(e.expr)
            m = e.member
            if isinstance(base, (HeaderLoc, DynHeaderLoc)):
                return base.field(m, e.pos)
            if isinstance(base, StructLoc):
                if m not in base.fields:
                    raise CompileError(f"no field '{m}'", e.pos)
                return base.fields[m]
            if isinstance(base, UnionLoc):
                if m not in base.members:
                    raise CompileError(f"header union has no member '{m}'", e.pos)
                return base.members[m]
            if isinstance(base, (StackLoc, UnionStackLoc)) and m == "next":
                raise CompileError("'next' can only be used as the argument of extract in a parser",
                                   e.pos, "unsupported")
            if isinstance(base, UnionStackLoc) and m == "last":
                # a statement or select key using it is split on the next index first
                raise CompileError("'last' of a stack of header unions is only supported in an assignment, a call, "
                                   "a declaration, an if condition or a select key of a parser state", e.pos, "unsupported")
            if isinstance(base, StackLoc) and m == "last":
                idx = expr_node("last_stack_index", None, base.node())
                return DynHeaderLoc(expr_node("dereference_header_stack", base.node(), idx), base.type.element)
            raise CompileError(f"'{m}' is not a storage location", e.pos)
        if isinstance(e, ast.IndexExpr):
            base = self.loc(e.expr)
            if isinstance(base, UnionStackLoc):
                i = const_value(e.index)
                if i is None:  # statements in controls are unrolled over the elements first
                    raise CompileError("a stack of header unions can only be indexed by a compile-time constant "
                                       + _UNION_INDEX_WHERE[self.parser], e.index.pos, "unsupported")
                if not 0 <= i < base.type.size:
                    raise CompileError(f"index {i} is out of bounds for a stack of size {base.type.size}",
                                       e.index.pos)
                return base.elements[i]
            if not isinstance(base, StackLoc):
                raise CompileError("only header stacks can be indexed", e.pos)
            i = const_value(e.index)
            if i is not None:
                if not 0 <= i < base.type.size:
                    raise CompileError(f"index {i} is out of bounds for a stack of size {base.type.size}", e.index.pos)
                return base.elements[i]
            idx = self.data(e.index)
            return DynHeaderLoc(expr_node("dereference_header_stack", base.node(), idx), base.type.element)
        raise CompileError("expression is not an l-value", e.pos)

    # ------------------------------------------------------------------ r-values
    def data(self, e: ast.Expr) -> dict:
        return to_data(self.rv(e), e.type)

    def rv(self, e: ast.Expr) -> dict:
        if id(e) in self.ctx.hoisted:  # computed before its statement (table results)
            return self.loc_value(self.ctx.hoisted[id(e)], e)
        t = e.type
        bt = base_type(t) if t is not None else None
        if isinstance(e, ast.IntLit):
            return hex_node(const_value(e), scalar_width(bt) if isinstance(bt, T.BitT) else None)
        if isinstance(e, ast.BoolLit):
            return bool_node(e.value)
        if isinstance(bt, (T.BitT, T.BoolT)) and not isinstance(e, ast.CallExpr):
            v = const_value(e)
            if v is not None:
                return const_node(v, bt)
        if isinstance(bt, (T.ErrorT, T.EnumT)) and isinstance(e, (ast.MemberExpr, ast.PathExpr)):
            c = self.enum_or_error(e)
            if c is not None:
                return c
        if isinstance(e, (ast.PathExpr, ast.MemberExpr, ast.IndexExpr)):
            if isinstance(e, ast.MemberExpr):
                special = self.member_value(e)
                if special is not None:
                    return special
            return self.loc_value(self.loc(e), e)
        if isinstance(e, ast.UnaryExpr):
            return self.unary(e)
        if isinstance(e, ast.BinaryExpr):
            return self.binary(e)
        if isinstance(e, ast.TernaryExpr):
            c = const_value(e.cond)
            if c is not None:
                return self.rv(e.then if c else e.else_)
            if has_call(e.then) or has_call(e.else_):
                return self.conditional_value(e)
            then, else_ = self.rv(e.then), self.rv(e.else_)
            if not isinstance(bt, T.BoolT):
                then, else_ = to_data(then, e.then.type), to_data(else_, e.else_.type)
            return expr_node("?", then, else_, cond=self.rv(e.cond))
        if isinstance(e, ast.CastExpr):
            return self.cast(e)
        if isinstance(e, ast.SliceExpr):
            hi, lo = const_value(e.hi), const_value(e.lo)
            if hi is None or lo is None:
                raise CompileError("slice bounds must be compile-time constants", e.pos)
            v = self.data(e.expr)
            if lo:
                v = expr_node(">>", v, hex_node(lo))
            return expr_node("&", v, hex_node(mask(hi - lo + 1), hi - lo + 1))
        if isinstance(e, ast.CallExpr):
            return self.call_value(e)
        raise CompileError(f"this expression is not supported by the BMv2 back end ({type(e).__name__})",
                           e.pos, "unsupported")

    def loc_value(self, loc: Any, e: ast.Expr) -> dict:
        if isinstance(loc, (FieldLoc, DynFieldLoc, ParamLoc)):
            n = loc.node()
            return d2b(n) if isinstance(base_type(loc.type), T.BoolT) else n
        if isinstance(loc, ConstLoc):
            return const_node(loc.value, loc.type)
        if isinstance(loc, ValueLoc):
            return loc.node()
        if isinstance(loc, (HeaderLoc, DynHeaderLoc, StackLoc, UnionLoc)):
            return loc.node()
        raise CompileError("this name cannot be used as a value here", e.pos)

    def enum_or_error(self, e: ast.Expr) -> Optional[dict]:
        bt = base_type(e.type)
        ref = getattr(e, "ref", None)
        if isinstance(bt, T.ErrorT):
            if isinstance(e, ast.MemberExpr) and self.names_type(e.expr, "error"):
                return hex_node(self.ctx.error_value(e.member, e.pos), 32)
            return None
        t = e.type
        if isinstance(t, T.EnumT) and (isinstance(ref, ast.EnumMember) or
                                       (isinstance(e, ast.MemberExpr) and self.names_type(e.expr, t.name))):
            name = ref.name if isinstance(ref, ast.EnumMember) else e.member  # type: ignore[union-attr]
            if name not in t.members:
                raise CompileError(f"enum {t.name} has no member '{name}'", e.pos)
            i = t.members.index(name)
            if t.underlying is not None:
                return hex_node(t.values[i], t.underlying.width)
            return hex_node(i, 32)
        return None

    @staticmethod
    def names_type(e: ast.Expr, name: str) -> bool:
        if isinstance(e, ast.TypeNameExpr):
            tr = e.type_ref
            return getattr(tr, "name", None) == name
        if isinstance(e, ast.PathExpr):
            return e.name == name and not isinstance(e.ref, (ast.Param, ast.VarDecl))
        return False

    def member_value(self, e: ast.MemberExpr) -> Optional[dict]:
        """Members that are values rather than storage: stack size/lastIndex, fields
        of a ``lookahead<H>()`` (a lookahead at the field's bit offset)."""
        la = lookahead_field(e)
        if la is not None:
            if not self.parser:
                raise CompileError("lookahead is only allowed in a parser", e.pos)
            return la
        if isinstance(e.expr.type, T.StackT):
            if e.member == "size":
                return hex_node(e.expr.type.size, 32)
            if e.member == "lastIndex":
                stack = self.loc(e.expr)
                if isinstance(stack, UnionStackLoc):  # nextIndex - 1, in bit<32> as P4 has it
                    nxt = self.ctx.layout.union_stack_next(stack)
                    return wrap(expr_node("-", nxt.node(), hex_node(1, 32)), T.BitT(32))
                return expr_node("last_stack_index", None, stack.node())
        if e.member in ("hit", "miss", "action_run"):
            raise CompileError(f"'{e.member}' is only supported in an if or switch condition or "
                               "where a statement always evaluates it", e.pos, "unsupported")
        return None

    def unary(self, e: ast.UnaryExpr) -> dict:
        if e.op == "!":
            return expr_node("not", None, self.rv(e.expr))
        v = self.data(e.expr)
        if e.op == "+":
            return v
        if e.op == "~":
            return wrap(expr_node("~", None, v), e.type)
        if e.op == "-":
            return wrap(expr_node("-", hex_node(0), v), e.type)
        raise CompileError(f"unknown unary operator '{e.op}'", e.pos)

    def binary(self, e: ast.BinaryExpr) -> dict:
        op = e.op
        if op in ("&&", "||"):
            left = const_value(e.left)
            if left is not None:  # the right operand runs only when it decides
                decided = bool(left) == (op == "||")
                return bool_node(bool(left)) if decided else self.rv(e.right)
            if has_call(e.right):
                return self.short_circuit(e)
            return expr_node("and" if op == "&&" else "or", self.rv(e.left), self.rv(e.right))
        lt = base_type(e.left.type)
        if has_call(e.right) and id(e.left) not in self.ctx.hoisted and isinstance(lt, (T.BitT, T.BoolT)):
            first = self.evaluated_first(e.left)  # as it reads before the call's effects
            if first is not None:
                self.ctx.hoisted[id(e.left)] = first
                try:
                    return self.binary(e)
                finally:
                    del self.ctx.hoisted[id(e.left)]
        if op in ("==", "!="):
            if isinstance(lt, T.BoolT):
                return expr_node(op, self.rv(e.left), self.rv(e.right))
            if isinstance(lt, (T.HeaderT, T.HeaderUnionT)):
                return expr_node(op, self.loc(e.left).node(), self.loc(e.right).node())
            if isinstance(lt, (T.StructT, T.TupleT, T.StackT)):
                return self.aggregate_equality(e)
            return expr_node(op, self.data(e.left), self.data(e.right))
        if op in ("<", ">", "<=", ">="):
            return expr_node(op, self.data(e.left), self.data(e.right))
        a, b = self.data(e.left), self.data(e.right)
        t = e.type
        if op in ("+", "-", "*", "<<"):
            return wrap(expr_node(op, a, b), t)
        if op in (">>", "&", "|", "^", "/", "%"):
            return expr_node(op, a, b)
        if op in ("|+|", "|-|"):
            bt = base_type(t)
            inner = expr_node("+" if op == "|+|" else "-", a, b)
            return expr_node("sat_cast" if bt.signed else "usat_cast", inner, hex_node(bt.width))
        if op == "++":
            lw = scalar_width(e.left.type)
            rw = scalar_width(e.right.type)
            if base_type(e.left.type).signed:
                a = expr_node("&", a, hex_node(mask(lw), lw))
            if base_type(e.right.type).signed:
                b = expr_node("&", b, hex_node(mask(rw), rw))
            node = expr_node("|", expr_node("<<", a, hex_node(rw)), b)
            return wrap(node, t) if base_type(t).signed else node
        raise CompileError(f"operator '{op}' is not supported here", e.pos, "unsupported")

    def aggregate_equality(self, e: ast.BinaryExpr) -> dict:
        """Structs, tuples and header stacks compare member by member (BMv2 compares
        only data, headers and unions; p4c's SimplifyComparisons expands the rest)."""
        out = self.equal_locs(self.loc(e.left), self.loc(e.right), e)
        return out if e.op == "==" else expr_node("not", None, out)

    def equal_locs(self, a: Any, b: Any, e: ast.Expr) -> dict:
        if isinstance(a, (HeaderLoc, DynHeaderLoc, UnionLoc)):
            return expr_node("==", a.node(), b.node())
        if isinstance(a, StackLoc):
            parts = [expr_node("==", x.node(), y.node()) for x, y in zip(a.elements, b.elements)]
        elif isinstance(a, StructLoc):
            parts = [self.equal_locs(fa, b.fields[name], e) for name, fa in a.fields.items()]
        elif isinstance(a, (FieldLoc, DynFieldLoc)):
            return expr_node("==", a.node(), b.node())
        else:
            raise CompileError("this comparison is not supported", e.pos, "unsupported")
        out: Optional[dict] = None
        for c in parts:
            out = c if out is None else expr_node("and", out, c)
        return out or bool_node(True)

    def cast(self, e: ast.CastExpr) -> dict:
        src, dst = base_type(e.expr.type), base_type(e.type)
        v = self.rv(e.expr)
        if isinstance(dst, T.BoolT):
            return v if isinstance(src, T.BoolT) else d2b(v)
        if isinstance(src, T.BoolT):
            v, src = to_data(v, src), T.BitT(1)
        if isinstance(dst, T.BitT):
            if not isinstance(src, T.BitT):
                return wrap(v, dst)
            if dst.signed:
                if src.signed and src.width <= dst.width:
                    return v
                return wrap(v, dst)
            if src.signed or src.width > dst.width:
                return wrap(v, dst)
            return v
        return v

    def call_value(self, e: ast.CallExpr) -> dict:
        t = e.target
        if isinstance(t, ast.MemberExpr):
            if t.member == "isValid":
                return valid_node(self.loc(t.expr))
            if t.member == "lookahead":
                base = self.loc(t.expr)
                if isinstance(base, PacketValue) and self.parser:
                    w = scalar_width(e.type)
                    if w is None:
                        raise CompileError("lookahead of a non-bit type is only supported as an "
                                           "assignment to a header, a struct or a stack", e.pos, "unsupported")
                    return {"type": "lookahead", "value": [0, w]}
        return self.call_with_result(e)

    def call_with_result(self, e: ast.CallExpr) -> dict:
        raise CompileError("a call cannot be used as a value here", e.pos, "unsupported")

    def evaluated_first(self, e: ast.Expr) -> Any:
        """Where operand ``e``, left of a call, holds the value it reads before that
        call runs (P4-16 8.1: operands are evaluated left to right), or None when it
        needs no copy. An expression alone cannot run calls, so here it never does;
        `PrimitiveLowerer` copies the operand into a temporary."""
        return None

    def short_circuit(self, e: ast.BinaryExpr) -> dict:
        """``a && f()`` / ``a || f()`` where ``f`` has effects: needs control flow
        (statements lower it, see `StmtLowerer`); a bare expression cannot."""
        raise CompileError(f"'{e.op}' with a call on its right needs a statement context here", e.pos,
                           "unsupported")

    def conditional_value(self, e: ast.TernaryExpr) -> dict:
        """``c ? f() : g()`` with calls: only one branch may run (see `StmtLowerer`)."""
        raise CompileError("'?:' with calls in its branches needs a statement context here", e.pos,
                           "unsupported")
