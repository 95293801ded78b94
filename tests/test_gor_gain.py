"""GOR's gain on the wire (root, Mininet): the demo's job on the default fabric, seeds
fixed, stock vs stock+GOR vs orthogonal ports. From iteration 2 on (GOR's moves land
within the first) stock+GOR must run at the orthogonal planner's pace and clearly
above stock -- margins set from the measured runs in docs/experiments.md: stock-gor
iterations 2..N 0.81 against orthogonal 0.82 (0.99x) and stock 0.38 (2.1x). A GOR
that never moves a flow runs at stock's pace and fails both. Runs the hypervisor stole
from are measured again, once, on the fabric dilated to cover the stalls they met
(`testkit.again_if_stolen`)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mnexec") is None,
                                reason="needs root and Mininet")

from experiments.__main__ import main  # noqa: E402
from experiments.runner import write_spec  # noqa: E402
from testkit import again_if_stolen  # noqa: E402
from topo.spec import load_spec, replace  # noqa: E402

DEFAULT_FABRIC = Path(__file__).resolve().parent.parent / "topo" / "fabrics" / "default.yaml"
# stock-gor's iterations 2..N against orthogonal's: measured 0.99x (0.96-0.99 over
# repeats on a loaded machine); a GOR that moved nothing gives stock's 0.46x.
VS_ORTHOGONAL = 0.95
# stock-gor's against stock's: measured 2.1x; far above anything stock reaches alone.
VS_STOCK = 1.5


@pytest.mark.timeout(600)
def test_stock_with_gor_runs_at_orthogonal_pace_from_iteration_two(tmp_path: Path) -> None:
    attempts = itertools.count()

    def measure(fabric: Path = DEFAULT_FABRIC) -> dict:
        out = tmp_path / f"run{next(attempts)}"
        assert main(["--configs", "stock,stock-gor,orthogonal", "--repeats", "1", "--iterations", "4",
                     "--seed", "1", "--fabric", str(fabric), "--out", str(out)]) == 0
        return json.loads((out / "summary.json").read_text())["configs"]

    def dilated(dilation: float) -> dict:
        return measure(write_spec(replace(load_spec(DEFAULT_FABRIC), dilation=dilation), tmp_path / "dilated.yaml"))

    # Each configuration's fidelity, with the host's steal during an unfaithful repeat;
    # a stolen measurement is taken again on the fabric dilated to cover its stalls.
    configs = again_if_stolen(measure, lambda c: [{"faithful": row["fidelity"]["faithful"],
                                                   "host_steal": row["fidelity"]["unfaithful_host_steal"],
                                                   "dilation_needed": row["fidelity"]["dilation_needed"]}
                                                  for row in c.values()], dilated=dilated)
    rest = {name: row["busbw_frac_rest"] for name, row in configs.items()}
    assert configs["stock-gor"]["gor_moves"] > 0, rest
    assert rest["stock-gor"] >= VS_ORTHOGONAL * rest["orthogonal"], rest
    assert rest["stock-gor"] >= VS_STOCK * rest["stock"], rest
