"""P4Runtime messages <-> engine values, with the spec's canonical forms and checks.

Everything a controller sends is checked here before the engine is touched, so that a
rejected update changes nothing and its error names the problem: unknown ids, missing
mandatory fields, values too wide for their bitwidth, LPM host bits, ternary
value/mask mismatch, don't-care matches that must be omitted, wrong priorities.

Byte strings follow P4Runtime's binary string rules: a receiver accepts any length as
long as the value fits the P4Info bitwidth; a sender uses the canonical form, the
shortest string holding the value (zero is one zero byte), so Read returns what a
client can compare byte for byte with what it wrote.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from p4sim.proto import p4d, p4r
from p4sim.runtime.errors import InvalidArgument, OutOfRange
from p4sim.runtime.schema import ActionInfo, MatchFieldInfo, MatchType, Schema, TableInfo, ValueSetInfo


def int_to_bytes(value: int) -> bytes:
    """Canonical P4Runtime binary string: shortest big-endian bytes, zero -> b"\\x00"."""
    if value < 0:
        raise ValueError(f"negative value {value} has no unsigned encoding")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def bytes_to_int(data: bytes, bitwidth: int, what: str) -> int:
    """Decode a binary string, rejecting empty strings and values that do not fit.

    Both are OUT_OF_RANGE: the spec's Bytestrings section says so for every string
    the server rejects on these grounds.
    """
    if not data:
        raise OutOfRange(f"{what}: empty byte string")
    value = int.from_bytes(data, "big")
    if value >> bitwidth:
        shown = data.hex() if len(data) <= 32 else f"{data[:32].hex()}... ({len(data)} bytes)"
        raise OutOfRange(f"{what}: value 0x{shown} is too wide for bitwidth {bitwidth}")
    return value


# -- match keys ----------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldValue:
    """One key field after decoding, in the engine's terms.

    ``kind`` is the field's match kind; for exact/optional ``a`` is the value, for lpm
    ``a``/``b`` are value/prefix length, for ternary value/mask, for range low/high.
    ``wildcard`` marks an omitted (don't care) optional field. Frozen, so a tuple of
    them is the entry's identity (the key a duplicate INSERT collides on).
    """

    kind: int
    a: int
    b: int = 0
    wildcard: bool = False


def decode_match(table: TableInfo | ValueSetInfo, matches: Sequence[p4r.FieldMatch]) -> tuple[FieldValue, ...]:
    """Turn a TableEntry's (or value set member's) ``match`` list into one FieldValue per
    key, in key order.

    Fields may come in any order; omitted fields are don't-care (exact fields are
    mandatory). Each present field must be in canonical form, as the spec requires.
    """
    given: dict[int, p4r.FieldMatch] = {}
    for fm in matches:
        if fm.field_id not in table.fields_by_id:
            raise InvalidArgument(f"{_what(table)} has no match field id {fm.field_id}")
        if fm.field_id in given:
            raise InvalidArgument(
                f"{_what(table)}: match field '{table.fields_by_id[fm.field_id].name}' given twice"
            )
        given[fm.field_id] = fm
    return tuple(_decode_field(table, f, given.get(f.id)) for f in table.match_fields)


def _what(obj: TableInfo | ValueSetInfo) -> str:
    return f"{'value set' if isinstance(obj, ValueSetInfo) else 'table'} '{obj.name}'"


def _decode_field(table: TableInfo | ValueSetInfo, f: MatchFieldInfo, fm: p4r.FieldMatch | None) -> FieldValue:
    where = f"{_what(table)} match field '{f.name}'"
    full = (1 << f.bitwidth) - 1
    if fm is None:
        if f.match_type == MatchType.EXACT:
            raise InvalidArgument(f"{where}: missing mandatory match field (exact)")
        if f.match_type == MatchType.RANGE:
            return FieldValue(f.match_type, 0, full)
        return FieldValue(f.match_type, 0, 0, wildcard=f.match_type == MatchType.OPTIONAL)
    given = fm.WhichOneof("field_match_type")
    if given != f.kind:
        raise InvalidArgument(f"{where}: field is {f.kind} but the request gives {given or 'no match value'}")
    if f.match_type == MatchType.EXACT:
        return FieldValue(f.match_type, bytes_to_int(fm.exact.value, f.bitwidth, where))
    if f.match_type == MatchType.OPTIONAL:
        return FieldValue(f.match_type, bytes_to_int(fm.optional.value, f.bitwidth, where))
    if f.match_type == MatchType.LPM:
        plen = fm.lpm.prefix_len
        if not 0 <= plen <= f.bitwidth:
            raise InvalidArgument(f"{where}: bad prefix length {plen} for bitwidth {f.bitwidth}")
        if plen == 0:
            raise InvalidArgument(f"{where}: a don't-care LPM match (prefix_len 0) must be omitted")
        value = bytes_to_int(fm.lpm.value, f.bitwidth, where)
        if value & (full >> plen):
            raise InvalidArgument(f"{where}: LPM value 0x{value:x} has bits set past prefix length {plen}")
        return FieldValue(f.match_type, value, plen)
    if f.match_type == MatchType.TERNARY:
        value = bytes_to_int(fm.ternary.value, f.bitwidth, where)
        mask = bytes_to_int(fm.ternary.mask, f.bitwidth, where + " mask")
        if mask == 0:
            raise InvalidArgument(f"{where}: a don't-care ternary match (mask 0) must be omitted")
        if value & ~mask:
            raise InvalidArgument(f"{where}: ternary value 0x{value:x} has bits outside mask 0x{mask:x}")
        return FieldValue(f.match_type, value, mask)
    if f.match_type == MatchType.RANGE:
        low = bytes_to_int(fm.range.low, f.bitwidth, where + " low")
        high = bytes_to_int(fm.range.high, f.bitwidth, where + " high")
        if low > high:
            raise InvalidArgument(f"{where}: range low 0x{low:x} is above high 0x{high:x}")
        if low == 0 and high == full:
            raise InvalidArgument(f"{where}: a don't-care range match (whole range) must be omitted")
        return FieldValue(f.match_type, low, high)
    raise InvalidArgument(f"{where}: match kind {f.kind} is not supported")


def encode_match(table: TableInfo | ValueSetInfo, key: tuple[FieldValue, ...]) -> list[p4r.FieldMatch]:
    """Canonical ``match`` list for Read: key order, don't-care fields omitted."""
    out = []
    for f, v in zip(table.match_fields, key):
        if _is_dont_care(f, v):
            continue
        fm = p4r.FieldMatch(field_id=f.id)
        if v.kind == MatchType.EXACT:
            fm.exact.value = int_to_bytes(v.a)
        elif v.kind == MatchType.OPTIONAL:
            fm.optional.value = int_to_bytes(v.a)
        elif v.kind == MatchType.LPM:
            fm.lpm.value = int_to_bytes(v.a)
            fm.lpm.prefix_len = v.b
        elif v.kind == MatchType.TERNARY:
            fm.ternary.value = int_to_bytes(v.a)
            fm.ternary.mask = int_to_bytes(v.b)
        elif v.kind == MatchType.RANGE:
            fm.range.low = int_to_bytes(v.a)
            fm.range.high = int_to_bytes(v.b)
        out.append(fm)
    return out


