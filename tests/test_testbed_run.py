"""The `make run` launcher refuses a bad spec or a missing backend with one clear error
before starting anything; it is the only module that joins the fabric and the
controller (no root needed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from topo.nodes import BMv2Switch

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("text, message", [
    ("blocks: 1\nservers_per_block: 1\nrails: 0\nspines: 1\n", "rails: must be at least 1, got 0"),
    ("blocks: 1\nservers_per_block: 1\nrails: 1\nspines: 1\nspine: 2\n", "spine: unknown key"),
    ("blocks: 1\nservers_per_block: 254\nrails: 1\nspines: 1\n", "more servers than addresses"),
])
def test_bad_spec_gives_one_error_and_starts_nothing(tmp_path, text, message):
    spec = tmp_path / "bad.yaml"
    spec.write_text(text)
    done = subprocess.run([sys.executable, "-m", "testbed.run", "--fabric", str(spec)], cwd=ROOT,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: {spec}: {message}"] or \
        (len(done.stderr.strip().splitlines()) == 1 and message in done.stderr)
    assert "***" not in done.stdout  # Mininet never started


@pytest.mark.skipif(shutil.which("simple_switch_grpc") is not None and shutil.which("p4c") is not None,
                    reason="BMv2 is installed here")
def test_bmv2_backend_without_bmv2_is_one_error():
    done = subprocess.run([sys.executable, "-m", "testbed.run", "--backend", "bmv2"], cwd=ROOT,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: backend bmv2 needs simple_switch_grpc and p4c on PATH"


def test_topo_imports_nothing_of_the_controller():
    """The fabric takes its programming step as a parameter: no module of topo/ pulls
    in controller/ (checked in a fresh interpreter, whose modules are only topo's)."""
    code = ("import importlib, pkgutil, sys, topo\n"
            "for m in pkgutil.iter_modules(topo.__path__):\n"
            "    importlib.import_module('topo.' + m.name)\n"
            "print(sorted(n for n in sys.modules if n.split('.')[0] == 'controller'))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
