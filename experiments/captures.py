"""Packet captures of a demo run (``--pcap``): each configuration's run gets a fabric of
its own, and its captures end up in its run directory, named as the logical fabric
names its switches.

Why a fabric per run rather than one for all: a switch opens its capture files once,
at start, and appends to them until it exits (`p4sim.switch.pcap`), so on a shared
fabric every run's frames land in the same files. The runs of a demo reuse the same
queue-pair numbers and addresses, so neither the cross-check (which finds an agent's
flow by its QPN) nor the per-flow table could tell one run's frames from another's,
and cutting the files by time windows would make every reader of the captures
depend on clocks agreeing to the millisecond. A fresh fabric costs its bring-up
(tens of seconds on the default fabric) per run -- captures are for inspecting a
run, not for timing many -- and gives files that hold exactly one run.

The switches run under the experiment's node prefix (``x123leaf0``); the captures
are renamed to the logical names (``leaf0-eth1_in.pcap``) once the switches have
exited and closed them, so the run directory reads with the logical ``fabric.yaml``
beside it, and the captures, the telemetry log and the summary use the same names.
"""

from __future__ import annotations

import shutil
from pathlib import Path


def keep_captures(source: Path, dest: Path, prefix: str) -> list[Path]:
    """Move the ``*.pcap`` files of ``source`` (a stopped fabric's capture directory)
    into ``dest``, dropping the node ``prefix`` from their names; the moved paths."""
    dest.mkdir(parents=True, exist_ok=True)
    moved = []
    for path in sorted(source.glob("*.pcap")):
        name = path.name[len(prefix):] if prefix and path.name.startswith(prefix) else path.name
        target = dest / name        # replaces a capture of an earlier run into the same --out
        shutil.move(str(path), str(target))
        moved.append(target)
    return moved
