"""Moving a flow: telling its agent a new source port, and checking from the data plane
that the flow went where it was sent.

A move walks through `MoveState`: ``COMMANDING`` (the agent was told the port for the
next candidate path; its answer comes on a worker thread, when the flow has drained
its message and sends on the new port: ``moved``) -> ``VERIFYING`` (the new 5-tuple
must be sampled on the new path -- leaving the source leaf by the planned uplink, or
the planned spine towards the destination leaf -- within ``verify_s``: ``verified``;
otherwise ``not_verified`` and the next candidate is commanded, and when none is left
the old port is put back: ``rolled_back``) -> ``CLEARING`` (a move off an alarmed
link waits up to ``clear_s`` for the alarm to drop below ``act_level``: ``cleared`` or
``not_cleared``; a move that did not relieve its link, or whose new path raised an
alarm meanwhile (a second tenant joined it), tries its next candidate -- the
simulation's next best path for the flow, `controller.simulate` -- with a ``retry``
event, at most `MAX_RETRIES` times) -> ``DONE``. When the clearing ends, a ``measured``
event puts the flow's rate the model predicted beside the one its samples on the new
path show. A finished move stays listed for two intervals, so that its links are not
planned again before telemetry shows it. Every step is an event.

Why ``moved`` is the agent's answer and not the first sample: the answer says the
flow's packets leave with the new port from then on (the agent applies it at a message
boundary, with nothing of the old port in flight); the sample that shows it on the new
path comes 1-in-`sample_rate` packets later and measures the sampling, not the move.
Both are logged, each with its latency from the alarm (``latency_s``); a sample that
arrives before the answer is both ``moved`` and ``verified``.

The agent calls run on a worker pool: `Mover` never waits for an agent, so GOR's lock
(held while moves advance) is never held across agent I/O.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from controller.alarms import AlarmBook
from controller.config import GorConfig
from controller.elephants import SampleWindow
from controller.events import EventLog
from controller.flows import Flow, FlowTable
from controller.paths import LinkId, find_port, links_of
from controller.repair import RouteRepair
from controller.telemetry import LinkMap
from topo.addressing import AddressPlan

# Outcomes of a move after which the flow is on its new path.
MOVED = frozenset({"moved", "cleared", "not cleared"})
# An agent applies a new port at the flow's next message boundary: it may wait this much
# longer than `verify_s` for it before it refuses.
AGENT_WAIT_S = 5.0
# A move whose agent has not answered `verify_s` + this after the command is given up
# (``command_timeout``): the agent's wait plus the control call's own 5 s margin.
COMMAND_TIMEOUT_S = 10.0
# Agent calls in flight at once: moves of different flows do not wait for each other
# (a call lasts until the flow's next message boundary, and one placement commands
# every move it makes in the same tick -- eight in the demo's stock job).
AGENT_WORKERS = 16
# A move that did not relieve its link tries at most this many further candidates.
MAX_RETRIES = 2


class MoveState(enum.Enum):
    """Where a move stands (see the module docstring)."""

    COMMANDING = "commanding"
    VERIFYING = "verifying"
    CLEARING = "clearing"
    DONE = "done"


@dataclass(eq=False)
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
    # The flow's rate on each candidate path as simulated (`controller.simulate`).
    predicted: dict[tuple[str, ...], float] = field(default_factory=dict)
    # The last level change of the alarm it relieves (``detect_t`` is the start of
    # that alarm's current episode, `controller.alarms.Alarm.episode`); None: ``detect_t``.
    alarm_t: float | None = None
    # A move of a plan (`controller.gor.Gor._plan_listed`): ``detect_t`` is the listing
    # that named the flow, no alarm's time, so its ``moved`` and ``verified`` carry
    # ``planned_s`` instead of ``latency_s`` (which the detect -> moved figures read).
    planned: bool = False
    state: MoveState = MoveState.COMMANDING
    path: tuple[str, ...] = ()
    sport: int = 0
    future: Future | None = None
    since: float = 0.0
    deadline: float = 0.0
    outcome: str = ""
    moved_t: float = float("-inf")        # when the agent (or the data plane) said it sends on the new port
    verified_t: float = float("-inf")     # when the data plane showed it on its new path
    answered: bool = False                # the agent's answer to the command in force is in
    retries: int = 0
    done: threading.Event = field(default_factory=threading.Event)


class PortSetter(Protocol):
    """What moves need of the agents (`controller.agents.AgentDirectory`)."""

    def set_source_port(self, server: str, qpn: int, sport: int, timeout_s: float) -> Any: ...


class Mover:
    """The moves in flight: commands, verification, clearing, rollback."""

    def __init__(self, plan: AddressPlan, agents: PortSetter, flows: FlowTable, samples: SampleWindow,
                 alarms: AlarmBook, routes: RouteRepair, events: EventLog,
                 settings: Callable[[], GorConfig], clock: Callable[[], float],
                 on_change: Callable[[], None] | None = None) -> None:
        self.plan = plan
        self.agents = agents
        self.flows = flows
        self.samples = samples
        self.alarms = alarms
        self.routes = routes
        self.events = events
        self.settings = settings
        self.clock = clock
        # Called when a command goes out and (on a worker) when its agent answers: the
        # wake-up of whoever watches the moves (`controller.gor`).
        self.on_change = on_change
        self.links = LinkMap(plan)
        self.moves: list[Move] = []
        self._pool = ThreadPoolExecutor(max_workers=AGENT_WORKERS, thread_name_prefix="gor-agent")

    def close(self) -> None:
        """Drop the agent calls not started yet (one running ends by its own timeout)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    # --- what the planner asks ------------------------------------------------------

    def in_flight(self) -> bool:
        """Whether a move waits for its agent or for the data plane's evidence."""
        return any(m.state in (MoveState.COMMANDING, MoveState.VERIFYING) for m in self.moves)

    def moving(self, flow: Flow) -> bool:
        return any(m.flow is flow and m.state is not MoveState.DONE for m in self.moves)

    def port_set_since(self, flow: Flow, asked: float) -> bool:
        """Whether GOR gave ``flow`` a port that an agents' listing asked for at
        ``asked`` may not show: a move commanded since, or one whose agent has not
        answered (the data plane may have shown it moved first)."""
        return any(m.flow is flow and (m.since >= asked or not m.answered) for m in self.moves)

    def busy_links(self, now: float) -> set[LinkId]:
        """Links on the old path of a move whose flow telemetry does not show on its
        new path yet, and the links those moves relieve: being commanded or verified, or
        verified less than two intervals ago (a move waiting for its alarm to clear has
        long been visible, and holding its links back would hold back the next loop)."""
        settle = 2 * self.settings().interval_s
        pending = [m for m in self.moves if m.state in (MoveState.COMMANDING, MoveState.VERIFYING)
                   or now - m.verified_t < settle]
        return {link for m in pending for link in links_of(list(m.old_path))} | \
            {m.link for m in pending if m.link is not None}

    def target(self, flow: Flow) -> tuple[str, ...] | None:
        """The path a move in flight is taking ``flow`` to (None: no move in flight):
        the placement counts the flow there already."""
        for m in self.moves:
            if m.flow is flow and m.state is not MoveState.DONE:
                return m.path or (m.candidates[0] if m.candidates else None)
        return None

    # --- the state machine -----------------------------------------------------------

    def command(self, move: Move) -> None:
        """Send the next candidate of ``move`` to the flow's agent (in a worker)."""
        config = self.settings()
        move.path = move.candidates.pop(0)
        used = self.flows.ports(move.flow.src, move.flow.dst)
        move.sport = find_port(self.plan, move.flow.five_tuple, list(move.path), self.routes.down, avoid=used)
        self._emit("command", move, server=move.flow.server, path="-".join(move.path), sport=move.sport,
                   old_sport=move.old_sport)
        move.state, move.since, move.answered = MoveState.COMMANDING, self.clock(), False
        move.deadline = move.since + config.verify_s + COMMAND_TIMEOUT_S
        if move not in self.moves:
            self.moves.append(move)
        assert move.flow.server is not None
        move.future = self._pool.submit(self._set_port, move.flow.server, move.flow.qpn, move.sport,
                                        config.verify_s + AGENT_WAIT_S)
        if self.on_change is not None:
            on_change = self.on_change
            move.future.add_done_callback(lambda _: on_change())
            on_change()

    def _set_port(self, server: str, qpn: int, sport: int, timeout_s: float) -> tuple[Any, float]:
        """(A worker) the agent's answer and when it arrived, dated on this thread:
        `advance` takes it in under GOR's lock with that date -- a tick commanding a
        plan's moves held the lock while answers waited (up to 0.12 s, the demo's stock
        job), and ``moved`` then measured GOR's lock, not the move."""
        reply = self.agents.set_source_port(server, qpn, sport, timeout_s)
        return reply, self.clock()

    def advance(self, now: float) -> None:
        """Move every move on as far as what happened since the last tick allows."""
        config = self.settings()
        for move in self.moves:
            if move.future is not None and move.future.done() and not move.answered:
                self._answered(move, now, config)
            elif move.state is MoveState.COMMANDING and self._seen_on_path(move):
                # The new 5-tuple on the new path: the agent applied the port, and its
                # answer is still on its way (under load it lagged the samples by 0.2 s).
                move.flow.sport = move.sport
                self._moved(move, now, "data plane")
                self._verified(move, now, config)
            elif move.state is MoveState.VERIFYING:
                self._verify(move, now, config)
            elif move.state is MoveState.CLEARING:
                self._clearing(move, now, config)
            elif move.state is MoveState.COMMANDING and now > move.deadline:
                self._emit("command_timeout", move)
                self._finish(move, "timeout")
        self.moves = [m for m in self.moves if m.state is not MoveState.DONE or now < m.deadline]

    def _answered(self, move: Move, now: float, config: GorConfig) -> None:
        """The agent's answer to the command in force, dated when it arrived
        (`_set_port`): ``commanded`` (verifying, unless the data plane showed the move
        already) or ``command_failed``."""
        assert move.future is not None
        move.answered = True
        error = move.future.exception()
        if error is not None:
            self._emit("command_failed", move, error=str(error))
            if move.state is MoveState.COMMANDING:
                self._next_or_rollback(move)
            return
        reply, now = move.future.result()
        move.flow.sport = move.sport
        # Where the command's time went (one emulated clock): GOR -> the agent's handler,
        # the flow's boundary, the answer back at GOR's worker.
        self._emit("commanded", move, t=now, waited_s=round(reply.waited_s, 4),
                   to_agent_s=round(reply.received_s - move.since, 4), answer_s=round(now - reply.applied_s, 4))
        if move.state is MoveState.COMMANDING:
            self._moved(move, now, "agent")
            move.state, move.deadline = MoveState.VERIFYING, now + config.verify_s

    def _verify(self, move: Move, now: float, config: GorConfig) -> None:
        if self._seen_on_path(move):
            self._verified(move, now, config)
        elif now > move.deadline:
            self._emit("not_verified", move, path="-".join(move.path))
            self._next_or_rollback(move)

    def _moved(self, move: Move, now: float, by: str) -> None:
        """``move``'s flow sends on its new port from now on, as its agent answered (or,
        its answer still on the way, the data plane showed): ``moved``, and the flow's
        cooldown starts."""
        move.flow.moved_at = move.moved_t = now
        self._emit("moved", move, t=now, path="-".join(move.path), sport=move.sport, by=by,
                   **self._latency(move, now))

    def _verified(self, move: Move, now: float, config: GorConfig) -> None:
        """The data plane showed ``move``'s flow on its new path: ``verified``, then
        done (a move by hand) or clearing its link."""
        move.verified_t = now
        self._emit("verified", move, path="-".join(move.path), sport=move.sport,
                   **{k: v for k, v in self._latency(move, now).items() if k != "from_alarm_s"})
        if move.link is None:
            self._finish(move, "moved")
        else:
            move.state, move.deadline = MoveState.CLEARING, now + config.clear_s

    @staticmethod
    def _latency(move: Move, now: float) -> dict[str, float]:
        """How long ``move`` took to ``now``: from its alarm's episode (``latency_s``)
        and the alarm's last level change (``from_alarm_s``), or, for a plan's move,
        from the listing (``planned_s``)."""
        if move.planned:
            return {"planned_s": round(now - move.detect_t, 4)}
        alarm_t = move.detect_t if move.alarm_t is None else move.alarm_t
        return {"latency_s": round(now - move.detect_t, 4), "from_alarm_s": round(now - alarm_t, 4)}

    def _seen_on_path(self, move: Move) -> bool:
        """Whether the new 5-tuple (with the commanded port: until the agent's answer is
        in, the flow has its old one) was sampled, since the command, leaving a switch
        of the new path by the port towards the path's next switch: the source leaf by
        the planned uplink, or the planned spine towards the destination leaf. Either
        proves the path (the spine a packet leaves is the one it went up to), and two
        sampling points give the evidence twice as fast as one."""
        hops = [(a, b) for a, b in zip(move.path[1:], move.path[2:-1])]
        for link in hops:
            switch, port = self.links.port_of(link)
            if self.samples.seen(dataclasses.replace(move.flow.five_tuple, sport=move.sport), switch, port,
                                 move.since):
                return True
        return False

    def _clearing(self, move: Move, now: float, config: GorConfig) -> None:
        assert move.link is not None
        # A link the move newly put the flow on that is alarmed now (another tenant's
        # flow there, or this one too many): the path is not the one simulated, so the
        # next candidate at once rather than after ``clear_s``.
        hot = [link for link in links_of(list(move.path)) if link not in links_of(list(move.old_path))
               and link in self.links.capacity and self.alarms.level(link) >= config.act_level]
        if hot and move.candidates and move.retries < MAX_RETRIES:
            self._measured(move, now)
            self._retry(move, f"{'->'.join(hot[0])} alarmed on the new path")
        elif self.alarms.level(move.link) < config.act_level:
            self.events.emit("cleared", loop=move.loop, link="->".join(move.link),
                             latency_s=round(now - move.detect_t, 4))
            self._measured(move, now)
            self._finish(move, "cleared")
        elif now > move.deadline:
            self.events.emit("not_cleared", loop=move.loop, link="->".join(move.link))
            self._measured(move, now)
            if move.candidates and move.retries < MAX_RETRIES:
                self._retry(move, f"{'->'.join(move.link)} still alarmed")
            else:
                self._finish(move, "not cleared")

    def _retry(self, move: Move, reason: str) -> None:
        """Command ``move``'s next candidate, saying why."""
        move.retries += 1
        self._emit("retry", move, round=move.retries, reason=reason, path="-".join(move.candidates[0]))
        self.command(move)

    def _measured(self, move: Move, now: float) -> None:
        """The flow's rate on its new path, estimated from its samples leaving the source
        leaf by the path's uplink since it moved, beside the simulation's prediction."""
        switch, port = self.links.port_of((move.path[1], move.path[2]))
        seen = [e for e in self.samples.flows(now, switch, port) if e.flow == move.flow.five_tuple]
        predicted = move.predicted.get(move.path)
        self._emit("measured", move, path="-".join(move.path),
                   predicted_mbps=None if predicted is None else round(predicted / 1e6, 3),
                   measured_mbps=round(seen[0].rate_bps / 1e6, 3) if seen else None,
                   samples=seen[0].samples if seen else 0)

    def _next_or_rollback(self, move: Move) -> None:
        if move.candidates:
            self.command(move)
            return
        if move.flow.sport != move.old_sport:
            self._emit("rolled_back", move, sport=move.old_sport)
            assert move.flow.server is not None
            self._pool.submit(self.agents.set_source_port, move.flow.server, move.flow.qpn,
                              move.old_sport, self.settings().verify_s + AGENT_WAIT_S)
            move.flow.sport = move.old_sport
        self._finish(move, "failed")

    def _emit(self, name: str, move: Move, **fields: Any) -> None:
        """An event of ``move``'s flow: its loop, its label and id (the label changes
        with the port; `events.flow_story` goes by id)."""
        self.events.emit(name, loop=move.loop, flow=move.flow.label, flow_id=move.flow.id, **fields)

    def _finish(self, move: Move, outcome: str) -> None:
        move.state, move.outcome = MoveState.DONE, outcome
        # A finished loop stays listed for a while so that its link is not re-planned
        # before telemetry reflects the move.
        move.deadline = self.clock() + self.settings().interval_s * 2
        move.done.set()
