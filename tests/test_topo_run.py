"""The launcher refuses a bad spec with one clear error before starting anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("text, message", [
    ("blocks: 1\nservers_per_block: 1\nrails: 0\nspines: 1\n", "rails: must be at least 1, got 0"),
    ("blocks: 1\nservers_per_block: 1\nrails: 1\nspines: 1\nspine: 2\n", "spine: unknown key"),
    ("blocks: 1\nservers_per_block: 254\nrails: 1\nspines: 1\n", "more servers than addresses"),
])
def test_bad_spec_gives_one_error_and_starts_nothing(tmp_path, text, message):
    spec = tmp_path / "bad.yaml"
    spec.write_text(text)
    done = subprocess.run([sys.executable, "-m", "topo.run", "--fabric", str(spec)], cwd=ROOT,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: {spec}: {message}"] or \
        (len(done.stderr.strip().splitlines()) == 1 and message in done.stderr)
    assert "***" not in done.stdout  # Mininet never started
