"""Random and mutated frames into every port type of a running ``p4sim switch`` (issue 15
part 2): the switch stays up, P4Runtime answers, forwarding is unchanged afterwards.

One leaf of a small fabric (astral.p4, its routes written by `controller.routes` over
P4Runtime) runs as a process in its own namespace, with a host-facing port towards a
server namespace and a fabric-facing port towards a spine namespace; the CPU port is fed
by PacketOuts on the controller's stream. Frames are valid RoCE, CNP, UDP, ICMP and ARP
frames mutated by bit flips, truncation, extension and byte overwrites, and random
bytes. They go in chunks, one port type per chunk, each closed by a marker frame of a
known flow behind it on the same port: a port is read in order, so the marker coming
out of the expected port means the switch has taken the whole chunk (the sender is
paced by the switch, no sleeping). Before and after the flood the known flows of each
port type (and an ARP request to the gateway) must come out of the same port with the
same bytes, and the table entries read back must be those written.

The campaign runs once per engine: ``--engine native`` (the pipeline generated in C,
in the native packet loop) and ``--engine python`` (the reference engine in the Python
loop); the switch's log must name the loop it ran, so a native run that quietly fell
back to Python fails. ``P4SIM_FUZZ_FRAMES`` sets the number of frames per engine
(`make fuzz`: 100 000).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import socket
import tempfile
import time
from pathlib import Path
from typing import Iterator

import finsy as fy
import grpc
import pytest
from scapy.layers.inet import ICMP, IP, UDP
from scapy.layers.l2 import ARP, Ether

from controller.routes import program_switch, switch_options, switch_program
from p4sim.runtime.queues import QueueControlClient
from tccl.roce import CNP_DSCP, SEND_ONLY, Endpoint, FrameTemplate
from topo.addressing import CPU_PORT, AddressPlan
from topo.namespaces import Netns
from topo.pipeline import Pipeline, build_pipeline
from topo.spec import FabricSpec

from fuzzkit import count
from switchproc import SwitchProcess

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

FRAMES = int(os.environ.get("P4SIM_FUZZ_FRAMES", "3000"))
CHUNK = 100                 # frames between two markers
MARKER_TIMEOUT_S = 20.0     # a chunk of garbage on a busy 2-core machine
MAX_FRAME = 1514            # the veths' MTU (1500) plus the Ethernet header
MIN_FRAME = 14              # a packet socket refuses less than an Ethernet header
SPEC = FabricSpec(blocks=2, servers_per_block=1, rails=1, spines=1, name="fuzz", sample_rate=4)
PLAN = AddressPlan(SPEC)
LEAF = PLAN.leaves[0]
LOCAL, REMOTE = PLAN.servers[0].nics[0], PLAN.servers[1].nics[0]
HOST_PORT, UPLINK_PORT = LOCAL.leaf_port, PLAN.uplink_port(0)


# -- frames -------------------------------------------------------------------------------------

def roce(src, dst, sport: int, payload: bytes, dscp: int = 0) -> bytes:
    """A RoCEv2 SEND_ONLY frame from NIC ``src`` to NIC ``dst`` as the wire carries it
    into the leaf (towards the leaf's MAC)."""
    template = FrameTemplate(Endpoint(src.mac, src.ip), Endpoint(LEAF.mac, dst.ip), sport, 0x11, dscp=dscp)
    return template.frame(SEND_ONLY, 1, payload)


def base_frames() -> list[bytes]:
    """Valid frames of every kind the fabric carries, from both sides of the leaf."""
    cnp = FrameTemplate(Endpoint(REMOTE.mac, REMOTE.ip), Endpoint(LEAF.mac, LOCAL.ip), 50000, 0x12,
                        dscp=CNP_DSCP).cnp()
    return [
        roce(LOCAL, REMOTE, 49152, bytes(range(64))),
        roce(REMOTE, LOCAL, 49153, b"\xab" * 512),
        cnp,
        bytes(Ether(src=LOCAL.mac, dst=LEAF.mac) / IP(src=LOCAL.ip, dst=REMOTE.ip) / UDP(sport=5, dport=6) / b"udp"),
        bytes(Ether(src=LOCAL.mac, dst=LEAF.mac) / IP(src=LOCAL.ip, dst=REMOTE.ip, ttl=1) / ICMP()),
        bytes(Ether(src=LOCAL.mac, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=LOCAL.mac, psrc=LOCAL.ip,
                                                               pdst=LOCAL.gateway_ip)),
        bytes(Ether(src=LOCAL.mac, dst=LEAF.mac) / ARP(op=2, hwsrc=LOCAL.mac, psrc=LOCAL.ip, pdst=LOCAL.gateway_ip)),
    ]


def mutate(rng: random.Random, bases: list[bytes], minimum: int) -> bytes:
    """One hostile frame: a base frame with bits flipped, cut short, extended or bytes
    overwritten, or plain random bytes; between ``minimum`` and `MAX_FRAME` bytes."""
    how = rng.choice(("flip", "flip", "truncate", "extend", "overwrite", "random"))
    frame = bytearray(rng.choice(bases))
    if how == "flip":
        for _ in range(rng.randint(1, 8)):
            bit = rng.randrange(len(frame) * 8)
            frame[bit // 8] ^= 1 << (bit % 8)
    elif how == "truncate":
        del frame[rng.randint(minimum, len(frame) - 1):]
    elif how == "extend":
        frame += rng.randbytes(rng.randint(1, MAX_FRAME - len(frame)))
    elif how == "overwrite":
        at = rng.randrange(min(len(frame), 64))   # the headers the parser reads
        frame[at:at + 4] = rng.randbytes(4)
    else:
        frame = bytearray(rng.randbytes(rng.randint(minimum, MAX_FRAME)))
    return bytes(frame[:MAX_FRAME])


# -- the switch ---------------------------------------------------------------------------------

@dataclasses.dataclass
class Leaf:
    """The running leaf: its namespaces, sockets on the far ends of its two ports, the
    process, and the controller's connection (finsy, on the switch's Unix socket)."""

    net: Netns
    proc: SwitchProcess
    address: str
    host: socket.socket     # the server's end of the host-facing port
    spine: socket.socket    # the spine's end of the fabric-facing port


@pytest.fixture(scope="module")
def pipeline() -> Pipeline:
    return build_pipeline(SPEC)


#: The loop each engine runs, as the switch's start-up line names it.
RUNNING = {"native": "switch running (native loop)", "python": "switch running:"}


@pytest.fixture(params=sorted(RUNNING))
def leaf(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Leaf]:
    # A short directory: a Unix socket path must fit 108 bytes.
    sockdir = Path(tempfile.mkdtemp(prefix="p4fz"))
    with Netns() as net:
        for ns in ("sw", "h", "sp"):
            net.add_ns(ns)
        sw_host, h = net.add_link("sw", "h")
        sw_up, sp = net.add_link("sw", "sp")
        address = f"unix:{sockdir / 'p4rt.sock'}"
        proc = SwitchProcess(tmp_path, "-i", f"{HOST_PORT}@{sw_host}", "-i", f"{UPLINK_PORT}@{sw_up}",
                             "--device-id", str(LEAF.device_id), "--cpu-port", str(CPU_PORT),
                             "--grpc-server-addr", address, "--no-p4", "--engine", request.param,
                             prefix=net.exec_prefix("sw"))
        host, spine = net.socket("h", h), net.socket("sp", sp)
        try:
            assert RUNNING[request.param] in proc.log_text(), proc.log_text()
            yield Leaf(net, proc, address, host, spine)
        finally:
            host.close()
            spine.close()
            proc.stop()
            (sockdir / "p4rt.sock").unlink(missing_ok=True)
            sockdir.rmdir()


def receive_frame(sock: socket.socket, wanted, timeout: float) -> bytes | None:
    """The first frame on ``sock`` for which ``wanted(frame)`` holds, skipping the rest
    (forwarded garbage); None after ``timeout``."""
    end = time.monotonic() + timeout
    while (left := end - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            frame = sock.recv(65536)
        except TimeoutError:
            return None
        if wanted(frame):
            return frame
    return None


class Campaign:
    """Sends into the leaf's three port types and checks the known flows."""

    def __init__(self, leaf: Leaf, conn: fy.Switch) -> None:
        self.leaf, self.conn = leaf, conn
        self.markers = 0

    def _known(self, kind: str, tag: bytes) -> tuple[socket.socket | None, bytes, socket.socket]:
        """(socket to send on or None for a PacketOut, frame, socket it must come out on)
        of the known flow of port type ``kind``, carrying ``tag``."""
        if kind == "host":
            return self.leaf.host, roce(LOCAL, REMOTE, 49999, tag), self.leaf.spine
        if kind == "fabric":
            return self.leaf.spine, roce(REMOTE, LOCAL, 49998, tag), self.leaf.host
        if kind == "cpu":
            return None, bytes(Ether(src=LEAF.mac, dst=LOCAL.mac) / IP(src=REMOTE.ip, dst=LOCAL.ip)
                               / UDP(sport=7, dport=8) / tag), self.leaf.host
        assert kind == "arp"
        request = Ether(src=LOCAL.mac, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=LOCAL.mac, psrc=LOCAL.ip,
                                                                      pdst=LOCAL.gateway_ip)
        return self.leaf.host, bytes(request / tag), self.leaf.host

    async def send(self, sock: socket.socket | None, frame: bytes, egress_port: int = HOST_PORT) -> None:
        if sock is None:
            await self.conn.write([fy.P4PacketOut(frame, egress_port=egress_port)])
        else:
            sock.send(frame)

    async def through(self, kind: str, tag: bytes) -> bytes:
        """Send the known flow of ``kind`` with ``tag``; the frame that comes out where
        it must (fails the test, counted as a hang, if it does not)."""
        sock, frame, out = self._known(kind, tag)
        await self.send(sock, frame)
        got = await asyncio.to_thread(receive_frame, out, lambda f: tag in f, MARKER_TIMEOUT_S)
        if got is None:
            count("frames_hangs")
            alive = self.leaf.proc.proc.poll() is None
            pytest.fail(f"the known {kind} flow did not come out within {MARKER_TIMEOUT_S:g} s "
                        f"(switch {'running' if alive else 'exited'}):\n{self.leaf.proc.log_text()[-3000:]}")
        return got

    async def known_flows(self) -> dict[str, bytes]:
        return {kind: await self.through(kind, b"known-flow-" + kind.encode()) for kind in ("host", "fabric", "cpu", "arp")}

    async def flood(self, frames: int, seed: int) -> dict[str, int]:
        rng = random.Random(seed)
        bases = base_frames()
        sent = {"host": 0, "fabric": 0, "cpu": 0}
        ports = [HOST_PORT, UPLINK_PORT, CPU_PORT, 0, 511, 65535]
        kinds = list(sent)
        while sum(sent.values()) < frames:
            kind = kinds[self.markers % len(kinds)]
            sock = {"host": self.leaf.host, "fabric": self.leaf.spine, "cpu": None}[kind]
            n = min(CHUNK, frames - sum(sent.values()))
            for _ in range(n):
                # A PacketOut's payload may be anything, even shorter than a header.
                frame = mutate(rng, bases, 0 if sock is None else MIN_FRAME)
                await self.send(sock, frame, rng.choice(ports))
            sent[kind] += n
            self.markers += 1
            await self.through(kind, b"marker-%08d" % self.markers + rng.randbytes(8))
        return sent


async def drain(conn: fy.Switch) -> None:
    """Take the sampled PacketIns as GOR would (unread, finsy logs each one)."""
    async for _ in conn.read_packets():
        pass


async def campaign(leaf: Leaf, pipeline: Pipeline, frames: int) -> None:
    program = switch_program(PLAN, LEAF.name)
    async with fy.Switch(LEAF.name, leaf.address, switch_options(pipeline, LEAF)) as conn:
        await program_switch(conn, program)
        entries = sorted([str(e) async for e in conn.read(fy.P4TableEntry())])
        sampled = asyncio.create_task(drain(conn))
        c = Campaign(leaf, conn)
        before = await c.known_flows()
        sent = await c.flood(frames, seed=15)
        if leaf.proc.proc.poll() is not None:
            count("frames_crashes")
            pytest.fail(f"the switch exited: {leaf.proc.stderr.read_text()}{leaf.proc.log_text()[-3000:]}")
        after = await c.known_flows()
        # P4Runtime answers and the switch holds what was written, no more, no less.
        assert sorted([str(e) async for e in conn.read(fy.P4TableEntry())]) == entries
        sampled.cancel()
    with grpc.insecure_channel(leaf.address) as channel:
        dropped = QueueControlClient(channel).fidelity()["kernel_drops"]
    changed = [kind for kind in before if before[kind] != after[kind]]
    for kind, n in sent.items():
        count(f"frames_{kind}", n)
    count("frames_fuzzed", sum(sent.values()))
    count("frames_kernel_dropped", int(dropped))
    count("forwarding_changed", len(changed))
    assert not changed, {k: (before[k].hex(), after[k].hex()) for k in changed}
    # Chunks are paced by the markers: the switch read (nearly) every frame.
    assert dropped <= 0.01 * frames, f"{dropped} of {frames} frames dropped before the switch read them"


@pytest.mark.timeout(max(300, FRAMES // 50))
def test_random_and_mutated_frames_leave_the_switch_forwarding_as_before(leaf: Leaf, pipeline: Pipeline) -> None:
    # The host is routed by the leaf: the known flows need no host configuration.
    asyncio.run(campaign(leaf, pipeline, FRAMES))
    assert leaf.proc.proc.poll() is None
    assert leaf.proc.stop() == 0, leaf.proc.stderr.read_text()
