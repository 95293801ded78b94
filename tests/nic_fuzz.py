"""Fuzz the native NIC: mutated and random frames through its ring reader, parser,
responder, requester and PFC handling, with hostile ring headers, and random requests
(posts, port changes, ACKs of any PSN, bad arguments) -- run by
tests/test_nic_sanitize.py in a process with the sanitizer build
(ASTRAL_NIC_SANITIZE=1), where any out-of-bounds access or undefined operation aborts.

``python tests/nic_fuzz.py FRAMES SEED`` prints what it pushed through and exits 0.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nic_rings import PARAMS, Device  # noqa: E402
from p4sim.switch.pause import pfc_frame  # noqa: E402
from tccl import roce  # noqa: E402
from tccl.nic import qp as native  # noqa: E402

ffi, lib = native.ffi, native.lib


def mutate(rng: random.Random, frame: bytes) -> bytes:
    f = bytearray(frame)
    for _ in range(rng.choice([0, 0, 1, 2, 8])):
        if f:
            f[rng.randrange(len(f))] = rng.randrange(256)
    cut = rng.random()
    if cut < 0.1:
        f = f[:rng.randrange(len(f) + 1)]
    elif cut < 0.15:
        f += rng.randbytes(rng.randrange(64))
    return bytes(f)


# The peer's headers (built once: Scapy takes a millisecond per template): towards the
# device's QP, ECT(0) and CE, and towards QPs it does not have.
TEMPLATES: list[roce.FrameTemplate] = []


def some_frame(rng: random.Random, dev: Device) -> bytes:
    kind = rng.random()
    psn = (dev.resp.epsn + rng.randrange(-3, 4)) & roce.PSN_MASK
    peer = rng.choice(TEMPLATES[:2] if rng.random() < 0.9 else TEMPLATES[2:])
    if kind < 0.5:
        op = rng.choice([roce.SEND_FIRST, roce.SEND_MIDDLE, roce.SEND_LAST, roce.SEND_ONLY, roce.WRITE_ONLY,
                         roce.WRITE_FIRST])
        return peer.frame(op, psn, rng.randbytes(rng.randrange(1100)),
                          ackreq=rng.random() < 0.3)
    if kind < 0.75:
        return peer.ack((dev.req.una + rng.randrange(-2, 20)) & roce.PSN_MASK, rng.randrange(1 << 24),
                        nak=rng.random() < 0.3)
    if kind < 0.85:
        return peer.cnp()
    if kind < 0.95:
        return rng.randbytes(rng.randrange(200))
    return b""


def pause_frame(rng: random.Random) -> bytes:
    f = pfc_frame(b"\x02" * 6, {p: rng.choice([0, 1, 100, 0xFFFF]) for p in range(8) if rng.random() < 0.5})
    return mutate(rng, f)


def hostile_calls(rng: random.Random) -> None:
    """Bad arguments to the C API: every one refused, none read out of bounds."""
    junk = rng.randbytes(rng.randrange(100))
    p = ffi.new("nic_parsed *")
    lib.nic_parse(junk, len(junk), p)
    lib.nic_icrc_ok(junk, len(junk))
    lib.nic_icrc(junk, len(junk))
    t = ffi.new("nic_template *")
    out = ffi.new("uint8_t[]", 64)
    assert lib.nic_frame(t, 0, 0, 0, ffi.NULL, 0, junk, len(junk), out, 64) in (0, roce.HDR_LEN + len(junk) + 4)
    assert lib.nic_requester_new(1, junk, len(junk), native.c_params(PARAMS), 0.0, 1024, 16, 0.1, ffi.NULL, 0) \
        == ffi.NULL or len(junk) == roce.HDR_LEN
    hdr = bytes(roce.HDR_LEN)
    for mtu, window, rto in ((0, 16, 0.1), (1 << 20, 16, 0.1), (1024, 0, 0.1), (1024, 1 << 30, 0.1),
                             (1024, 16, 0.0), (1024, 16, float("nan"))):
        assert lib.nic_requester_new(1, hdr, len(hdr), native.c_params(PARAMS), 0.0, mtu, window, rto,
                                     ffi.NULL, 0) == ffi.NULL


def threaded(rng: random.Random, dev: Device, frames: int) -> None:
    """The same frames and requests with the device's thread running: the library's
    calls (posts, port changes, reaps, snapshots, skips) race its loop."""
    assert lib.nic_device_start(dev.c, 1e-4) == 0
    port = ffi.new("uint32_t *")
    pushed = 0
    while pushed < frames:
        action = rng.random()
        if action < 0.6:
            if dev.data.push(mutate(rng, some_frame(rng, dev))):
                pushed += 1
        elif action < 0.7:
            dev.req.post(bytes(rng.randrange(1, 20000)), None, dev.now())
        elif action < 0.75:
            dev.req.request_port(rng.randrange(1024, 65536))
        elif action < 0.85:
            dev.completions.reap()
            dev.req.stats, dev.resp.stats, dev.req.idle, dev.req.sport
            dev.req.rate.advance(dev.now())
        else:
            if lib.nic_device_need(dev.c, port) != lib.NIC_NO_QPN:
                lib.nic_device_skip(dev.c)
            dev.sent()
    lib.nic_device_stop(dev.c)
    dev.completions.reap()


def main(frames: int, seed: int) -> None:
    rng = random.Random(seed)
    dev = Device(native, native.Completions, native.Requester, native.Responder)
    TEMPLATES[:] = [roce.FrameTemplate(dev.peer.src, dev.peer.dst, 50001, q, ecn=ecn)
                    for q, ecn in ((dev.qpn, roce.ECN_ECT0), (dev.qpn, roce.ECN_CE),
                                   (rng.randrange(1 << 24), roce.ECN_CE), (rng.randrange(1 << 24), roce.ECN_ECT0))]
    pushed = posted = 0
    now = 0.0
    try:
        while pushed < frames:
            action = rng.random()
            if action < 0.6:
                ring = dev.pause if rng.random() < 0.1 else dev.data
                frame = pause_frame(rng) if ring is dev.pause else mutate(rng, some_frame(rng, dev))
                odd = rng.random()
                kw: dict = {}
                if odd < 0.03:
                    kw["snaplen"] = len(frame) + rng.randrange(1, 20000)
                elif odd < 0.06:
                    kw["mac"] = rng.randrange(65536)
                elif odd < 0.08:
                    kw["wire_len"] = rng.randrange(1 << 32)
                elif odd < 0.1:
                    kw["status"] = rng.choice([1 | 2, 1 | 16, 1 | 8])
                elif odd < 0.12:
                    kw["pkttype"] = rng.randrange(256)
                if ring.push(frame, **kw):
                    pushed += 1
            elif action < 0.75:
                dev.receive(skip_unknown=rng.random() < 0.95)
                if dev.c.need_qpn != lib.NIC_NO_QPN:
                    lib.nic_device_skip(dev.c)
            elif action < 0.85:
                now += rng.choice([0.0, 1e-4, 1e-3, 0.05, 1.0])
                dev.service(now)
                dev.sent()
            elif action < 0.93:
                if not dev.req._c.q_head or rng.random() < 0.2:
                    dev.req.post(bytes(rng.randrange(1, 20000)), None, now)
                    posted += 1
            elif action < 0.96:
                dev.req.request_port(rng.randrange(1024, 65536))
            else:
                hostile_calls(rng)
        dev.receive()
        threaded(rng, dev, frames // 10)
    finally:
        dev.close()
    print(f"nic fuzz: {pushed} frames, {posted} posts, rx {dev.c.rx_frames} ignored {dev.c.rx_ignored}, "
          f"delivered {len(dev.delivered)}, bad ICRC {dev.resp.stats.bad_icrc}, "
          f"retransmits {dev.req.stats.retransmits}")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
