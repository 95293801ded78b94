"""Packets/s and latency through one ``p4sim switch`` process between two namespaces,
once per engine in the same run (``switch_kpps_64B_native`` beside
``switch_kpps_64B_python``, ``switch_latency_us_p50_native``, ...; and their ratio
``switch_native_over_python_ratio_kpps_64B``). ``--engine native`` runs the whole device
in C (the native loop, p4sim/switch/native/device.py, with the generated pipeline),
``--engine python`` the Python Device with the Python engine: the figures compare the
two switches frame for frame, end to end.

Setup: namespaces h1 - sw - h2 joined by veth pairs (created here, always removed);
the switch runs in sw on ports 1 (to h1) and 2 (to h2) with unlimited port rates, its
program p4src/astral.p4 pushed over P4Runtime with a leaf's routes: 10.2.0.0/16 ->
``ecmp_select`` (4-way group) -> ``ecmp_nhop`` -> port 2, and an ``ecn_threshold``
entry, so every packet takes LPM, the ECMP hash, the next-hop table and the ECN table.

Traffic: RoCEv2 frames (ECT, 64 UDP source ports so that ECMP spreads them) built once,
sent from h1 by a small C sender (bench/sender.c: sendmmsg on a raw AF_PACKET socket,
paced to an offered rate), so that the sender is not the limit of the native switch.
The receive side costs no CPU: what reached h2 is read from h2's interface counters.

* throughput (``switch_kpps_<size>B_<engine>``): the lossless rate, i.e. the highest
  offered rate losing < 0.1% of the frames in a 1-second trial, found by doubling the
  rate until frames are lost, then bisecting;
* overload (``switch_kpps_overload_<size>B_<engine>``): what the switch forwards per
  second while the sender offers all it can;
* latency: one frame in flight at a time (lowest load), carrying its send time
  (CLOCK_REALTIME); the receive time is the kernel's SO_TIMESTAMPNS on h2's socket,
  so the figure is wire-to-wire through the switch process, not Python wake-up time.

If ``simple_switch_grpc`` is on PATH the same runs against it (the same P4Runtime
programming, the same traffic) and the ratios p4sim/BMv2 are added.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from bench.bench_p4rt import (DEVICE_ID, P4RuntimeClient, canonical, compiled_program, connect, lpm,
                              p4sim_switch, start_switch, stop)
from bench.cbuild import compiled
from p4sim.proto import p4r
from topo.namespaces import SO_TIMESTAMPNS, Netns

SIZES = (64, 1000)
ENGINES = ("native", "python")  # p4sim switch --engine: the C pipeline, the Python reference
FLOWS = 64               # distinct UDP source ports
LOSS_LIMIT = 0.001       # "lossless": under 0.1% of the offered frames lost
TRIAL_S = 1.0            # length of one offered-rate trial
START_RATE = 2000.0      # frames/s of the first trial; doubled while lossless
MAX_RATE = 4_096_000.0   # beyond what the C sender offers: the search stops there
OVERLOAD_FRAMES = 1_000_000   # about a second of the C sender at full speed
BISECTIONS = 5           # resolution: 1/32 of the last doubling step
LATENCY_SAMPLES = 1000
LATENCY_WARMUP = 50      # first probes, not counted: they warm caches on both sides
LATENCY_GAP_S = 0.001    # pause between latency probes: no queueing anywhere
NEXT_HOPS = 4


# ---- namespaces ---------------------------------------------------------------------


class Topology(Netns):
    """Namespaces h1, sw, h2 and veths h1-sw, sw-h2 (`Netns`: named after this process
    so that nothing else is touched, no IPv6 chatter); ``cleanup`` deletes them."""

    def __init__(self) -> None:
        super().__init__()
        try:
            self.add_switch_and_hosts()
        except BaseException:
            self.cleanup()
            raise

    def rx_packets(self, host: str) -> int:
        """Frames the host's interface has received (kernel counter)."""
        (link,) = json.loads(subprocess.run(["ip", "-n", self.name(host), "-s", "-j", "link", "show", "dev",
                                             self.ifaces[host]], check=True, capture_output=True, text=True).stdout)
        return link["stats64"]["rx"]["packets"]

    def socket_of(self, host: str) -> socket.socket:
        """A raw socket on the host's interface, inside its namespace."""
        return self.socket(host, self.ifaces[host])


# ---- the switches -------------------------------------------------------------------


def p4sim_command(topo: Topology, address: str, workdir: Path, engine: str) -> list[str]:
    return p4sim_switch(address, workdir, "-i", f"1@{topo.ifaces['s1']}", "-i", f"2@{topo.ifaces['s2']}",
                        "--engine", engine)


def bmv2_command(topo: Topology, address: str, workdir: Path) -> list[str]:
    return ["simple_switch_grpc", "--device-id", str(DEVICE_ID), "--no-p4",
            "-i", f"1@{topo.ifaces['s1']}", "-i", f"2@{topo.ifaces['s2']}",
            "--", "--grpc-server-addr", address]


