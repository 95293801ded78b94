"""Fabric spec: the shipped YAML files load, and bad specs fail with one error naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from topo.spec import (FabricSpec, PfcSpec, SpecError, at_link_rate, load_spec, min_headroom, parse_spec, replace,
                       switch_process_of)

FABRICS = Path(__file__).resolve().parent.parent / "topo" / "fabrics"
MINIMAL = {"blocks": 2, "servers_per_block": 2, "rails": 4, "spines": 2}


def test_default_fabric_is_the_documented_size():
    spec = load_spec(FABRICS / "default.yaml")
    assert (spec.blocks, spec.servers_per_block, spec.rails, spec.spines) == (2, 2, 4, 2)
    assert spec.leaves == 8 and spec.switches == 10
    assert spec.links.uplink_mbps == 10 and spec.ecn.kmin < spec.ecn.kmax


def test_shipped_fabrics_keep_the_timers_in_frame_times():
    """time_factor x host rate is the same everywhere (docs/fabric.md): DCQCN's timers
    and the CNP interval are the same number of frame times at any link rate."""
    for path in sorted(FABRICS.glob("*.yaml")):
        spec = load_spec(path)
        assert spec.time_factor * spec.links.host_mbps == 2000, path.name


def test_a_spec_at_another_link_rate_keeps_its_profile_in_frames():
    """`at_link_rate`: every tier's rate by the same ratio, time_factor by its inverse
    (time_factor x rate kept: DCQCN's timers the same frame times), ECN in packets and
    PFC in bytes of frames as they were."""
    data = {**MINIMAL, "links": {"host_mbps": 10, "uplink_mbps": 5, "spine_uplink_mbps": 2.5},
            "ecn": {"kmin": 5, "kmax": 20, "pmax": 0.2}, "pfc": {"xoff": 32768, "xon": 16384}}
    fast = parse_spec(at_link_rate(data, 40))
    assert (fast.links.host_mbps, fast.links.uplink_mbps, fast.links.spine_uplink_mbps) == (40, 20, 10)
    assert fast.time_factor == 50 and fast.time_factor * fast.links.host_mbps == 2000
    assert (fast.ecn.kmin, fast.ecn.kmax, fast.pfc.xoff, fast.pfc.xon) == (5, 20, 32768, 16384)
    assert parse_spec(at_link_rate({**data, "time_factor": 300}, 5)).time_factor == 600
    assert data["links"]["host_mbps"] == 10                     # the document given is left alone
    with pytest.raises(SpecError, match="x.yaml: links.host_mbps: .*got 0"):
        at_link_rate(data, 0, "x.yaml")


def test_atrate_writes_the_spec_at_the_rate_make_asks_for(tmp_path, capsys):
    from topo.atrate import main

    out = tmp_path / "f" / "default-20mbps.yaml"
    assert main([str(FABRICS / "default.yaml"), "20", str(out)]) == 0
    spec, default = load_spec(out), load_spec(FABRICS / "default.yaml")
    assert (spec.links.host_mbps, spec.links.uplink_mbps) == (20, 20)
    assert spec.time_factor == default.time_factor * default.links.host_mbps / 20
    assert (spec.ecn, spec.pfc, spec.queue_depth) == (default.ecn, default.pfc, default.queue_depth)
    assert main([str(FABRICS / "default.yaml"), "fast", str(out)]) == 2
    assert "MBPS: a rate in Mbit/s, got 'fast'" in capsys.readouterr().err
    assert main([str(FABRICS / "default.yaml"), "-5", str(out)]) == 2
    assert "default.yaml: links.host_mbps" in capsys.readouterr().err


def test_block8_is_two_blocks_of_eight_rail_servers():
    spec = load_spec(FABRICS / "block8.yaml")
    assert (spec.blocks * spec.servers_per_block * spec.rails, spec.leaves, spec.spines) == (64, 16, 4)
    assert spec.leaf_oversubscription == 1 and spec.pfc.enabled and spec.dilation == 0.0


def test_every_shipped_fabric_loads():
    specs = [load_spec(p) for p in sorted(FABRICS.glob("*.yaml"))]
    assert len(specs) >= 2
    assert max(s.switches for s in specs) > 10


def test_defaults_fill_optional_keys():
    spec = parse_spec(MINIMAL)
    assert spec == FabricSpec(**MINIMAL)


@pytest.mark.parametrize("change, key, words", [
    ({"rails": 0}, "rails", "at least 1"),
    ({"servers_per_block": 300}, "servers_per_block", "more servers than addresses"),
    ({"spines": 70}, "spines", "ports"),
    ({"railz": 4}, "railz", "unknown key"),
    ({"ecn": {"kmin": 10, "kmax": 10}}, "ecn.kmax", "greater than ecn.kmin"),
    ({"ecn": {"pmax": 1.5}}, "ecn.pmax", "probability"),
    ({"ecn": {"kmim": 3}}, "ecn.kmim", "unknown key"),
    ({"links": {"uplink_mbps": 0}}, "links.uplink_mbps", "> 0"),
    ({"links": 20}, "links", "expected dict"),
    ({"ecmp_hash": "md5"}, "ecmp_hash", "crc32"),
    ({"blocks": "two"}, "blocks", "expected int"),
    ({"pcap": 1}, "pcap", "expected bool"),
    ({"grpc_port_base": 80}, "grpc_port_base", "1024..65535"),
    ({"node_prefix": "toolong"}, "node_prefix", "at most 4"),
    ({"nvlink": {"gbps": -1}}, "nvlink.gbps", ">= 0"),
    ({"nvlink": {"latency_us": -0.5}}, "nvlink.latency_us", ">= 0"),
    ({"nvlink": {"gbs": 1}}, "nvlink.gbs", "unknown key"),
    ({"nvlink": {"gbps": "fast"}}, "nvlink.gbps", "expected int or float"),
    ({"time_factor": 0}, "time_factor", "> 0"),
    ({"time_factor": float("inf")}, "time_factor", "> 0"),
    ({"time_factor": "slow"}, "time_factor", "expected int or float"),
    ({"mtu": 1500}, "mtu", "one of 256, 512, 1024, 2048, 4096"),
    ({"dilation": 0.5}, "dilation", ">= 1 or 'auto'"),
    ({"dilation": "fast"}, "dilation", ">= 1 or 'auto'"),
    ({"rt_priority": 100}, "rt_priority", "1..99"),
    ({"nic": "rxe"}, "nic", "one of auto, python, native"),
    ({"switch_engine": "c"}, "switch_engine", "one of auto, native, python"),
    ({"switch_process": "one"}, "switch_process", "one of auto, own, shared"),
    ({"switch_process": "shared", "switch_engine": "python"}, "switch_process", "native switches only"),
    ({"switch_process": "shared", "cluster": {"servers": ["a", "b"]}}, "switch_process", "cluster mode needs"),
    ({"pfc": {"enabled": 1}}, "pfc.enabled", "expected bool"),
    ({"pfc": {"priority": 6}}, "pfc.priority", "below the CNPs' 6"),
    ({"pfc": {"xoff": 1000}}, "pfc.xoff", "at least one frame (4218 bytes"),
    ({"pfc": {"xon": 32768}}, "pfc.xon", "xon < pfc.xoff (32768)"),
    ({"pfc": {"headroom": 8000}}, "pfc.headroom", "= 16872 at mtu 4096"),
    ({"pfc": {"watchdog_ms": -1}}, "pfc.watchdog_ms", ">= 0"),
    ({"pfc": {"xof": 1}}, "pfc.xof", "unknown key"),
    ({"pfc": True}, "pfc", "expected dict"),
])
def test_bad_values_name_the_key(change, key, words):
    with pytest.raises(SpecError) as err:
        parse_spec({**MINIMAL, **change}, "bad.yaml")
    message = str(err.value)
    assert message.startswith(f"bad.yaml: {key}: "), message
    assert words in message


def test_nvlink_keys_are_read():
    spec = parse_spec({**MINIMAL, "nvlink": {"gbps": 2, "latency_us": 1.5}})
    assert (spec.nvlink.gbps, spec.nvlink.latency_us) == (2.0, 1.5)
    assert parse_spec(MINIMAL).nvlink.gbps == 0.0           # absent: no NVLink


def test_pfc_keys_are_read():
    spec = parse_spec({**MINIMAL, "pfc": {"enabled": True, "priority": 2, "xoff": 40000, "xon": 0,
                                          "headroom": 20000, "watchdog_ms": 0}})
    assert spec.pfc == PfcSpec(True, 2, 40000, 0, 20000, 0.0)
    assert not parse_spec(MINIMAL).pfc.enabled                # absent: no PFC
    # A smaller MTU needs less headroom (2 x (frame + frame), frame = 1500 + 18).
    assert min_headroom(parse_spec({**MINIMAL, "mtu": 1024})) == 4 * 1518


def test_emulation_keys_are_read():
    spec = parse_spec({**MINIMAL, "mtu": 1024, "dilation": "auto", "rt_priority": 0, "nic": "python"})
    assert (spec.mtu, spec.iface_mtu, spec.dilation, spec.rt_priority, spec.nic) == (1024, 1500, 0.0, 0, "python")
    assert parse_spec(MINIMAL).nic == "auto"        # the native NIC where it builds
    spec = parse_spec({**MINIMAL, "dilation": 2})
    assert (spec.mtu, spec.iface_mtu, spec.dilation) == (4096, 4200, 2.0)
    assert parse_spec(MINIMAL).switch_engine == "auto"
    assert parse_spec({**MINIMAL, "switch_engine": "python"}).switch_engine == "python"
    assert parse_spec(MINIMAL).switch_process == "auto"
    assert parse_spec({**MINIMAL, "switch_process": "shared"}).switch_process == "shared"
    # auto: one shared loop for native-capable switches on one machine, else a process each.
    assert switch_process_of(parse_spec(MINIMAL)) == "shared"
    assert switch_process_of(parse_spec({**MINIMAL, "switch_engine": "python"})) == "own"
    assert switch_process_of(parse_spec({**MINIMAL, "cluster": {"servers": ["a", "b"]}})) == "own"
    assert switch_process_of(parse_spec({**MINIMAL, "switch_process": "own"})) == "own"


def test_missing_required_key():
    with pytest.raises(SpecError, match=r"^x.yaml: spines: missing"):
        parse_spec({k: v for k, v in MINIMAL.items() if k != "spines"}, "x.yaml")


def test_load_spec_reports_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "none.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("blocks: [1, 2\n")
    with pytest.raises(SpecError, match=r"bad.yaml: not valid YAML"):
        load_spec(bad)
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(SpecError, match="a mapping of keys"):
        load_spec(bad)


def test_replace_validates():
    spec = parse_spec(MINIMAL)
    assert replace(spec, grpc_port_base=40000).grpc_port_base == 40000
    with pytest.raises(SpecError, match="rails"):
        replace(spec, rails=0)
