"""Compile-time evaluation of constant expressions, with P4's width semantics: the one
constant evaluator of the compiler.

The front end needs values where the language demands a constant: widths in
``bit<W>``, header stack sizes, slice bounds, serializable enum values, tuple indices.
The mid and back ends need plain integers wherever BMv2 JSON or P4Info holds a number
(table and extern sizes, entry keys, select cases, shift amounts, constants inside
expressions), and fold conditions known at compile time. All of them ask this module,
so a constant has one value everywhere. Expressions are evaluated over their resolved
names (``PathExpr.ref`` to a `ConstDecl`, an `EnumMember`) and their types: a result of
type ``bit<W>`` wraps modulo 2**W, ``int<W>`` is two's complement, an unsized integer
is exact.

What is constant is what p4c's constant folding folds: ``false && x`` is false and
``true || x`` is true whatever ``x`` is; a header stack's ``size`` is constant, its
``lastIndex`` is not (it follows ``nextIndex`` at run time).

`evaluate` raises `CompileError` when the expression is not constant; `try_evaluate`
returns None instead; `const_value` is `try_evaluate` with booleans as 0/1, the form
BMv2 JSON holds them in.
"""

from __future__ import annotations

from typing import Optional, Union

from p4sim.compiler import ast
from p4sim.compiler import types as T
from p4sim.compiler.diagnostics import CompileError

Value = Union[int, bool]


# ---- P4's width arithmetic ----


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


def _width(t: Optional[T.Type]) -> Optional[int]:
    """The bit width of a value of type ``t`` (a type definition by its base type;
    a bool is one bit); None when it has none."""
    if isinstance(t, T.NewT):
        t = t.base
    if isinstance(t, T.BitT):
        return t.width
    if isinstance(t, T.BoolT):
        return 1
    return None


# ---- evaluation ----
# The evaluator answers None for "not constant" rather than raising: the back end asks
# about every expression it lowers and most are not constant, so that answer must be
# cheap. Only `evaluate`, when it reports an error, looks for the operand to blame.


def evaluate(e: ast.Expr, what: str = "value") -> Value:
    """The value of constant expression ``e``; CompileError naming ``what`` (at the
    operand that is not constant) if it has none."""
    v = _value(e)
    if v is None:
        raise CompileError(f"{what} must be a compile-time constant", _culprit(e).pos)
    return v


def try_evaluate(e: ast.Expr) -> Optional[Value]:
    """The value of ``e``, or None when it is not known at compile time."""
    return _value(e)


def const_value(e: ast.Expr) -> Optional[int]:
    """The integer value of ``e`` (booleans as 0/1; serializable enum members as their
    value), or None when ``e`` is not known at compile time."""
    v = _value(e)
    return None if v is None else int(v)


def _value(e: ast.Expr) -> Optional[Value]:
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
            v = _value(ref.value)
            return v if v is None or isinstance(v, bool) else wrap(v, t)
        if isinstance(ref, ast.EnumMember) and ref.value is not None:
            v = _value(ref.value)
            return None if v is None else wrap(int(v), t)
        if isinstance(e, ast.MemberExpr) and e.member == "size" and isinstance(e.expr.type, T.StackT):
            return e.expr.type.size
        return None
    if isinstance(e, ast.CastExpr):
        v = _value(e.expr)
        if v is None:
            return None
        return bool(v) if isinstance(t, T.BoolT) else wrap(int(v), t)
    if isinstance(e, ast.UnaryExpr):
        v = _value(e.expr)
        if v is None:
            return None
        if e.op == "!":
            return not v
        if e.op == "-":
            return wrap(-int(v), t)
        if e.op == "~":
            return wrap(~int(v), t)
        return v
    if isinstance(e, ast.TernaryExpr):
        c = _value(e.cond)
        return None if c is None else _value(e.then if c else e.else_)
    if isinstance(e, ast.SliceExpr):
        v, hi, lo = _value(e.expr), _value(e.hi), _value(e.lo)
        if v is None or hi is None or lo is None:
            return None
        return bit_slice(int(v), int(hi), int(lo))
    if isinstance(e, ast.BinaryExpr):
        return _binary(e)
    return None


_ARITHMETIC = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a // b, "%": lambda a, b: a % b, "&": lambda a, b: a & b,
    "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "<<": lambda a, b: a << b,
    ">>": lambda a, b: a >> b,
}
_COMPARISONS = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    ">": lambda a, b: a > b, "<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b,
}


def _binary(e: ast.BinaryExpr) -> Optional[Value]:
    op = e.op
    a = _value(e.left)
    if a is None:
        return None
    if op in ("&&", "||"):
        if bool(a) == (op == "||"):  # false && x, true || x
            return bool(a)
        b = _value(e.right)
        return None if b is None else bool(b)
    b = _value(e.right)
    if b is None:
        return None
    if op in _COMPARISONS:
        return _COMPARISONS[op](a, b)
    a, b = int(a), int(b)
    t = e.type
    if op == "++":
        lw, rw = _width(e.left.type), _width(e.right.type)
        if rw is None:
            return None
        high = a & ((1 << lw) - 1) if lw else a
        return wrap((high << rw) | (b & ((1 << rw) - 1)), t)
    if op in ("|+|", "|-|"):
        return saturate(a + b if op == "|+|" else a - b, t)
    if op in ("/", "%") and b == 0:
        raise CompileError("division by zero in a constant expression", e.pos)
    if op not in _ARITHMETIC:  # ``&&&`` and ``..`` build keys, not values
        return None
    return wrap(_ARITHMETIC[op](a, b), t)


def _culprit(e: ast.Expr) -> ast.Expr:
    """What keeps ``e`` from being constant: its first operand, in evaluation order,
    that is not constant itself, followed down; ``e`` when every operand is."""
    for sub in _operands(e):
        if _value(sub) is None:
            return _culprit(sub)
    return e


def _operands(e: ast.Expr) -> tuple[ast.Expr, ...]:
    if isinstance(e, (ast.PathExpr, ast.MemberExpr)):
        ref = e.ref
        if isinstance(ref, (ast.ConstDecl, ast.EnumMember)) and ref.value is not None:
            return (ref.value,)
        return ()
    if isinstance(e, (ast.CastExpr, ast.UnaryExpr)):
        return (e.expr,)
    if isinstance(e, ast.TernaryExpr):
        c = _value(e.cond)
        return (e.cond,) if c is None else (e.then if c else e.else_,)
    if isinstance(e, ast.SliceExpr):
        return (e.expr, e.hi, e.lo)
    if isinstance(e, ast.BinaryExpr):
        return (e.left, e.right)
    return ()
