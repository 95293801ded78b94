"""A stopped fabric's captures move into the run directory under the logical names."""

from __future__ import annotations

from pathlib import Path

from experiments.captures import keep_captures


def test_captures_move_with_the_node_prefix_dropped(tmp_path: Path) -> None:
    src, dest = tmp_path / "fabric" / "pcap", tmp_path / "run" / "pcap"
    src.mkdir(parents=True)
    for name in ("x12b0l0-eth1_in.pcap", "x12sp1-eth3_out.pcap", "cpu3_out.pcap"):
        (src / name).write_bytes(name.encode())
    (src / "x12b0l0.log").write_text("not a capture")
    moved = keep_captures(src, dest, "x12")
    assert sorted(p.name for p in moved) == ["b0l0-eth1_in.pcap", "cpu3_out.pcap", "sp1-eth3_out.pcap"]
    assert (dest / "b0l0-eth1_in.pcap").read_bytes() == b"x12b0l0-eth1_in.pcap"
    assert [p.name for p in src.iterdir()] == ["x12b0l0.log"]


def test_without_a_prefix_names_are_kept(tmp_path: Path) -> None:
    src = tmp_path / "pcap"
    src.mkdir()
    (src / "b0l0-eth1_in.pcap").write_bytes(b"x")
    assert [p.name for p in keep_captures(src, tmp_path / "out", "")] == ["b0l0-eth1_in.pcap"]
