"""Constant folding: the value of a compile-time-known expression.

The back end needs plain integers wherever BMv2 JSON holds a number (table sizes,
extern sizes, entry keys, select cases, slice bounds, shift amounts, constants in
expressions), and P4 lets all of these be written as constant expressions
(``1 << 10``, ``MAX_PORTS - 1``, ``(bit<8>) 0x1ff``). One evaluator, with P4's width
semantics (results of ``bit<W>`` wrap modulo 2**W, ``int<W>`` is two's complement),
serves all of them. The width arithmetic itself (wrapping, saturation, slices) is the
front end's, from `p4sim.compiler.consteval`, so both evaluators agree on it; this one
differs in answering None (not an error) for a non-constant and 0/1 for booleans.
"""

from __future__ import annotations

from typing import Optional

from p4sim.compiler import ast
from p4sim.compiler import types as T
from p4sim.compiler.consteval import bit_slice, saturate, wrap
from p4sim.compiler.diagnostics import CompileError


def _bool(v: Optional[int]) -> Optional[int]:
    return None if v is None else int(bool(v))


def const_value(e: ast.Expr) -> Optional[int]:
    """The integer value of ``e`` (booleans as 0/1; serializable enum members as their
    value), or None when ``e`` is not known at compile time."""
    t = e.type
    if isinstance(e, ast.IntLit):
        return wrap(e.value, t) if isinstance(t, (T.BitT, T.NewT)) else e.value
    if isinstance(e, ast.BoolLit):
        return int(e.value)
    if isinstance(e, ast.PathExpr):
        ref = e.ref
        if isinstance(ref, ast.ConstDecl):
            v = const_value(ref.value)
            return None if v is None else wrap(v, t)
        return _enum_member_value(ref, t)
    if isinstance(e, ast.MemberExpr):
        v = _enum_member_value(e.ref, t)
        if v is not None:
            return v
        if e.member == "size" and isinstance(e.expr.type, T.StackT):
            return e.expr.type.size
        return None
    if isinstance(e, ast.CastExpr):
        v = const_value(e.expr)
        return None if v is None else wrap(v, t)
    if isinstance(e, ast.UnaryExpr):
        v = const_value(e.expr)
        if v is None:
            return None
        if e.op == "!":
            return int(not v)
        if e.op == "-":
            return wrap(-v, t)
        if e.op == "~":
            return wrap(~v, t)
        return v
    if isinstance(e, ast.BinaryExpr):
        return _binary(e)
    if isinstance(e, ast.TernaryExpr):
        c = const_value(e.cond)
        if c is None:
            return None
        return const_value(e.then if c else e.else_)
    if isinstance(e, ast.SliceExpr):
        v, hi, lo = const_value(e.expr), const_value(e.hi), const_value(e.lo)
        if v is None or hi is None or lo is None:
            return None
        return bit_slice(v, hi, lo)
    return None


def _enum_member_value(ref: object, t: object) -> Optional[int]:
    if isinstance(ref, ast.EnumMember) and ref.value is not None:
        v = const_value(ref.value)
        return None if v is None else wrap(v, t)
    return None


def _binary(e: ast.BinaryExpr) -> Optional[int]:
    a, b = const_value(e.left), const_value(e.right)
    if a is None or b is None:
        return None
    op, t = e.op, e.type
    width = _width(e.left.type)
    if op in ("&&", "||"):
        return int(bool(a) and bool(b)) if op == "&&" else int(bool(a) or bool(b))
    if op in ("==", "!=", "<", ">", "<=", ">="):
        return int({"==": a == b, "!=": a != b, "<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op])
    if op == "++":
        wb = _width(e.right.type)
        if wb is None:
            return None
        return wrap(((a & ((1 << (width or 0)) - 1) if width else a) << wb) | (b & ((1 << wb) - 1)), t)
    if op in ("/", "%") and b == 0:
        raise CompileError("division by zero in a constant expression", e.pos)
    if op in ("|+|", "|-|"):
        return saturate(a + b if op == "|+|" else a - b, t)
    r = {
        "+": lambda: a + b,
        "-": lambda: a - b,
        "*": lambda: a * b,
        "/": lambda: a // b,
        "%": lambda: a % b,
        "<<": lambda: a << b,
        ">>": lambda: a >> b,
        "&": lambda: a & b,
        "|": lambda: a | b,
        "^": lambda: a ^ b,
    }.get(op)
    if r is None:
        return None
    return wrap(r(), t)


def _width(t: object) -> Optional[int]:
    if isinstance(t, T.NewT):
        t = t.base
    if isinstance(t, T.BitT):
        return t.width
    if isinstance(t, T.BoolT):
        return 1
    return None


def require_const(e: ast.Expr, what: str) -> int:
    """`const_value` or a CompileError saying that ``what`` must be a constant."""
    v = const_value(e)
    if v is None:
        raise CompileError(f"{what} must be a compile-time constant", e.pos)
    return v
