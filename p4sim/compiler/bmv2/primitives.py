"""The primitive list an action body or a parser state becomes, and how it is written.

`PrimitiveLowerer` holds the output (``out``) and the ways to add to it: a primitive
(``prim``), a field write (``set_field``, ``write_slice``), a temporary, and the
destination of a primitive's ``out`` argument (``field_dest`` / ``finish_dest``).
Statements (`statements.StmtLowerer`) and extern calls (`externs`) both write through
it, as p4c's action and extern converters both build primitives on one conversion
context; extern calls therefore need nothing of the statement lowering itself.
"""

from __future__ import annotations

from typing import Any, Optional

from p4sim.compiler import ast
from p4sim.compiler import types as T
from p4sim.compiler.bmv2.context import Scope
from p4sim.compiler.bmv2.expressions import ExprLowerer, to_data
from p4sim.compiler.bmv2.jsonutil import as_param, expr_node, hex_node, mask, source_info
from p4sim.compiler.bmv2.storage import DynFieldLoc, FieldLoc, base_type, scalar_width
from p4sim.compiler.consteval import const_value
from p4sim.compiler.diagnostics import CompileError


class PrimitiveLowerer(ExprLowerer):
    """Expressions of one scope, and the primitives written with them."""

    def __init__(self, scope: Scope, parser: bool = False):
        super().__init__(scope, parser)
        self.out: list[dict] = []
        self.pos: Any = None  # of the statement being lowered, for source_info

    def prim(self, op: str, params: list[dict]) -> dict:
        p = {"op": op, "parameters": params}
        info = source_info(self.pos)
        if info is not None:
            p["source_info"] = info
        self.out.append({"op": "primitive", "parameters": [p]} if self.parser else p)
        return p

    def set_field(self, dst: Any, value: dict) -> None:
        if isinstance(base_type(dst.type), T.VarbitT):
            self.prim("assign_VL", [as_param(dst.node()), as_param(value)])
            return
        if self.parser and isinstance(dst, FieldLoc):
            self.out.append({"op": "set", "parameters": [dst.node(), as_param(value)]})
        else:
            self.prim("assign", [as_param(dst.node()), as_param(value)])

    def temp(self, t: T.Type, base: str = "tmp") -> FieldLoc:
        return self.ctx.layout.scalar(base, t)

    def evaluated_first(self, e: ast.Expr) -> Optional[FieldLoc]:
        """``x + f(x)`` where ``f`` writes ``x``: the left operand is read before the
        call runs, as p4c's side-effect ordering copies it into a temporary."""
        if const_value(e) is not None:
            return None
        tmp = self.temp(e.type)
        self.set_field(tmp, to_data(self.rv(e), e.type))
        return tmp

    def require_const(self, e: ast.Expr) -> int:
        v = const_value(e)
        if v is None:
            raise CompileError("expected a compile-time constant", e.pos)
        return v

    def write_slice(self, lhs: ast.SliceExpr, value: dict) -> None:
        """``f[hi:lo] = v`` as ``f = (f & ~m) | ((v << lo) & m)`` (p4c's lowering);
        a slice of a slice (``f[7:4][1:0]``) is the slice of ``f`` it denotes."""
        hi, lo = self.require_const(lhs.hi), self.require_const(lhs.lo)
        base = lhs.expr
        while isinstance(base, ast.SliceExpr):
            outer_lo = self.require_const(base.lo)
            hi, lo = hi + outer_lo, lo + outer_lo
            base = base.expr
        dst = self.loc(base)
        w = scalar_width(dst.type)
        m = mask(hi - lo + 1) << lo
        keep = expr_node("&", dst.node(), hex_node(mask(w) & ~m, w))
        shifted = expr_node("<<", value, hex_node(lo)) if lo else value
        self.set_field(dst, expr_node("|", keep, expr_node("&", shifted, hex_node(m, w))))

    # ------------------------------------------------------------------ destinations of primitives
    def field_dest(self, e: ast.Expr) -> tuple[dict, Any]:
        """A field node for an ``out`` argument of a primitive; if ``e`` is not a plain
        field, a temporary plus the location to copy it to afterwards."""
        if isinstance(e, ast.DontCareExpr):
            raise CompileError("'_' cannot receive a value here", e.pos, "unsupported")
        if isinstance(e, ast.SliceExpr):
            tmp = self.temp(e.type)
            return tmp.node(), (e, tmp)
        loc = self.loc(e)
        if isinstance(loc, FieldLoc) and not isinstance(base_type(loc.type), T.BoolT):
            return loc.node(), None
        if isinstance(loc, (FieldLoc, DynFieldLoc)):
            tmp = self.temp(e.type)
            return tmp.node(), (loc, tmp)
        raise CompileError("expected a field here", e.pos)

    def finish_dest(self, pending: Any) -> None:
        if pending is None:
            return
        target, tmp = pending
        if isinstance(target, ast.SliceExpr):
            self.write_slice(target, tmp.node())
        else:
            self.set_field(target, tmp.node())
