"""Match-key values for table entries, one class per BMv2 match kind.

A table entry's match is a list with one of these per key field, in the order of the
table's `key` list in the BMv2 JSON (the order `simple_switch_CLI` uses).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Exact:
    """Field equals `value`."""

    value: int


@dataclass(frozen=True)
class Lpm:
    """The top `prefix_len` bits of the field equal those of `value`."""

    value: int
    prefix_len: int


@dataclass(frozen=True)
class Ternary:
    """`field & mask == value & mask`."""

    value: int
    mask: int


@dataclass(frozen=True)
class Range:
    """`low <= field <= high`."""

    low: int
    high: int


@dataclass(frozen=True)
class Optional:
    """Field equals `value`, or anything when `wildcard` is true."""

    value: int
    wildcard: bool = False


@dataclass(frozen=True)
class Valid:
    """BMv2's legacy `valid` match kind: header validity equals `value`."""

    value: bool


MatchValue = Exact | Lpm | Ternary | Range | Optional | Valid
