"""Put each pipeline in reading order, the way p4c's JSON reads.

The control-flow lowering builds the graph back to front, so tables, conditionals and
synthesized names (``act``, ``tbl_act``, ``node_N``) come out numbered from the end of
the apply block. This pass walks each pipeline from ``init_table`` (depth first, in
program order), sorts ``tables``/``conditionals`` by that walk, renumbers their ids and
renames the synthesized objects so that the first statement's table is ``tbl_act``.
Only names the compiler made up are renamed; control-plane names never change.
"""

from __future__ import annotations

import heapq
from typing import Optional

from p4sim.compiler.bmv2.jsonutil import NameGen

SPECIAL = ("__HIT__", "__MISS__")


def _successors(node: dict) -> list[str]:
    if "expression" in node:
        succ = [node["true_next"], node["false_next"]]
    else:
        succ = list(node["next_tables"].values()) + [node["base_default_next"]]
    return [s for s in succ if s is not None]


def walk(pipeline: dict) -> list[str]:
    """Node names in program order: a topological order of the (acyclic) graph that
    prefers depth-first pre-order, so a branch is listed whole before its sibling
    and the statement after an ``if`` comes after both branches."""
    nodes = {t["name"]: t for t in pipeline["tables"]}
    nodes.update({c["name"]: c for c in pipeline["conditionals"]})
    dfs: dict[str, int] = {}
    stack = [pipeline["init_table"]]
    while stack:
        n = stack.pop()
        if n is None or n in dfs:
            continue
        dfs[n] = len(dfs)
        stack.extend(reversed(_successors(nodes[n])))
    indeg = {n: 0 for n in dfs}
    for n in dfs:
        for s in set(_successors(nodes[n])):
            indeg[s] += 1
    ready = [(dfs[n], n) for n in dfs if indeg[n] == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _, n = heapq.heappop(ready)
        order.append(n)
        for s in set(_successors(nodes[n])):
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(ready, (dfs[s], s))
    placed = set(order)
    return order + [n for n in nodes if n not in placed]


def put_in_reading_order(pipelines: list[dict], actions: list[dict], synth_tables: set[str],
                         synth_actions: set[str], reserved: set[str]) -> None:
    names = NameGen()
    for r in reserved - synth_tables - synth_actions:
        names.reserve(r)
    node_names: dict[str, str] = {}
    action_names: dict[str, str] = {}
    ids = {"tables": 0, "conditionals": 0}
    cond_number = 0
    for p in pipelines:
        order = walk(p)
        rank = {n: i for i, n in enumerate(order)}
        for kind in ("tables", "conditionals"):
            p[kind].sort(key=lambda o: rank[o["name"]])
            for o in p[kind]:
                o["id"] = ids[kind]
                ids[kind] += 1
        tables = {t["name"]: t for t in p["tables"]}
        for n in order:
            if n in tables:
                if n not in synth_tables:
                    continue
                act = tables[n]["actions"][0]
                if act in synth_actions:
                    action_names.setdefault(act, names.fresh("act"))
                base = action_names.get(act, act).rsplit(".", 1)[-1]
                node_names[n] = names.fresh(f"tbl_{base}")
            else:
                cond_number += 1
                node_names[n] = names.fresh(f"node_{cond_number}")

    def rn(n: Optional[str]) -> Optional[str]:
        return node_names.get(n, n) if n is not None else None

    def ra(a: str) -> str:
        return action_names.get(a, a)

    for p in pipelines:
        p["init_table"] = rn(p["init_table"])
        for t in p["tables"]:
            t["name"] = rn(t["name"])
            t["actions"] = [ra(a) for a in t["actions"]]
            t["next_tables"] = {(k if k in SPECIAL else ra(k)): rn(v) for k, v in t["next_tables"].items()}
            t["base_default_next"] = rn(t["base_default_next"])
        for c in p["conditionals"]:
            c["name"], c["true_next"], c["false_next"] = rn(c["name"]), rn(c["true_next"]), rn(c["false_next"])
    for a in actions:
        a["name"] = ra(a["name"])


def renumber_actions(pipelines: list[dict], actions: list[dict], decl_rank: dict[str, int]) -> None:
    """Order ``actions`` like p4c: declared actions in source order (``NoAction``
    first), then synthesized ones in reading order; fix every id that refers to them."""
    seen: list[str] = []
    for p in pipelines:
        for t in p["tables"]:
            seen.extend(a for a in t["actions"] if a not in seen)
    first_use = {name: i for i, name in enumerate(seen)}
    big = len(decl_rank) + len(seen) + len(actions)

    def key(a: dict) -> tuple[int, int]:
        if a["name"] in decl_rank:
            return 0, decl_rank[a["name"]]
        return 1, first_use.get(a["name"], big)

    actions.sort(key=key)
    new_id = {a["id"]: i for i, a in enumerate(actions)}
    for i, a in enumerate(actions):
        a["id"] = i
    for p in pipelines:
        for t in p["tables"]:
            t["action_ids"] = [new_id[x] for x in t["action_ids"]]
            if "default_entry" in t:
                t["default_entry"]["action_id"] = new_id[t["default_entry"]["action_id"]]
            for e in t.get("entries", []):
                e["action_entry"]["action_id"] = new_id[e["action_entry"]["action_id"]]
