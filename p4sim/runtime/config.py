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
from p4sim.runtime.schema import Schema


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


def verify(config: p4r.ForwardingPipelineConfig) -> PipelineConfig:
    """Check a pipeline config and return it parsed; raise INVALID_ARGUMENT naming the problem."""
    if not config.HasField("p4info"):
        raise InvalidArgument("forwarding pipeline config has no p4info")
    if not config.p4_device_config:
        raise InvalidArgument("forwarding pipeline config has no p4_device_config (BMv2 JSON expected)")
    try:
        bmv2 = json.loads(config.p4_device_config)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidArgument(f"p4_device_config is not BMv2 JSON: {exc}") from None
    if not isinstance(bmv2, dict) or "pipelines" not in bmv2:
        raise InvalidArgument("p4_device_config is not BMv2 JSON: no 'pipelines'")
    schema = Schema(config.p4info)
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
            raise InvalidArgument(
                f"P4Info and BMv2 JSON do not match: {kind} '{missing[0]}' is in the P4Info but not in the JSON"
            )
    for table in schema.tables:
        key = next(t for p in bmv2["pipelines"] for t in p.get("tables", []) if t["name"] == table.name)["key"]
        if len(key) != len(table.match_fields):
            raise InvalidArgument(
                f"P4Info and BMv2 JSON do not match: table '{table.name}' has {len(table.match_fields)} "
                f"match fields in the P4Info and {len(key)} in the JSON"
            )
    cookie = config.cookie.cookie if config.HasField("cookie") else None
    return PipelineConfig(config.p4info, bytes(config.p4_device_config), cookie, schema, bmv2)
