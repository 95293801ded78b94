"""STF key values -> the engine's match objects, with p4c's conventions.

The STF value forms do not say which match kind they are for; the key's kind and
width (from the BMv2 JSON) decide, as in p4c's ``bmv2stf.py``: a hex ternary value's
mask comes from its digits (``0x0a**`` -> mask ``0xff00``), an LPM value without
``/LEN`` gets the length its non-``*`` digits cover, and keys the entry does not
mention are wildcards (exact keys: 0, like p4c). Priorities are converted here too.
"""

from __future__ import annotations

from p4sim.stf.program import KeyInfo, TableInfo
from p4sim.stf.syntax import KeyValue, Masked, Number, Prefix, Span
from p4sim.switch.match import Exact, Lpm, Optional, Range, Ternary, Valid

# STF priorities rank like P4Runtime's (higher wins); BMv2's like a CLI's (lower wins).
# p4c's runner converts with 10000 - priority; the same constant keeps us comparable.
BMV2_PRIORITY_BASE = 10000


class BadEntry(Exception):
    """An entry that does not suit its table: a key value's kind or width, a priority."""


def default_match(key: KeyInfo):
    """The match for a key an ``add`` does not mention: anything (exact: 0, as p4c)."""
    full = (1 << key.width) - 1
    return {
        "exact": Exact(0),
        "valid": Valid(False),
        "lpm": Lpm(0, 0),
        "ternary": Ternary(0, 0),
        "range": Range(0, full),
        "optional": Optional(0, True),
    }[key.match_type]


def _fits(key: KeyInfo, *values: int) -> None:
    for v in values:
        if v >= 1 << key.width:
            raise BadEntry(f"value {v:#x} does not fit in the {key.width}-bit key '{key.name}'")


def _lpm(width: int, value: int, length: int) -> Lpm:
    """Bits beyond the prefix cleared, as BMv2 stores them (so entries compare equal)."""
    full = (1 << width) - 1
    return Lpm(value & (full ^ (full >> length)), length)


def _ternary(value: int, mask: int) -> Ternary:
    return Ternary(value & mask, mask)


def to_match(key: KeyInfo, value: KeyValue):
    """One STF value for ``key`` as an engine match object."""
    kind, width = key.match_type, key.width
    full = (1 << width) - 1
    if kind == "valid":
        if isinstance(value, Number) and value.value in (0, 1) and not value.has_wildcards:
            return Valid(bool(value.value))
    elif kind == "exact":
        if isinstance(value, Number) and not value.has_wildcards:
            _fits(key, value.value)
            return Exact(value.value)
    elif kind == "lpm":
        if isinstance(value, Prefix):
            if value.length > width:
                raise BadEntry(f"prefix length {value.length} is longer than the {width}-bit key '{key.name}'")
            _fits(key, value.value)
            return _lpm(width, value.value, value.length)
        if isinstance(value, Number):
            _fits(key, value.value)
            length = width if value.care_mask is None else bin(value.care_mask).count("1")
            return _lpm(width, value.value, min(length, width))
    elif kind == "ternary":
        if isinstance(value, Masked):
            _fits(key, value.value, value.mask)
            return _ternary(value.value, value.mask)
        if isinstance(value, Number):
            _fits(key, value.value)
            return _ternary(value.value, full if value.care_mask is None else value.care_mask & full)
        if isinstance(value, Prefix) and value.length <= width:
            _fits(key, value.value)
            return _ternary(value.value, full ^ ((1 << (width - value.length)) - 1))
    elif kind == "range":
        if isinstance(value, Span):
            _fits(key, value.lo, value.hi)
            return Range(value.lo, value.hi)
        if isinstance(value, Number) and not value.has_wildcards:
            _fits(key, value.value)
            return Range(value.value, value.value)
    elif kind == "optional":
        if isinstance(value, Number) and value.care_mask == 0:
            return Optional(0, True)
        if isinstance(value, Number) and not value.has_wildcards:
            _fits(key, value.value)
            return Optional(value.value, False)
    raise BadEntry(f"a {type(value).__name__.lower()} value does not suit the {kind} key '{key.name}'")


def entry_match(table: TableInfo, values: dict[int, KeyValue]) -> list:
    """The full key of an entry, in JSON key order, from the values given by key index."""
    return [to_match(k, values[i]) if i in values else default_match(k) for i, k in enumerate(table.keys)]


def engine_priority(table: TableInfo, priority: int | None, stf_ranking: bool = True) -> int | None:
    """The engine's (BMv2's) priority for an entry; ``stf_ranking``: higher numbers win."""
    if not table.needs_priority:
        return None  # p4c passes a priority only to ternary tables; LPM ranks by length
    if priority is None:
        raise BadEntry(f"table '{table.name}' ({table.match_type}) needs a priority: add {table.name} PRIORITY ...")
    return BMV2_PRIORITY_BASE - priority if stf_ranking else priority
