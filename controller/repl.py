"""GOR's live prompt (``astral>``, where `make run` ends).

Built on Mininet's CLI, itself Python's `cmd`: every command is a ``do_<name>`` method
whose docstring is its help, ``help <command>`` prints it, Tab completes command names
and arguments (readline), and Mininet's own commands stay available -- ``<host>
<command>`` runs a command in a server's namespace, ``pingall``, ``sh``, ``py``,
``source <file>``. Why not prompt_toolkit or cmd2: neither is among the project's
pinned packages, Mininet's CLI already gives host commands and scripting, and `cmd`
reads a pipe or a file line by line like a terminal (``echo links | make run``).

GOR commands: ``topology``, ``links``, ``alarms``, ``flows``, ``paths``, ``reroute``,
``pin``/``unpin``, ``set``, ``link`` (down/up, then GOR's repair), ``job``/``jobs``,
``watch``, ``events``, ``nics``, ``switches``; ``quit`` (or EOF) tears everything down.
"""

from __future__ import annotations

import dataclasses
import json
import select
import time
from pathlib import Path
from typing import Any

from mininet.cli import CLI

from controller.alarms import LEVELS
from controller.gor import Gor
from controller.paths import candidate_paths, find_port
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
    "top": ("top_n", int, "elephants considered per alarmed link"),
    "safety": ("safety", _fraction, "max projected utilisation of a new path (0.75 or 75%)"),
    "verify": ("verify_s", float, "seconds to see a moved flow on its new path"),
    "clear": ("clear_s", float, "seconds for the alarm to clear after a move"),
    "cooldown": ("cooldown_s", float, "seconds a moved flow is left alone"),
    "auto": ("auto", lambda v: {"on": True, "off": False}[v], "act on alarms by itself: on, off"),
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


