"""The control channel over a real Unix socket, on an engine without NICs (no root):
flows are queue pairs created directly, the engine loop turns in a thread."""

from __future__ import annotations

import concurrent.futures

import grpc
import pytest

from tccl.job import qpn

from agent_fixtures import serving_agent
from testkit import wait_for
from topo.spec import NICS


@pytest.fixture(params=NICS)
def agent(request, tmp_path):
    with serving_agent(tmp_path, nic=request.param) as serving:
        yield serving


def test_list_flows_and_stats(agent):
    engine, qp, client = agent
    (flow,) = client.list_flows()
    assert (flow.qpn, flow.src_ip, flow.dst_ip, flow.sport, flow.dport, flow.state) == \
        (qpn(0, 1), "10.0.0.1", "10.0.1.1", 50000, 4791, "idle")
    assert flow.rate_bps == pytest.approx(engine.dcqcn.line_rate)
    stats = client.stats()
    assert stats.server == "a" and len(stats.flows) == 1


def test_move_an_idle_flow_by_qpn_and_by_addresses(agent):
    _, qp, client = agent
    reply = client.set_source_port(51000, qpn=qp.qpn)
    assert (reply.old_sport, reply.flow.sport) == (50000, 51000) and qp.requester.sport == 51000
    reply = client.set_source_port(52000, src_ip="10.0.0.1", dst_ip="10.0.1.1", current_sport=51000)
    assert reply.flow.sport == 52000


def test_errors_name_the_flow_or_port(agent):
    _, qp, client = agent
    for kwargs, code, text in [
        (dict(sport=80, qpn=qp.qpn), grpc.StatusCode.INVALID_ARGUMENT, "invalid source port 80"),
        (dict(sport=70000, qpn=qp.qpn), grpc.StatusCode.INVALID_ARGUMENT, "invalid source port 70000"),
        (dict(sport=50001, qpn=0x42), grpc.StatusCode.NOT_FOUND, "no flow with QPN 0x42"),
        (dict(sport=50001, src_ip="10.0.0.1", dst_ip="10.9.9.9"), grpc.StatusCode.NOT_FOUND,
         "no flow 10.0.0.1:0 -> 10.9.9.9"),
    ]:
        with pytest.raises(grpc.RpcError) as err:
            client.set_source_port(**kwargs)
        assert err.value.code() == code and text in err.value.details()


def test_move_waits_for_a_boundary_and_times_out_when_none_comes(agent):
    engine, qp, client = agent
    qp.requester.post(b"x" * 3000)
    # One packet in flight that nobody will acknowledge (this engine has no NICs).
    engine.call(lambda: qp.requester.next_frame(engine.clock())).result(5)
    with pytest.raises(grpc.RpcError) as err:
        client.set_source_port(53000, qpn=qp.qpn, timeout_s=0.3)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "did not reach a message boundary" in err.value.details()
    assert client.list_flows()[0].state == "moving" and qp.requester.sport == 50000


def test_the_answer_leaves_at_the_boundary_without_another_turn_of_the_loop(agent):
    """The answer to a move is taken on the engine thread as the flow passes its
    boundary: it reaches the client while the engine, right after that boundary, is
    still busy (here: held by the command that acknowledged the flow's last packet).
    An answer that needs one more turn of the loop arrives only once that is over."""
    engine, qp, client = agent
    psn = qp.requester.nxt
    qp.requester.post(b"x" * 100)
    assert engine.call(lambda: qp.requester.next_frame(engine.clock())).result(5) is not None
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        reply = pool.submit(client.set_source_port, 54000, qpn=qp.qpn, timeout_s=30)
        wait_for("the move pending", lambda: client.list_flows()[0].state == "moving", timeout=10)

        def ack_then_hold() -> bool:
            qp.requester.on_ack(psn, False, engine.clock())     # the boundary passes
            # The engine stays busy until the answer is in, or for 4 s: less than the
            # 5 s after which the control channel gives up on the loop (UNAVAILABLE).
            return bool(concurrent.futures.wait([reply], timeout=4).done)
        assert engine.call(ack_then_hold).result(15), "the answer waited for the engine loop"
        answer = reply.result()
    assert (answer.old_sport, answer.flow.sport, answer.flow.state) == (50000, 54000, "idle")
    assert 0 <= answer.waited_s < 30
    # When the request came in and when the boundary passed, on the engine's clock.
    assert answer.received_s <= answer.applied_s <= engine.clock()
    assert answer.waited_s == pytest.approx(answer.applied_s - answer.received_s)