def program(client: P4RuntimeClient) -> None:
    """A leaf's forwarding state: 10.2.0.0/16 over a 4-way ECMP group, all next hops on
    port 2 (different MACs), and an ECN threshold entry that matches every queue depth."""
    modify, insert = p4r.Update.MODIFY, p4r.Update.INSERT
    depth = p4r.FieldMatch(range=p4r.FieldMatch.Range(low=canonical(0), high=canonical(1000)))
    updates = [
        client.update(modify, client.table_entry("AstralIngress.switch_config", {}, "AstralIngress.set_switch_config",
                                                 {"salt": 0x5A17, "switch_id": 1, "sample_rate": 0}, default=True)),
        client.update(insert, client.table_entry("AstralIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": lpm(0x0A020000, 16)},
                                                 "AstralIngress.ecmp_select", {"group": 1, "size": NEXT_HOPS})),
        client.update(insert, client.table_entry("AstralEgress.ecn_threshold", {"standard_metadata.enq_qdepth": depth},
                                                 "AstralEgress.set_mark_threshold", {"threshold": 0}, priority=1)),
    ]
    for index in range(NEXT_HOPS):
        updates.append(client.update(insert, client.table_entry(
            "AstralIngress.ecmp_nhop", {"meta.ecmp_group": 1, "meta.ecmp_index": index},
            "AstralIngress.forward", {"port": 2, "dst_mac": 0x02000000AA00 + index})))
    client.write(updates)


# ---- traffic ------------------------------------------------------------------------


def frames(size: int) -> list[bytes]:
    """One RoCEv2 frame per flow, zero-padded to ``size`` bytes (without the FCS, as
    captures show frames); the UDP checksum is zero as latency probes vary the payload."""
    out = []
    for flow in range(FLOWS):
        head = bytes(Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:02")
                     / IP(src="10.1.0.1", dst="10.2.0.1", tos=0x02, ttl=64)
                     / UDP(sport=49152 + flow, dport=4791, chksum=0) / BTH(opcode=4, dqpn=17, psn=flow))
        out.append(head + bytes(max(size - len(head), 0)))
    return out


class Sender:
    """bench/sender.c (compiled once into build/bench/), run in h1: frames from a file,
    sendmmsg in batches, paced or as fast as it can. A Python sender's send() per frame
    stopped near 250 kpps, below what the native switch forwards."""

    def __init__(self, topo: Topology, workdir: Path) -> None:
        self.topo, self.workdir = topo, workdir
        self.binary = compiled(Path(__file__).with_name("sender.c"))

    def offer(self, batch: list[bytes], count: int, rate: float) -> tuple[int, float]:
        """Send ``count`` frames of ``batch`` round robin at ``rate`` frames/s (0: as
        fast as the sender can); (frames sent, seconds it took)."""
        path = self.workdir / "frames.bin"
        path.write_bytes(b"".join(struct.pack("<H", len(f)) + f for f in batch))
        done = subprocess.run([*self.topo.exec_prefix("h1"), str(self.binary), self.topo.ifaces["h1"],
                               str(path), str(count), f"{rate:.3f}"], capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"sender failed: {done.stderr.strip()}")
        sent, seconds = done.stdout.split()
        return int(sent), float(seconds)


def delivered(topo: Topology, before: int, expected: int) -> int:
    """Frames h2 received since ``before``, once the switch has drained (the counter has
    reached ``expected`` or stopped moving)."""
    deadline = time.monotonic() + 5.0
    last, still_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now = topo.rx_packets("h2") - before
        if now >= expected:
            return now
        if now != last:
            last, still_since = now, time.monotonic()
        elif time.monotonic() - still_since > 0.3:
            return now
        time.sleep(0.02)
    return last


def trial(topo: Topology, sender: Sender, batch: list[bytes], rate: float) -> tuple[float, float]:
    """(offered frames/s, loss fraction) of one trial at ``rate``."""
    count = int(rate * TRIAL_S)
    before = topo.rx_packets("h2")
    sent, seconds = sender.offer(batch, count, rate)
    got = delivered(topo, before, sent)
    return sent / seconds, 1.0 - got / sent


def overload_rate(topo: Topology, sender: Sender, batch: list[bytes]) -> float:
    """Frames/s the switch forwards while offered more than it can take: OVERLOAD_FRAMES
    sent as fast as the sender can, what reached h2 over the time they took (plus what
    the switch still held when the sender stopped, a ring's worth at most)."""
    before = topo.rx_packets("h2")
    sent, seconds = sender.offer(batch, OVERLOAD_FRAMES, 0)
    return delivered(topo, before, sent) / seconds


def lossless_rate(topo: Topology, sender: Sender, batch: list[bytes]) -> float:
    """Highest offered rate (frames/s) with loss under LOSS_LIMIT: double the rate from
    START_RATE until a trial loses frames, then bisect between the last lossless and the
    first lossy rate. A lossy trial is repeated once and counts only if it loses again,
    so that a moment of CPU taken by another process on this shared 2-core machine does
    not end the search."""

    def lossless(rate: float) -> float | None:
        for _ in range(2):
            achieved, loss = trial(topo, sender, batch, rate)
            if loss < LOSS_LIMIT:
                return min(rate, achieved)
        return None

    best, rate = 0.0, START_RATE
    while rate <= MAX_RATE:
        achieved = lossless(rate)
        if achieved is None:
            break
        best, rate = achieved, rate * 2
    else:
        return best  # the sender's limit, not the switch's
    lossy = rate
    for _ in range(BISECTIONS):
        rate = (best + lossy) / 2
        achieved = lossless(rate)
        if achieved is None:
            lossy = rate
        else:
            best = max(best, achieved)
    return best