class GorCLI(CLI):
    """Mininet's CLI plus GOR's commands (see the module docstring)."""

    prompt = "astral> "

    def __init__(self, fabric: Any, gor: Gor, **kwargs: Any) -> None:
        self.fabric = fabric
        self.gor = gor
        self._fidelity_mark: tuple[float, dict[str, dict]] | None = None
        super().__init__(fabric.net, **kwargs)

    def out(self, text: str = "") -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def onecmd(self, line: str) -> Any:
        """Run one command; a mistake in its arguments prints the reason, not a trace."""
        try:
            return super().onecmd(line)
        except (ValueError, KeyError) as e:
            self.out(f"error: {e.args[0] if e.args else e}")
            return None

    # --- the fabric ------------------------------------------------------------------

    def do_nics(self, _line: str) -> None:
        """List every NIC: server, rail, address, MAC, leaf and leaf port."""
        self.out(f"{'server':<8} {'rail':>4} {'ip':<15} {'mac':<18} {'leaf':<8} port")
        for nic in self.fabric.plan.nics():
            self.out(f"{nic.server:<8} {nic.rail:>4} {nic.ip:<15} {nic.mac:<18} {nic.leaf:<8} {nic.leaf_port}")

    def do_switches(self, _line: str) -> None:
        """List every switch: role, id, MAC, P4Runtime address, ECMP salt, and whether
        GOR's session with it is up."""
        self.out(f"{'switch':<8} {'role':<6} {'id':>3} {'mac':<18} {'p4runtime':<16} {'salt':<10} session")
        for sw in self.fabric.plan.switches:
            up = "up" if self.gor.fleet.is_up(sw.name) else "down"
            self.out(f"{sw.name:<8} {sw.role:<6} {sw.switch_id:>3} {sw.mac:<18} {sw.grpc_address:<16} "
                     f"0x{sw.salt:08x} {up} (pushed {self.gor.fleet.pushes[sw.name]}x)")

    def do_topology(self, _line: str) -> None:
        """Show the fabric: sizes, rates, every leaf's spines (x = cable down), and
        where the published topology file is."""
        plan = self.fabric.plan
        s = plan.spec
        self.out(f"fabric {s.name!r}: {s.blocks} blocks x {s.servers_per_block} servers x {s.rails} rails, "
                 f"{len(plan.leaves)} leaves, {len(plan.spines)} spines; NIC {s.links.host_mbps:g} Mbit/s, "
                 f"uplink {s.links.uplink_mbps:g} Mbit/s; ECMP {s.ecmp_hash}, sampling 1/{s.sample_rate}")
        for leaf in plan.leaves:
            spines = []
            for k, spine in enumerate(plan.spines):
                mark = "x" if frozenset((leaf.name, spine.name)) in self.gor.down else "-"
                spines.append(f"{mark}{spine.name}(port {plan.uplink_port(k)})")
            servers = sorted({n.server for n in plan.nics() if n.leaf == leaf.name})
            self.out(f"  {leaf.name:<8} servers {','.join(servers):<20} uplinks {' '.join(spines)}")
        self.out(f"published: {self.gor.agent_dir / 'gor-topology.json'} (version {self.gor.routes.version})")

    # --- views -----------------------------------------------------------------------

    def do_links(self, line: str) -> None:
        """links [all|NAME...]: every leaf-spine link (``all``: NIC links too; names:
        links touching those nodes) with utilisation, rate, ECN-marked fraction, max
        queue depth and alarm level of the last telemetry interval, and the tail drops
        the last drop reading found (they are read once a second)."""
        self.out(self._links_table(line.split()))

    def _links_table(self, words: list[str]) -> str:
        rows = [f"{'link':<20} {'util':>6} {'Mbit/s':>7} {'ecn':>6} {'maxq':>5} {'drops':>6} alarm"]
        show_all = "all" in words
        names = [w for w in words if w != "all"]
        for link, stats, level in self.gor.link_rows():
            if names and not any(n in link for n in names):
                continue
            if not names and not show_all and link not in self.gor.fabric_links:
                continue
            state = "DOWN" if frozenset(link) in self.gor.down else LEVELS[level]
            if stats is None:
                rows.append(f"{'->'.join(link):<20} {'-':>6} {'-':>7} {'-':>6} {'-':>5} {'-':>6} {state}")
                continue
            rows.append(f"{'->'.join(link):<20} {stats.util:>6.0%} {stats.bps / 1e6:>7.2f} "
                        f"{stats.ecn_fraction:>6.1%} {stats.queue_depth:>5} {stats.drops:>6} {state}")
        return "\n".join(rows)

    def do_alarms(self, _line: str) -> None:
        """Links with an alarm (notice, warning, critical), since when, and the last
        interval's ECN-marked fraction and queue depth."""
        now = self.gor.clock()
        active = self.gor.alarm_rows()
        if not active:
            self.out("no alarms")
        for link, alarm in sorted(active.items(), key=lambda kv: -kv[1].level):
            last = alarm.last
            self.out(f"{'->'.join(link):<20} {LEVELS[alarm.level]:<8} for {now - alarm.since:5.1f} s  "
                     f"ecn {last.ecn_fraction if last else 0:.1%}  maxq {last.queue_depth if last else 0}")

    def do_flows(self, _line: str) -> None:
        """Flows GOR knows (from the agents and from samples): id, 5-tuple, agent,
        rate, current spine, pinned."""
        rows = self.gor.flow_rows()
        if not rows:
            self.out("no flows (start a job, or wait for samples)")
            return
        self.out(f"{'id':>3} {'flow':<32} {'agent':<10} {'Mbit/s':>7} {'via':<8} {'state':<8} pin")
        for f, path in rows:
            via = path[2] if path and len(path) == 5 else "-"
            self.out(f"{f.id:>3} {f.label:<32} {f.server or '(sampled)':<10} {f.rate_bps / 1e6:>7.2f} "
                     f"{via:<8} {f.state or '-':<8} {'yes' if f.pinned else ''}")

    def do_paths(self, line: str) -> None:
        """paths FLOW: the flow's ECMP paths now (``*`` = current) and, for each, the
        source port that would put it there."""
        flow = self.gor.flow(_one(line, "paths FLOW"))
        current = self.gor.path_of(flow)
        for path in candidate_paths(self.gor.plan, flow.five_tuple, self.gor.down):
            port = find_port(self.gor.plan, flow.five_tuple, path, self.gor.down)
            self.out(f"{'*' if path == current else ' '} {'-'.join(path):<44} sport {port}")

    def do_events(self, line: str) -> None:
        """events [N] [NAME]: the last N (default 15) events of GOR's log, optionally
        only those named NAME (e.g. moved, alarm_raised)."""
        words = line.split()
        n = int(words[0]) if words and words[0].isdigit() else 15
        names = [w for w in words if not w.isdigit()]
        recent = [e for e in self.gor.events.snapshot() if not names or e["event"] in names][-n:]
        for e in recent:
            fields = {k: v for k, v in e.items() if k not in ("ts", "t", "event")}
            self.out(f"{time.strftime('%H:%M:%S', time.localtime(e['ts']))}.{int(e['ts'] % 1 * 1000):03d} "
                     f"{e['event']:<15} {json.dumps(fields, default=str)}")

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
                view = self._links_table(words)
                active = self.gor.alarm_rows()
                head = f"GOR {time.strftime('%H:%M:%S')}  alarms: " + (", ".join(
                    f"{'->'.join(k)} {LEVELS[a.level]}" for k, a in sorted(active.items())) or "none")
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
        top, safety, verify, clear, cooldown, auto; alarm thresholds ecn, qdepth,
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
            self.out(f"{a}-{b} set {state}; GOR repairs only leaf-spine cables")

    def do_job(self, line: str) -> None:
        """job OP SIZES [--ports orthogonal|random] [--order rail|input] [--iters N]
        [--nvlink GBPS] | job trace FILE [orthogonal|random] | job FILE: start a
        collective sweep over every NIC (OP: allreduce, allgather, reducescatter,
        alltoall, sendrecv; SIZES like 64K,1M), a training trace (traces/*.yaml), or a
        job file, on the agents; `jobs` shows them, `flows` their flows."""
        words = line.split()
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
        run = self.gor.jobs.start(job)
        self.out(f"job {run.name}: agents on {', '.join(run.procs)} (logs: {self.gor.agent_dir}/agent-*.log)")

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
        """Jobs started from this prompt and the state of their agents."""
        if not self.gor.jobs.jobs:
            self.out("no jobs")
        for run in self.gor.jobs.jobs:
            self.out(f"{run.name}: " + ", ".join(f"{s} {st}" for s, st in run.status().items()))

    # --- completion --------------------------------------------------------------------

    def _complete(self, text: str, options: list[str]) -> list[str]:
        return [o for o in options if o.startswith(text)]

    def _flow_ids(self) -> list[str]:
        return [str(f.id) for f, _ in self.gor.flow_rows()]

    def complete_paths(self, text: str, *_: Any) -> list[str]:
        return self._complete(text, self._flow_ids())

    complete_unpin = complete_paths

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