def _is_dont_care(f: MatchFieldInfo, v: FieldValue) -> bool:
    if v.kind == MatchType.OPTIONAL:
        return v.wildcard
    if v.kind in (MatchType.LPM, MatchType.TERNARY):
        return v.b == 0
    if v.kind == MatchType.RANGE:
        return v.a == 0 and v.b == (1 << f.bitwidth) - 1
    return False


def check_priority(table: TableInfo, priority: int) -> None:
    """Priority is required (> 0) iff the table has ternary/range/optional keys."""
    if table.needs_priority and priority <= 0:
        raise InvalidArgument(
            f"table '{table.name}' has ternary/range/optional keys: entries need a priority > 0, got {priority}"
        )
    if not table.needs_priority and priority != 0:
        raise InvalidArgument(
            f"table '{table.name}' has only exact/lpm keys: priority must be unset, got {priority}"
        )


# -- actions -------------------------------------------------------------------------------


def decode_action(schema: Schema, action: p4r.Action, allowed: frozenset[int], where: str) -> tuple[ActionInfo, list[int]]:
    """Check an Action against its P4Info (allowed here, every parameter once, widths).

    Returns the action and its argument values in ``runtime_data`` order.
    """
    if action.action_id not in schema.actions:
        raise InvalidArgument(f"{where}: unknown action id {action.action_id}")
    info = schema.actions.get(action.action_id)
    if action.action_id not in allowed:
        raise InvalidArgument(f"{where}: action '{info.name}' is not allowed here")
    args: list[int | None] = [None] * len(info.params)
    for p in action.params:
        param = info.params_by_id.get(p.param_id)
        if param is None:
            raise InvalidArgument(f"{where}: action '{info.name}' has no parameter id {p.param_id}")
        if args[param.index] is not None:
            raise InvalidArgument(f"{where}: parameter '{param.name}' of action '{info.name}' given twice")
        args[param.index] = bytes_to_int(p.value, param.bitwidth, f"{where}: parameter '{param.name}' of action '{info.name}'")
    for param, value in zip(info.params, args):
        if value is None:
            raise InvalidArgument(f"{where}: missing parameter '{param.name}' of action '{info.name}'")
    return info, [a for a in args if a is not None]


