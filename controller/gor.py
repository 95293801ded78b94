"""GOR, the global controller: the loop that watches the fabric and moves elephants.

Every ``interval_s`` the loop thread

1. reads every switch's counters (`controller.telemetry`) and the state of every
   switch port (``/sys/class/net/<switch>-eth<port>/operstate``: the switches run in
   the root namespace), repairing the routes when a cable goes down or comes back;
2. feeds the links' ECN-marked fractions and queue depths to the alarms
   (`controller.alarms`);
3. takes the sampled packets that arrived (`controller.elephants`) and the agents'
   flow lists (`controller.agents`);
4. advances the moves in flight (below), and for every link alarmed at ``act_level``
   or above with no move in flight starts a reroute loop: the top-N elephants leaving
   that port, each planned (`controller.planner` over `controller.paths`' candidates)
   until one has an accepted path; a source port that lands on it (hash model); the
   flow's agent is told to switch.

A move is verified, not assumed: once the agent acknowledges, the new 5-tuple must be
sampled leaving the source leaf by the planned uplink within ``verify_s`` (``moved``);
otherwise the next accepted path is tried, and when none is left the old port is put
back (``rolled_back``). After ``moved`` the loop waits up to ``clear_s`` for the alarm
to drop below ``act_level`` (``cleared``). Moved flows are left alone for
``cooldown_s`` and pinned flows always. Every step goes to the event log
(`controller.events`) with its timestamp.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from controller.agents import AgentDirectory, AgentFlow, JobRunner
from controller.alarms import LEVELS, NOTICE, AlarmBook, AlarmEvent, AlarmThresholds, LinkSample
from controller.elephants import Sample, SampleWindow, parse_sample
from controller.events import EventLog
from controller.paths import LinkId, candidate_paths, find_port, links_of, predict
from controller.planner import SAFETY, plan_move
from controller.publish import publish, topology_document
from controller.routes import NO_FAILURES, Down, cable, program_updates, switch_program
from controller.switches import SwitchFleet, SwitchFleetError
from controller.telemetry import LinkStats, Telemetry
from topo.addressing import AddressPlan
from topo.hashmodel import PROTO_UDP, FiveTuple
from topo.pipeline import Pipeline

LOG = logging.getLogger("controller.gor")
# Flows are re-listed from the agents this often (s): listing costs each agent (a busy
# sender) a turn of its event loop -- measured, 0.5 s cost the demo's GOR run about
# 0.05 of busbw. An elephant GOR does not know yet triggers a listing at once.
AGENT_REFRESH_S = 2.0
# Agents of a fabric run in this subdirectory of its run directory (tccl.launch).
AGENT_SUBDIR = "tccl"
# Outcomes of a move after which the flow is on its new path.
MOVED = ("moved", "cleared", "not cleared")
# An alarmed link for which no move was found is planned again after this many
# telemetry intervals: soon enough that a job whose agents were not listed yet (its
# flows "no agent") is not held back long, not every tick for a link with nothing to move.
NO_PLAN_RETRY_TICKS = 2
# A flow neither listed by an agent nor sampled for this long is forgotten (s).
FORGET_S = 10.0


@dataclass(frozen=True)
class GorConfig:
    """GOR's knobs (the REPL's ``set`` changes them at run time).

    ``interval_s``: telemetry period; 0.25 s gives alarms within a few hundred ms while
    polling 10 switches costs them little CPU. ``window_s``: how far back samples count
    for elephants (long enough for a few samples of a 10 Mbit/s flow at 1 in 64).
    ``act_level`` and ``act_util``: GOR acts on a link whose alarm is at least
    ``act_level`` *and* whose utilisation is at least ``act_util``. Senders running
    DCQCN keep an overloaded link's marked fraction low (a few percent: they back off
    until the queue hovers near Kmin), so marks alone do not tell an overloaded link
    from a busy one whose software switch forwards in bursts; a link with room left
    under the safety threshold is not where moving a flow helps.
    """

    interval_s: float = 0.25
    window_s: float = 1.0
    act_level: int = NOTICE
    act_util: float = SAFETY
    top_n: int = 2
    safety: float = SAFETY
    verify_s: float = 3.0
    clear_s: float = 6.0
    cooldown_s: float = 10.0
    auto: bool = True
    thresholds: AlarmThresholds = field(default_factory=AlarmThresholds)

    def __post_init__(self) -> None:
        for name in ("interval_s", "window_s", "verify_s", "clear_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"GOR config: {name} must be > 0, got {getattr(self, name)}")
        if not 1 <= self.act_level < len(LEVELS):
            raise ValueError(f"GOR config: act_level must be 1..{len(LEVELS) - 1}, got {self.act_level}")
        if self.top_n < 1:
            raise ValueError(f"GOR config: top_n must be >= 1, got {self.top_n}")
        for name in ("safety", "act_util"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"GOR config: {name} must be in (0, 1], got {getattr(self, name)}")


@dataclass
class Flow:
    """A flow GOR knows: from an agent (movable) or only from samples."""

    id: int
    src: str
    dst: str
    sport: int
    dport: int
    server: str | None = None
    qpn: int = 0
    created_ns: int = 0       # the agent's QP creation time (0: a sampled flow)
    rate_bps: float = 0.0
    bytes: int = 0
    state: str = ""
    pinned: bool = False
    moved_at: float = float("-inf")
    last_seen: float = 0.0

    @property
    def five_tuple(self) -> FiveTuple:
        return FiveTuple(self.src, self.dst, PROTO_UDP, self.sport, self.dport)

    @property
    def label(self) -> str:
        return f"{self.src}:{self.sport}->{self.dst}"


@dataclass
class Move:
    """One flow being moved: the candidates still to try, and where it stands."""

    loop: int
    flow: Flow
    old_sport: int
    link: LinkId | None                   # the alarmed link it relieves (None: by hand)
    old_path: tuple[str, ...]
    rate_bps: float
    candidates: list[tuple[str, ...]]
    detect_t: float
    state: str = "commanding"             # commanding, verifying, clearing, done
    path: tuple[str, ...] = ()
    sport: int = 0
    future: Future | None = None
    since: float = 0.0
    deadline: float = 0.0
    outcome: str = ""
    done: threading.Event = field(default_factory=threading.Event)


class Gor:
    """The controller of one running fabric (see the module docstring)."""

    def __init__(self, plan: AddressPlan, pipeline: Pipeline, run_dir: str | Path,
                 config: GorConfig | None = None, fabric: Any = None,
                 clock: Callable[[], float] = time.monotonic, agent_dir: str | Path | None = None) -> None:
        self.plan = plan
        self.run_dir = Path(run_dir)
        # Where the agents run, keep their control sockets and read the published
        # topology: by default `tccl.launch`'s convention for a fabric whose run dir
        # this is; a caller that launches the agents itself names their run dir.
        self.agent_dir = Path(agent_dir) if agent_dir is not None else self.run_dir / AGENT_SUBDIR
        self.agent_dir.mkdir(parents=True, exist_ok=True)
        self.config = config or GorConfig(thresholds=default_thresholds(plan))
        self.fabric = fabric
        self.clock = clock
        self.lock = threading.RLock()
        self.down: Down = NO_FAILURES
        self.version = 0
        self.events = EventLog(self.run_dir / "gor-events.jsonl", clock)
        self.alarms = AlarmBook(self.config.thresholds)
        self.samples = SampleWindow(self.config.window_s, max(1, plan.spec.sample_rate))
        self._incoming: queue.SimpleQueue[Sample] = queue.SimpleQueue()
        self.fleet = SwitchFleet(plan, pipeline, self._program, on_packet=self._on_packet)
        self.telemetry: Telemetry | None = None
        self.agents = AgentDirectory(plan, self.agent_dir)
        self.jobs = JobRunner(fabric, self.agent_dir) if fabric is not None else None
        self.flows: dict[tuple, Flow] = {}
        self._flow_ids = itertools.count(1)
        self._loops = itertools.count(1)
        self.moves: list[Move] = []
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="gor-agent")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._agents_at = 0.0
        self._answered: set[str] = set()
        self.ticks = 0
        self.fabric_links = {(a.name, b.name) for a in plan.leaves for b in plan.spines} | \
            {(b.name, a.name) for a in plan.leaves for b in plan.spines}
        # Alarmed links for which no plan was found: not re-planned before this time.
        self._no_plan_until: dict[LinkId, float] = {}

    # --- life cycle ----------------------------------------------------------------

    def start(self) -> "Gor":
        """Connect to every switch (re-pushing its program), publish the topology and
        start the loop thread."""
        self.fleet.start()
        self.telemetry = Telemetry(self.plan, self.fleet)
        self._publish()
        self.telemetry.poll(self.clock)
        self.events.emit("started", switches=len(self.plan.switches), interval_s=self.config.interval_s)
        self._thread = threading.Thread(target=self._run, name="gor-loop", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the loop, the agent calls and the switch sessions (safe twice)."""
        self._stop.set()
        if self.jobs is not None:
            self.jobs.stop_all()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        self._pool.shutdown(wait=False, cancel_futures=True)
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
        """Change settings at run time (validated); thresholds apply from the next tick."""
        with self.lock:
            self.config = dataclasses.replace(self.config, **changes)
            self.alarms.thresholds = self.config.thresholds
            if self.config.window_s != self.samples.window_s:
                self.samples.window_s = self.config.window_s
            self.events.emit("configured", **{k: str(v) for k, v in changes.items()})
            return self.config

    # --- the loop ------------------------------------------------------------------

    def _run(self) -> None:
        next_tick = self.clock()
        while not self._stop.is_set():
            next_tick += self.config.interval_s
            try:
                self.tick()
            except Exception:  # noqa: BLE001 -- the loop must outlive one bad round
                LOG.exception("GOR tick failed")
            self._stop.wait(max(0.0, next_tick - self.clock()))
            if self.clock() > next_tick + self.config.interval_s:
                next_tick = self.clock()     # fell behind: do not try to catch up

    def tick(self) -> None:
        """One round: telemetry, port status, alarms, samples, flows, moves."""
        assert self.telemetry is not None
        stats = self.telemetry.poll(self.clock, self.config.interval_s / 2)
        now = self.clock()
        with self.lock:
            self.ticks += 1
            self._check_ports()
            samples = {link: LinkSample(s.ecn_fraction, s.queue_depth, s.packets)
                       for link, s in stats.items() if cable(*link) not in self.down}
            for event in self.alarms.update(now, samples):
                self._alarm_event(event)
            drained = []
            while True:
                try:
                    drained.append(self._incoming.get_nowait())
                except queue.Empty:
                    break
            self.samples.add(drained)
            self.samples.prune(now)
            for s in drained:
                self._flow_from_sample(s)
        if now - self._agents_at >= AGENT_REFRESH_S:
            self._agents_at = now
            self._refresh_agent_flows(*self.agents.flows(), now)
        with self.lock:
            self._advance_moves(now)
            if self.config.auto:
                self._act_on_alarms(now)

    def _on_packet(self, switch: str, packet: Any) -> None:
        sample = parse_sample(self.clock(), switch, packet.metadata, packet.payload)
        if sample is not None:
            self._incoming.put(sample)

    def _alarm_event(self, event: AlarmEvent) -> None:
        self.events.emit(event.name, t=event.time, **event.fields())

    # --- flows ---------------------------------------------------------------------

    def _flow_from_sample(self, s: Sample) -> None:
        f = s.flow
        for flow in self.flows.values():
            if (flow.src, flow.dst, flow.sport, flow.dport) == (f.src, f.dst, f.sport, f.dport):
                flow.last_seen = s.time
                return
        key = ("sampled", f.src, f.dst, f.sport, f.dport)
        self.flows[key] = Flow(next(self._flow_ids), f.src, f.dst, f.sport, f.dport, last_seen=s.time)

    def _refresh_agent_flows(self, answered: set[str], listed: list[AgentFlow], now: float) -> None:
        """Merge the agents' flow lists: an agent flow takes over the id of the sampled
        flow with its 5-tuple; a QP created anew is a new flow (a new job reusing the QP
        number: no cooldown, no pin); flows of agents that are gone,
        and sampled flows not seen for `FORGET_S`, are forgotten. A change in which
        agents answer is an ``agents`` event: the log shows whom GOR could command."""
        with self.lock:
            if answered != self._answered:
                self._answered = set(answered)
                self.events.emit("agents", servers=sorted(answered))
            live = set()
            for af in listed:
                key = ("agent", af.server, af.qpn)
                live.add(key)
                sampled = self.flows.pop(("sampled", af.src, af.dst, af.sport, af.dport), None)
                flow = self.flows.get(key)
                if flow is None or af.created_ns != flow.created_ns:
                    flow = Flow(flow.id if flow else sampled.id if sampled else next(self._flow_ids),
                                af.src, af.dst, af.sport, af.dport, server=af.server, qpn=af.qpn,
                                created_ns=af.created_ns)
                    self.flows[key] = flow
                if not any(m.flow is flow and m.state == "commanding" for m in self.moves):
                    flow.sport = af.sport
                flow.rate_bps, flow.state, flow.bytes, flow.last_seen = af.rate_bps, af.state, af.bytes, now
            for key, flow in list(self.flows.items()):
                gone = key[0] == "agent" and key not in live and \
                    (flow.server not in answered or now - flow.last_seen > FORGET_S)
                stale = key[0] == "sampled" and now - flow.last_seen > FORGET_S
                if (gone or stale) and not flow.pinned:
                    del self.flows[key]

    def flow(self, ref: str) -> Flow:
        """A flow by its id number or its label (``src:sport->dst``)."""
        with self.lock:
            for flow in self.flows.values():
                if ref == str(flow.id) or ref == flow.label:
                    return flow
        raise KeyError(f"no flow {ref!r} (see `flows` for ids)")

    def path_of(self, flow: Flow) -> list[str] | None:
        return predict(self.plan, flow.five_tuple, self.down)

    # --- deciding ------------------------------------------------------------------

    def _loads(self) -> tuple[dict[LinkId, float], dict[LinkId, float]]:
        """Measured link loads, with the moves telemetry does not show yet (in flight or
        just finished) applied: their rate taken off the old path, put on the new."""
        assert self.telemetry is not None
        stats = self.telemetry.latest
        capacity = {link: cap for link, cap in self.telemetry.links.capacity.items()
                    if cable(*link) not in self.down}
        loads = {link: s.bps for link, s in stats.items()}
        for m in self.moves:
            if m.state == "done" and m.outcome not in MOVED:
                continue
            for link in links_of(list(m.old_path)):
                loads[link] = max(0.0, loads.get(link, 0.0) - m.rate_bps)
            for link in links_of(list(m.path or (m.candidates[0] if m.candidates else ()))):
                loads[link] = loads.get(link, 0.0) + m.rate_bps
        return loads, capacity

    def _act_on_alarms(self, now: float) -> None:
        # Links on the old path of a move in flight (or just finished, see `_finish`)
        # wait: telemetry does not show that move yet, so planning now would double it.
        busy = {link for m in self.moves for link in links_of(list(m.old_path))} | \
            {m.link for m in self.moves}
        for link, alarm in sorted(self.alarms.active(self.config.act_level).items()):
            # A NIC link carries its flows on every path: moving cannot relieve it.
            if link in busy or now < self._no_plan_until.get(link, 0.0) or link not in self.fabric_links:
                continue
            stats = self.telemetry.latest.get(link)  # type: ignore[union-attr]
            if stats is None or stats.util < self.config.act_util:
                continue
            switch, port = self.telemetry.links.port_of(link)  # type: ignore[union-attr]
            elephants = self.samples.top(now, switch, port, self.config.top_n)
            if not elephants:
                continue
            loop = next(self._loops)
            self.events.emit("detect", loop=loop, t=alarm.since, link="->".join(link),
                             level=LEVELS[alarm.level], elephants=[
                                 {"flow": f"{e.flow.src}:{e.flow.sport}->{e.flow.dst}",
                                  "mbps": round(e.rate_bps / 1e6, 3), "samples": e.samples}
                                 for e in elephants])
            move = self._plan_for(loop, link, alarm.since, elephants, now)
            if move is None:
                self.events.emit("failed", loop=loop, link="->".join(link),
                                 reason="no movable elephant with a safe path")
                # The same answer would come every tick: ask again a little later.
                self._no_plan_until[link] = now + NO_PLAN_RETRY_TICKS * self.config.interval_s
                continue
            self._command(move)
            busy |= set(links_of(list(move.old_path)))

    def _plan_for(self, loop: int, link: LinkId, detect_t: float, elephants: list, now: float) -> Move | None:
        known = {(f.src, f.dst, f.sport) for f in self.flows.values() if f.server is not None}
        if any((e.flow.src, e.flow.dst, e.flow.sport) not in known for e in elephants) and \
                now - self._agents_at >= NO_PLAN_RETRY_TICKS * self.config.interval_s:
            # An elephant younger than the last agent listing: ask the agents now (not
            # again and again for a sender that no agent will ever list).
            self._agents_at = now
            self._refresh_agent_flows(*self.agents.flows(), now)
        loads, capacity = self._loads()
        alarmed = set(self.alarms.active(self.config.act_level))
        for e in elephants:
            flow = self._movable(e.flow, now, loop)
            if flow is None:
                continue
            current = self.path_of(flow)
            if current is None:
                continue
            accepted, rejected = plan_move(current, candidate_paths(self.plan, flow.five_tuple, self.down),
                                           e.rate_bps, loads, capacity, alarmed - {link}, self.config.safety)
            self.events.emit("decide", loop=loop, flow=flow.label, flow_id=flow.id,
                             mbps=round(e.rate_bps / 1e6, 3), current="-".join(current),
                             accepted=[{"path": "-".join(c.path), "max_util": round(c.max_util, 3)}
                                       for c in accepted],
                             rejected=[{"path": "-".join(r.path), "reason": r.reason} for r in rejected])
            if accepted:
                return Move(loop, flow, flow.sport, link, tuple(current), e.rate_bps,
                            [c.path for c in accepted], detect_t)
        return None

    def _movable(self, f: FiveTuple, now: float, loop: int) -> Flow | None:
        for flow in self.flows.values():
            if (flow.src, flow.dst, flow.sport) != (f.src, f.dst, f.sport):
                continue
            reason = ("pinned" if flow.pinned else "no agent" if flow.server is None else
                      "cooling down" if now - flow.moved_at < self.config.cooldown_s else
                      "already moving" if any(m.flow is flow and m.state != "done" for m in self.moves)
                      else "")
            if reason:
                self.events.emit("skip", loop=loop, flow=flow.label, reason=reason)
                return None
            return flow
        return None

    # --- acting --------------------------------------------------------------------

    def reroute(self, flow: Flow, path: list[str] | tuple[str, ...]) -> Move:
        """Move ``flow`` onto ``path`` by hand (REPL); returns the move (wait on
        ``move.done``). Raises ValueError if the path is not one of its ECMP paths."""
        with self.lock:
            if flow.server is None:
                raise ValueError(f"flow {flow.label} has no agent to tell (seen only in samples)")
            paths = [tuple(p) for p in candidate_paths(self.plan, flow.five_tuple, self.down)]
            if tuple(path) not in paths:
                raise ValueError(f"{'-'.join(path)} is not an ECMP path of {flow.label}; "
                                 f"paths: {', '.join('-'.join(p) for p in paths)}")
            loop = next(self._loops)
            now = self.clock()
            self.events.emit("detect", loop=loop, t=now, flow=flow.label, reason="manual reroute")
            move = Move(loop, flow, flow.sport, None, tuple(self.path_of(flow) or ()), flow.rate_bps,
                        [tuple(path)], now)
            self._command(move)
            return move

    def _command(self, move: Move) -> None:
        """Send the next candidate of ``move`` to the flow's agent (in a worker)."""
        move.path = move.candidates.pop(0)
        used = {f.sport for f in self.flows.values() if (f.src, f.dst) == (move.flow.src, move.flow.dst)}
        move.sport = find_port(self.plan, move.flow.five_tuple, list(move.path), self.down, avoid=used)
        self.events.emit("command", loop=move.loop, flow=move.flow.label, server=move.flow.server,
                         path="-".join(move.path), sport=move.sport, old_sport=move.old_sport)
        move.state, move.since = "commanding", self.clock()
        move.deadline = move.since + self.config.verify_s + 10.0
        if move not in self.moves:
            self.moves.append(move)
        assert move.flow.server is not None
        move.future = self._pool.submit(self.agents.set_source_port, move.flow.server, move.flow.qpn,
                                        move.sport, self.config.verify_s + 5.0)

    def _advance_moves(self, now: float) -> None:
        for move in self.moves:
            if move.state == "commanding" and move.future is not None and move.future.done():
                error = move.future.exception()
                if error is not None:
                    self.events.emit("command_failed", loop=move.loop, flow=move.flow.label, error=str(error))
                    self._next_or_rollback(move, now)
                    continue
                reply = move.future.result()
                move.flow.sport = move.sport
                self.events.emit("commanded", loop=move.loop, flow=move.flow.label,
                                 waited_s=round(reply.waited_s, 4))
                move.state, move.deadline = "verifying", now + self.config.verify_s
            elif move.state == "verifying":
                # The uplink the source leaf sends the flow out of on its new path.
                port = self.telemetry.links.port_of((move.path[1], move.path[2]))  # type: ignore[union-attr]
                if self.samples.seen(move.flow.five_tuple, port[0], port[1], move.since):
                    move.flow.moved_at = now
                    self.events.emit("moved", loop=move.loop, flow=move.flow.label, path="-".join(move.path),
                                     sport=move.sport, latency_s=round(now - move.detect_t, 4))
                    if move.link is None:
                        self._finish(move, "moved")
                    else:
                        move.state, move.deadline = "clearing", now + self.config.clear_s
                elif now > move.deadline:
                    self.events.emit("not_moved", loop=move.loop, flow=move.flow.label, path="-".join(move.path))
                    self._next_or_rollback(move, now)
            elif move.state == "clearing":
                assert move.link is not None
                if self.alarms.level(move.link) < self.config.act_level:
                    self.events.emit("cleared", loop=move.loop, link="->".join(move.link),
                                     latency_s=round(now - move.detect_t, 4))
                    self._finish(move, "cleared")
                elif now > move.deadline:
                    self.events.emit("not_cleared", loop=move.loop, link="->".join(move.link))
                    self._finish(move, "not cleared")
            elif move.state == "commanding" and now > move.deadline:
                self.events.emit("command_timeout", loop=move.loop, flow=move.flow.label)
                self._finish(move, "timeout")
        self.moves = [m for m in self.moves if m.state != "done" or now < m.deadline]

    def _next_or_rollback(self, move: Move, now: float) -> None:
        if move.candidates:
            self._command(move)
            return
        if move.flow.sport != move.old_sport:
            self.events.emit("rolled_back", loop=move.loop, flow=move.flow.label, sport=move.old_sport)
            assert move.flow.server is not None
            self._pool.submit(self.agents.set_source_port, move.flow.server, move.flow.qpn,
                              move.old_sport, self.config.verify_s + 5.0)
            move.flow.sport = move.old_sport
        self._finish(move, "failed")

    def _finish(self, move: Move, outcome: str) -> None:
        move.state, move.outcome = "done", outcome
        # A finished loop stays listed for a while so that its link is not re-planned
        # before telemetry reflects the move.
        move.deadline = self.clock() + self.config.interval_s * 2
        move.done.set()

    # --- cables --------------------------------------------------------------------

    def _check_ports(self) -> None:
        """Compare every leaf-spine cable's interfaces with the failure set."""
        changed = False
        down = set(self.down)
        for leaf in self.plan.leaves:
            for k, spine in enumerate(self.plan.spines):
                key = cable(leaf.name, spine.name)
                up = (_oper_up(f"{leaf.name}-eth{self.plan.uplink_port(k)}")
                      and _oper_up(f"{spine.name}-eth{self.plan.spine_port(leaf.block, leaf.rail)}"))
                if up is None:
                    continue
                if not up and key not in down:
                    down.add(key)
                    changed = True
                    self.events.emit("link_down", link=f"{leaf.name}-{spine.name}")
                elif up and key in down:
                    down.discard(key)
                    changed = True
                    self.events.emit("link_up", link=f"{leaf.name}-{spine.name}")
        if changed:
            self.apply_failures(frozenset(down))

    def apply_failures(self, down: Down) -> None:
        """Reprogram the switches whose routes change with cables ``down`` failed."""
        with self.lock:
            old = self.down
            updates = {sw.name: program_updates(switch_program(self.plan, sw.name, old),
                                                switch_program(self.plan, sw.name, down))
                       for sw in self.plan.switches}
            self.down = down
            changed = sorted(n for n, u in updates.items() if u)
            try:
                self.fleet.write({n: updates[n] for n in changed})
            except SwitchFleetError as e:
                # `down` stays the wanted state: a switch that comes back is re-pushed
                # with it (`SwitchFleet` programs `switch_program(..., self.down)`).
                self.events.emit("repair_failed", error=str(e))
            else:
                self.events.emit("repaired", down=sorted("-".join(sorted(c)) for c in down), switches=changed)
            self._publish()

    def _program(self, name: str) -> Any:
        return switch_program(self.plan, name, self.down)

    def _publish(self) -> None:
        self.version += 1
        publish(self.agent_dir, topology_document(self.plan, self.down, self.version))

    # --- views for the REPL ------------------------------------------------------------

    def link_rows(self) -> list[tuple[LinkId, LinkStats | None, int]]:
        """(link, latest stats, alarm level) for every switch-to-switch link and NIC link."""
        assert self.telemetry is not None
        with self.lock:
            latest = self.telemetry.latest
            return [(link, latest.get(link), self.alarms.level(link))
                    for link in sorted(self.telemetry.links.capacity)]


def default_thresholds(plan: AddressPlan) -> AlarmThresholds:
    """Queue-depth thresholds from the fabric's spec: Kmax, 2 Kmax, 3 Kmax, each at
    most the queue's capacity (a full queue is as deep as it gets)."""
    kmax, cap = plan.spec.ecn.kmax, plan.spec.queue_depth
    depths = sorted(min(n * kmax, cap - 3 + n) for n in (1, 2, 3))
    return AlarmThresholds(queue_depth=(depths[0], depths[1], depths[2]))


def _oper_up(intf: str) -> bool | None:
    """An interface's operational state in the root namespace (None: no interface)."""
    try:
        state = Path(f"/sys/class/net/{intf}/operstate").read_text().strip()
    except OSError:
        return None
    return state in ("up", "unknown")
