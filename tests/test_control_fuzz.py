"""Malformed control messages (issue 15 part 2): the agents' control channel
(``tccl.Agent`` on its Unix socket), the switches' ``p4sim.QueueControl`` service, and
GOR's input from the switches (sampled PacketIns) get random bytes, mutated requests and
hostile field values. No answer is INTERNAL/UNKNOWN and no exception escapes; each
server still answers a well-formed request afterwards and its state is what the
accepted requests made it.

Derandomized and bounded like tests/test_runtime_fuzz.py (``P4SIM_FUZZ_EXAMPLES``).
"""

from __future__ import annotations

import math
import os

import grpc
import pytest
from google.protobuf import struct_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.alarms import CRITICAL, NOTICE, parse_alarm
from controller.elephants import SampleWindow, parse_sample
from p4sim.runtime.queues import SERVICE as QUEUES
from p4sim.switch.device import Device
from tccl.control import MAX_APPLY_TIMEOUT, MESSAGES, SERVICE
from topo.hashmodel import PORT_RANGE

from agent_fixtures import serving_agent
from topo.spec import NICS
from fuzzkit import count, overwrite
from runtime_fixtures.harness import CPU_PORT, Runtime

EXAMPLES = int(os.environ.get("P4SIM_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
BAD_CODES = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}


def answered(call, *args, **kwargs) -> grpc.StatusCode:
    """The status of one call (OK or its error), counted; never INTERNAL/UNKNOWN."""
    count("control_fuzzed")
    try:
        call(*args, **kwargs)
        return grpc.StatusCode.OK
    except grpc.RpcError as err:
        count("control_internal_errors", err.code() in BAD_CODES)
        assert err.code() not in BAD_CODES, f"{err.code()}: {err.details()}"
        return err.code()


# -- the agent's control channel --------------------------------------------------------------

@pytest.fixture(scope="module", params=NICS)
def agent(request, tmp_path_factory):
    """An agent with one flow, serving its control channel (for the whole module), on
    each transport."""
    with serving_agent(tmp_path_factory.mktemp("agent"), loop_s=3600, nic=request.param) as (_, qp, client):
        yield qp, client


floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 0.01, 1.0, -1.0]))
flow_refs = st.builds(lambda qpn, src, dst, sport: MESSAGES["FlowRef"](qpn=qpn, src_ip=src, dst_ip=dst, sport=sport),
                      st.one_of(st.just(0), st.just(0x100001), st.integers(0, 2**32 - 1)),
                      st.sampled_from(["", "10.0.0.1", "10.0.0.1\x00", "x" * 300]),
                      st.sampled_from(["", "10.0.1.1", "::1"]), st.integers(0, 2**32 - 1))
set_port_requests = st.builds(
    lambda flow, sport, timeout, has_flow: MESSAGES["SetSourcePortRequest"](
        sport=sport, timeout_s=timeout, **({"flow": flow} if has_flow else {})),
    flow_refs, st.one_of(st.integers(*PORT_RANGE), st.integers(0, 2**32 - 1)),
    st.one_of(floats, st.floats(0.01, 0.5)), st.booleans())
raw_messages = st.tuples(st.sampled_from(sorted(MESSAGES["SetSourcePortRequest"].DESCRIPTOR.file.services_by_name["Agent"]
                                                .methods_by_name) + ["Nope"]),
                         st.one_of(st.binary(max_size=64),
                                   set_port_requests.map(lambda r: r.SerializeToString()).flatmap(
                                       lambda b: st.lists(st.tuples(st.integers(0, 63), st.integers(0, 255)),
                                                          min_size=1, max_size=4).map(lambda fl: overwrite(b, fl)))))


@FUZZ
@given(requests=st.lists(st.one_of(set_port_requests.map(lambda r: ("set", r)), raw_messages.map(lambda r: ("raw", r))),
                         min_size=1, max_size=6))
def test_malformed_control_messages_never_break_an_agent(agent, requests) -> None:
    qp, client = agent
    for kind, request in requests:
        before = qp.requester.sport
        if kind == "raw":
            method, data = request
            answered(client.channel.unary_unary(f"/{SERVICE}/{method}"), data, timeout=10)
            continue
        code = answered(client._stubs["SetSourcePort"], request, timeout=10)
        valid = 1024 <= request.sport <= 65535 and request.HasField("flow") and 0 <= request.timeout_s <= MAX_APPLY_TIMEOUT
        if code == grpc.StatusCode.OK:
            assert valid and qp.requester.sport == request.sport
        else:
            assert valid or code == grpc.StatusCode.INVALID_ARGUMENT, code
            assert qp.requester.sport == before, "a refused change moved the flow"
    # The agent still answers, and its flow is where the accepted requests put it.
    (flow,) = client.list_flows()
    assert flow.qpn == qp.qpn and flow.sport == qp.requester.sport


