"""p4runtime-shell, the P4 community's interactive P4Runtime client, against ``p4sim switch``.

p4runtime-shell pins protobuf < 3.21 and the PyPI ``p4runtime`` 1.4.1 bindings, while
the project (and p4sim's server) live in protobuf 6, so the shell gets its own venv
(``.venv-clients/p4runtime-shell``, `testbed.clients`: created once and reused) and runs
tests/clients/p4runtime_shell_ops.py there; this test talks to it in JSON over
stdin/stdout. The switch is a real ``p4sim switch`` process (stopped by PID), its
program p4src/astral.p4 compiled by ``p4sim compile`` to the two files the shell's
``--config p4info.txtpb,prog.json`` takes.

* without network namespaces: push the pipeline, set the default action, insert /
  read / modify / delete entries with the server's error codes, read counters, and a
  second (backup) client that gets the P4Info from the switch and may not write;
* with namespaces (root): entries written by the shell forward real packets between
  two hosts through LPM -> ECMP, counters read by the shell count them, and after the
  shell deletes the entries the packets are dropped (and counted as unrouted).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from google.protobuf import text_format
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from p4sim.proto import p4i
from switchproc import SwitchProcess
from testbed.clients import p4runtime_shell
from topo.namespaces import Netns
from testkit import wait_for

ROOT = Path(__file__).resolve().parent.parent
CLIENT_SCRIPT = Path(__file__).parent / "clients" / "p4runtime_shell_ops.py"
DEVICE_ID = 1
CPU_PORT = 255
PRIMARY = [0, 10]  # p4runtime-shell's election id is (high, low)
BACKUP = [0, 5]

LPM = "AstralIngress.ipv4_lpm"
NHOP = "AstralIngress.ecmp_nhop"
ECN = "AstralEgress.ecn_threshold"
CONFIG = "AstralIngress.switch_config"
RX = "AstralIngress.rx_port_counter"
TX = "AstralEgress.tx_port_counter"
NO_ROUTE = "AstralIngress.no_route_counter"
NHOP_MACS = ("02:00:00:00:02:0a", "02:00:00:00:02:0b")


# ---- the client venv and the switch ---------------------------------------------------


@pytest.fixture(scope="session")
def shell_python() -> Path:
    try:
        return p4runtime_shell()
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        pytest.fail(str(e))


@pytest.fixture(scope="module")
def astral(tmp_path_factory) -> tuple[Path, Path]:
    """(P4Info text, BMv2 JSON) of p4src/astral.p4, written by ``p4sim compile``."""
    out = tmp_path_factory.mktemp("astral")
    p4info = out / "astral.p4info.txtpb"
    subprocess.run([sys.executable, "-m", "p4sim.cli", "compile", "--target", "bmv2", "--arch", "v1model",
                    "--p4runtime-files", str(p4info), "-o", str(out), str(ROOT / "p4src" / "astral.p4")],
                   check=True, capture_output=True, text=True)
    return p4info, out / "astral.json"


def table_names(p4info: Path) -> list[str]:
    info = text_format.Parse(p4info.read_text(), p4i.P4Info())
    return sorted(t.preamble.name for t in info.tables)


class Switch(SwitchProcess):
    """A ``p4sim switch --no-p4`` process serving P4Runtime on a Unix socket."""

    def __init__(self, workdir: Path, *args: str, prefix: tuple[str, ...] = ()) -> None:
        self.address = f"unix:{workdir}/p4rt.sock"
        super().__init__(workdir, "--no-p4", "--device-id", str(DEVICE_ID), "--cpu-port", str(CPU_PORT),
                         "--grpc-server-addr", self.address, *args, prefix=prefix)


def shell(python: Path, switch: Switch, ops: list[dict], *, config: tuple[Path, Path] | None = None,
          election_id: list[int] = PRIMARY) -> dict:
    """Run the ops through p4runtime-shell against ``switch``; the client's JSON result."""
    request = {"grpc_addr": switch.address, "device_id": DEVICE_ID, "election_id": election_id,
               "config": [str(p) for p in config] if config else None, "ops": ops}
    done = subprocess.run([str(python), str(CLIENT_SCRIPT)], input=json.dumps(request),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"p4runtime-shell client failed:\n{done.stderr}\nswitch log:\n{switch.log_text()}"
    return json.loads(done.stdout)


# ---- scenario helpers ---------------------------------------------------------------


def ip(text: str) -> int:
    return int.from_bytes(bytes(int(x) for x in text.split(".")), "big")


def mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


def lpm_entry(prefix: str, action: str, **params) -> dict:
    return {"table": LPM, "match": {"hdr.ipv4.dstAddr": prefix}, "action": action, "params": params}


def nhop_entry(index: int, port: int, dst_mac: str) -> dict:
    return {"table": NHOP, "match": {"meta.ecmp_group": 1, "meta.ecmp_index": index},
            "action": "AstralIngress.forward", "params": {"port": port, "dst_mac": dst_mac}}


def routes(h1_mac: str) -> list[dict]:
    """A leaf's routes: 10.0.2.0/24 over a 2-way ECMP group to port 2, 10.0.1.1 on port 1."""
    return [
        {"op": "set_default", "table": CONFIG, "action": "AstralIngress.set_switch_config",
         "params": {"salt": 0x5A17, "switch_id": 3, "sample_rate": 0}},
        {"op": "insert", **lpm_entry("10.0.2.0/24", "AstralIngress.ecmp_select", group=1, size=2)},
        {"op": "insert", **lpm_entry("10.0.1.1/32", "AstralIngress.forward", port=1, dst_mac=h1_mac)},
        {"op": "insert", **nhop_entry(0, 2, NHOP_MACS[0])},
        {"op": "insert", **nhop_entry(1, 2, NHOP_MACS[1])},
    ]


def ok(result: dict) -> dict:
    assert result["ok"], result
    return result


def by_prefix(entries: list[dict]) -> dict[tuple[int, int], dict]:
    return {tuple(e["match"]["hdr.ipv4.dstAddr"]["lpm"]): e for e in entries}


# ---- tests --------------------------------------------------------------------------


def test_shell_pushes_pipeline_and_manages_entries(shell_python, astral, tmp_path) -> None:
    switch = Switch(tmp_path)
    try:
        ops = routes("02:00:00:00:01:01") + [
            {"op": "insert", **lpm_entry("10.0.2.0/24", "AstralIngress.drop")},     # duplicate key
            {"op": "modify", **lpm_entry("10.0.9.0/24", "AstralIngress.drop")},     # no such entry
            {"op": "insert", "table": ECN, "match": {"standard_metadata.enq_qdepth": "5..100"},
             "action": "AstralEgress.set_mark_threshold", "params": {"threshold": 1000}, "priority": 10},
            {"op": "read", "table": LPM},
            {"op": "read", "table": ECN},
            {"op": "read_default", "table": CONFIG},
            {"op": "modify", **lpm_entry("10.0.1.1/32", "AstralIngress.forward", port=3, dst_mac="02:00:00:00:01:03")},
            {"op": "read", "table": LPM},
            {"op": "read_counter", "counter": RX, "index": 1},
            {"op": "read_counter", "counter": TX, "index": None},
            {"op": "delete", **lpm_entry("10.0.1.1/32", "AstralIngress.forward", port=3, dst_mac="02:00:00:00:01:03")},
            {"op": "delete_all", "table": NHOP},
            {"op": "read", "table": NHOP},
        ]
        out = shell(shell_python, switch, ops, config=astral)
        assert out["p4info_tables"] == table_names(astral[0]) and LPM in out["p4info_tables"]
        r = out["results"]
        for result in r[:5]:
            ok(result)
        assert (r[5]["ok"], r[5]["code"]) == (False, "ALREADY_EXISTS")
        assert (r[6]["ok"], r[6]["code"]) == (False, "NOT_FOUND")
        ok(r[7])
        lpm = by_prefix(ok(r[8])["entries"])
        assert set(lpm) == {(ip("10.0.2.0"), 24), (ip("10.0.1.1"), 32)}
        assert lpm[(ip("10.0.2.0"), 24)]["action"] == "AstralIngress.ecmp_select"
        assert lpm[(ip("10.0.2.0"), 24)]["params"] == {"group": 1, "size": 2}
        assert lpm[(ip("10.0.1.1"), 32)]["params"] == {"port": 1, "dst_mac": mac("02:00:00:00:01:01")}
        (ecn,) = ok(r[9])["entries"]
        assert ecn["match"] == {"standard_metadata.enq_qdepth": {"range": [5, 100]}}
        assert ecn["priority"] == 10 and ecn["params"] == {"threshold": 1000}
        (default,) = ok(r[10])["entries"]
        assert default["is_default"] and default["params"] == {"salt": 0x5A17, "switch_id": 3, "sample_rate": 0}
        ok(r[11])
        modified = by_prefix(ok(r[12])["entries"])[(ip("10.0.1.1"), 32)]
        assert modified["params"] == {"port": 3, "dst_mac": mac("02:00:00:00:01:03")}
        assert ok(r[13])["cells"] == [{"index": 1, "packets": 0, "bytes": 0}]
        tx_cells = ok(r[14])["cells"]
        assert [c["index"] for c in tx_cells] == list(range(64))  # NUM_PORTS cells, all read
        ok(r[15])
        assert ok(r[16])["deleted"] == 2
        assert ok(r[17])["entries"] == []

        # A second client, without a config: it gets the P4Info from the switch. Its
        # election id is below the highest seen, so it is a backup: reads, no writes.
        out = shell(shell_python, switch, [
            {"op": "read", "table": LPM},
            {"op": "insert", **lpm_entry("10.0.3.0/24", "AstralIngress.drop")},
        ], election_id=BACKUP)
        assert out["p4info_tables"] == table_names(astral[0])
        assert set(by_prefix(ok(out["results"][0])["entries"])) == {(ip("10.0.2.0"), 24)}
        assert (out["results"][1]["ok"], out["results"][1]["code"]) == (False, "PERMISSION_DENIED")
    finally:
        switch.stop()


H1_MAC, H2_MAC, SW_MAC = "02:00:00:00:01:01", "02:00:00:00:02:02", "02:00:00:00:00:aa"
FRAME_BYTES = 100


def udp_frame(sport: int) -> bytes:
    pkt = Ether(src=H1_MAC, dst=SW_MAC) / IP(src="10.0.1.1", dst="10.0.2.2", ttl=64) / UDP(sport=sport, dport=4791)
    return bytes(pkt / Raw(bytes(FRAME_BYTES - len(pkt))))


def receive_ours(sock, count: int, timeout: float) -> list[Ether]:
    """Frames for 10.0.2.2 arriving on ``sock``, until ``count`` of them or ``timeout``."""
    got: list[Ether] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            pkt = Ether(sock.recv(65536))
        except TimeoutError:
            break
        if IP in pkt and pkt[IP].dst == "10.0.2.2":
            got.append(pkt)
    return got


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
def test_shell_entries_forward_packets_and_counters_count_them(shell_python, astral, tmp_path) -> None:
    with Netns() as net:
        ifaces = net.add_switch_and_hosts()
        switch = Switch(tmp_path, "-i", f"1@{ifaces['s1']}", "-i", f"2@{ifaces['s2']}",
                        prefix=tuple(net.exec_prefix("sw")))
        tx, rx = net.socket("h1", ifaces["h1"]), net.socket("h2", ifaces["h2"])
        try:
            for result in shell(shell_python, switch, routes(H1_MAC), config=astral)["results"]:
                ok(result)
            flows = 20
            for sport in range(50000, 50000 + flows):
                tx.send(udp_frame(sport))
            got = receive_ours(rx, flows, timeout=10)
            assert len(got) == flows
            assert {p[UDP].sport for p in got} == set(range(50000, 50000 + flows))
            for p in got:
                # ecmp_nhop's forward: next hop MAC, old destination MAC as source, TTL - 1
                assert p.dst in NHOP_MACS and p.src == SW_MAC and p[IP].ttl == 63
            assert {p.dst for p in got} == set(NHOP_MACS), "20 flows should use both ECMP members"

            out = shell(shell_python, switch, [
                {"op": "read_counter", "counter": RX, "index": 1},
                {"op": "read_counter", "counter": TX, "index": 2},
                {"op": "delete_all", "table": LPM},
                {"op": "delete_all", "table": NHOP},
                {"op": "read", "table": LPM},
            ])
            r = out["results"]
            assert ok(r[0])["cells"] == [{"index": 1, "packets": flows, "bytes": flows * FRAME_BYTES}]
            assert ok(r[1])["cells"] == [{"index": 2, "packets": flows, "bytes": flows * FRAME_BYTES}]
            assert (ok(r[2])["deleted"], ok(r[3])["deleted"]) == (2, 2)
            assert ok(r[4])["entries"] == []

            # Without routes the same packets hit ipv4_lpm's default (drop), counted per port.
            for sport in range(50000, 50005):
                tx.send(udp_frame(sport))
            def no_route_cell() -> dict:
                (cell,) = ok(shell(shell_python, switch, [
                    {"op": "read_counter", "counter": NO_ROUTE, "index": 1}])["results"][0])["cells"]
                return cell

            cell = wait_for("the 5 unrouted packets in the no-route counter",
                            lambda: c if (c := no_route_cell())["packets"] >= 5 else None, 10, 0.1)
            assert cell["packets"] == 5    # all five counted, and nothing else
            rx.setblocking(False)
            leaked = []
            try:
                while True:
                    leaked.append(rx.recv(65536))
            except BlockingIOError:
                pass
            assert not [f for f in leaked if IP in Ether(f) and Ether(f)[IP].dst == "10.0.2.2"]
        finally:
            tx.close()
            rx.close()
            switch.stop()
