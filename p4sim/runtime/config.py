"""Checking a ForwardingPipelineConfig: P4Info + BMv2 JSON that belong together.

SetForwardingPipelineConfig's VERIFY step: the device config must be BMv2 JSON, the
P4Info must be self-consistent, and every P4Info object the server will drive must
exist under the same name in the JSON (p4c names them identically), so a mismatched
pair is refused up front instead of failing on the first Write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from p4sim.proto import p4i, p4r
from p4sim.runtime.errors import InvalidArgument
from p4sim.runtime.schema import MatchType, Schema


@dataclass(frozen=True)
class PipelineConfig:
    """A verified forwarding pipeline: what Get returns and what the engine loads."""

    p4info: p4i.P4Info
    device_config: bytes
    cookie: int | None
    schema: Schema
    bmv2: dict

    def to_proto(self, with_p4info: bool, with_device_config: bool) -> p4r.ForwardingPipelineConfig:
        out = p4r.ForwardingPipelineConfig()
        if with_p4info:
            out.p4info.CopyFrom(self.p4info)
        if with_device_config:
            out.p4_device_config = self.device_config
        if self.cookie is not None:
            out.cookie.cookie = self.cookie
        return out


MAX_ARRAY_SIZE = 1 << 20
"""Largest counter/meter/register array or table a pipeline may declare: the engine
allocates every cell up front, so a hostile size would exhaust the switch's memory."""

MAX_BITWIDTH = 1 << 16
"""Widest value a P4Info may declare (p4c's own limit is far below): requests are
checked against ``1 << bitwidth``, which a hostile width would make enormous."""

_SIZE_KEYS = frozenset({"size", "max_size", "bitwidth", "compressed_bitwidth", "max_length", "rate_count"})
"""BMv2 JSON keys whose integer the engine allocates or shifts by, wherever they occur."""

_MATCH_KINDS = {"exact": MatchType.EXACT, "lpm": MatchType.LPM, "ternary": MatchType.TERNARY,
                "range": MatchType.RANGE, "optional": MatchType.OPTIONAL}


def _mismatch(message: str) -> InvalidArgument:
    return InvalidArgument(f"P4Info and BMv2 JSON do not match: {message}")


def _parse_json(data: bytes) -> dict:
    """The device config as a dict, or INVALID_ARGUMENT naming what is wrong with it."""
    try:
        bmv2 = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidArgument(f"p4_device_config is not BMv2 JSON: {exc}") from None
    except RecursionError:
        raise InvalidArgument("p4_device_config is not usable BMv2 JSON: nested too deeply to parse") from None
    if not isinstance(bmv2, dict) or "pipelines" not in bmv2:
        raise InvalidArgument("p4_device_config is not BMv2 JSON: no 'pipelines'")
    _check_shape(bmv2)
    _check_limits(bmv2)
    return bmv2


def _check_limits(bmv2: dict) -> None:
    """Every size and width anywhere in the JSON (header stacks, header fields, parser
    value sets, ... as well as the arrays) is one the engine can allocate: a hostile
    header field of 2^40 bits made it try to build a 128 GiB mask."""
    stack: list = [bmv2]
    while stack:  # iterative: the JSON may nest as deep as the parser allowed
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in _SIZE_KEYS and isinstance(value, int) and not 0 <= value <= MAX_ARRAY_SIZE:
                    raise InvalidArgument(f"p4_device_config: '{key}' {value} is outside 0..{MAX_ARRAY_SIZE}")
                stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    for ht in bmv2.get("header_types", []):
        for field in ht.get("fields", []):
            width = field[1] if len(field) > 1 else None
            if isinstance(width, bool) or not (isinstance(width, int) and 0 <= width <= MAX_BITWIDTH or width == "*"):
                raise InvalidArgument(
                    f"p4_device_config: header type '{ht['name']}' field '{field[0]}' has width {width!r}, "
                    f"not an integer in 0..{MAX_BITWIDTH} (or '*')"
                )


