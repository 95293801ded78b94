"""`python -m testbed.run` (what `make run` starts) as a user scripts it: commands piped
to the prompt, and nothing left behind after the prompt ends (root, Mininet)."""

from __future__ import annotations

import os
import re
import signal
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from topo.nodes import RUN_DIR

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mnexec") is None,
                                reason="needs root and Mininet")

ROOT = Path(__file__).resolve().parent.parent


def small_spec(tmp_path: Path, prefix: str, port_offset: int) -> Path:
    """A 2-block, 1-server, 2-rail, 1-spine fabric with names and ports of its own."""
    spec = tmp_path / "small.yaml"
    spec.write_text(f"name: small\nblocks: 2\nservers_per_block: 1\nrails: 2\nspines: 1\n"
                    f"node_prefix: {prefix}\n"
                    f"grpc_port_base: {41000 + (os.getpid() % 1000) * 16 + port_offset}\n")
    return spec


def assert_nothing_left(prefix: str) -> None:
    assert not list(RUN_DIR.glob(f"{prefix}*.pid"))
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f" {prefix}" not in links


def test_piped_pingall_then_clean_exit(tmp_path):
    prefix = f"r{os.getpid() % 1000}"
    spec = small_spec(tmp_path, prefix, 0)
    done = subprocess.run([sys.executable, "-m", "testbed.run", "--fabric", str(spec)], cwd=ROOT,
                          input="pingall\nnics\nswitches\n", capture_output=True, text=True, timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "Fabric 'small' ready" in out
    assert "*** Results: 0% dropped (2/2 received)" in out, out
    assert re.search(rf"^{prefix}b1h0 +1 10\.1\.1\.1 ", out, re.M), out
    # Each of the 5 switches programmed once: by GOR's session, not before it as well.
    assert len(re.findall(rf"^{prefix}\w+ +(leaf|spine) .* up \(pushed 1x\)$", out, re.M)) == 5, out
    assert_nothing_left(prefix)


def test_sigterm_at_the_prompt_tears_everything_down(tmp_path):
    prefix = f"s{os.getpid() % 1000}"
    spec = small_spec(tmp_path, prefix, 8)
    proc = subprocess.Popen([sys.executable, "-m", "testbed.run", "--fabric", str(spec)], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        for line in proc.stdout:
            if "ready in" in line:
                break
        assert len(list(RUN_DIR.glob(f"{prefix}*.pid"))) == 5
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM
    assert_nothing_left(prefix)


def test_stop_removes_every_cable_even_with_a_process_left_in_a_host(tmp_path):
    """`Fabric.stop` ends the hosts' namespaces to drop their cables at once; a host
    whose namespace outlives its shell (a process still in it) loses its cables too,
    and the same fabric comes up again at once."""
    from topo.net import Fabric
    from topo.processes import stop_process
    from topo.spec import load_spec

    prefix = f"t{os.getpid() % 1000}"
    spec = load_spec(small_spec(tmp_path, prefix, 4))
    fabric = Fabric(spec, run_dir=tmp_path / "run")
    fabric.start()
    stay = fabric.host(f"{prefix}b0h0").popen(["sleep", "60"])
    try:
        fabric.stop()
        assert_nothing_left(prefix)
        with Fabric(spec, run_dir=tmp_path / "again"):
            pass
        assert_nothing_left(prefix)
    finally:
        fabric.stop()
        stop_process(stay, 5)
