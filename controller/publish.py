"""What GOR publishes to the agents: the topology and the hash model, as one JSON file
(``gor-topology.json`` in the run directory, which every Mininet host sees).

The document holds everything an agent needs to predict a flow's path and pick
source ports, including what only the controller knows -- the cables that are down
and the ECMP groups the leaves use because of them:

* ``fabric``: the spec (sizes, rates, ECN profile, hash algorithm, sampling);
* ``hash``: algorithm (the leaves'; ``algorithms``: per tier that chooses), the field
  list in order with widths, and every switch's salt;
* ``switches``, ``nics``, ``links``: the addressing plan;
* ``down``: failed cables; ``groups``: per source leaf, per destination leaf, the
  spine numbers of the ECMP group (member = hash % len(group));
* ``version``: increases with every change, so an agent can tell it is stale.

It is rewritten atomically (write + rename) whenever it changes.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import yaml

from controller.routes import Down, ecmp_members
from topo.addressing import AddressPlan
from topo.hashmodel import HASH_FIELDS, tier_algorithm
from topo.spec import FabricSpec

FILENAME = "gor-topology.json"
SPEC_FILENAME = "gor-fabric.yaml"


def topology_document(plan: AddressPlan, down: Down, version: int) -> dict[str, Any]:
    """The published document for ``plan`` with cables ``down`` failed."""
    return {
        "version": version,
        "fabric": dataclasses.asdict(plan.spec),
        "hash": {"algorithm": plan.spec.ecmp_hash,
                 "algorithms": {role: tier_algorithm(plan.spec, role) for role in ("leaf", "spine")},
                 "fields": [list(f) for f in HASH_FIELDS],
                 "salts": {sw.name: sw.salt for sw in plan.switches}},
        "switches": [{"name": sw.name, "role": sw.role, "id": sw.switch_id, "mac": sw.mac}
                     for sw in plan.switches],
        "nics": [{"server": n.server, "rail": n.rail, "ip": n.ip, "mac": n.mac, "leaf": n.leaf}
                 for n in plan.nics()],
        "links": [{"a": link.a, "a_port": link.a_port, "b": link.b, "b_port": link.b_port,
                   "mbps": link.mbps} for link in plan.links],
        "down": sorted(sorted(c) for c in down),
        "groups": {src.name: {dst.name: list(ecmp_members(plan, src.name, dst.name, down))
                              for dst in plan.leaves if dst.name != src.name}
                   for src in plan.leaves},
    }


def publish(run_dir: str | Path, document: dict[str, Any]) -> Path:
    """Write the document into ``run_dir`` atomically; returns its path."""
    path = Path(run_dir) / FILENAME
    tmp = path.with_name(f".{FILENAME}.{os.getpid()}")
    tmp.write_text(json.dumps(document, indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return path


def write_spec(run_dir: str | Path, spec: FabricSpec) -> Path:
    """The running fabric's spec as a YAML file in ``run_dir`` (``gor-fabric.yaml``),
    for jobs whose agents plan ports from a spec file (`tccl.job.job_from_fabric`)."""
    path = Path(run_dir) / SPEC_FILENAME
    tmp = path.with_name(f".{SPEC_FILENAME}.{os.getpid()}")
    tmp.write_text(yaml.safe_dump(dataclasses.asdict(spec), sort_keys=False), encoding="utf-8")
    os.replace(tmp, path)
    return path
