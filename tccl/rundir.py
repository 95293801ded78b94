"""The files an agent keeps in its job's run directory besides its control socket
(`tccl.control.socket_path`): the barrier markers and the results, and how a launcher
clears what an earlier job left there."""

from __future__ import annotations

from pathlib import Path


def ready_path(run_dir: Path, server: str) -> Path:
    """Marker file an agent writes once its NICs are open (the start barrier)."""
    return run_dir / f"ready-{server}"


def done_path(run_dir: Path, server: str) -> Path:
    """Marker file an agent writes once its workload is over and every message it sent
    is acknowledged (the finish barrier)."""
    return run_dir / f"done-{server}"


def results_path(run_dir: Path, server: str) -> Path:
    """The agent's results (`tccl.results.save`)."""
    return run_dir / f"results-{server}.json"


def clear_markers(run_dir: Path, server: str) -> None:
    """Remove what an earlier job left of ``server``'s agent in ``run_dir``: its
    results and its barrier markers would pass the next job's barriers."""
    for path in (results_path(run_dir, server), ready_path(run_dir, server), done_path(run_dir, server)):
        path.unlink(missing_ok=True)
