"""GOR, the global controller: the loop that watches the fabric and moves elephants.

A switch's own ECN alarm (a PacketIn from astral.p4, `controller.alarms.parse_alarm`)
is taken in at once by the reactions' thread (`AlarmBook.raise_from_switch`), which
probes the link's load when no round showed it and runs one reroute loop (`react`,
no counter round) the moment the link is known loaded. Every ``interval_s`` the
loop thread (the ticks)

1. reads every switch's counters (`controller.telemetry`) and the state of every
   switch-switch cable as the switches report their ports (`controller.cables`), repairing the routes when one goes down or
   comes back (`controller.repair`);
2. feeds the links' ECN-marked fractions and queue depths to the alarms
   (`controller.alarms`);
3. takes the sampled packets that arrived (`controller.elephants`) and the agents'
   flow lists (`controller.agents`) into its flow table (`controller.flows`);
4. advances the moves in flight (`controller.moves`), and when links are alarmed at
   ``act_level`` or above (and loaded to ``act_util``, or raised by a switch's own
   alarm to ``act_switch_level``) with no move in flight, runs
   one reroute loop for all of them: the natural demand of every active flow
   (`controller.demand`, Hedera's estimator), one placement of every movable flow on
   `controller.paths`' candidates by the projected load of those demands
   (`controller.placement`: only flows on links over their bar move), and a move
   commanded for each flow that changes path.

Moved flows are left alone for ``cooldown_s`` and pinned flows always. Every step goes
to the event log (`controller.events`) with its timestamp.

One lock, ``lock``, guards the loop's state (alarms, samples, flows, moves, failures)
against the REPL's thread, and no switch or agent I/O happens while it is held: the
telemetry poll, the route repair's writes and the agents' flow listings run outside it,
and moves call the agents from worker threads.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import queue
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from controller.agents import AgentDirectory, AgentFlow, JobRunner
from controller.alarms import (EPISODE_QUIET_S, LEVELS, Alarm, AlarmBook, AlarmEvent, LinkSample, SwitchAlarm,
                               parse_alarm)
from controller.cables import CableWatch, PortReader, after
from controller.config import GorConfig, default_config
from controller.elephants import Elephant, Sample, SampleWindow, parse_sample
from controller.events import EventLog
from controller.flows import Flow, FlowTable
from controller.moves import MAX_RETRIES, Move, Mover
from controller.paths import LinkId, PathCache, links_of
from controller.demand import FlowEnds, estimate_demands
from controller.placement import FlowToPlace, place
from controller.repair import RouteRepair
from controller.routes import Down, SwitchProgram, cable
from controller.simulate import Candidate, rank, ranked_paths, simulate
from controller.switches import SwitchFleet
from controller.telemetry import LinkStats, Telemetry
from emulation.clock import EmulationClock
from topo.addressing import AddressPlan
from topo.hashmodel import FiveTuple
from topo.pipeline import Pipeline

LOG = logging.getLogger("controller.gor")
# Flows are re-listed from the agents this often (s): listing costs each agent (a busy
# sender) a turn of its event loop -- measured, 0.5 s cost the demo's GOR run about
# 0.05 of busbw. An elephant GOR does not know yet triggers a listing at once.
AGENT_REFRESH_S = 2.0
# Agents of a fabric run in this subdirectory of its run directory (tccl.launch).
AGENT_SUBDIR = "tccl"
# An alarmed link for which no move was found is planned again after this many
# telemetry intervals: soon enough that a job whose agents were not listed yet (its
# flows "no agent") is not held back long, not every tick for a link with nothing to move.
NO_PLAN_RETRY_TICKS = 2
# Frames of at most this many bytes on the wire are RoCE control frames -- ACK, NAK, CNP
# (62 bytes: Ethernet, IPv4, UDP, BTH, AETH, ICRC) -- which a responder sends back with
# its QP's source port: a flow sampled only in those carries no data.
CONTROL_FRAME_MAX = 128
# While moves are in flight, their watcher takes in the samples this often (s): no I/O,
# so it costs the switches nothing and GOR a few lock turns; an agent's answer wakes
# it at once.
MOVE_POLL_S = 0.02
# A switch routed around as dead that answers again runs a tick at once, but never
# sooner than this after the previous tick (s): each tick polls every switch's counters,
# and a tick's utilisation needs some packets to be measured over.
ALARM_TICK_GAP_S = 0.05
# A switch's alarm that raises a fabric link's level, on a link no telemetry round of
# the window showed at ``act_util``, is checked by a probe: the link's own transmit
# counter read twice this far apart (emulated s). 50 ms is ~15 full-size packets of a
# 10 Mbit/s link (a utilisation to within 7 %), where the next round of every switch's
# counters came 0.1-0.5 s after the alarm (measured on the demo's stock job: alarm ->
# decision 0.26-0.59 s).
PROBE_GAP_S = 0.05
# A probe whose link is under ``act_util`` while its alarm stays up reads on, every
# `PROBE_GAP_S`, for up to this many gaps (s: one interval, after which the ticks'
# rounds see the link anyway): a collective step ramps up under DCQCN, and the demo's
# first probes, 50-100 ms after the alarm, showed 0.16-0.70 of links that were full a
# round later.
PROBE_ROUNDS = 5
# Probes running at once: an alarm arriving while another link's probe runs is probed
# at once, not after it (a collision alarms a leaf's uplink and the spine's downlink
# within milliseconds).
PROBE_WORKERS = 4
# A switch's alarm that confirms a link at `GorConfig.act_switch_level` runs a reaction
# (`Gor.react`: no switch I/O) at once, but never sooner than this after the previous
# tick or reaction (s): the alarms of one collision arrive within milliseconds of each
# other, and one reroute loop should see them together.
REACT_GAP_S = 0.02


@dataclass(frozen=True)
class LoopPlacement:
    """What one reroute loop's placement made: the moves (flow id -> new path), every
    active flow's path before and afterwards and its demand (bit/s), how
    (`controller.placement`), the projected worst link before and after, how many flows
    could move, each movable flow's ECMP paths and the links judged (capacities):
    what the simulation of its candidates needs (`controller.simulate`)."""

    moves: dict[int, tuple[str, ...]]
    paths: dict[int, tuple[str, ...]]
    demands: dict[int, float]
    method: str
    worst_before: float
    worst_after: float
    listed: int          # of the active flows, how many an agent lists (the rest: samples only)
    movable: int
    current: dict[int, tuple[str, ...]]
    options: dict[int, tuple[tuple[str, ...], ...]]
    capacity: dict[LinkId, float]


class Gor:
    """The controller of one running fabric (see the module docstring)."""

    def __init__(self, plan: AddressPlan, pipeline: Pipeline, run_dir: str | Path,
                 config: GorConfig | None = None, fabric: Any = None,
                 clock: EmulationClock | None = None, agent_dir: str | Path | None = None,
                 agents: AgentDirectory | None = None) -> None:
        self.plan = plan
        self.run_dir = Path(run_dir)
        # Where the agents run, keep their control sockets and read the published
        # topology: by default `tccl.launch`'s convention for a fabric whose run dir
        # this is; a caller that launches the agents itself names their run dir.
        self.agent_dir = Path(agent_dir) if agent_dir is not None else self.run_dir / AGENT_SUBDIR
        self.agent_dir.mkdir(parents=True, exist_ok=True)
        self.config = config or default_config(plan)
        self.fabric = fabric
        # The fabric's emulation clock (a fresh one without a fabric): ticks, deadlines
        # and event times are emulated seconds; `clock` is its reading, handed to the
        # parts that only read the time.
        self.time = clock or getattr(fabric, "clock", None) or EmulationClock.start()
        self.clock = self.time.now
        self.lock = threading.RLock()
        self.events = EventLog(self.run_dir / "gor-events.jsonl", self.clock)
        self.alarms = AlarmBook(self.config.thresholds)
        self.samples = SampleWindow(self.config.window_s, max(1, plan.spec.sample_rate))
        self._incoming: queue.SimpleQueue[Sample] = queue.SimpleQueue()
        # The switches' alarms as they arrive (finsy's thread), and the loop's wake-up.
        self._switch_alarms: queue.SimpleQueue[SwitchAlarm] = queue.SimpleQueue()
        self._wake = threading.Event()
        self.routes = RouteRepair(plan, self.events, self.agent_dir, self.lock)
        self.fleet = SwitchFleet(plan, pipeline, self._program, on_packet=self._on_packet, on_push=self._on_push)
        # Set (finsy's thread) when a switch GOR routes around as dead was pushed again.
        self._came_back = threading.Event()
        # Set when a move was commanded (the loop) or an agent answered one (a mover's
        # worker): the moves' watcher looks at once.
        self._moves_changed = threading.Event()
        # Set (the listing thread) when a listing that alarmed links waited for is in
        # (their plan found nothing to move while it was under way): they react now.
        self._listed = threading.Event()
        self._await_listing: set[LinkId] = set()
        # The (src, dst, sport) of every flow an agent listed, as of the last listing
        # merged, and those sampled in data frames since that it did not name: read and
        # written on finsy's thread without the lock (`_on_packet`), replaced whole.
        self._listed_tuples: frozenset[tuple[str, str, int]] = frozenset()
        self._unnamed: set[tuple[str, str, int]] = set()
        # Set (finsy's thread) when a data frame of a flow no listing named was sampled.
        self._new_sender = threading.Event()
        # The probes of alarmed links (`_probe`): the links being probed, and set (a
        # probe's thread) when one showed its link at ``act_util``.
        self._prober = ThreadPoolExecutor(max_workers=PROBE_WORKERS, thread_name_prefix="gor-probe")
        self._probing: set[LinkId] = set()
        self._probed = threading.Event()
        self.telemetry: Telemetry | None = None
        self.cables = CableWatch(plan)
        self.ports: PortReader | None = None   # the switches' port status (on start)
        # The agents' control channels (a test gives a stand-in).
        self.agents = agents if agents is not None else AgentDirectory(plan, self.agent_dir)
        self.jobs = JobRunner(fabric, self.agent_dir) if fabric is not None else None
        self.flows = FlowTable()
        self.paths = PathCache(plan)
        # The agents' flows a plan (`_plan_listed`) has seen, by id.
        self._planned: set[int] = set()
        self.mover = Mover(plan, self.agents, self.flows, self.samples, self.alarms, self.routes,
                           self.events, lambda: self.config, self.clock, on_change=self._moves_changed.set)
        self._loops = itertools.count(1)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None      # the ticks (`_run`), with their poll
        self._reactor: threading.Thread | None = None     # the reactions between ticks (`_react_loop`)
        self._watcher: threading.Thread | None = None     # the moves in flight (`_watch`)
        # Set (the reactions' thread) when a tick is due before the next interval.
        self._tick_now = threading.Event()
        self._agents_at = 0.0
        # The agents' flow listings run here, one at a time (`_list_agents`).
        self._lister = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gor-listing")
        self._listing: Future | None = None
        self._answered: set[str] = set()
        self.fabric_links = {(c.a, c.b) for c in plan.switch_links} | \
            {(c.b, c.a) for c in plan.switch_links}
        # Every link's utilisation per telemetry round over the last window (t, util).
        self._utils: dict[LinkId, deque[tuple[float, float]]] = {}
        # Alarmed links for which no plan was found: not re-planned before this time.
        self._no_plan_until: dict[LinkId, float] = {}
        self._ticked_at = 0.0
        # The switches whose P4Runtime session is down (routed around), as last seen.
        self._dead: frozenset[str] = frozenset()
        # Every NIC's line rate: the host capacity of the demand estimate.
        self._nic_bps = plan.spec.links.host_mbps * 1e6

    # --- life cycle ----------------------------------------------------------------

    def start(self) -> "Gor":
        """Connect to every switch (re-pushing its program), publish the topology and
        start the loop thread."""
        self.fleet.start()
        self.telemetry = Telemetry(self.plan, self.fleet)
        self.ports = PortReader(self.plan, self.telemetry.queue_clients)
        self.routes.publish()
        self.telemetry.poll(self.clock)
        self.events.emit("started", switches=len(self.plan.switches), interval_s=self.config.interval_s)
        self._thread = threading.Thread(target=self._run, name="gor-loop", daemon=True)
        self._thread.start()
        self._reactor = threading.Thread(target=self._react_loop, name="gor-react", daemon=True)
        self._reactor.start()
        self._watcher = threading.Thread(target=self._watch, name="gor-moves", daemon=True)
        self._watcher.start()
        return self

    def stop(self) -> None:
        """Stop the loop, the agent calls and the switch sessions (safe twice)."""
        self._stop.set()
        self._wake.set()
        if self.jobs is not None:
            self.jobs.stop_all()
        self._moves_changed.set()
        self._tick_now.set()
        for thread in (self._thread, self._reactor, self._watcher):
            if thread is not None:
                thread.join(10)
        self._thread = self._reactor = self._watcher = None
        self.mover.close()
        self._lister.shutdown(wait=True, cancel_futures=True)
        self._prober.shutdown(wait=True, cancel_futures=True)
        if self.ports is not None:
            self.ports.close()
        if self.telemetry is not None:
            self.telemetry.close()
        self.agents.close()
        self.fleet.stop()
        self.events.close()

    def __enter__(self) -> "Gor":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def configure(self, **changes: Any) -> GorConfig:
        """Change settings at run time (validated); thresholds apply from the next tick.
        The switches' alarm levels are not among them: they are programmed when a
        switch connects."""
        if "switch_alarms" in changes:
            raise ValueError("GOR config: switch_alarms are programmed into the switches when GOR "
                             "starts; give them in its GorConfig")
        with self.lock:
            self.config = dataclasses.replace(self.config, **changes)
            self.alarms.thresholds = self.config.thresholds
            if self.config.window_s != self.samples.window_s:
                self.samples.window_s = self.config.window_s
            self.events.emit("configured", **{k: str(v) for k, v in changes.items()})
            return self.config

    @property
    def down(self) -> Down:
        """The cables GOR routes around (as repaired and published)."""
        return self.routes.down

    # --- the loop ------------------------------------------------------------------

    def _run(self) -> None:
        """The ticks, every interval (sooner when `_react_loop` calls for one). A tick's
        telemetry poll runs on this thread, so the reactions (`_react_loop`) never wait
        for a round of reads: a poll of every switch, one after the other, took 0.1-0.4
        s under load, and a switch's alarm arriving meanwhile was taken in after it
        (measured on the demo's stock job: alarms of 0.20 s acted on at 0.41 s)."""
        next_tick = self.clock()
        while not self._stop.is_set():
            next_tick += self.config.interval_s
            self._safely(self.tick)
            if self.clock() > next_tick + self.config.interval_s:
                next_tick = self.clock()     # fell behind: do not try to catch up
            if self.time.wait(self._tick_now, max(0.0, next_tick - self.clock())):
                self._tick_now.clear()       # a switch back: tick now, the next an interval on
                next_tick = self.clock()

    def _react_loop(self) -> None:
        """What a switch's alarm (or a probe, or the listing an alarmed link waits for)
        calls for between ticks (`_between_ticks`): a reaction here, or a tick (a
        switch back) on the ticks' thread."""
        while not self._stop.is_set():
            due = self._between_ticks(self.clock() + self.config.interval_s)
            if due == "react":
                self._safely(self.react)
            elif due == "tick":
                self._tick_now.set()

    def _safely(self, step: Callable[[], None]) -> None:
        try:
            step()
        except Exception:  # noqa: BLE001 -- the loop must outlive one bad round
            LOG.exception("GOR %s failed", step.__name__)

    def _between_ticks(self, until: float) -> str | None:
        """Wait for the next tick (None when it is due). Sooner when a switch's alarm
        calls for it (`_take_switch_alarms`): ``"react"`` for a link its switch
        raised that was already loaded, or that its probe showed loaded, or that its
        switch confirmed at ``act_switch_level``, or when the agents' listing an
        alarmed link waits for came in (`REACT_GAP_S` after the last tick or
        reaction); ``"tick"`` when a switch routed around as dead was pushed again:
        its cables back in service now (`ALARM_TICK_GAP_S` after the last tick)."""
        due_at, due = None, ""
        while not self._stop.is_set():
            now = self.clock()
            if due_at is not None and now >= due_at:
                return due
            left = until - now
            if left <= 0:
                return None
            if self.time.wait(self._wake, left if due_at is None else min(left, due_at - now)):
                self._wake.clear()
                wanted = self._take_switch_alarms()
                if self._probed.is_set():
                    self._probed.clear()
                    wanted = wanted or "react"
                if self._came_back.is_set():
                    self._came_back.clear()
                    wanted = "tick"
                if self._listed.is_set():
                    # The agents named the flows an alarmed link waits for: plan it now,
                    # not a telemetry interval later.
                    self._listed.clear()
                    wanted = wanted or "react"
                if wanted == "tick" or (wanted and not due):
                    due = wanted
                    gap = ALARM_TICK_GAP_S if due == "tick" else REACT_GAP_S
                    due_at = max(now, self._ticked_at + gap) if due_at is None else \
                        max(min(due_at, now), self._ticked_at + gap)
        return None

    def _watch(self) -> None:
        """The moves in flight, on a thread of their own: the agents' answers the moment
        they come, the samples every `MOVE_POLL_S` (no switch or agent I/O: the queue
        and the moves' futures), so a move is seen commanded and moved when the
        evidence arrives -- not after the loop's tick, whose telemetry poll took 0.1-0.2
        s under load (measured: acks taken in 0.13-0.3 s after the agents sent them)."""
        while not self._stop.is_set():
            with self.lock:
                watching = self.mover.in_flight()
            self.time.wait(self._moves_changed, MOVE_POLL_S if watching else self.config.interval_s)
            self._moves_changed.clear()
            self._watch_once()

    def _watch_once(self) -> None:
        """One look at the moves in flight (`_watch`)."""
        with self.lock:
            if self.mover.in_flight():
                now = self.clock()
                self._take_samples(now)
                self.mover.advance(now)

    def react(self) -> None:
        """What a switch's alarm (or the listing an alarmed link waited for) calls for
        between ticks: the alarms and samples that arrived, the moves, one
        reroute loop -- without a tick's switch I/O. A link a switch's own alarm raised
        to ``act_switch_level`` needs no counter round (`_actionable`), and the poll
        under load took 0.1-0.2 s of a loop that has 0.27 s."""
        self._take_switch_alarms()
        with self.lock:
            now = self._ticked_at = self.clock()
            self._take_samples(now)
            self.mover.advance(now)
            if self.config.auto:
                self._act_on_alarms(now)

    def tick(self) -> None:
        """One round: telemetry, cables, alarms, samples, flows, moves (each step's I/O
        outside the lock). The switches' alarms are the reactions' thread's to take in
        (`_between_ticks`): what they call for is decided there."""
        assert self.telemetry is not None
        stats = self.telemetry.poll(self.clock, self.config.interval_s / 2)
        now = self._ticked_at = self.clock()
        while self.telemetry.storms:
            switch, port, trips = self.telemetry.storms.pop(0)
            # A pause storm: the switch's PFC watchdog took a queue out of lossless service.
            LOG.warning("PFC watchdog on %s port %d: %d pause storm(s)", switch, port, trips)
            self.events.emit("pfc_storm", switch=switch, port=port, storms=trips)
        self._check_cables()
        with self.lock:
            samples = {link: LinkSample(s.ecn_fraction, s.queue_depth, s.packets)
                       for link, s in stats.items() if cable(*link) not in self.routes.down}
            for event in self.alarms.update(now, samples):
                self._alarm_event(event)
            for link, st in stats.items():
                history = self._utils.setdefault(link, deque())
                history.append((now, st.util))
                while history[0][0] < now - self.config.window_s:
                    history.popleft()
            self._take_samples(now)
        if now - self._agents_at >= AGENT_REFRESH_S:
            self._list_agents(now)
        with self.lock:
            # Read again: the wait for the lock takes time (with the round's time, a
            # plan's move once showed moved 10 ms before its plan).
            now = self.clock()
            self.mover.advance(now)
            # A sender the last listing could not name (it started after it: a job
            # starting) is listed at once, before its alarm: the loop then finds the
            # flows movable the moment the alarm arrives, not a listing later.
            relist = self.config.auto and (self.flows.unlisted_since(self._agents_at) or self._unlisted_elephant(now))
        if relist:
            self._list_agents(now)
        with self.lock:
            if self.config.auto:
                self._act_on_alarms(now)

    def _take_samples(self, now: float) -> None:
        """The sampled packets that arrived, into the window and the flow table (under
        the lock)."""
        drained = []
        while True:
            try:
                drained.append(self._incoming.get_nowait())
            except queue.Empty:
                break
        self.samples.add(drained)
        self.samples.prune(now)
        for s in drained:
            self.flows.sampled(s, CONTROL_FRAME_MAX)

    def _on_packet(self, switch: str, packet: Any) -> None:
        """A PacketIn (on finsy's thread): a switch's alarm wakes the loop, a sample
        waits for the next tick; one PacketIn may be both."""
        now = self.clock()
        alarm = parse_alarm(now, switch, packet.metadata)
        if alarm is not None:
            self._switch_alarms.put(alarm)
            self._wake.set()
        if packet.metadata.get("sampled"):
            sample = parse_sample(now, switch, packet.metadata, packet.payload)
            if sample is not None:
                self._incoming.put(sample)
                self._note_sender(sample)

    def _note_sender(self, sample: Sample) -> None:
        """(finsy's thread, no lock) A data frame of a flow the last listing did not
        name wakes the reactions' thread once, which lists the agents
        (`_take_switch_alarms`): a job's QPs exist from their first message on, and
        waiting for the next tick (or an alarm) to ask held a job's plan back 0.1-0.3 s
        after its first collision's alarm (the demo's stock job)."""
        f = sample.flow
        key = (f.src, f.dst, f.sport)
        if sample.length > CONTROL_FRAME_MAX and key not in self._listed_tuples and key not in self._unnamed:
            self._unnamed.add(key)
            self._new_sender.set()
            self._wake.set()

    def _take_switch_alarms(self) -> str:
        """The switches' alarms that arrived, into the alarm book; what they call for
        now: ``"react"`` when one confirmed a fabric link at ``act_switch_level`` (acted
        on without a counter round) or raised or escalated to ``act_level`` a fabric
        link some round of the window showed at ``act_util``, else ``""`` -- such a
        link not shown loaded yet is probed (`_probe`), and its probe calls for the
        reaction when it shows the load. A fabric link raised, or a data frame sampled
        of a flow the last listing did not name (`_note_sender`), while a sender no
        listing named yet is sampled: the agents are listed now, not at the next tick (a
        job's first listing came 0.5 s after its first alarm in a demo run, and until it
        came no loop had a flow it could move)."""
        assert self.telemetry is not None
        due, ask = "", self._new_sender.is_set()
        self._new_sender.clear()
        with self.lock:
            while True:
                try:
                    alarm = self._switch_alarms.get_nowait()
                except queue.Empty:
                    if ask and self.config.auto:
                        now = self.clock()
                        self._take_samples(now)
                        if self.flows.unlisted_since(self._agents_at):
                            self._list_agents(now)
                    return due
                link = self.telemetry.links.tx.get((alarm.switch, alarm.port))
                if link is None or cable(*link) in self.routes.down:
                    continue
                confirmed = self.config.switch_confirms(self.alarms.switch_level(link))
                event = self.alarms.raise_from_switch(link, alarm)
                if event is not None:
                    self._alarm_event(event)
                if link not in self.fabric_links:
                    continue
                ask = ask or event is not None
                if not confirmed and self.config.switch_confirms(self.alarms.switch_level(link)):
                    due = "react"
                elif event is not None and event.level >= self.config.act_level:
                    if self._peak_util(link, self.clock()) >= self.config.act_util:
                        due = "react"
                    else:
                        self._probe(link)

    def _probe(self, link: LinkId) -> None:
        """(Under the lock) measure ``link``'s utilisation now on a probe thread, unless
        it is being probed: its transmit counter read twice `PROBE_GAP_S` apart. Why
        not the next tick: a tick reads every switch one after the other (0.1-0.2 s
        under load) after waiting for its turn; the probe reads one counter twice."""
        if link in self._probing or self.telemetry is None:
            return
        self._probing.add(link)
        self._prober.submit(self._probe_link, link)

    def _probe_link(self, link: LinkId) -> None:
        """A probe (`_probe`, on its thread): the link's transmit counter read every
        `PROBE_GAP_S` until the last gap shows it at ``act_util``, its alarm drops
        below ``act_level``, or `PROBE_ROUNDS` gaps went by; the last gap's
        utilisation into the link's history of the window, a ``probed`` event, and the
        loop woken when it reached ``act_util``. A switch that does not answer leaves
        the link to the next tick."""
        assert self.telemetry is not None
        util, rounds, t0 = None, 0, 0.0
        try:
            switch, port = self.telemetry.links.port_of(link)
            t1, b1 = self.telemetry.port_bytes(switch, port, self.clock)
            while rounds < PROBE_ROUNDS and not self._stop.is_set():
                self.time.wait(self._stop, PROBE_GAP_S)
                (t0, b0), (t1, b1) = (t1, b1), self.telemetry.port_bytes(switch, port, self.clock)
                rounds += 1
                if t1 > t0:
                    util = max(0, b1 - b0) * 8 / (t1 - t0) / self.telemetry.links.capacity[link]
                if (util is not None and util >= self.config.act_util) or \
                        self.alarms.level(link) < self.config.act_level:
                    break
        except Exception as e:  # noqa: BLE001 -- the next tick's poll measures the link
            LOG.debug("probing %s failed: %r", "->".join(link), e)
        with self.lock:
            self._probing.discard(link)
            if util is None:
                return
            self._utils.setdefault(link, deque()).append((t1, util))
            self.events.emit("probed", link="->".join(link), util=round(util, 3), seconds=round(t1 - t0, 4),
                             rounds=rounds)
        if util >= self.config.act_util:
            self._probed.set()
            self._wake.set()

    def _on_push(self, name: str) -> None:
        """A switch was (re)programmed (finsy's thread): one GOR routes around as dead
        wakes the loop."""
        if name in self._dead:
            self._came_back.set()
            self._wake.set()

    def _program(self, name: str) -> SwitchProgram:
        """What switch ``name`` is given when it connects: its routes with the failures
        in force, and the alarm levels of GOR's config."""
        return dataclasses.replace(self.routes.program(name), alarms=self.config.switch_alarms)

    def _alarm_event(self, event: AlarmEvent) -> None:
        self.events.emit(event.name, t=event.time, **event.fields())

    def _check_cables(self) -> None:
        """Compare every switch-switch cable's ends as their switches report them, and whether the switches at its
        ends answer, with the failure set; repair the routes when they differ. A switch
        whose P4Runtime stream broke is dead: its cables are routed around within the
        tick, and come back when it answers again (and was re-pushed)."""
        dead = frozenset(sw.name for sw in self.plan.switches if not self.fleet.is_up(sw.name))
        for name in sorted(dead ^ self._dead):
            self.events.emit("switch_down" if name in dead else "switch_up", switch=name)
        self._dead = dead
        assert self.ports is not None
        changes = self.cables.changes(self.routes.down, self.ports.read(), dead)
        for change in changes:
            self.events.emit("link_up" if change.up else "link_down", link=change.name)
        if changes:
            self.routes.repair(after(self.routes.down, changes), self.fleet, dead)

    # --- flows ---------------------------------------------------------------------

    def _list_agents(self, now: float) -> None:
        """Ask every agent for its flows on the listing thread, unless a listing is
        under way: agent I/O off the loop thread (a busy agent answers in up to
        `controller.agents.LIST_TIMEOUT_S`, which held whole ticks back -- and the moves
        they verify). `_listing_done` takes the answer in. Under the lock: the ticks'
        and the reactions' threads both ask."""
        with self.lock:
            if self._listing is None:
                self._agents_at = now
                self._listing = self._lister.submit(self.agents.flows)
                self._listing.add_done_callback(self._listing_done)

    def _listing_done(self, _: Future) -> None:
        """A listing is in (the listing thread): merged and planned here, at once --
        not at the next tick or reaction, which came 0.05-0.2 s later under load; the
        alarmed links that waited for it react (`_between_ticks`)."""
        with self.lock:
            waited = bool(self._await_listing)
            self._merge_listing()
        if waited:
            self._listed.set()
            self._wake.set()

    def _merge_listing(self) -> None:
        """(Under the lock) merge the finished listing into the flow table and plan the
        QPs it names first (`_plan_listed`)."""
        listing = self._listing
        if listing is None or not listing.done():
            return
        self._listing = None
        try:
            answered, listed = listing.result()
        except Exception:  # noqa: BLE001 -- a failed listing is skipped like a silent agent
            LOG.exception("listing the agents' flows failed")
            return
        self._refresh_agent_flows(answered, listed, self.clock(), self._agents_at)
        self._listed_tuples = frozenset((f.src, f.dst, f.sport) for f in self.flows if f.server is not None)
        self._unnamed = set()
        self._plan_listed(self.clock())
        for link in self._await_listing:
            self._no_plan_until.pop(link, None)
        self._await_listing.clear()

    def _refresh_agent_flows(self, answered: set[str], listed: list[AgentFlow], now: float,
                             asked: float | None = None) -> None:
        """Merge the agents' flow lists, asked for at ``asked`` (default ``now``), into
        the flow table (`FlowTable.merge`): a flow GOR gave a port since keeps it (the
        listing may show the old one: it was taken before). A change in which agents
        answer is an ``agents`` event: the log shows whom GOR could command."""
        asked = now if asked is None else asked
        with self.lock:
            if answered != self._answered:
                self._answered = set(answered)
                self.events.emit("agents", servers=sorted(answered))
            self.flows.merge(answered, listed, now, lambda flow: self.mover.port_set_since(flow, asked))

    def flow(self, ref: str) -> Flow:
        """A flow by its id number or its label (``src:sport->dst``)."""
        with self.lock:
            return self.flows.find(ref)

    def path_of(self, flow: Flow) -> list[str] | None:
        return self.paths.predict(flow.five_tuple, self.routes.down)

    # --- deciding ------------------------------------------------------------------

    def _actionable(self, now: float, busy: set[LinkId]) -> Iterator[tuple[LinkId, Alarm, list[Elephant]]]:
        """The alarmed fabric links GOR would act on now, with the elephants sampled
        leaving by them: at the acting level and utilisation -- or raised by a switch's
        own alarm to ``act_switch_level`` -- not ``busy``, not waiting after a failed
        plan."""
        assert self.telemetry is not None
        for link, alarm in sorted(self.alarms.active(self.config.act_level).items()):
            # A NIC link carries its flows on every path: moving cannot relieve it.
            if link in busy or now < self._no_plan_until.get(link, 0.0) or link not in self.fabric_links:
                continue
            if not self.config.switch_confirms(alarm.switch_level) and \
                    self._peak_util(link, now) < self.config.act_util:
                continue
            # Its elephants (for the log and the listing below): the placement takes
            # every active flow from the agents and the samples, not only these.
            switch, port = self.telemetry.links.port_of(link)
            yield link, alarm, self.samples.top(now, switch, port, self.config.top_n)

    def _peak_util(self, link: LinkId, now: float) -> float:
        """The link's highest utilisation over the last sample window: a collective step
        that starts or ends inside a telemetry interval leaves a collided link under
        ``act_util`` for that interval, which held a loop back by seconds."""
        return max((u for t, u in self._utils.get(link, ()) if t >= now - self.config.window_s), default=0.0)

    def _unlisted_elephant(self, now: float) -> bool:
        """Whether an elephant GOR would plan for is younger than the last agent
        listing (so the agents are asked now, not again and again for a sender that
        no agent will ever list)."""
        if now - self._agents_at < NO_PLAN_RETRY_TICKS * self.config.interval_s:
            return False
        return any(not self.flows.listed(e.flow)
                   for _, _, elephants in self._actionable(now, self.mover.busy_links(now)) for e in elephants)

    def _act_on_alarms(self, now: float) -> None:
        """One reroute loop for every alarmed link GOR acts on now: the demands of every
        active flow, every movable elephant placed at once (`controller.placement`;
        only those on links over their bar move), a move commanded for each that
        changes path."""
        # Links on the old path of a move not yet shown on its new path (or just shown)
        # wait: telemetry does not show that move yet.
        busy = self.mover.busy_links(now)
        actionable = list(self._actionable(now, busy))
        if not actionable:
            return
        loop = next(self._loops)
        # The loop is dated from the alarms' current episodes (`Alarm.episode`), and
        # ``from_alarm`` from their last level change, as before episodes.
        self.events.emit("detect", loop=loop, t=min(a.episode for _, a, _ in actionable), at=round(now, 6),
                         from_alarm=round(min(a.since for _, a, _ in actionable), 6),
                         link="->".join(actionable[0][0]), links=["->".join(l) for l, _, _ in actionable],
                         level=LEVELS[max(a.level for _, a, _ in actionable)], elephants=[
                             {"flow": f"{e.flow.src}:{e.flow.sport}->{e.flow.dst}",
                              "mbps": round(e.rate_bps / 1e6, 3), "samples": e.samples}
                             for _, _, elephants in actionable for e in elephants])
        alarmed = self._barred(now)
        since = {link: a.episode for link, a, _ in actionable}
        raised = {link: a.since for link, a, _ in actionable}
        # Simulate, then act. The alarmed links' top elephants are what moves first: a
        # placement of them alone, and one of every movable flow, each with its
        # candidates ranked by the model; the second is taken only when its best
        # candidate is strictly better. The best one's moves go out, each with its
        # paths in the ranked candidates' order.
        elephants = {e.flow for _, _, top in actionable for e in top}
        placed, flows = self._place(now, loop, alarmed, set(since), elephants)
        candidates = self._simulate(placed)
        scope = "elephants"
        wide, _ = self._place(now, loop, alarmed, set(since), None)
        wide_candidates = self._simulate(wide)
        if (wide_candidates and (not candidates or wide_candidates[0].score < candidates[0].score)) \
                or not candidates:        # nothing to move either way: the whole picture's why
            placed, candidates, scope = wide, wide_candidates, "all movable flows"
        # The flows cooling down after a move may move again, but only when that is
        # strictly better: an early loop that moved some flows of a collision must not
        # leave the rest of it where no flow still free to move can undo it.
        if any(now - f.moved_at < self.config.cooldown_s for f in flows.values()):
            again, _ = self._place(now, loop, alarmed, set(since), None, cooling=True)
            again_candidates = self._simulate(again)
            if again_candidates and again_candidates[0].score < (candidates[0].score if candidates else
                                                                 self._score_in_force(again)):
                placed, candidates, scope = again, again_candidates, "with flows cooling down"
        moves = self._decide(loop, placed, candidates, flows, scope, since, raised)
        if not moves:
            self.events.emit("failed", loop=loop, links=["->".join(l) for l, _, _ in actionable],
                             reason=("no movable elephant" if not placed.movable else
                                     "no placement better than the current one" if not placed.moves else
                                     "the simulation found no candidate better than the current placement"))
            # The same answer would come every tick: ask again a little later -- at the
            # next tick if nothing could move while a listing that may name the flows'
            # agents is under way (a job's agents start after GOR).
            waits = not placed.movable and self._listing is not None
            ticks = 1 if waits else NO_PLAN_RETRY_TICKS
            for link, _, _ in actionable:
                self._no_plan_until[link] = now + ticks * self.config.interval_s
                if waits:
                    self._await_listing.add(link)
            return
        for move in moves:
            self.mover.command(move)

    def _decide(self, loop: int, placed: "LoopPlacement", candidates: list[Candidate], flows: dict[int, Flow],
                scope: str, since: dict[LinkId, float], raised: dict[LinkId, float],
                planned_at: float | None = None) -> list[Move]:
        """The moves of the best of the ranked ``candidates`` (each with its paths in
        the candidates' order) and the ``decide`` event. A move off a link acted on is
        dated from that link's alarm (``since``: its episode, ``raised``: its last level
        change), also in a plan (``planned_at``, `_plan_listed`); a plan's move that
        relieves no alarmed link is dated from the plan and marked ``planned``."""
        best = candidates[0] if candidates else None
        moves = []
        for key in sorted(best.moved if best else (), key=lambda k: flows[k].id):
            flow = flows[key]
            old = tuple(self.path_of(flow) or ())
            ranked = ranked_paths(key, placed.current[key], candidates)
            # The alarm the move relieves (when its old path crosses one) dates it.
            relieved = [l for l in links_of(list(old)) if l in since]
            if planned_at is not None and not relieved:
                moves.append(Move(loop, flow, flow.sport, None, old, placed.demands[key],
                                  list(ranked)[:1 + MAX_RETRIES], planned_at, predicted=ranked, planned=True))
                continue
            detect_t = max(since[l] for l in relieved) if relieved else min(since.values())
            alarm_t = max(raised[l] for l in relieved) if relieved else min(raised.values())
            moves.append(Move(loop, flow, flow.sport, relieved[0] if relieved else None, old,
                              placed.demands[key], list(ranked)[:1 + MAX_RETRIES], detect_t, predicted=ranked,
                              alarm_t=alarm_t))
        self.events.emit("decide", loop=loop, method=placed.method, scope=scope,
                         worst_before=round(placed.worst_before, 3), worst_after=round(placed.worst_after, 3),
                         flows=len(placed.paths), listed=placed.listed, movable=placed.movable,
                         simulated=[c.summary() for c in candidates],
                         moves=[{"flow": m.flow.label, "flow_id": m.flow.id,
                                 "demand_mbps": round(m.rate_bps / 1e6, 3),
                                 "predicted_mbps": round(m.predicted[m.candidates[0]] / 1e6, 3),
                                 "current": "-".join(m.old_path),
                                 "path": "-".join(m.candidates[0]),
                                 "next": ["-".join(p) for p in m.candidates[1:]]} for m in moves])
        return moves

    def _plan_listed(self, now: float) -> None:
        """(Under the lock, as a listing is merged) plan when the agents list QPs for
        the first time, before any alarm: the demand of every active flow and of every
        QP an agent lists as having sent (its step may be paused), every movable flow
        placed, simulated and ranked as a reroute loop does, and a move commanded for
        each that changes path (``plan``, then ``decide`` with scope ``plan``). Every
        movable flow, not the new ones among the others fixed: a job's QPs come in over two or three listings,
        and a plan of the later ones around the earlier ones found nothing better in
        the demo where a loop over all of them, 14 ms later, moved five. Why plan: a
        job's QPs are known from the first listing after they start sending, while an
        alarm, its probe and the loop on it took 0.2-0.5 s of the demo's 0.53 s
        iteration; alarms then handle only what the plan could not foresee. A plan's
        move off a link alarmed by then is dated from that alarm, as a reroute loop's
        (its ``latency_s`` counts in the detect -> moved figures); the others relieve
        no alarm: their ``moved`` events carry ``planned_s`` (listing -> moved)."""
        new = {f.id for f in self.flows if f.server is not None} - self._planned
        if not new or not self.config.auto or not self.config.plan:
            return
        self._planned |= new
        loop = next(self._loops)
        # No link barred: the plan places the job's flows by their demands, each one
        # simulated, and an alarm on a link is those flows' own (measured: barring the
        # alarmed links left a plan of 32 QPs with nothing better, 1.5x the step, that
        # a loop 0.7 s later, the alarms gone quiet, fixed with six moves).
        placed, flows = self._place(now, loop, set(), set(), None, listed_too=True)
        candidates = self._simulate(placed)
        # A move off a link alarmed now relieves that alarm: dated from it like a
        # reroute loop's, and in the detect -> moved figures.
        alarmed = self.alarms.active(self.config.act_level)
        self.events.emit("plan", loop=loop, new=len(new), flows=len(placed.paths), movable=placed.movable,
                         alarmed=["->".join(l) for l in sorted(alarmed)])
        for move in self._decide(loop, placed, candidates, flows, "plan",
                                 {l: a.episode for l, a in alarmed.items()},
                                 {l: a.since for l, a in alarmed.items()}, planned_at=now):
            self.mover.command(move)

    def _barred(self, now: float) -> set[LinkId]:
        """The alarmed links no placement may newly put a flow on: at ``act_level``,
        with evidence of congestion (a switch's alarm, a poll at a threshold) within
        `EPISODE_QUIET_S` and none of it older than a move that took a flow off the link
        since. An alarm is cleared only after ``clear_after`` quiet intervals: a link a
        move relieved, or that went quiet, kept placements off a free link for that
        long, and a later loop found "no placement better"."""
        relieved: dict[LinkId, float] = {}
        for m in self.mover.moves:
            for link in links_of(list(m.old_path)):
                relieved[link] = max(relieved.get(link, float("-inf")), m.moved_t)
        return {link for link, a in self.alarms.active(self.config.act_level).items()
                if now - a.evidence <= EPISODE_QUIET_S and a.evidence > relieved.get(link, float("-inf"))}

    @staticmethod
    def _score_in_force(placed: "LoopPlacement") -> tuple[int, int]:
        """The model's score of the placement in force (what a loop that moves nothing
        leaves)."""
        return Candidate(placed.current, (), simulate(placed.current, placed.demands, placed.capacity)).score

    def _place(self, now: float, loop: int, alarmed: set[LinkId], acted_on: set[LinkId],
               only: set[FiveTuple] | None, cooling: bool = False,
               listed_too: bool = False) -> tuple["LoopPlacement", dict[int, Flow]]:
        """The active flows' demands (`controller.demand`) and the placement of the
        movable ones (`controller.placement`) -- of those in ``only``, if given; with
        ``cooling``, flows cooling down after a move count as movable; with
        ``listed_too``, every flow an agent lists as having sent is active (the QPs of
        a step that pauses send again) -- by flow id.
        Why a flow on a link acted on may not move is a ``skip`` event (for the others
        it would be noise; once per loop)."""
        active = self._active_flows(now)
        if listed_too:
            # A QP that never sent a byte is the receiving end of a connection (the
            # agents list both ends' QPs): no flow of its own.
            active += [f for f in self.flows if f.server is not None and f.bytes > 0 and f not in active]
        demands = estimate_demands([FlowEnds(f.id, f.src, f.dst) for f in active], self._nic_bps)
        capacity = {link: cap for link, cap in self.telemetry.links.capacity.items()
                    if link in self.fabric_links and cable(*link) not in self.routes.down}
        to_place, movable = [], 0
        for flow in active:
            target = self.mover.target(flow)
            current = tuple(target or self.path_of(flow) or ())
            if not current:
                continue
            # The alarm triggers the loop; the placement covers every flow that crosses
            # a spine (a path of 5 nodes; 7 across pods), and First Fit moves only
            # those on links over their bar: a collision whose alarm is a tick away is
            # undone in the same loop.
            report = only is None and not cooling and any(link in acted_on for link in links_of(list(current)))
            may_move = len(current) >= 5 and target is None and self._movable(flow, now, loop, report, cooling) \
                and (only is None or flow.five_tuple in only)
            movable += may_move
            candidates = tuple(tuple(p) for p in self.paths.candidates(flow.five_tuple, self.routes.down)) \
                if may_move else ()
            to_place.append(FlowToPlace(flow.id, demands[flow.id], current, candidates, may_move))
        result = place(to_place, capacity, alarmed, self.config.safety)
        return LoopPlacement(result.moves, result.paths, demands, result.method, result.worst_before,
                             result.worst_after, sum(f.server is not None for f in active), movable,
                             {f.key: f.current for f in to_place},
                             {f.key: f.candidates for f in to_place if f.movable}, capacity), \
            {f.id: f for f in active}

    @staticmethod
    def _simulate(placed: "LoopPlacement") -> list[Candidate]:
        """A placement's candidates ranked by the model (none when it moves nothing)."""
        if not placed.moves:
            return []
        return rank(placed.current, placed.paths, placed.options, placed.demands, placed.capacity)

    def _active_flows(self, now: float) -> list[Flow]:
        """The flows sending now: sampled in the window, or listed by their agent with
        bytes sent since its previous listing. A sender whose agent lists its flows is
        known from the listing alone (a sample of a port it left is no flow of its own);
        a flow sampled only in ACK-sized frames is the acknowledgements of a flow the
        other way, not a sender."""
        rate = self.samples.sample_rate
        sampled = {(e.flow.src, e.flow.dst, e.flow.sport) for e in self.samples.flows(now)
                   if e.bytes / rate / e.samples > CONTROL_FRAME_MAX}
        listed_src = {f.src for f in self.flows if f.server is not None}
        out = []
        for f in self.flows:
            if f.server is None and f.src in listed_src:
                continue
            if (f.src, f.dst, f.sport) in sampled or \
                    (f.server is not None and now - f.active_at <= AGENT_REFRESH_S + self.config.window_s):
                out.append(f)
        return out

    def _movable(self, flow: Flow, now: float, loop: int, report: bool, cooling: bool = False) -> bool:
        """Whether GOR may move ``flow`` now (``cooling``: also while it cools down
        after a move); if not and ``report``, a ``skip`` event says why."""
        reason = ("pinned" if flow.pinned else "no agent" if flow.server is None else
                  "cooling down" if not cooling and now - flow.moved_at < self.config.cooldown_s else
                  "already moving" if self.mover.moving(flow) else "")
        if reason and report:
            self.events.emit("skip", loop=loop, flow=flow.label, flow_id=flow.id, reason=reason)
        return not reason

    # --- acting by hand ----------------------------------------------------------------

    def reroute(self, flow: Flow, path: list[str] | tuple[str, ...]) -> Move:
        """Move ``flow`` onto ``path`` by hand (REPL); returns the move (wait on
        ``move.done``). Raises ValueError if the path is not one of its ECMP paths."""
        with self.lock:
            if flow.server is None:
                raise ValueError(f"flow {flow.label} has no agent to tell (seen only in samples)")
            paths = [tuple(p) for p in self.paths.candidates(flow.five_tuple, self.routes.down)]
            if tuple(path) not in paths:
                raise ValueError(f"{'-'.join(path)} is not an ECMP path of {flow.label}; "
                                 f"paths: {', '.join('-'.join(p) for p in paths)}")
            loop = next(self._loops)
            now = self.clock()
            self.events.emit("detect", loop=loop, t=now, flow=flow.label, flow_id=flow.id, reason="manual reroute")
            move = Move(loop, flow, flow.sport, None, tuple(self.path_of(flow) or ()), flow.rate_bps,
                        [tuple(path)], now)
            self.mover.command(move)
            return move

    # --- views for the REPL (copies, taken under the lock) -------------------------------

    def link_rows(self) -> list[tuple[LinkId, LinkStats | None, int]]:
        """(link, latest stats, alarm level) for every switch-to-switch link and NIC link."""
        assert self.telemetry is not None
        with self.lock:
            latest = self.telemetry.latest
            return [(link, latest.get(link), self.alarms.level(link))
                    for link in sorted(self.telemetry.links.capacity)]

    def alarm_rows(self) -> dict[LinkId, Alarm]:
        """The links in alarm now and their alarms."""
        with self.lock:
            return {link: dataclasses.replace(a) for link, a in self.alarms.active().items()}

    def flow_rows(self) -> list[tuple[Flow, list[str] | None]]:
        """Every flow GOR knows, by id, with its current path."""
        with self.lock:
            return [(f, self.path_of(f)) for f in sorted(self.flows, key=lambda f: f.id)]
