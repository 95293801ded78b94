"""GOR's live prompt (``astral>``, where `make run` ends).

Built on Mininet's CLI, itself Python's `cmd`: every command is a ``do_<name>`` method
whose docstring is its help, ``help <command>`` prints it, Tab completes command names
and arguments (readline), and Mininet's own commands stay available -- ``<host>
<command>`` runs a command in a server's namespace, ``pingall``, ``sh``, ``py``,
``source <file>``. Why not prompt_toolkit or cmd2: neither is among the project's
pinned packages, Mininet's CLI already gives host commands and scripting, and `cmd`
reads a pipe or a file line by line like a terminal (``echo links | make run``).

GOR commands: ``topology``, ``links``, ``alarms``, ``flows``, ``paths``, ``reroute``,
``pin``/``unpin``, ``set``, ``link`` (down/up, then GOR's repair), ``job``/``jobs``/``wait``,
``sleep``, ``watch``, ``events``, ``why``, ``nics``, ``switches``, ``p4sh``; ``quit`` (or EOF)
tears everything down. ``help`` lists them by group, one line each (`COMMAND_GROUPS`),
before Mininet's own.

This module is the prompt: parsing commands, announcements, completion. What it prints
comes from `controller.views` (the tables) and `controller.jobtable` (a finished job's
results); ``p4sh`` runs `controller.p4sh`. It stays over 600 lines because `cmd` wants
one ``do_<name>`` method per command, whose docstring is that command's help: twenty
commands with their argument checks and help text.

Scripts (a pipe, ``source FILE``) run each command as soon as the last one is done, so
the prompt gives them time: it waits for GOR's first link rates before the first
command, ``sleep`` lets emulated time pass, ``wait`` (or ``job ... --wait``) waits for
a job. A job's nccl-tests results table prints when it finishes -- at once at an idle
prompt (the line being typed is redrawn), else after the running command.
"""

from __future__ import annotations

import dataclasses
import readline
import select
import threading
import time
from pathlib import Path
from typing import Any, Callable

import finsy as fy
from mininet.cli import CLI

from controller import p4sh, views
from controller.agents import JobRun
from controller.alarms import LEVELS
from controller.events import flow_story
from controller.gor import Gor
from controller.jobtable import job_table, running
from controller.paths import candidate_paths
from controller.publish import write_spec
from emulation.fidelity import switches_window
from tccl.job import OPS, JobError, Transport, Workload, job_from_fabric, load_job
from tccl.launch import job_from_command


def _fraction(text: str) -> float:
    """``0.75`` or ``75%`` -> 0.75."""
    return float(text.rstrip("%")) / (100 if text.endswith("%") else 1)


# `set` names -> (GorConfig field, parser, what it takes).
_SETTINGS: dict[str, tuple[str, Any, str]] = {
    "interval": ("interval_s", float, "telemetry period, seconds"),
    "window": ("window_s", float, "elephant sample window, seconds"),
    "act": ("act_level", lambda v: LEVELS.index(v) if v in LEVELS else int(v),
            "alarm level GOR acts on: notice, warning, critical"),
    "act_util": ("act_util", _fraction, "min utilisation of an alarmed link for GOR to act (0.75 or 75%)"),
    "act_switch": ("act_switch_level", lambda v: None if v == "off" else LEVELS.index(v) if v in LEVELS else int(v),
                   "a switch's own alarm at this level is acted on without act_util: notice, warning, critical, off"),
    "top": ("top_n", int, "elephants considered per alarmed link"),
    "safety": ("safety", _fraction, "max projected utilisation of a new path (0.75 or 75%)"),
    "verify": ("verify_s", float, "seconds to see a moved flow on its new path"),
    "clear": ("clear_s", float, "seconds for the alarm to clear after a move"),
    "cooldown": ("cooldown_s", float, "seconds a moved flow is left alone"),
    "auto": ("auto", lambda v: {"on": True, "off": False}[v], "act on alarms by itself: on, off"),
    "plan": ("plan", lambda v: {"on": True, "off": False}[v],
             "place a job's QPs as the agents first list them, before any alarm: on, off"),
}
_THRESHOLDS: dict[str, tuple[str, Any, str]] = {
    "ecn": ("ecn_fraction", lambda v: tuple(float(x) for x in v.split(",")),
            "marked fraction for notice,warning,critical (e.g. 0.02,0.08,0.25)"),
    "qdepth": ("queue_depth", lambda v: tuple(int(x) for x in v.split(",")),
               "max queue depth (packets) for notice,warning,critical (e.g. 20,40,60)"),
    "clear_ratio": ("clear_ratio", float, "an alarm clears below this fraction of its thresholds"),
    "clear_after": ("clear_after", int, "intervals below before an alarm clears"),
}
# `link ... down|up` waits this long for GOR to see the port state and repair (s).
REPAIR_WAIT_S = 5.0
# Before the first command the prompt waits up to this long (emulated s) for GOR's first
# link rates: a piped `links` would otherwise print a table of dashes.
FIRST_RATES_WAIT_S = 5.0
# How often finished jobs are looked for (wall s): their results print within this.
JOB_POLL_S = 0.5
# `job` returns the prompt once the job's agents are set up, or after this long (wall s).
JOB_START_WAIT_S = 60.0

