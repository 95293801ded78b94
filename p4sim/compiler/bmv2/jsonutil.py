"""Small formatting rules of BMv2 JSON shared by every emitter module."""

from __future__ import annotations

from typing import Optional


def nbytes(width: int) -> int:
    """Bytes a value of ``width`` bits occupies in BMv2 (hexstrings are byte-padded)."""
    return max(1, (width + 7) // 8)


def hexstr(value: int, width: Optional[int] = None) -> str:
    """``0x0800``-style hexstring, zero-padded to the byte width of ``width`` bits,
    as p4c writes constants; negative values get a leading '-' (JSON_format.md)."""
    sign = "-" if value < 0 else ""
    digits = format(abs(value), "x")
    if width is not None:
        digits = digits.rjust(2 * nbytes(width), "0")
    return f"{sign}0x{digits}"


def hex_node(value: int, width: Optional[int] = None) -> dict:
    return {"type": "hexstr", "value": hexstr(value, width)}


def bool_node(value: bool) -> dict:
    return {"type": "bool", "value": bool(value)}


def expr_node(op: str, left: Optional[dict], right: Optional[dict], cond: Optional[dict] = None) -> dict:
    """A BMv2 ``expression`` type-value node."""
    value: dict = {"op": op, "left": left, "right": right}
    if cond is not None:
        value["cond"] = cond
    return {"type": "expression", "value": value}


def mask(width: int) -> int:
    return (1 << width) - 1


def as_param(node: dict) -> dict:
    """A type-value node as a primitive / parser-op parameter: bare action data is
    ``runtime_data`` there (``local`` only inside expressions), and an expression is
    wrapped once more (``{"type": "expression", "value": <node>}``), as p4c emits."""
    if node["type"] == "local":
        return {"type": "runtime_data", "value": node["value"]}
    if node["type"] == "expression":
        return {"type": "expression", "value": node}
    return node


def source_info(pos: object, fragment: Optional[str] = None) -> Optional[dict]:
    """p4c's ``source_info`` object for a source position (None when unknown). The
    fragment defaults to the statement text at the position, up to its ``;``/``{``."""
    line = getattr(pos, "line", 0)
    if not line:
        return None
    if fragment is None:
        text = getattr(pos, "text", "")[max(getattr(pos, "col", 1) - 1, 0):]
        fragment = text.split(";")[0].split("{")[0].strip()
    # p4c counts columns from 0 in source_info (its diagnostics count from 1)
    return {"filename": pos.file, "line": line, "column": pos.col - 1,  # type: ignore[attr-defined]
            "source_fragment": fragment}


class NameGen:
    """Unique names in p4c's style: ``act``, ``act_0``, ``act_1``..."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.counters: dict[str, int] = {}

    def reserve(self, name: str) -> None:
        self.used.add(name)

    def fresh(self, base: str) -> str:
        base = base.rstrip("_") or "tmp"
        if base not in self.used:
            self.used.add(base)
            return base
        n = self.counters.get(base, 0)
        while f"{base}_{n}" in self.used:
            n += 1
        self.counters[base] = n + 1
        name = f"{base}_{n}"
        self.used.add(name)
        return name