def encode_action(info: ActionInfo, args: Sequence[int]) -> p4r.Action:
    """Canonical Action message for Read."""
    return p4r.Action(
        action_id=info.id,
        params=[p4r.Action.Param(param_id=p.id, value=int_to_bytes(v)) for p, v in zip(info.params, args)],
    )


# -- indexes, data, metadata ------------------------------------------------------------------


def check_index(index: int, size: int, what: str) -> int:
    """An array index must lie in ``[0, size)``: a negative one is INVALID_ARGUMENT, one
    past the end OUT_OF_RANGE (the spec's rule for counter, meter and register indexes)."""
    if index < 0:
        raise InvalidArgument(f"{what}: index {index} is negative")
    if index >= size:
        raise OutOfRange(f"{what}: index {index} out of range (size {size})")
    return index


def check_counter_data(data: p4r.CounterData, what: str) -> None:
    """Counter values are int64 on the wire but counts: negative ones are INVALID_ARGUMENT."""
    if data.packet_count < 0 or data.byte_count < 0:
        raise InvalidArgument(
            f"{what}: counter_data values must not be negative "
            f"(packet_count {data.packet_count}, byte_count {data.byte_count})"
        )


def check_meter_counter_data(data: p4r.MeterCounterData, what: str) -> None:
    """``meter_counter_data`` in a write may only reset the per-colour counters: the spec
    makes any non-zero sub-field INVALID_ARGUMENT (p4sim keeps no per-colour counts, so a
    zero one changes nothing)."""
    for colour in ("green", "yellow", "red"):
        counts = getattr(data, colour)
        if counts.packet_count or counts.byte_count:
            raise InvalidArgument(
                f"{what}: meter_counter_data.{colour} must be zero in a write (it can only reset the counters)"
            )


def decode_bitstring_data(data: p4d.P4Data, bitwidth: int, what: str) -> int:
    """A register cell value: P4Data holding a bitstring of the register's width."""
    if data.WhichOneof("data") != "bitstring":
        raise InvalidArgument(f"{what}: expected a bitstring value, got {data.WhichOneof('data') or 'nothing'}")
    return bytes_to_int(data.bitstring, bitwidth, what)


def encode_bitstring_data(value: int) -> p4d.P4Data:
    return p4d.P4Data(bitstring=int_to_bytes(value))


def encode_digest_data(values: Sequence[int], widths: Sequence[int]) -> p4d.P4Data:
    """One digest message: a struct of bitstrings (or a bare bitstring for one member)."""
    if len(widths) == 1 and len(values) == 1:
        return encode_bitstring_data(values[0])
    return p4d.P4Data(struct=p4d.P4StructLike(members=[encode_bitstring_data(v) for v in values]))


def pack_fields(values: Sequence[int], widths: Sequence[int]) -> bytes:
    """Serialise header fields MSB first, like a P4 deparser emits them."""
    acc = 0
    total = 0
    for value, width in zip(values, widths):
        acc = (acc << width) | (value & ((1 << width) - 1))
        total += width
    pad = (-total) % 8
    return (acc << pad).to_bytes((total + pad) // 8, "big")


def unpack_fields(data: bytes, widths: Sequence[int]) -> list[int]:
    """Inverse of `pack_fields`: field values from the first bytes of ``data``."""
    total = sum(widths)
    nbytes = (total + 7) // 8
    acc = int.from_bytes(data[:nbytes], "big") >> (nbytes * 8 - total)
    values = []
    shift = total
    for width in widths:
        shift -= width
        values.append((acc >> shift) & ((1 << width) - 1))
    return values


# -- meters ------------------------------------------------------------------------------------


def check_meter_config(cfg: p4r.MeterConfig, what: str) -> None:
    """Rates and bursts are non-negative and the peak rate is not below the committed one."""
    for name in ("cir", "cburst", "pir", "pburst"):
        if getattr(cfg, name) < 0:
            raise InvalidArgument(f"{what}: meter {name} must not be negative")
    if cfg.pir < cfg.cir:
        raise InvalidArgument(f"{what}: meter pir {cfg.pir} is below cir {cfg.cir}")


def meter_rates(cfg: p4r.MeterConfig) -> list[tuple[float, int]]:
    """P4Runtime rates are per second; BMv2 (and the engine) take units per microsecond."""
    return [(cfg.cir / 1e6, cfg.cburst), (cfg.pir / 1e6, cfg.pburst)]