def _objects(parent: dict, key: str, where: str) -> list[dict]:
    """``parent[key]``: a list of JSON objects (missing: empty), or INVALID_ARGUMENT."""
    items = parent.get(key, [])
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise InvalidArgument(f"p4_device_config is not BMv2 JSON: {where}'{key}' must be a list of objects")
    return items


def _check_shape(bmv2: dict) -> None:
    """The parts of the BMv2 JSON this module reads have BMv2's types (the engine checks
    the rest when it loads the program), so that a JSON of the wrong shape is refused
    with a message instead of failing with a TypeError deep inside."""
    for pipeline in _objects(bmv2, "pipelines", ""):
        for table in _objects(pipeline, "tables", "pipeline "):
            if not isinstance(table.get("name"), str):
                raise InvalidArgument("p4_device_config is not BMv2 JSON: a table has no name")
            for k in _objects(table, "key", f"table '{table['name']}' "):
                if not isinstance(k.get("match_type"), str):
                    raise InvalidArgument(f"p4_device_config is not BMv2 JSON: table '{table['name']}' key without match_type")
            _sized(table, "max_size", f"table '{table['name']}'")
        for ap in _objects(pipeline, "action_profiles", "pipeline "):
            _named(ap, "action profile")
            _sized(ap, "max_size", f"action profile '{ap['name']}'")
    for kind, key in (("action", "actions"), ("counter", "counter_arrays"), ("meter", "meter_arrays"),
                      ("register", "register_arrays"), ("digest", "learn_lists"), ("value set", "parse_vsets"),
                      ("header type", "header_types"), ("header", "headers")):
        for obj in _objects(bmv2, key, ""):
            _named(obj, kind)
            if kind in ("counter", "meter", "register") and not obj.get("is_direct"):
                _sized(obj, "size", f"{kind} '{obj['name']}'")
            if kind == "register":
                _sized(obj, "bitwidth", f"register '{obj['name']}'")
    for action in bmv2.get("actions", []):
        for param in _objects(action, "runtime_data", f"action '{action['name']}' "):
            _sized(param, "bitwidth", f"action '{action['name']}' parameter")
    for header in bmv2.get("headers", []):
        if not isinstance(header.get("header_type"), str):
            raise InvalidArgument(f"p4_device_config is not BMv2 JSON: header '{header['name']}' has no header_type")
    for ht in bmv2.get("header_types", []):
        fields = ht.get("fields", [])
        if not isinstance(fields, list) or not all(isinstance(f, list) and f and isinstance(f[0], str) for f in fields):
            raise InvalidArgument(f"p4_device_config is not BMv2 JSON: header type '{ht['name']}' has malformed fields")


def _named(obj: dict, kind: str) -> None:
    """Every BMv2 object the server looks up by name has a string name."""
    if not isinstance(obj.get("name"), str):
        raise InvalidArgument(f"p4_device_config is not BMv2 JSON: a {kind} has no name")


def _sized(obj: dict, key: str, what: str) -> None:
    """A size or width is an integer the engine can allocate (0..MAX_ARRAY_SIZE)."""
    value = obj.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_ARRAY_SIZE:
        raise InvalidArgument(f"p4_device_config: {what} {key} {value!r} must be an integer in 0..{MAX_ARRAY_SIZE}")


def _bmv2_names(bmv2: dict) -> dict[str, set[str]]:
    """Names of the objects the engine API addresses, by kind."""
    pipelines = bmv2.get("pipelines", [])
    return {
        "table": {t["name"] for p in pipelines for t in p.get("tables", [])},
        "action": {a["name"] for a in bmv2.get("actions", [])},
        "action profile": {ap["name"] for p in pipelines for ap in p.get("action_profiles", [])},
        "counter": {c["name"] for c in bmv2.get("counter_arrays", []) if not c.get("is_direct")},
        "meter": {m["name"] for m in bmv2.get("meter_arrays", []) if not m.get("is_direct")},
        "register": {r["name"] for r in bmv2.get("register_arrays", [])},
        "digest": {ll["name"] for ll in bmv2.get("learn_lists", [])},
        "value set": {vs["name"] for vs in bmv2.get("parse_vsets", [])},
    }


