"""finsy, a real P4Runtime client, against the p4sim server: connect and arbitrate, push the
pipeline, write/read/delete entries (the engine then forwards accordingly), PacketIn."""

from __future__ import annotations

import asyncio

import finsy as fy
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

from runtime_fixtures.harness import DEVICE_ID, FIXTURES, Runtime, packet
from runtime_fixtures.harness import rt  # noqa: F401 - fixture


def switch(rt: Runtime, **options) -> fy.Switch:
    opts = fy.SwitchOptions(
        p4info=FIXTURES / "small.p4info.txtpb",
        p4blob=FIXTURES / "small.json",
        device_id=DEVICE_ID,
        **options,
    )
    return fy.Switch("sw1", rt.address, opts)


def run(coro) -> None:
    asyncio.run(asyncio.wait_for(coro, timeout=30))


def test_finsy_sets_pipeline_writes_reads_and_deletes(rt: Runtime) -> None:
    async def main() -> None:
        async with switch(rt) as sw:
            assert sw.is_primary
            assert str(sw.p4runtime_version) == "1.5.0"
            entry = fy.P4TableEntry(
                "ipv4_lpm",
                match=fy.P4TableMatch({"hdr.ipv4.dstAddr": "10.0.1.0/24"}),
                action=fy.P4TableAction("set_nhop", dmac=0xBB, port=2),
            )
            await sw.insert([entry])
            await sw.insert([fy.P4MulticastGroupEntry(3, replicas=[2, 3])])
            # the engine forwards with the entry a real client wrote
            assert [p for p, _ in rt.dataplane.receive(1, packet())] == [2]
            entries = [e async for e in sw.read(fy.P4TableEntry("ipv4_lpm"))]
            assert len(entries) == 1
            # read-write symmetry: what comes back encodes exactly like what was written
            assert entries[0].encode(sw.p4info) == entry.encode(sw.p4info)
            groups = [g async for g in sw.read(fy.P4MulticastGroupEntry())]
            assert groups[0].multicast_group_id == 3 and list(groups[0].replicas) == [2, 3]
            await sw.delete([entry])
            assert [e async for e in sw.read(fy.P4TableEntry("ipv4_lpm"))] == []
            assert rt.dataplane.receive(1, packet()) == []

    run(main())


def test_finsy_second_client_reads_the_pipeline_and_gets_packet_ins(rt: Runtime) -> None:
    async def main() -> None:
        async with switch(rt) as primary:
            await primary.insert([
                fy.P4TableEntry(
                    "acl",
                    match=fy.P4TableMatch({"hdr.ipv4.srcAddr": "10.0.0.1/255.255.255.255"}),
                    priority=5,
                    action=fy.P4TableAction("send_to_cpu"),
                )
            ])
            observer = fy.Switch("obs", rt.address, fy.SwitchOptions(device_id=DEVICE_ID, initial_election_id=3))
            async with observer:
                assert not observer.is_primary
                assert observer.p4info.tables["acl"].id == rt.table_id("MyIngress.acl")  # fetched from the server
                (read,) = [e async for e in observer.read(fy.P4TableEntry("acl"))]
                assert read.priority == 5
            packets = primary.read_packets()
            waiting = asyncio.ensure_future(anext(packets))
            # One turn of the loop runs the reader to its first await, which registers
            # its queue before the packet arrives (asyncio runs ready tasks in order).
            await asyncio.sleep(0)
            await asyncio.to_thread(rt.dataplane.receive, 7, packet())
            pin = await waiting
            assert pin.metadata["ingress_port"] == 7
            assert Ether(pin.payload)[IP].src == "10.0.0.1"

    run(main())