# `help`: the testbed's commands by group, one line each (a command's docstring is its
# whole help: `help links`). A testbed command missing here is listed under "more".
COMMAND_GROUPS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("the fabric", (
        ("topology", "sizes, rates, each leaf's spines, cables down, the published topology"),
        ("nics", "every NIC: server, rail, address, MAC, leaf port"),
        ("switches", "every switch: id, P4Runtime address, salt, GOR's session"),
        ("link", "link NODE1 NODE2 down|up: fail or restore a cable; GOR repairs the routes"),
    )),
    ("what GOR sees", (
        ("links", "links [all|NAME...]: utilisation, ECN marks, queues, drops, PFC, alarm per link"),
        ("alarms", "the links with an alarm, since when"),
        ("flows", "the flows GOR knows: 5-tuple, agent, rate, spine"),
        ("paths", "paths FLOW: a flow's ECMP paths and the source port for each"),
        ("events", "events [N] [NAME]: GOR's last events"),
        ("why", "why FLOW: why GOR moved a flow (or did not): alarm, simulated candidates, measurement"),
        ("watch", "watch [SECONDS] [all|NAME...]: links and alarms, refreshed"),
        ("fidelity", "fidelity [mark]: how faithful the emulation has been"),
    )),
    ("what GOR does", (
        ("reroute", "reroute FLOW SPINE|PATH: move a flow through its agent"),
        ("pin", "pin FLOW [SPINE|PATH]: GOR never moves the flow"),
        ("unpin", "unpin FLOW: GOR may move the flow again"),
        ("set", "set [NAME VALUE]: GOR's settings and alarm thresholds"),
    )),
    ("jobs", (
        ("job", "job OP SIZES | job trace FILE | job FILE [--wait]: start a job on the agents"),
        ("jobs", "the jobs started here, with their results tables"),
        ("wait", "wait [JOB...]: until the jobs finish"),
        ("sleep", "sleep SECONDS: let emulated time pass"),
    )),
    ("P4Runtime", (
        ("p4sh", "p4sh SWITCH [--primary]: p4runtime-shell on a switch"),
    )),
)


