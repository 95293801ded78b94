"""What both emitters read out of the BMv2 JSON the same way: the parts of a table's
key and the operands of parser ops whose encoding is BMv2's, not the target's.

`codegen` (Python) and `ccodegen` (C) walk the same JSON and differ only in the code
they write; each fact of the JSON's shape -- which header a key field's validity
guards, how a ``shift`` gives its amount, how many bytes a ``lookahead`` needs, which
expressions index a stack at run time -- is decoded here once, so a fix to the
reading of the JSON is one edit for both engines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..program import FieldInfo, HeaderInfo, Layout

_DEREFERENCES = ("dereference_header_stack", "dereference_stack", "dereference_union_stack")


@dataclass(frozen=True)
class KeyPart:
    """One field of a table's key as BMv2 builds it.

    ``kind`` is the match type; ``field`` is None for a ``valid`` key (the header's
    validity itself); ``mask`` the key's constant mask, if any; ``guarded``: the field
    reads as 0 while its header is invalid (a packet header's field, not metadata and
    not ``$valid$``), as BMv2 does.
    """

    kind: str
    header: HeaderInfo
    field: Optional[FieldInfo]
    mask: Optional[int]
    guarded: bool


def table_key(layout: Layout, table: dict[str, Any]) -> list[KeyPart]:
    """The parts of ``table``'s key, in order."""
    parts = []
    for k in table.get("key", []):
        mt, target = k["match_type"], k["target"]
        if mt == "valid":
            h = layout.header(target if isinstance(target, str) else target[0])
            parts.append(KeyPart(mt, h, None, None, False))
            continue
        h = layout.header(target[0])
        mask = int(k["mask"], 16) if k.get("mask") is not None else None
        parts.append(KeyPart(mt, h, layout.field(target[0], target[1]), mask,
                             not h.metadata and target[1] != "$valid$"))
    return parts


def shift_bits(param: Any) -> int:
    """The bits a parser ``shift`` op skips (its operand: a number of bytes, as a
    number, a hex string, or a type-value object holding either)."""
    amount = param["value"] if isinstance(param, dict) else param
    return 8 * (int(amount, 16) if isinstance(amount, str) else int(amount))


def lookahead_bytes(src: dict[str, Any]) -> Optional[int]:
    """The bytes of packet a ``set`` op's source needs beyond the parse position (None:
    it is not a lookahead)."""
    if src.get("type") != "lookahead":
        return None
    return (int(src["value"][1]) + 7) // 8


def dereferences(tree: Any) -> list[dict]:
    """The run-time stack references in a JSON value, innermost first (an index may
    itself read a stack element)."""
    found: list[dict] = []
    if isinstance(tree, list):
        for t in tree:
            found += dereferences(t)
    elif isinstance(tree, dict):
        for t in tree.values():
            found += dereferences(t)
        if tree.get("op") in _DEREFERENCES:
            found.append(tree)
    return found
