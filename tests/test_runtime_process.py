"""The P4Runtime server inside a real ``p4sim switch`` process (the Device as dataplane):
push the pipeline, PacketOut -> pipeline -> CPU port -> PacketIn, queue control."""

from __future__ import annotations

import socket
import subprocess
import sys

import grpc
import pytest

from p4sim.proto import p4r, p4r_grpc
from p4sim.runtime.queues import QueueControlClient

from runtime_fixtures.harness import CPU_PORT, DEVICE_ID, Stream, load_device_config, load_p4info


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def switch_address():
    address = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "p4sim.cli", "switch", "--no-p4", "--cpu-port", str(CPU_PORT),
         "--device-id", str(DEVICE_ID), "--grpc-server-addr", address],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        with grpc.insecure_channel(address) as channel:
            grpc.channel_ready_future(channel).result(timeout=20)
        yield address
    finally:
        proc.terminate()
        output, _ = proc.communicate(timeout=10)
        assert proc.returncode == 0, output


def test_packet_out_loops_back_as_packet_in_through_the_device(switch_address: str) -> None:
    channel = grpc.insecure_channel(switch_address)
    stub = p4r_grpc.P4RuntimeStub(channel)
    stream = Stream(stub)
    try:
        assert stream.arbitrate(1).status.code == 0
        stub.SetForwardingPipelineConfig(p4r.SetForwardingPipelineConfigRequest(
            device_id=DEVICE_ID, election_id=p4r.Uint128(low=1),
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
            config=p4r.ForwardingPipelineConfig(p4info=load_p4info(), p4_device_config=load_device_config())))
        payload = bytes.fromhex("00000000000a00000000000b88b5") + b"loopback"  # not IPv4
        # The program sends a PacketOut to its packet_out.egress_port: the CPU port here,
        # where the egress pipeline adds packet_in -- the packet comes back as a PacketIn.
        stream.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(
            payload=payload, metadata=[p4r.PacketMetadata(metadata_id=1, value=bytes([CPU_PORT]))])))
        msg = stream.recv(timeout=10)
        assert msg.WhichOneof("update") == "packet"
        assert msg.packet.payload == payload
        assert [(m.metadata_id, m.value) for m in msg.packet.metadata] == [(1, bytes([CPU_PORT])), (2, b"\x00")]
        queues = QueueControlClient(channel)
        queues.set_port_rate(CPU_PORT, 16.0)
        assert queues.queue_stats()[CPU_PORT]["rate_bytes_per_s"] == 2e6
    finally:
        stream.close()
        channel.close()
