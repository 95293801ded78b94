"""Compile-time evaluation of constant expressions, with P4's width semantics.

The front end needs values where the language demands a constant: widths in
``bit<W>``, header stack sizes, slice bounds, serializable enum values; the back end
needs them for table sizes, entry keys and select cases. Expressions are evaluated
over their resolved names (``PathExpr.ref`` to a `ConstDecl`, an `EnumMember`) and
their types: a result of type ``bit<W>`` wraps modulo 2**W, ``int<W>`` is two's
complement, an unsized integer is exact.

`evaluate` raises `CompileError` when the expression is not constant; `try_evaluate`
returns None instead.
"""

from __future__ import annotations

from typing import Optional, Union

from p4sim.compiler import ast
from p4sim.compiler import types as T
from p4sim.compiler.diagnostics import CompileError

Value = Union[int, bool]


class NotConstant(Exception):
    """Internal: the expression depends on run-time state."""

    def __init__(self, expr: ast.Expr):
        super().__init__("not constant")
        self.expr = expr


# ---- P4's width arithmetic (shared with the mid end's midend.constfold) ----


def wrap(value: int, t: Optional[T.Type]) -> int:
    """``value`` reduced to the range of ``t`` (unchanged for unsized/other types):
    ``bit<W>`` modulo 2**W, ``int<W>`` two's complement; a type definition or a
    serializable enum by its underlying type."""
    if isinstance(t, T.NewT):
        t = t.base
    if isinstance(t, T.EnumT) and t.underlying is not None:
        t = t.underlying
    if isinstance(t, T.BitT):
        value &= (1 << t.width) - 1
        if t.signed and value >> (t.width - 1):
            value -= 1 << t.width
    return value


def saturate(value: int, t: Optional[T.Type]) -> int:
    """``value`` clamped to the range of ``t`` (``|+|``, ``|-|``); unchanged for an
    unsized or non-bit type."""
    if isinstance(t, T.BitT):
        if t.signed:
            lo, hi = -(1 << (t.width - 1)), (1 << (t.width - 1)) - 1
        else:
            lo, hi = 0, (1 << t.width) - 1
        return max(lo, min(hi, value))
    return value


def bit_slice(value: int, hi: int, lo: int) -> int:
    """``value[hi:lo]``: bits ``hi`` down to ``lo``, as an unsigned number."""
    return (value >> lo) & ((1 << (hi - lo + 1)) - 1)


# ---- evaluation ----


def evaluate(e: ast.Expr, what: str = "value") -> Value:
    """The value of constant expression ``e``; CompileError naming ``what`` if not."""
    try:
        return _eval(e)
    except NotConstant as nc:
        raise CompileError(f"{what} must be a compile-time constant", nc.expr.pos) from None


def try_evaluate(e: ast.Expr) -> Optional[Value]:
    try:
        return _eval(e)
    except NotConstant:
        return None


def _int(e: ast.Expr) -> int:
    v = _eval(e)
    return int(v)


def _eval(e: ast.Expr) -> Value:
    t = e.type
    if isinstance(e, ast.IntLit):
        if e.width is not None:
            return wrap(e.value, T.BitT(e.width, e.signed))
        return wrap(e.value, t)
    if isinstance(e, ast.BoolLit):
        return e.value
    if isinstance(e, (ast.PathExpr, ast.MemberExpr)):
        ref = e.ref
        if isinstance(ref, ast.ConstDecl):
            v = _eval(ref.value)
            return v if isinstance(v, bool) else wrap(v, t)
        if isinstance(ref, ast.EnumMember) and ref.value is not None:
            return wrap(_int(ref.value), t)
        if isinstance(e, ast.MemberExpr) and isinstance(e.expr.type, T.StackT):
            if e.member == "size":
                return e.expr.type.size
            if e.member == "lastIndex":
                return e.expr.type.size - 1
        raise NotConstant(e)
    if isinstance(e, ast.CastExpr):
        v = _eval(e.expr)
        if isinstance(t, T.BoolT):
            return bool(v)
        return wrap(int(v), t)
    if isinstance(e, ast.UnaryExpr):
        v = _eval(e.expr)
        if e.op == "!":
            return not v
        if e.op == "-":
            return wrap(-int(v), t)
        if e.op == "~":
            if isinstance(t, T.BitT):
                return wrap(~int(v), t)
            raise NotConstant(e)
        return v
    if isinstance(e, ast.TernaryExpr):
        return _eval(e.then) if _eval(e.cond) else _eval(e.else_)
    if isinstance(e, ast.SliceExpr):
        return bit_slice(_int(e.expr), _int(e.hi), _int(e.lo))
    if isinstance(e, ast.BinaryExpr):
        return _binary(e)
    raise NotConstant(e)


def _binary(e: ast.BinaryExpr) -> Value:
    op = e.op
    if op == "&&":
        return bool(_eval(e.left)) and bool(_eval(e.right))
    if op == "||":
        return bool(_eval(e.left)) or bool(_eval(e.right))
    a, b = _eval(e.left), _eval(e.right)
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    a, b = int(a), int(b)
    t = e.type
    if op == "<":
        return a < b
    if op == ">":
        return a > b
    if op == "<=":
        return a <= b
    if op == ">=":
        return a >= b
    if op == "++":
        rw = e.right.type.width if isinstance(e.right.type, T.BitT) else 0
        return wrap((a << rw) | (b & ((1 << rw) - 1)), t)
    if op in ("|+|", "|-|"):
        return saturate(a + b if op == "|+|" else a - b, t)
    if op in ("/", "%") and b == 0:
        raise CompileError("division by zero", e.pos)
    if op in ("&&&", ".."):
        raise NotConstant(e)
    result = {
        "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
        "/": lambda: a // b, "%": lambda: a % b, "&": lambda: a & b, "|": lambda: a | b,
        "^": lambda: a ^ b, "<<": lambda: a << b, ">>": lambda: a >> b,
    }[op]()
    return wrap(result, t)
