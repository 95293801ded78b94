"""The BMv2 JSON program as an STF test names it.

STF files name tables, actions, key fields and counters loosely -- ``ipv4_lpm`` for
``MyIngress.ipv4_lpm``, ``dstAddr`` for ``hdr.ipv4.dstAddr`` -- and p4c's runner
(``bmv2stf.py``) resolves them against the BMv2 JSON by exact name first, then by
suffix. This module does that resolution once per program and also knows each key's
width, which the STF value forms need (a decimal ternary value means "all bits").
Ambiguous suffixes are errors here (p4c silently picks one), so a test never runs
against a table its author did not mean.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, TypeVar


class UnknownName(Exception):
    """A name in the STF that the program does not have (or has more than once)."""


@dataclass(frozen=True)
class KeyInfo:
    name: str  # as in the JSON ``key`` list, e.g. ``hdr.ipv4.dstAddr``
    match_type: str  # exact | lpm | ternary | range | optional | valid
    width: int
    spellings: tuple[str, ...] = ()  # every name an STF file may use for it (see key_index)


@dataclass(frozen=True)
class ParamInfo:
    name: str
    width: int


@dataclass(frozen=True)
class ActionInfo:
    name: str
    params: tuple[ParamInfo, ...]


@dataclass(frozen=True)
class TableInfo:
    name: str
    match_type: str  # the table's overall match type (BMv2: range > ternary > lpm > exact)
    keys: tuple[KeyInfo, ...]
    actions: tuple[ActionInfo, ...]
    kind: str  # simple | indirect | indirect_ws
    action_profile: str | None
    has_const_entries: bool = False  # ``const entries``: the control plane cannot change it

    @property
    def needs_priority(self) -> bool:
        """BMv2 wants a priority for entries of ternary/range tables and optional keys."""
        return self.match_type in ("ternary", "range") or any(k.match_type == "optional" for k in self.keys)


@dataclass(frozen=True)
class CounterInfo:
    """A counter or meter array; a direct one belongs to ``table`` (indexed by entry)."""

    name: str
    is_direct: bool
    table: str | None
    size: int = 0


T = TypeVar("T")


def resolve(name: str, candidates: Iterable[tuple[str, T]], what: str) -> T:
    """Exact name, else a unique ``.name`` suffix, else a unique plain suffix (p4c)."""
    items = list(candidates)
    for full, obj in items:
        if full == name:
            return obj
    for test in (lambda full: full.endswith("." + name), lambda full: full.endswith(name)):
        found = [(full, obj) for full, obj in items if test(full)]
        if len(found) == 1:
            return found[0][1]
        if len(found) > 1:
            names = ", ".join(full for full, _ in found)
            raise UnknownName(f"{what} name '{name}' is ambiguous: {names}")
    known = ", ".join(full for full, _ in items) or "none"
    raise UnknownName(f"no {what} '{name}' in the program (known: {known})")


class Program:
    """Tables, actions, key widths and counters of one BMv2 JSON pipeline, by name."""

    def __init__(self, bmv2_json: dict):
        self.json = bmv2_json
        self._field_widths = self._header_field_widths(bmv2_json)
        actions_by_id = {
            a["id"]: ActionInfo(a["name"], tuple(ParamInfo(p["name"], p["bitwidth"]) for p in a["runtime_data"]))
            for a in bmv2_json.get("actions", [])
        }
        self.tables: dict[str, TableInfo] = {}
        self.action_profiles: list[str] = []
        for pipeline in bmv2_json.get("pipelines", []):
            for prof in pipeline.get("action_profiles", []):
                self.action_profiles.append(prof["name"])
            for t in pipeline.get("tables", []):
                keys = tuple(self._key_info(t["name"], k) for k in t.get("key", []))
                actions = tuple(actions_by_id[i] for i in t.get("action_ids", []))
                self.tables[t["name"]] = TableInfo(
                    t["name"], t.get("match_type", "exact"), keys, actions,
                    t.get("type", "simple"), t.get("action_profile"), bool(t.get("entries")),
                )  # fmt: skip
        self.counters = {
            c["name"]: CounterInfo(c["name"], bool(c.get("is_direct")), c.get("binding"))
            for c in bmv2_json.get("counter_arrays", [])
        }
        self.meters = {
            m["name"]: CounterInfo(m["name"], bool(m.get("is_direct")), m.get("binding"), m.get("size", 0))
            for m in bmv2_json.get("meter_arrays", [])
        }
        self.registers = [r["name"] for r in bmv2_json.get("register_arrays", [])]
        self.value_sets = [v["name"] for v in bmv2_json.get("parse_vsets", [])]

    @staticmethod
    def _header_field_widths(bmv2_json: dict) -> dict[tuple[str, str], int]:
        types = {ht["name"]: ht for ht in bmv2_json.get("header_types", [])}
        widths: dict[tuple[str, str], int] = {}
        for h in bmv2_json.get("headers", []):
            for f in types[h["header_type"]]["fields"]:
                widths[(h["name"], f[0])] = f[1]
            widths[(h["name"], "$valid$")] = 1
        return widths

    def _key_info(self, table: str, key: dict) -> KeyInfo:
        target = key.get("target")
        name = key.get("name") or (".".join(target) if isinstance(target, list) else str(target))
        if not (isinstance(target, list) and len(target) == 2 and tuple(target) in self._field_widths):
            raise UnknownName(f"table '{table}': cannot find the width of key '{name}' (target {target!r})")
        spellings = [name, ".".join(target)]
        if name.endswith(".isValid()"):
            spellings.append(name[: -len("isValid()")] + "$valid$")
        return KeyInfo(name, key["match_type"], self._field_widths[tuple(target)], tuple(spellings))

    # ------------------------------------------------------------ lookups

    def table(self, name: str) -> TableInfo:
        return resolve(name, self.tables.items(), "table")

    def action(self, table: TableInfo, name: str) -> ActionInfo:
        return resolve(name, ((a.name, a) for a in table.actions), f"action of table '{table.name}'")

    def key_index(self, table: TableInfo, field: str) -> int:
        """p4c's key-name rules: exact, ``$valid$`` spellings, then ``.field`` suffix.

        A key answers to its JSON name, to the header/field of its target
        (``ipv4.dstAddr``), and an ``X.isValid()`` key also to ``X.$valid$`` -- the
        spelling STF files use, since STF names cannot contain parentheses.
        """
        spellings = [(i, n) for i, k in enumerate(table.keys) for n in k.spellings]

        def matching(test) -> set[int]:
            return {i for i, n in spellings if test(n)}

        for rule in (
            lambda n: n in (field, field + "$", field + ".$valid$"),
            lambda n: field.endswith(".valid") and n == field[: -len("valid")] + "$valid$",
            (lambda n: n == "$valid$" or n.endswith(".$valid$")) if field == "valid"
            else (lambda n: n.endswith("." + field) or n.endswith("." + field + "$")),
        ):
            found = matching(rule)
            if len(found) == 1:
                return found.pop()
            if found:
                raise UnknownName(f"key field '{field}' of table '{table.name}' is ambiguous: "
                                  + ", ".join(table.keys[i].name for i in sorted(found)))  # fmt: skip
        names = ", ".join(k.name for k in table.keys) or "none"
        raise UnknownName(f"table '{table.name}' has no key field '{field}' (keys: {names})")

    def counter(self, name: str) -> CounterInfo:
        return resolve(name, self.counters.items(), "counter")

    def register(self, name: str) -> str:
        return resolve(name, ((r, r) for r in self.registers), "register")

    def meter(self, name: str) -> CounterInfo:
        return resolve(name, self.meters.items(), "meter")

    def value_set(self, name: str) -> str:
        return resolve(name, ((v, v) for v in self.value_sets), "parser value set")

    def action_profile(self, name: str) -> str:
        return resolve(name, ((p, p) for p in self.action_profiles), "action profile")

    def any_action(self, name: str) -> ActionInfo:
        """An action by name across the program (act_prof_create_member has no table)."""
        actions = {a.name: a for t in self.tables.values() for a in t.actions}
        return resolve(name, actions.items(), "action")
