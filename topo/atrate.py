"""``python -m topo.atrate SPEC MBPS OUT``: the fabric spec SPEC with its NICs' links at
MBPS Mbit/s and its profile restated to mean the same in frames
(`topo.spec.at_link_rate`), validated and written to OUT. `make run` and `make demo`
run on it with ``RATE=MBPS`` (OUT under build/fabrics): the shipped fabrics keep the
rate this machine carries faithfully (docs/fabric.md "Link rates"), and this is how to
try another without editing them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from topo.spec import SpecError, at_link_rate, load_spec


def write_at_rate(spec_path: str | Path, mbps: float, out: str | Path) -> None:
    """SPEC restated for ``mbps``, validated, written to ``out``."""
    load_spec(spec_path)     # the original's own errors first, naming its keys
    data = yaml.safe_load(Path(spec_path).read_text(encoding="utf-8"))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(at_link_rate(data, mbps, str(spec_path)), sort_keys=False), encoding="utf-8")
    load_spec(out)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m topo.atrate SPEC MBPS OUT", file=sys.stderr)
        return 2
    try:
        mbps = float(argv[1])
    except ValueError:
        print(f"topo.atrate: MBPS: a rate in Mbit/s, got {argv[1]!r}", file=sys.stderr)
        return 2
    try:
        write_at_rate(argv[0], mbps, argv[2])
    except SpecError as e:
        print(e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
