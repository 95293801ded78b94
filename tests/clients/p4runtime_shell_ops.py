"""Drive p4runtime-shell (``p4runtime_sh.shell``) through a list of operations.

Runs inside the p4runtime-shell venv (protobuf 3.20, p4runtime 1.4.1), never in the
project's venv, so it imports nothing from the project. The test hands it one JSON
request on stdin and reads one JSON result from stdout, which keeps the scenario (what
to write, what to expect) in the test and this script a thin, generic driver that uses
only the shell's public API -- what a person types at the ``P4Runtime sh >>>`` prompt.

Request::

    {"grpc_addr": "unix:/tmp/x/p4rt.sock", "device_id": 1, "election_id": [0, 10],
     "config": ["prog.p4info.txtpb", "prog.json"],      # or null: use the switch's
     "ops": [{"op": "insert", "table": "...", "match": {"hdr.ipv4.dstAddr": "10.0.2.0/24"},
              "action": "...", "params": {"port": "2"}, "priority": 0},
             {"op": "modify" | "delete", ...same fields...},
             {"op": "set_default", "table": "...", "action": "...", "params": {...}},
             {"op": "read", "table": "..."},            # all entries of one table
             {"op": "read_default", "table": "..."},
             {"op": "read_counter", "counter": "...", "index": 1},   # index null: all cells
             {"op": "delete_all", "table": "..."}]}

Result: ``{"p4info_tables": [...], "results": [...]}`` with one item per op: ``{"ok":
true, ...}`` (``entries`` / ``cells`` for reads, ``deleted`` for delete_all) or ``{"ok":
false, "code": "ALREADY_EXISTS", "message": "..."}`` when the server refused it.
"""

from __future__ import annotations

import contextlib
import json
import sys

import grpc
from google.rpc import code_pb2

import p4runtime_sh.shell as sh
from p4runtime_sh.context import P4Type
from p4runtime_sh.p4runtime import P4RuntimeException, P4RuntimeWriteException


def build_entry(op: dict) -> sh.TableEntry:
    """A TableEntry the way a shell user writes one: match fields and params as strings."""
    entry = sh.TableEntry(op["table"])
    if op.get("action"):
        entry(action=op["action"])
        for name, value in op.get("params", {}).items():
            entry.action[name] = str(value)
    for name, value in op.get("match", {}).items():
        entry.match[name] = str(value)
    if op.get("priority"):
        entry.priority = op["priority"]
    return entry


def describe_entry(entry: sh.TableEntry) -> dict:
    """A table entry read back, as plain JSON: match values and params as integers."""
    msg = entry.msg()
    match = {}
    for field in msg.match:
        name = sh.context.get_mf_name(entry.name, field.field_id)
        kind = field.WhichOneof("field_match_type")
        part = getattr(field, kind)
        if kind == "exact":
            match[name] = {"exact": _int(part.value)}
        elif kind == "lpm":
            match[name] = {"lpm": [_int(part.value), part.prefix_len]}
        elif kind == "ternary":
            match[name] = {"ternary": [_int(part.value), _int(part.mask)]}
        elif kind == "range":
            match[name] = {"range": [_int(part.low), _int(part.high)]}
        else:
            match[name] = {kind: _int(part.value)}
    out = {"match": match, "priority": msg.priority, "is_default": msg.is_default_action}
    if msg.action.HasField("action"):
        action = msg.action.action
        out["action"] = sh.context.get_name_from_id(action.action_id)
        names = {p.id: p.name for p in sh.context.get_obj_by_id(action.action_id).params}
        out["params"] = {names[p.param_id]: _int(p.value) for p in action.params}
    return out


def _int(value: bytes) -> int:
    return int.from_bytes(value, "big")


def run_op(op: dict) -> dict:
    """Carry out one op of the request (see the module docstring) with the shell's API."""
    kind = op["op"]
    if kind in ("insert", "modify", "delete"):
        getattr(build_entry(op), kind)()
        return {"ok": True}
    if kind == "set_default":
        entry = sh.TableEntry(op["table"])(action=op["action"], is_default=True)
        for name, value in op.get("params", {}).items():
            entry.action[name] = str(value)
        entry.modify()
        return {"ok": True}
    if kind == "read":
        return {"ok": True, "entries": [describe_entry(e) for e in sh.TableEntry(op["table"]).read()]}
    if kind == "read_default":
        query = sh.TableEntry(op["table"])(is_default=True)
        return {"ok": True, "entries": [describe_entry(e) for e in query.read()]}
    if kind == "read_counter":
        query = sh.CounterEntry(op["counter"])
        query.index = op.get("index")
        cells = [{"index": c.index, "packets": c.packet_count, "bytes": c.byte_count}
                 for c in query.read()]
        return {"ok": True, "cells": cells}
    if kind == "delete_all":
        entries = list(sh.TableEntry(op["table"]).read())
        for entry in entries:
            entry.delete()
        return {"ok": True, "deleted": len(entries)}
    raise ValueError(f"unknown op {kind!r} in {op}")


def run_checked(op: dict) -> dict:
    """Run one op; a refusal by the server becomes a result, not a crash."""
    try:
        return run_op(op)
    except P4RuntimeWriteException as e:
        _, error = e.errors[0]
        return {"ok": False, "code": code_pb2.Code.Name(error.canonical_code), "message": error.message}
    except P4RuntimeException as e:
        return {"ok": False, "code": e.grpc_error.code().name, "message": e.grpc_error.details()}
    except grpc.RpcError as e:
        return {"ok": False, "code": e.code().name, "message": e.details()}


def main() -> int:
    request = json.load(sys.stdin)
    config = sh.FwdPipeConfig(*request["config"]) if request.get("config") else None
    # The shell prints notices ("You are not the primary client...") on stdout, which
    # carries only the result here.
    with contextlib.redirect_stdout(sys.stderr):
        # setup() pushes the pipeline (VERIFY_AND_COMMIT) when given a config, then fetches
        # the P4Info back from the switch -- exactly what `p4runtime-sh --config a,b` does.
        sh.setup(device_id=request["device_id"], grpc_addr=request["grpc_addr"],
                 election_id=tuple(request["election_id"]), config=config, verbose=False)
        try:
            tables = sorted(name for name, _ in sh.context.get_objs(P4Type.table))
            results = [run_checked(op) for op in request["ops"]]
        finally:
            sh.teardown()
    json.dump({"p4info_tables": tables, "results": results}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
