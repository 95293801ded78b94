"""Operations on a stack of header unions, which p4sim keeps as one union per element.

p4c's mid end flattens such a stack into its elements (FlattenHeaderUnionStack), so
nothing but constant indexes reaches them afterwards; p4sim does the same (no
``header_union_stacks`` in the JSON), which leaves what a BMv2 stack would do by
itself to the compiler:

* ``push_front(n)`` / ``pop_front(n)`` (P4-16 8.18) become per-element union copies
  (``assign_union``: every member header, validity included), ordered so that no
  element is overwritten before it is read, then the vacated elements are made
  invalid (every member) and the next index moves, saturating at the stack's size
  and at 0, as BMv2's P4-16 stacks (``StackP4_16``) do;
* ``u.last`` (a parser-only expression) names the element at the run-time index
  ``nextIndex - 1``: `union_last` finds it so that the parser splits its state on
  the next index, one state per element.

The next index itself is a metadata field (`storage.Layout.union_stack_next`);
``lastIndex`` is computed from it where expressions are lowered.
"""

from __future__ import annotations

from typing import Any, Optional

from p4sim.compiler import ast
from p4sim.compiler import types as T
from p4sim.compiler.bmv2.expressions import sub_expressions
from p4sim.compiler.bmv2.jsonutil import expr_node, hex_node
from p4sim.compiler.bmv2.primitives import PrimitiveLowerer
from p4sim.compiler.bmv2.storage import UnionLoc, UnionStackLoc, base_type


def invalidate_union(lw: PrimitiveLowerer, union: UnionLoc) -> None:
    """Make every member header of ``union`` invalid (an invalid union)."""
    for h in union.members.values():
        lw.prim("remove_header", [h.node()])


def push_front(lw: PrimitiveLowerer, stack: UnionStackLoc, n: int) -> None:
    """``stack.push_front(n)``: element ``i`` gets element ``i - n``, copied from the
    end of the stack towards its front (each source is read before it is written);
    the first ``n`` become invalid; ``nextIndex = min(nextIndex + n, size)``."""
    if n <= 0:
        return
    size = stack.type.size
    for i in range(size - 1, n - 1, -1):
        lw.prim("assign_union", [stack.elements[i].node(), stack.elements[i - n].node()])
    for u in stack.elements[:n]:
        invalidate_union(lw, u)
    nxt = lw.ctx.layout.union_stack_next(stack)
    moved = expr_node("+", nxt.node(), hex_node(n, 32))
    full = expr_node(">", moved, hex_node(size, 32))
    lw.set_field(nxt, expr_node("?", hex_node(size, 32), moved, cond=full))


def pop_front(lw: PrimitiveLowerer, stack: UnionStackLoc, n: int) -> None:
    """``stack.pop_front(n)``: element ``i`` gets element ``i + n``, copied from the
    front of the stack towards its end; the last ``n`` become invalid;
    ``nextIndex = nextIndex - n``, or 0 when it is smaller than ``n``."""
    if n <= 0:
        return
    size = stack.type.size
    for i in range(size - n):
        lw.prim("assign_union", [stack.elements[i].node(), stack.elements[i + n].node()])
    for u in stack.elements[max(size - n, 0):]:
        invalidate_union(lw, u)
    nxt = lw.ctx.layout.union_stack_next(stack)
    enough = expr_node(">=", nxt.node(), hex_node(n, 32))
    lw.set_field(nxt, expr_node("?", expr_node("-", nxt.node(), hex_node(n, 32)), hex_node(0, 32),
                                cond=enough))


def is_union_stack(t: Optional[T.Type]) -> bool:
    bt = base_type(t) if t is not None else None
    return isinstance(bt, T.StackT) and isinstance(base_type(bt.element), T.HeaderUnionT)


def union_last(root: Any, hoisted: dict[int, Any]) -> Optional[ast.MemberExpr]:
    """The first ``u.last`` in ``root`` (a statement or an expression) on a stack of
    header unions, unless one being lowered already stands for it."""
    for n in sub_expressions(root):
        if isinstance(n, ast.MemberExpr) and n.member == "last" and id(n) not in hoisted \
                and is_union_stack(n.expr.type):
            return n
    return None