def latency_us(topo: Topology, tx: socket.socket) -> list[float]:
    """One-way latencies (us) of probes sent one at a time from h1 to h2.

    A probe is the RoCEv2 headers of the first flow plus 16 bytes: its sequence number
    and send time. A probe lost on the way is left out; more than 1% lost (none should
    be at this load) ends the measurement with an error.
    """
    head = frames(0)[0]
    rx = topo.socket_of("h2")
    try:
        rx.settimeout(0.5)
        samples, lost = [], 0
        for seq in range(LATENCY_WARMUP + LATENCY_SAMPLES):
            sent_ns = time.time_ns()
            tx.send(head + struct.pack("!QQ", seq, sent_ns))
            try:
                anc = _receive_probe(rx, len(head), seq)
            except TimeoutError:
                lost += 1
                if lost > LATENCY_SAMPLES // 100:
                    raise RuntimeError(f"{lost} of {seq + 1} latency probes lost at low load") from None
                continue
            (stamp,) = [d for level, kind, d in anc if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS]
            sec, nsec = struct.unpack("qq", stamp[:16])
            if seq >= LATENCY_WARMUP:
                samples.append((sec * 1_000_000_000 + nsec - sent_ns) / 1000)
            time.sleep(LATENCY_GAP_S)
        return samples
    finally:
        rx.close()


def _receive_probe(rx: socket.socket, at: int, seq: int) -> list:
    """The ancillary data (kernel timestamp) of the probe ``seq`` arriving on ``rx``."""
    while True:
        data, anc, _, _ = rx.recvmsg(2048, socket.CMSG_SPACE(16))
        if len(data) == at + 16 and struct.unpack_from("!Q", data, at)[0] == seq:
            return anc


def measure(topo: Topology, command: Callable[[Topology, str, Path], list[str]]) -> dict[str, float]:
    """Start a switch in sw, program it, measure; the switch is stopped by PID."""
    p4info, device_config = compiled_program()
    with tempfile.TemporaryDirectory(prefix="bench-switch-") as tmp:
        address = f"unix:{tmp}/p4rt.sock"
        workdir = Path(tmp)
        proc = start_switch([*topo.exec_prefix("sw"), *command(topo, address, workdir)], workdir)
        client = None
        tx = topo.socket_of("h1")
        try:
            client = connect(proc, address, workdir)
            client.set_pipeline(p4info, device_config)
            program(client)
            figures: dict[str, float] = {}
            sender = Sender(topo, workdir)
            for size in SIZES:
                batch = frames(size)
                _, loss = trial(topo, sender, batch, 1000.0)  # warm-up, and proof that it forwards
                if loss > LOSS_LIMIT:
                    raise RuntimeError(f"the switch loses {loss:.1%} of {size}-byte frames at 1000 frames/s")
                figures[f"kpps_{size}B"] = lossless_rate(topo, sender, batch) / 1000
                figures[f"kpps_overload_{size}B"] = overload_rate(topo, sender, batch) / 1000
            samples = latency_us(topo, tx)
            figures["latency_us_p50"] = statistics.median(samples)
            figures["latency_us_p99"] = statistics.quantiles(samples, n=100)[98]
            return figures
        except Exception as e:
            said = (workdir / "switch.stderr").read_text(errors="replace").splitlines()[-10:]
            e.add_note("switch stderr (last lines):\n" + ("\n".join(said) or "(empty)"))
            raise
        finally:
            tx.close()
            if client is not None:
                client.close()
            stop(proc)


def run() -> dict[str, float]:
    if os.geteuid() != 0:
        raise PermissionError("bench_switch needs root (network namespaces, raw sockets)")
    topo = Topology()
    try:
        figures: dict[str, float] = {}
        by_engine = {}
        for engine in ENGINES:  # the same switch, traffic and programming; only --engine differs
            by_engine[engine] = measure(topo, lambda t, a, w, e=engine: p4sim_command(t, a, w, e))
            figures.update({f"switch_{k}_{engine}": v for k, v in by_engine[engine].items()})
        native, python = by_engine["native"], by_engine["python"]
        figures.update({f"switch_native_over_python_ratio_{k}": native[k] / python[k]
                        for k in native if k.startswith("kpps") and python[k]})
        if shutil.which("simple_switch_grpc"):
            bmv2 = measure(topo, bmv2_command)
            figures.update({f"bmv2_{k}": v for k, v in bmv2.items()})
            figures.update({f"switch_over_bmv2_ratio_{k}": native[k] / bmv2[k] for k in native if bmv2[k]})
        return figures
    finally:
        topo.cleanup()
