"""The files of a run directory besides the captures, and how to read each.

    RUN_DIR/pcap/*.pcap          per-port captures (or the .pcap files in RUN_DIR itself)
    RUN_DIR/gor-fabric.yaml      the fabric spec (GOR writes it; or fabric.yaml, or --fabric)
    RUN_DIR/results-*.json       the TCCL agents' results, with their flow records (or in
                                 RUN_DIR/tccl/, where tccl.launch puts them by default)
    RUN_DIR/gor-events.jsonl     GOR's event log (controller.events)
    RUN_DIR/gor-telemetry.jsonl  GOR's telemetry log: {"ts": .., "links": {"a->b": {"queue_depth": n, ..}}}
                                 (or RUN_DIR/telemetry.jsonl, an experiment run's, same format)
    RUN_DIR/summary.json         an experiment's {"configs": {name: {"busbw_frac": .., ..}}}

Every reader names the file and the line or key of a problem.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from topo.spec import FabricSpec, load_spec

SPEC_NAMES = ("gor-fabric.yaml", "fabric.yaml")
DEFAULT_SPEC = Path(__file__).resolve().parent.parent / "topo" / "fabrics" / "default.yaml"
EVENTS = "gor-events.jsonl"
# GOR's log, else an experiment run's (`experiments.recorder`): the same format.
TELEMETRY_NAMES = ("gor-telemetry.jsonl", "telemetry.jsonl")
EXPERIMENT_SUMMARY = "summary.json"


class RunFileError(ValueError):
    """A run file that cannot be read; the message names the file and the place."""


def find_spec(run_dir: Path, given: str | Path | None = None) -> FabricSpec:
    """The fabric the run used: ``given``, else the run directory's copy, else the
    default fabric."""
    if given is not None:
        return load_spec(given)
    for name in SPEC_NAMES:
        if (run_dir / name).is_file():
            return load_spec(run_dir / name)
    return load_spec(DEFAULT_SPEC)


def read_json_lines(path: Path) -> list[dict[str, Any]]:
    """Records of a JSON-lines file; a bad line is an error naming its number."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise RunFileError(f"{path}:{n}: not JSON: {e.msg}") from e
        if not isinstance(record, dict):
            raise RunFileError(f"{path}:{n}: expected a JSON object, got {type(record).__name__}")
        out.append(record)
    return out


def read_events(run_dir: Path) -> list[dict[str, Any]]:
    """GOR's events (each with ``ts``, wall-clock seconds), [] when the run had no GOR."""
    path = run_dir / EVENTS
    if not path.is_file():
        return []
    events = read_json_lines(path)
    for n, e in enumerate(events, 1):
        if not isinstance(e.get("ts"), (int, float)) or "event" not in e:
            raise RunFileError(f"{path}: record {n}: needs a numeric 'ts' and an 'event'")
    return events


def read_telemetry(run_dir: Path) -> dict[str, list[tuple[float, float]]] | None:
    """Queue depth over time per directed link from the run's telemetry log (the first
    of `TELEMETRY_NAMES` present); None if there is none."""
    path = next((run_dir / name for name in TELEMETRY_NAMES if (run_dir / name).is_file()), None)
    if path is None:
        return None
    series: dict[str, list[tuple[float, float]]] = {}
    for n, record in enumerate(read_json_lines(path), 1):
        ts, links = record.get("ts"), record.get("links")
        if not isinstance(ts, (int, float)) or not isinstance(links, dict):
            raise RunFileError(f"{path}: record {n}: needs a numeric 'ts' and a 'links' object")
        for link, stats in links.items():
            depth = stats.get("queue_depth") if isinstance(stats, dict) else None
            if isinstance(depth, (int, float)):
                series.setdefault(link, []).append((float(ts), float(depth)))
    return series


def find_agent_results(run_dir: Path) -> list[Path]:
    """The agents' results files of a run: ``results-*.json`` in the run directory, or
    in its ``tccl/`` subdirectory (`tccl.launch.default_run_dir`)."""
    for directory in (run_dir, run_dir / "tccl"):
        found = sorted(directory.glob("results-*.json"))
        if found:
            return found
    return []


def read_agent_results(paths: list[Path]) -> list[dict[str, Any]]:
    """The flow records of the TCCL agents' results files, each tagged with its server."""
    flows = []
    for path in paths:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise RunFileError(f"{path}: cannot read agent results: {e}") from e
        if not isinstance(doc, dict) or not isinstance(doc.get("flows"), list):
            raise RunFileError(f"{path}: agent results need a 'flows' list")
        for n, flow in enumerate(doc["flows"]):
            missing = [k for k in ("src_ip", "dst_ip", "bytes", "packets") if k not in flow]
            if missing:
                raise RunFileError(f"{path}: flows[{n}]: missing {', '.join(missing)}")
            flows.append({**flow, "server": doc.get("server", path.stem)})
    return flows


def read_experiment_summary(path: Path) -> dict[str, dict[str, Any]]:
    """The per-configuration numbers of an experiment summary (``configs``)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise RunFileError(f"{path}: cannot read the experiment summary: {e}") from e
    configs = doc.get("configs") if isinstance(doc, dict) else None
    if not isinstance(configs, dict) or not configs:
        raise RunFileError(f"{path}: expected {{\"configs\": {{name: {{...}}}}}} with at least one config")
    for name, numbers in configs.items():
        if not isinstance(numbers, dict):
            raise RunFileError(f"{path}: configs.{name}: expected an object")
    return configs