def _field_widths(bmv2: dict) -> dict[tuple[str, str], int]:
    """(header instance, field) -> bit width, for resolving table key targets."""
    types = {ht["name"]: {f[0]: f[1] for f in ht.get("fields", []) if len(f) > 1} for ht in bmv2.get("header_types", [])}
    out = {}
    for header in bmv2.get("headers", []):
        for field_name, width in types.get(header.get("header_type"), {}).items():
            out[(header["name"], field_name)] = width
    return out


def _is_field_ref(target: object) -> bool:
    """A BMv2 ``[header, field]`` reference (keys and learn lists name fields this way)."""
    return isinstance(target, list) and len(target) == 2 and all(isinstance(t, str) for t in target)


def _check_tables(schema: Schema, bmv2: dict) -> None:
    by_name = {t["name"]: t for p in bmv2["pipelines"] for t in p.get("tables", [])}
    widths = _field_widths(bmv2)
    for table in schema.tables:
        js = by_name[table.name]
        key = js.get("key", [])
        if len(key) != len(table.match_fields):
            raise _mismatch(
                f"table '{table.name}' has {len(table.match_fields)} match fields in the P4Info and {len(key)} in the JSON"
            )
        for f, k in zip(table.match_fields, key):
            kind = _MATCH_KINDS.get(k["match_type"])
            if kind is not None and kind != f.match_type:
                raise _mismatch(f"table '{table.name}' match field '{f.name}' is {f.kind} in the P4Info and {k['match_type']} in the JSON")
            target = k.get("target")
            width = widths.get(tuple(target)) if _is_field_ref(target) else None
            if width is not None and k.get("mask") is None and width != f.bitwidth:
                raise _mismatch(f"table '{table.name}' match field '{f.name}' is {f.bitwidth} bits in the P4Info and {width} in the JSON")
        if table.size and "max_size" in js and js["max_size"] != table.size:
            raise _mismatch(f"table '{table.name}' has size {table.size} in the P4Info and {js['max_size']} in the JSON")


def _check_sizes(schema: Schema, bmv2: dict) -> None:
    """Widths and sizes the server checks requests against must be the engine's."""
    actions = {a["name"]: a for a in bmv2.get("actions", [])}
    for action in schema.actions:
        data = actions[action.name].get("runtime_data", [])
        if len(data) != len(action.params):
            raise _mismatch(f"action '{action.name}' has {len(action.params)} parameters in the P4Info and {len(data)} in the JSON")
        for param, rd in zip(action.params, data):
            if rd.get("bitwidth") != param.bitwidth:
                raise _mismatch(
                    f"action '{action.name}' parameter '{param.name}' is {param.bitwidth} bits in the P4Info "
                    f"and {rd.get('bitwidth')} in the JSON"
                )
    arrays = [
        ("counter", schema.counters, {c["name"]: c for c in bmv2.get("counter_arrays", []) if not c.get("is_direct")}),
        ("meter", schema.meters, {m["name"]: m for m in bmv2.get("meter_arrays", []) if not m.get("is_direct")}),
        ("register", schema.registers, {r["name"]: r for r in bmv2.get("register_arrays", [])}),
    ]
    for kind, registry, by_name in arrays:
        for info in registry:
            js = by_name[info.name]
            if js.get("size") != info.size:
                raise _mismatch(f"{kind} '{info.name}' has size {info.size} in the P4Info and {js.get('size')} in the JSON")
            if kind == "register" and js.get("bitwidth") != info.bitwidth:
                raise _mismatch(f"register '{info.name}' is {info.bitwidth} bits in the P4Info and {js.get('bitwidth')} in the JSON")
    widths = _field_widths(bmv2)
    learn_lists = {ll["name"]: ll for ll in bmv2.get("learn_lists", [])}
    for digest in schema.digests:
        elements = learn_lists[digest.name].get("elements", [])
        if not isinstance(elements, list) or len(elements) != len(digest.member_widths):
            raise _mismatch(f"digest '{digest.name}' has {len(digest.member_widths)} members in the P4Info and "
                            f"{len(elements) if isinstance(elements, list) else 'no'} elements in the JSON")
        for i, (element, width) in enumerate(zip(elements, digest.member_widths)):
            target = element.get("value") if isinstance(element, dict) and element.get("type") == "field" else None
            js_width = widths.get(tuple(target)) if _is_field_ref(target) else None
            if js_width is not None and js_width != width:
                raise _mismatch(f"digest '{digest.name}' member {i} is {width} bits in the P4Info and {js_width} in the JSON")
    profiles = {ap["name"]: ap for p in bmv2["pipelines"] for ap in p.get("action_profiles", [])}
    for profile in schema.action_profiles:
        js_size = profiles[profile.name].get("max_size")
        if profile.size and js_size is not None and js_size != profile.size:
            raise _mismatch(f"action profile '{profile.name}' has size {profile.size} in the P4Info and {js_size} in the JSON")