class GorCLI(CLI):
    """Mininet's CLI plus GOR's commands (see the module docstring)."""

    prompt = "astral> "

    def __init__(self, fabric: Any, gor: Gor, shell_python: Callable[[Callable[[str], None]], Path],
                 **kwargs: Any) -> None:
        self.fabric = fabric
        self.gor = gor
        # Gives the python of p4runtime-shell's venv, made on first use (`testbed.clients`:
        # passed in, since controller/ sits below testbed/).
        self.shell_python = shell_python
        self._fidelity_mark: tuple[float, dict[str, dict]] | None = None
        # Announcements (finished jobs, GOR's notices) print at once while the prompt is
        # idle, else after the running command: never into another command's output.
        self._lock = threading.Lock()
        self._idle = True
        self._pending: list[str] = []
        self._tables: dict[int, str] = {}    # index in gor.jobs.jobs -> its results, once finished
        self._stop = threading.Event()
        for name, sw in gor.fleet.switches.items():
            sw.ee.on(fy.SwitchEvent.BECOME_BACKUP, lambda _sw, n=name: self._role_changed(n, False))
            sw.ee.on(fy.SwitchEvent.BECOME_PRIMARY, lambda _sw, n=name: self._role_changed(n, True))
        self._await_first_rates()
        threading.Thread(target=self._watch_jobs, name="job-watch", daemon=True).start()
        super().__init__(fabric.net, **kwargs)

    def out(self, text: str = "") -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def do_help(self, line: str) -> None:
        """help [COMMAND]: the testbed's commands by group, one line each, then
        Mininet's; with COMMAND, that command's whole help."""
        if line.strip():
            super().do_help(line)
            return
        self.out(self.commands_help())
        mininet = sorted(name[3:] for name in dir(CLI) if name.startswith("do_")
                         and getattr(GorCLI, name) is getattr(CLI, name))
        self.out("\nMininet's commands (help COMMAND for one):")
        self.columnize(mininet)
        self.out(CLI.helpStr.rstrip())

    @classmethod
    def commands_help(cls) -> str:
        """The testbed's commands by group, one line each (`COMMAND_GROUPS`)."""
        width = max(len(name) for _, group in COMMAND_GROUPS for name, _ in group) + 2
        lines = ["The testbed's commands (help COMMAND for the whole story):"]
        listed = set()
        for title, group in COMMAND_GROUPS:
            lines.append(f"  {title}:")
            for name, what in group:
                lines.append(f"    {name:<{width}}{what}")
                listed.add(name)
        more = sorted(name[3:] for name in vars(cls) if name.startswith("do_") and name[3:] not in listed
                      and name != "do_help")
        if more:
            lines.append("  more:")
            for name in more:
                doc = (getattr(cls, f"do_{name}").__doc__ or "").strip().splitlines()
                lines.append(f"    {name:<{width}}{doc[0] if doc else ''}")
        return "\n".join(lines)

    def onecmd(self, line: str) -> Any:
        """Run one command; a mistake in its arguments prints the reason, not a trace."""
        try:
            return super().onecmd(line)
        except (ValueError, KeyError) as e:
            self.out(f"error: {e.args[0] if e.args else e}")
            return None

    # --- announcements -----------------------------------------------------------------

    def precmd(self, line: str) -> str:
        """A command starts: announcements wait for its end (Mininet's comment
        stripping still applies)."""
        with self._lock:
            self._idle = False
        return super().precmd(line)

    def postcmd(self, stop: Any, line: str) -> Any:
        """A command ended: what was announced meanwhile prints now."""
        with self._lock:
            self._flush()
            self._idle = True
        return stop

    def postloop(self) -> None:
        """The prompt is left: the job watcher stops."""
        self._stop.set()

    def _announce(self, text: str) -> None:
        with self._lock:
            self._pending.append(text)
            if self._idle:
                self._flush(redraw=True)

    def _flush(self, redraw: bool = False) -> None:
        """Print what is pending (the lock held); ``redraw``: over an idle terminal
        prompt, which is drawn again with what was typed so far."""
        if not self._pending:
            return
        text = "\n".join(self._pending)
        self._pending.clear()
        if redraw and self.isatty():
            self.stdout.write(f"\r\x1b[K{text}\n{self.prompt}{readline.get_line_buffer()}")
            self.stdout.flush()
        else:
            self.out(text)

    def _await_first_rates(self) -> None:
        """Until GOR's telemetry has rates of every leaf-spine link (two polls of each
        switch; a switch slow to answer is left out of a round), so that a script's
        first `links` shows numbers, not dashes."""
        clock = self.gor.time
        end = clock.now() + FIRST_RATES_WAIT_S
        while clock.now() < end and any(stats is None for link, stats, _ in self.gor.link_rows()
                                        if link in self.gor.fabric_links):
            clock.sleep(0.05)

    def _role_changed(self, switch: str, primary: bool) -> None:
        """(On the P4Runtime loop) GOR's session with ``switch`` lost or regained
        primary: say so, in the event log and at the prompt."""
        primary_id = self.gor.fleet.switches[switch].primary_id
        self.gor.events.emit("switch_primary" if primary else "switch_backup", switch=switch,
                             primary_election_id=primary_id)
        if primary:
            self._announce(f"GOR: primary again on {switch}: its program is pushed again "
                           f"(entries written meanwhile are replaced)")
        else:
            self._announce(f"GOR: another controller is primary on {switch} (election id {primary_id}): "
                           f"GOR only reads it -- no route repairs through it -- until it is back")

    # --- jobs --------------------------------------------------------------------------

    def _watch_jobs(self) -> None:
        while not self._stop.wait(JOB_POLL_S):
            self._collect_finished(announce=True)

    def _collect_finished(self, announce: bool) -> None:
        """Make the results table of every job that finished since the last look."""
        jobs = self.gor.jobs
        if jobs is None:
            return
        for index, run in enumerate(list(jobs.jobs)):
            if index in self._tables or running(run):
                continue
            table = job_table(run, self.gor.agent_dir)
            with self._lock:
                if index in self._tables:
                    continue
                self._tables[index] = table
            if announce:
                self._announce(table)

    # --- the fabric ------------------------------------------------------------------

    def do_nics(self, _line: str) -> None:
        """List every NIC: server, rail, address, MAC, leaf and leaf port."""
        self.out(views.nics_table(self.fabric.plan))

    def do_switches(self, _line: str) -> None:
        """List every switch: role, id, MAC, P4Runtime address, ECMP salt, and whether
        GOR's session with it is up."""
        self.out(views.switches_table(self.gor))

    def do_topology(self, _line: str) -> None:
        """Show the fabric: sizes, rates, every leaf's spines (x = cable down), every
        spine's super-spines (three tiers), and where the published topology file is."""
        self.out(views.topology_text(self.gor))

    # --- views -----------------------------------------------------------------------

    def do_links(self, line: str) -> None:
        """links [all|NAME...]: every leaf-spine link (``all``: NIC links too; names:
        links touching those nodes) with utilisation, rate, ECN-marked fraction, max
        queue depth and alarm level of the last telemetry interval, and what the last
        queue reading found (once a second): tail drops, PFC PAUSE frames the link's
        receiver sent back and the seconds its sender stood paused."""
        self.out(views.links_table(self.gor, line.split()))

    def do_alarms(self, _line: str) -> None:
        """Links with an alarm (notice, warning, critical), since when, and the last
        interval's ECN-marked fraction and queue depth."""
        self.out(views.alarms_table(self.gor))

    def do_flows(self, _line: str) -> None:
        """Flows GOR knows (from the agents and from samples): id, 5-tuple, agent,
        rate, current spine, pinned."""
        self.out(views.flows_table(self.gor))

    def do_paths(self, line: str) -> None:
        """paths FLOW: the flow's ECMP paths now (``*`` = current) and, for each, the
        source port that would put it there."""
        self.out(views.paths_table(self.gor, self.gor.flow(_one(line, "paths FLOW"))))

    def do_events(self, line: str) -> None:
        """events [N] [NAME]: the last N (default 15) events of GOR's log, optionally
        only those named NAME (e.g. moved, alarm_raised)."""
        words = line.split()
        n = int(words[0]) if words and words[0].isdigit() else 15
        names = [w for w in words if not w.isdigit()]
        recent = [e for e in self.gor.events.snapshot() if not names or e["event"] in names][-n:]
        if recent:
            self.out(views.events_table(recent))

    def do_why(self, line: str) -> None:
        """why FLOW: why GOR moved the flow (or did not), loop by loop -- the alarm, the
        candidate placements it simulated (best first), the path it chose with the
        predicted rate and the next ones, each step of the move, any retry, and the
        rate measured on the new path beside the prediction."""
        flow = self.gor.flow(_one(line, "why FLOW"))
        story = flow_story(self.gor.events.snapshot(), flow.id)
        if not story:
            self.out(f"GOR has not decided about {flow.label} (flow {flow.id})")
        for loop, steps in story.items():
            self.out(f"loop {loop}:")
            for e in steps:
                self.out(f"  {e['t']:9.3f}  {views.why_line(e)}")

    def do_watch(self, line: str) -> None:
        """watch [SECONDS] [all|NAME...]: the links view and alarms, refreshed every
        telemetry interval, until SECONDS pass, Enter or Ctrl-C."""
        words = line.split()
        seconds = float(words.pop(0)) if words and _is_number(words[0]) else None
        if seconds is None and not self.stdin.isatty():
            seconds = 5.0        # a script cannot press Enter
        clock = self.gor.time
        end = clock.now() + seconds if seconds is not None else float("inf")
        tty = self.stdout.isatty()
        try:
            while clock.now() < end:
                view = views.links_table(self.gor, words)
                head = f"GOR {time.strftime('%H:%M:%S')}  {views.alarms_line(self.gor)}"
                self.stdout.write(("\x1b[H\x1b[2J" if tty else "") + head + "\n" + view + "\n\n")
                self.stdout.flush()
                wait = clock.wall_s(min(self.gor.config.interval_s, max(0.0, end - clock.now())))
                if self.stdin.isatty():
                    ready, _, _ = select.select([self.stdin], [], [], wait)
                    if ready:
                        self.stdin.readline()
                        break
                else:
                    time.sleep(wait)
        except KeyboardInterrupt:
            pass

    # --- acting ----------------------------------------------------------------------

    def do_reroute(self, line: str) -> None:
        """reroute FLOW SPINE|PATH: move a flow onto the path through SPINE (e.g.
        sp1) or onto PATH (nodes joined by '-'), through its agent, and wait until the
        data plane shows it there (or the move fails)."""
        words = line.split()
        if len(words) != 2:
            raise ValueError("usage: reroute FLOW SPINE|PATH")
        flow = self.gor.flow(words[0])
        paths = candidate_paths(self.gor.plan, flow.five_tuple, self.gor.down)
        target = words[1].split("-")
        chosen = next((p for p in paths if p == target or (len(target) == 1 and target[0] in p[2:-2])), None)
        if chosen is None:
            raise ValueError(f"{words[1]} is not a spine or path of flow {flow.id}; paths: "
                             + ", ".join("-".join(p) for p in paths))
        move = self.gor.reroute(flow, chosen)
        self.out(f"moving flow {flow.id} ({flow.label}) to {'-'.join(chosen)} ...")
        if not move.done.wait(self.gor.config.verify_s + 20):
            self.out("still not confirmed; see `events`")
            return
        self.out(f"flow {flow.id}: {move.outcome} (sport {move.flow.sport})")

    def do_pin(self, line: str) -> None:
        """pin FLOW [SPINE|PATH]: never let GOR move this flow (after moving it to
        SPINE or PATH, if given)."""
        words = line.split()
        if not words:
            raise ValueError("usage: pin FLOW [SPINE|PATH]")
        if len(words) == 2:
            self.do_reroute(line)
        flow = self.gor.flow(words[0])
        flow.pinned = True
        self.out(f"flow {flow.id} pinned")

    def do_unpin(self, line: str) -> None:
        """unpin FLOW: GOR may move this flow again."""
        flow = self.gor.flow(_one(line, "unpin FLOW"))
        flow.pinned = False
        self.out(f"flow {flow.id} unpinned")

    def do_set(self, line: str) -> None:
        """set [NAME VALUE]: show GOR's settings, or change one: interval, window, act,
        top, safety, verify, clear, cooldown, auto, plan; alarm thresholds ecn, qdepth,
        clear_ratio, clear_after."""
        words = line.split()
        if not words:
            c = self.gor.config
            for name, (fld, _, what) in _SETTINGS.items():
                value = getattr(c, fld)
                shown = LEVELS[value] if name == "act" else value
                self.out(f"{name:<12} {shown!s:<16} {what}")
            for name, (fld, _, what) in _THRESHOLDS.items():
                self.out(f"{name:<12} {','.join(map(str, v)) if isinstance(v := getattr(c.thresholds, fld), tuple) else v!s:<16} {what}")
            return
        if len(words) != 2:
            raise ValueError("usage: set NAME VALUE")
        name, raw = words
        if name not in _SETTINGS and name not in _THRESHOLDS:
            raise ValueError(f"unknown setting {name!r}; one of {', '.join([*_SETTINGS, *_THRESHOLDS])}")
        fld, parse, what = _SETTINGS.get(name) or _THRESHOLDS[name]
        try:
            value = parse(raw)
        except (ValueError, KeyError, IndexError, TypeError):
            raise ValueError(f"bad value {raw!r} for {name} ({what})") from None
        if name in _SETTINGS:
            self.gor.configure(**{fld: value})
        else:
            self.gor.configure(thresholds=dataclasses.replace(self.gor.config.thresholds, **{fld: value}))
        self.out(f"{name} = {raw}")

    def do_link(self, line: str) -> None:
        """link NODE1 NODE2 down|up: set a cable down or up (both interfaces), then
        wait for GOR to see it in the port status and repair the ECMP groups."""
        words = line.split()
        if len(words) != 3 or words[2] not in ("up", "down"):
            raise ValueError("usage: link NODE1 NODE2 down|up")
        a, b, state = words
        key = frozenset((a, b))
        self.fabric.net.configLinkStatus(a, b, state)
        clock = self.gor.time
        end = clock.now() + REPAIR_WAIT_S
        while True:
            down, version = self.gor.routes.state()     # a repair is seen whole
            repaired = (key in down) == (state == "down")
            if repaired or clock.now() > end:
                break
            clock.sleep(0.05)
        if repaired:
            self.out(f"{a}-{b} {state}; routes repaired (topology version {version})")
        else:
            self.out(f"{a}-{b} set {state}; GOR repairs only cables between switches")

    def do_job(self, line: str) -> None:
        """job OP SIZES [--ports orthogonal|random] [--order rail|input] [--iters N]
        [--nvlink GBPS] | job trace FILE [orthogonal|random] | job FILE: start a
        collective sweep over every NIC (OP: allreduce, allgather, reducescatter,
        alltoall, sendrecv; SIZES like 64K,1M), a training trace (traces/*.yaml), or a
        job file, on the agents; `jobs` shows them, `flows` their flows. The prompt
        returns once every agent is set up (or has failed: `not up`); with --wait when
        the job is done, after its results table."""
        words = line.split()
        wait = "--wait" in words
        words = [w for w in words if w != "--wait"]
        line = " ".join(words)
        if not words:
            raise ValueError("usage: job OP SIZES [--ports P] [--order O] [--iters N] | "
                             "job trace FILE [PORTS] | job FILE")
        try:
            if words[0] in OPS:
                job = job_from_command(line, self._spec_file())
            elif words[0] == "trace" and len(words) in (2, 3):
                ports = words[2] if len(words) == 3 else "orthogonal"
                job = job_from_fabric(self._spec_file(), Workload(trace=words[1]), Transport(ports=ports),
                                      name=f"trace-{Path(words[1]).stem}")
            elif len(words) == 1:
                job = load_job(words[0])
            else:
                raise ValueError(f"{words[0]!r} is not a collective ({', '.join(OPS)}), `trace` or a job file")
        except JobError as e:
            raise ValueError(str(e)) from None
        assert self.gor.jobs is not None
        # A new job's agents start by removing their servers' results files: the
        # tables of jobs that just finished are made first.
        self._collect_finished(announce=True)
        run = self.gor.jobs.start(job)
        self.out(f"job {run.name}: agents on {', '.join(run.procs)} (logs: {self.gor.agent_dir}/agent-*.log)")
        try:
            late = self.gor.jobs.wait_started(run, JOB_START_WAIT_S)
        except KeyboardInterrupt:
            self.out("stopped waiting for the agents to start; the job starts on (`jobs`)")
            return
        if late:
            self.out(f"job {run.name}: not up: " + ", ".join(f"{s} {why}" for s, why in sorted(late.items())))
        if wait:
            self._wait_for([run])

    def _spec_file(self) -> Path:
        return write_spec(self.gor.agent_dir, self.fabric.plan.spec)

    def do_fidelity(self, line: str) -> None:
        """fidelity [mark]: how faithful the emulation has been -- the switches'
        departures against the ideal links' schedule (on-time share, p99 lateness in
        packet times), kernel drops, saturated input, dilation -- since the fabric
        started, or since the last `fidelity mark`; `mark` starts a new window."""
        assert self.gor.telemetry is not None
        now = self.gor.telemetry.fidelity()
        if line.strip() == "mark":
            self._fidelity_mark = (self.gor.clock(), now)
            self.out("fidelity: new window from now")
            return
        if line.strip():
            raise ValueError("usage: fidelity [mark]")
        since, before = self._fidelity_mark or (None, {})
        window = "since the fabric started" if since is None else \
            f"over the last {self.gor.clock() - since:.1f} s"
        for name in sorted(now):
            self.out(f"{name:<8} {switches_window({name: before.get(name, {})}, {name: now[name]}).line()}")
        self.out(f"fabric   {switches_window(before, now).line()} ({window})")

    def do_jobs(self, _line: str) -> None:
        """Jobs started from this prompt: the state of their agents and, for a finished
        job, its results table again (nccl-tests' columns)."""
        assert self.gor.jobs is not None
        if not self.gor.jobs.jobs:
            self.out("no jobs")
        self._collect_finished(announce=False)
        for index, run in enumerate(self.gor.jobs.jobs):
            table = self._tables.get(index)
            self.out(table if table is not None else
                     f"job {run.name} running: " + ", ".join(f"{s} {st}" for s, st in run.status().items()))

    def do_wait(self, line: str) -> None:
        """wait [JOB...]: wait until the named jobs (default: every job still running)
        have finished, and print their results tables; Ctrl-C stops the waiting, not the
        jobs. (Mininet's own `wait` waits for OpenFlow switches, which P4 switches are not.)"""
        assert self.gor.jobs is not None
        names = line.split()
        runs = [r for r in self.gor.jobs.jobs if r.name in names] if names else \
            [r for r in self.gor.jobs.jobs if running(r)]
        unknown = set(names) - {r.name for r in runs}
        if unknown:
            raise ValueError(f"no job {', '.join(sorted(unknown))}; jobs: "
                             f"{', '.join(r.name for r in self.gor.jobs.jobs) or 'none'}")
        if not runs:
            self.out("no job running")
            return
        self._wait_for(runs)

    def _wait_for(self, runs: list[JobRun]) -> None:
        assert self.gor.jobs is not None
        try:
            while any(running(r) for r in runs):
                time.sleep(JOB_POLL_S)
        except KeyboardInterrupt:
            self.out("stopped waiting; the job runs on (`jobs`, `wait`)")
            return
        self._collect_finished(announce=True)
        indices = [i for i, r in enumerate(self.gor.jobs.jobs) if any(r is w for w in runs)]
        with self._lock:
            for i in indices:
                if self._tables[i] not in self._pending:
                    self._pending.append(self._tables[i])
            self._flush()

    def do_sleep(self, line: str) -> None:
        """sleep SECONDS: let SECONDS of *emulated* time pass -- the fabric's clock, the one
        GOR's interval and `watch` count (with dilation D, D x SECONDS of wall time) --
        so that a script sees what happened meanwhile (a piped script runs its next
        command at once otherwise). Jobs finishing meanwhile print their results."""
        seconds = float(_one(line, "sleep SECONDS"))
        if seconds < 0:
            raise ValueError("sleep: SECONDS must be >= 0")
        with self._lock:
            self._flush()
            self._idle = True
        try:
            self.gor.time.sleep(seconds)
        except KeyboardInterrupt:
            pass
        finally:
            with self._lock:
                self._idle = False

    # --- p4runtime-shell -----------------------------------------------------------------

    def do_p4sh(self, line: str) -> None:
        """p4sh SWITCH [--primary]: open p4runtime-shell (the P4 tutorials' P4Runtime
        client) on SWITCH, with the P4Info the switch runs. By default a backup client:
        it reads tables and counters and cannot write, so GOR is not disturbed. With
        --primary it takes over as primary (an election id above GOR's) to write entries
        by hand: GOR notices and says so, only reads the switch meanwhile, and when the
        shell exits takes the switch back and pushes its program again (entries written
        by hand are gone then). The shell's venv is made on first use (a minute).
        Needs a terminal; `exit` or Ctrl-D leaves the shell."""
        words = line.split()
        primary = "--primary" in words
        names = [w for w in words if w != "--primary"]
        if len(names) != 1:
            raise ValueError("usage: p4sh SWITCH [--primary]")
        sw = self.fabric.plan.switch(names[0])
        if not self.stdin.isatty():
            raise ValueError("p4sh needs a terminal (p4runtime-shell is an IPython prompt)")
        try:
            python = self.shell_python(self.out)
        except RuntimeError as e:
            raise ValueError(str(e)) from None
        election = p4sh.election_id(self.gor.fleet.switches[sw.name].primary_id, primary)
        pushes = self.gor.fleet.pushes[sw.name]
        self.out(f"p4runtime-shell on {sw.name} ({sw.grpc_address}, device {sw.device_id}) as "
                 f"{'PRIMARY: GOR only reads it until you exit' if primary else 'backup: read-only'}; "
                 f"P4Info from the switch; exit or Ctrl-D to come back")
        status = p4sh.run_shell(python, sw, election, self.stdin, self.stdout)
        if status != 0:
            self.out(f"p4runtime-shell exited with status {status}")
        if primary:
            self.out(f"GOR took {sw.name} back: program pushed again (push {self.gor.fleet.pushes[sw.name]})"
                     if p4sh.taken_back(self.gor, sw.name, pushes)
                     else f"GOR has not taken {sw.name} back yet; see `switches`, `events`")

    # --- completion --------------------------------------------------------------------

    def _complete(self, text: str, options: list[str]) -> list[str]:
        return [o for o in options if o.startswith(text)]

    def _flow_ids(self) -> list[str]:
        return [str(f.id) for f, _ in self.gor.flow_rows()]

    def complete_paths(self, text: str, *_: Any) -> list[str]:
        return self._complete(text, self._flow_ids())

    complete_unpin = complete_paths
    complete_why = complete_paths

    def complete_reroute(self, text: str, line: str, *_: Any) -> list[str]:
        if len(line.split()) <= (1 if not text else 2):
            return self._complete(text, self._flow_ids())
        return self._complete(text, [s.name for s in self.fabric.plan.spines])

    complete_pin = complete_reroute

    def complete_set(self, text: str, *_: Any) -> list[str]:
        return self._complete(text, [*_SETTINGS, *_THRESHOLDS])

    def complete_link(self, text: str, line: str, *_: Any) -> list[str]:
        if len(line.split()) >= (3 if not text else 4):
            return self._complete(text, ["down", "up"])
        return self._complete(text, [sw.name for sw in self.fabric.plan.switches])

    def complete_links(self, text: str, *_: Any) -> list[str]:
        return self._complete(text, ["all", *(sw.name for sw in self.fabric.plan.switches)])

    complete_watch = complete_links

    def complete_p4sh(self, text: str, *_: Any) -> list[str]:
        return self._complete(text, [*(sw.name for sw in self.fabric.plan.switches), "--primary"])

    def complete_wait(self, text: str, *_: Any) -> list[str]:
        return self._complete(text, [r.name for r in self.gor.jobs.jobs] if self.gor.jobs else [])

    def complete_job(self, text: str, *_: Any) -> list[str]:
        return self._complete(text, [*OPS, "trace"])


def _one(line: str, usage: str) -> str:
    words = line.split()
    if len(words) != 1:
        raise ValueError(f"usage: {usage}")
    return words[0]


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False