# -- the switch's QueueControl service --------------------------------------------------------

@pytest.fixture(scope="module")
def queues():
    device = Device({}, cpu_port=CPU_PORT)
    runtime = Runtime(queue_control=device)
    try:
        yield runtime, device
    finally:
        runtime.close()
        device.close()


json_leaves = st.one_of(st.none(), st.booleans(), floats, st.integers(-2**60, 2**60).map(float), st.text(max_size=4))
json_values = st.recursive(json_leaves, lambda inner: st.lists(inner, max_size=2) |
                           st.dictionaries(st.text(max_size=3), inner, max_size=2), max_leaves=4)
queue_requests = st.tuples(
    st.sampled_from(["SetPortRate", "SetQueueRate", "SetQueueDepth", "GetQueueStats", "GetFidelity"]),
    st.one_of(st.binary(max_size=32),
              st.dictionaries(st.sampled_from(["port", "rate_mbps", "pps", "packets", "x"]),
                              st.one_of(json_values, st.integers(0, 8).map(float)), max_size=3)
              .map(lambda d: _struct(d).SerializeToString())))


def _struct(d: dict) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(d)
    return out


@FUZZ
@given(requests=st.lists(queue_requests, min_size=1, max_size=6))
def test_malformed_queue_control_requests_never_break_the_switch(queues, requests) -> None:
    runtime, device = queues
    for method, data in requests:
        answered(runtime.channel.unary_unary(f"/{QUEUES}/{method}"), data, timeout=10)
    # Still served; every queue has a depth and a rate a traffic manager can run with.
    stats = device.queue_stats()
    assert answered(runtime.channel.unary_unary(f"/{QUEUES}/GetQueueStats"), b"", timeout=10) == grpc.StatusCode.OK
    for port, s in stats.items():
        assert s["depth"] >= 1, (port, s)
        rate = s["rate_bytes_per_s"]
        assert rate is None or (math.isfinite(rate) and rate > 0), (port, s)


# -- GOR's sampled PacketIns --------------------------------------------------------------------

metadata = st.dictionaries(st.sampled_from(["ingress_port", "egress_port", "qdepth", "switch_id", "sampled",
                                            "alarm_level", "alarm_marks", "first_mark", "other"]),
                           st.integers(0, 2**48 - 1), max_size=8)


SAMPLED = bytes(Ether(src="02:00:0a:00:00:01", dst="02:ff:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.1.1")
                / UDP(sport=49152, dport=4791) / bytes(16))
# Mutations aim at the Ethernet, IPv4 and UDP headers (bytes 12-41).
payloads = st.one_of(st.binary(max_size=80), st.lists(st.tuples(st.sampled_from(range(12, 42)), st.integers(0, 255)),
                                                      min_size=1, max_size=3).map(lambda fl: overwrite(SAMPLED, fl)),
                     st.integers(0, len(SAMPLED)).map(lambda n: SAMPLED[:n]))


@FUZZ
@given(packets=st.lists(st.tuples(metadata, payloads), min_size=1, max_size=20))
def test_garbage_packet_ins_never_break_gors_sampling_or_alarms(packets) -> None:
    window = SampleWindow(window_s=1.0, sample_rate=4)
    samples = []
    for md, payload in packets:
        count("control_fuzzed")
        alarm = parse_alarm(0.5, "b0l0", md)
        assert alarm is None or NOTICE <= alarm.level <= CRITICAL, "an alarm level no switch can raise"
        sample = parse_sample(0.5, "b0l0", md, payload)
        if sample is not None:
            ip_len = (payload[14] & 0x0F) * 4
            assert ip_len >= 20 and len(payload) >= 14 + ip_len + 4, "a header shorter than IPv4's was read"
            assert 0 <= sample.flow.sport < 65536 and 0 <= sample.flow.dport < 65536
            samples.append(sample)
    window.add(samples)
    assert sum(e.samples for e in window.flows(1.0)) == len(samples)