def _check_widths(schema: Schema) -> None:
    widths = [(f"table '{t.name}' match field '{f.name}'", f.bitwidth) for t in schema.tables for f in t.match_fields]
    widths += [(f"value set '{v.name}' match field '{f.name}'", f.bitwidth) for v in schema.value_sets for f in v.match_fields]
    widths += [(f"action '{a.name}' parameter '{p.name}'", p.bitwidth) for a in schema.actions for p in a.params]
    widths += [(f"register '{r.name}'", r.bitwidth) for r in schema.registers]
    widths += [(f"controller header '{c.name}' field '{f.name}'", f.bitwidth) for c in schema.controller_headers for f in c.fields]
    widths += [(f"digest '{d.name}' member {i}", w) for d in schema.digests for i, w in enumerate(d.member_widths)]
    for what, width in widths:
        if width > MAX_BITWIDTH:
            raise InvalidArgument(f"P4Info {what}: bitwidth {width} exceeds this switch's limit {MAX_BITWIDTH}")


def verify(config: p4r.ForwardingPipelineConfig) -> PipelineConfig:
    """Check a pipeline config and return it parsed; raise INVALID_ARGUMENT naming the problem."""
    if not config.HasField("p4info"):
        raise InvalidArgument("forwarding pipeline config has no p4info")
    if not config.p4_device_config:
        raise InvalidArgument("forwarding pipeline config has no p4_device_config (BMv2 JSON expected)")
    bmv2 = _parse_json(config.p4_device_config)
    schema = Schema(config.p4info)
    _check_widths(schema)
    for kind, registry in (("table", schema.tables), ("counter", schema.counters), ("meter", schema.meters),
                           ("register", schema.registers), ("action profile", schema.action_profiles)):
        for info in registry:
            if not 0 <= info.size <= MAX_ARRAY_SIZE:
                raise InvalidArgument(f"P4Info {kind} '{info.name}': size {info.size} exceeds this switch's limit {MAX_ARRAY_SIZE}")
    names = _bmv2_names(bmv2)
    checks = [
        ("table", [t.name for t in schema.tables]),
        ("action", [a.name for a in schema.actions]),
        ("action profile", [ap.name for ap in schema.action_profiles]),
        ("counter", [c.name for c in schema.counters]),
        ("meter", [m.name for m in schema.meters]),
        ("register", [r.name for r in schema.registers]),
        ("digest", [d.name for d in schema.digests]),
        ("value set", [v.name for v in schema.value_sets]),
    ]
    for kind, wanted in checks:
        missing = [n for n in wanted if n not in names[kind]]
        if missing:
            raise _mismatch(f"{kind} '{missing[0]}' is in the P4Info but not in the JSON")
    _check_tables(schema, bmv2)
    _check_sizes(schema, bmv2)
    cookie = config.cookie.cookie if config.HasField("cookie") else None
    return PipelineConfig(config.p4info, bytes(config.p4_device_config), cookie, schema, bmv2)
