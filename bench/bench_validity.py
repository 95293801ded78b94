"""The fabric against published models (issue 26, docs/validation.md): each check of
`experiments.validity.runs` on its small fabric, its figures printed beside the
reference's value and source, and returned as ``validity_*`` figures (``*_ref`` the
reference's). Needs root (Mininet); the machine's load and each run's fidelity are
printed with the figures.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

SOURCES = {
    "one_cnp": "DCQCN (Zhu et al., SIGCOMM 2015) section 3: eqs. 1-2 and QCN's increase, as CoNEXT 2016 section 3 "
               "restates them",
    "two_flows": "DCQCN section 4, fluid model (per flow: Zhu et al., CoNEXT 2016, section 3.1, eqs. 3-7; "
                 "its fixed point: section 3.2, Theorem 1)",
    "pfc": "DCQCN section 2, PFC unfairness: shares per ingress port",
    "victim": "DCQCN section 2, the victim flow: paused with an incast under PFC alone, max-min share with DCQCN",
    "profiles": "topo/ccprofiles.py: DCQCN's own values, HPCC's simulation/run.py (cc dcqcn)",
}


def _on_fabric(base: Mapping[str, Any], tmp: Path, runs: Callable[[Any, Path], dict[str, Any]]) -> dict[str, Any]:
    from controller.routes import program_fabric
    from experiments.validity.runs import check_spec
    from topo.net import Fabric

    spec, spec_file = check_spec(base, f"b{os.getpid() % 1000}", tmp)
    with Fabric(spec, run_dir=tmp / "run", program=program_fabric) as fabric:
        out = runs(fabric, spec_file)
        out["dilation"] = fabric.clock.dilation
    return out


def _say(check: str, result: Mapping[str, Any]) -> None:
    print(f"## {check} -- reference: {SOURCES[check.split(':')[0]]}", file=sys.stderr)
    print(json.dumps(result, default=str), file=sys.stderr, flush=True)


def run() -> dict[str, float]:
    if os.geteuid() != 0:
        raise RuntimeError("bench_validity needs root (Mininet)")
    from experiments.validity import runs as R

    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-validity-") as tmp_name:
        tmp = Path(tmp_name)
        one = _on_fabric(R.ONE_CNP_FABRIC, tmp / "one", lambda f, s: R.one_cnp(f, s, tmp / "one" / "job"))
        _say("one_cnp", one)
        for i, cut in enumerate(one["cuts"], 1):
            figures[f"validity_cnp{i}_cut_ratio"] = cut["cut_ratio"]
            figures[f"validity_cnp{i}_cut_ratio_ref"] = cut["cut_ratio_ref"]
            # None: no cut seen after the CNP (experiments.validity.runs.one_cnp)
            figures[f"validity_cnp{i}_alpha_periods"] = \
                cut["alpha_periods"] if cut["alpha_periods"] is not None else float("nan")
            figures[f"validity_cnp{i}_alpha_periods_ref"] = cut["alpha_periods_ref"]
            for k in (1, 3, 5):
                figures[f"validity_cnp{i}_rate_after_{k}T"] = cut["recovery"][k]
                figures[f"validity_cnp{i}_rate_after_{k}T_ref"] = cut["recovery_ref"][k]

        two = _on_fabric(R.TWO_FLOWS_FABRIC, tmp / "two", lambda f, s: R.two_flows(f, s, tmp / "two" / "job"))
        _say("two_flows", two)
        nan = float("nan")
        figures["validity_two_flows_fair_after_s"] = two["fair_after_s"] if two["fair_after_s"] is not None else nan
        figures["validity_two_flows_fair_after_s_model"] = \
            two["fair_after_s_model"] if two["fair_after_s_model"] is not None else nan
        for i, share in enumerate(two["shares_after"]):
            figures[f"validity_two_flows_share{i}"] = share
        figures["validity_two_flows_queue_p50"] = two["queue_p5_p50_p95"][1]
        figures["validity_two_flows_queue_p50_model"] = two["queue_p5_p50_p95_model"][1]
        figures["validity_two_flows_queue_fixed_point"] = two["queue_fixed_point"]

        def pfc_runs(fabric: Any, spec_file: Path) -> dict[str, Any]:
            return {"pfc": R.pfc_ingress(fabric, spec_file, tmp / "pfc" / "alone", dcqcn=False),
                    "dcqcn": R.pfc_ingress(fabric, spec_file, tmp / "pfc" / "dcqcn", dcqcn=True),
                    "victim_pfc": R.victim(fabric, spec_file, tmp / "pfc" / "victim-alone", dcqcn=False),
                    "victim_dcqcn": R.victim(fabric, spec_file, tmp / "pfc" / "victim-dcqcn", dcqcn=True)}

        pfc = _on_fabric(R.PFC_FABRIC, tmp / "pfc", pfc_runs)
        for kind in ("pfc", "dcqcn"):
            _say(f"pfc: {kind}", pfc[kind])
            shares, ref = pfc[kind]["shares"], pfc[kind]["shares_ref"]
            figures[f"validity_{kind}_lone_share"] = shares["local"]
            figures[f"validity_{kind}_lone_share_ref"] = ref["local"]
            remote = [v for k, v in shares.items() if k != "local"]
            figures[f"validity_{kind}_shared_port_share_min"] = min(remote)
            figures[f"validity_{kind}_shared_port_share_max"] = max(remote)
            figures[f"validity_{kind}_shared_port_share_ref"] = ref["remote0"]
            figures[f"validity_{kind}_pauses"] = pfc[kind]["pauses"]
            victim = pfc[f"victim_{kind}"]
            _say(f"victim: {kind}", victim)
            figures[f"validity_victim_{kind}_share"] = victim["victim"]
            figures[f"validity_victim_{kind}_receiver_use"] = victim["receiver_link_use"]
        figures["validity_victim_share_ref"] = pfc["victim_dcqcn"]["victim_ref"]

        demo = _on_fabric(R.PROFILES_FABRIC, tmp / "profiles", lambda f, s: R.profiles(f, s, tmp / "profiles" / "job"))
        for name, numbers in demo.items():
            if isinstance(numbers, dict):
                _say(f"profiles: {name}", numbers)
                for key in ("ecn_marks", "cnps", "busbw_mbps_min", "busbw_mbps_mean", "pauses"):
                    figures[f"validity_profile_{name}_{key}"] = numbers[key]
    return figures
