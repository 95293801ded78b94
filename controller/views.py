"""The prompt's tables, as text: what `controller.repl`'s view commands print.

Each function renders one view of GOR's state or the fabric's plan and returns it; the
prompt only parses the command and prints. Kept apart so that a view reads the same
wherever it is shown (``links`` and ``watch`` share `links_table`) and can be read
without the prompt around it.
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterable

from controller.alarms import LEVELS
from controller.gor import Gor
from controller.paths import candidate_paths, find_port
from topo.addressing import AddressPlan


def nics_table(plan: AddressPlan) -> str:
    """Every NIC: server, rail, address, MAC, leaf and leaf port."""
    rows = [f"{'server':<8} {'rail':>4} {'ip':<15} {'mac':<18} {'leaf':<8} port"]
    rows += [f"{nic.server:<8} {nic.rail:>4} {nic.ip:<15} {nic.mac:<18} {nic.leaf:<8} {nic.leaf_port}"
             for nic in plan.nics()]
    return "\n".join(rows)


def switches_table(gor: Gor) -> str:
    """Every switch: role, id, MAC, P4Runtime address, ECMP salt, GOR's session."""
    rows = [f"{'switch':<8} {'role':<10} {'id':>3} {'mac':<18} {'p4runtime':<16} {'salt':<10} session"]
    for sw in gor.plan.switches:
        session = gor.fleet.switches[sw.name]
        up = ("up" if session.is_primary else "up, BACKUP") if gor.fleet.is_up(sw.name) else "down"
        rows.append(f"{sw.name:<8} {sw.role:<10} {sw.switch_id:>3} {sw.mac:<18} {sw.grpc_address:<16} "
                    f"0x{sw.salt:08x} {up} (pushed {gor.fleet.pushes[sw.name]}x)")
    return "\n".join(rows)


def topology_text(gor: Gor) -> str:
    """Sizes and rates, every leaf's spines (x = cable down), every spine's super-spines
    (three tiers), and the published topology file."""
    plan = gor.plan
    s = plan.spec
    tier3 = (f" in {s.pods} pods, {len(plan.super_spines)} super-spines (spine uplink "
             f"{s.links.spine_uplink_mbps:g} Mbit/s)") if s.tiers == 3 else ""
    rows = [f"fabric {s.name!r}: {s.blocks} blocks x {s.servers_per_block} servers x {s.rails} rails, "
            f"{len(plan.leaves)} leaves, {len(plan.spines)} spines{tier3}; NIC {s.links.host_mbps:g} Mbit/s, "
            f"uplink {s.links.uplink_mbps:g} Mbit/s; ECMP {s.ecmp_hash}, sampling 1/{s.sample_rate}"]
    for leaf in plan.leaves:
        spines = []
        for k in range(s.spines):
            spine = plan.spine(leaf.pod, k)
            mark = "x" if frozenset((leaf.name, spine.name)) in gor.down else "-"
            spines.append(f"{mark}{spine.name}(port {plan.uplink_port(k)})")
        servers = sorted({n.server for n in plan.nics() if n.leaf == leaf.name})
        rows.append(f"  {leaf.name:<8} servers {','.join(servers):<20} uplinks {' '.join(spines)}")
    for spine in plan.spines if s.tiers == 3 else ():
        ups = " ".join(f"-{plan.super_spine(spine.spine, j).name}(port {plan.spine_uplink_port(j)})"
                       for j in range(s.super_spines))
        rows.append(f"  {spine.name:<8} pod {spine.pod} plane {spine.spine:<10} uplinks {ups}")
    rows.append(f"published: {gor.agent_dir / 'gor-topology.json'} (version {gor.routes.version})")
    return "\n".join(rows)


def links_table(gor: Gor, words: list[str]) -> str:
    """The links (leaf-spine; ``all`` in ``words``: NIC links too; names: links touching
    those nodes) with the last interval's utilisation, rate, ECN-marked fraction, max
    queue, drops, PAUSE frames, paused seconds and alarm level."""
    head = ("link", "util", "Mbit/s", "ecn", "maxq", "drops", "pause", "paused")
    rows = [f"{head[0]:<20} " + " ".join(f"{h:>6}" for h in head[1:]) + " alarm"]
    show_all = "all" in words
    names = [w for w in words if w != "all"]
    for link, stats, level in gor.link_rows():
        if names and not any(n in link for n in names):
            continue
        if not names and not show_all and link not in gor.fabric_links:
            continue
        state = "DOWN" if frozenset(link) in gor.down else LEVELS[level]
        if stats is None:
            cells = ["-"] * (len(head) - 1)
        else:
            cells = [f"{stats.util:.0%}", f"{stats.bps / 1e6:.2f}", f"{stats.ecn_fraction:.1%}",
                     str(stats.queue_depth), str(stats.drops), str(stats.pauses), f"{stats.paused_s:.2f}"]
        rows.append(f"{'->'.join(link):<20} " + " ".join(f"{c:>6}" for c in cells) + f" {state}")
    return "\n".join(rows)


def alarms_line(gor: Gor) -> str:
    """The active alarms on one line (``watch``'s heading)."""
    active = gor.alarm_rows()
    return "alarms: " + (", ".join(f"{'->'.join(k)} {LEVELS[a.level]}" for k, a in sorted(active.items()))
                         or "none")


def alarms_table(gor: Gor) -> str:
    """Links with an alarm, the worst first: level, since when, the last interval's
    ECN-marked fraction and queue depth."""
    now = gor.clock()
    active = gor.alarm_rows()
    if not active:
        return "no alarms"
    rows = []
    for link, alarm in sorted(active.items(), key=lambda kv: -kv[1].level):
        last = alarm.last
        rows.append(f"{'->'.join(link):<20} {LEVELS[alarm.level]:<8} for {now - alarm.since:5.1f} s  "
                    f"ecn {last.ecn_fraction if last else 0:.1%}  maxq {last.queue_depth if last else 0}")
    return "\n".join(rows)


def flows_table(gor: Gor) -> str:
    """Flows GOR knows: id, 5-tuple, agent, rate, current spine, state, pinned."""
    rows = gor.flow_rows()
    if not rows:
        return ("no flows yet: GOR lists the agents' flows every few seconds and samples "
                "packets on the fabric links (start a job; in a script: `sleep 3`)")
    out = [f"{'id':>3} {'flow':<32} {'agent':<10} {'Mbit/s':>7} {'via':<8} {'state':<8} pin"]
    for f, path in rows:
        via = "/".join(path[2:len(path) // 2 + 1]) if path and len(path) >= 5 else "-"
        out.append(f"{f.id:>3} {f.label:<32} {f.server or '(sampled)':<10} {f.rate_bps / 1e6:>7.2f} "
                   f"{via:<8} {f.state or '-':<8} {'yes' if f.pinned else ''}")
    return "\n".join(out)


def paths_table(gor: Gor, flow: Any) -> str:
    """A flow's ECMP paths now (``*`` = current) and the source port for each."""
    current = gor.path_of(flow)
    rows = []
    for path in candidate_paths(gor.plan, flow.five_tuple, gor.down):
        port = find_port(gor.plan, flow.five_tuple, path, gor.down)
        rows.append(f"{'*' if path == current else ' '} {'-'.join(path):<44} sport {port}")
    return "\n".join(rows)


def events_table(events: Iterable[dict[str, Any]]) -> str:
    """Events of GOR's log, one a line: local time, name, the other fields as JSON."""
    rows = []
    for e in events:
        fields = {k: v for k, v in e.items() if k not in ("ts", "t", "event")}
        rows.append(f"{time.strftime('%H:%M:%S', time.localtime(e['ts']))}.{int(e['ts'] % 1 * 1000):03d} "
                    f"{e['event']:<15} {json.dumps(fields, default=str)}")
    return "\n".join(rows)


def why_line(e: dict[str, Any]) -> str:
    """One event of `why`, in words."""
    name = e["event"]
    if name == "detect":
        return f"detect: {e.get('link') or e.get('reason')} {e.get('level', '')}".rstrip()
    if name == "decide":
        (m,) = e["moves"]
        sims = "; ".join(f"{c['moves']} move(s): step x{c['step_factor']}, worst {c['worst_util']:.0%}"
                         for c in e.get("simulated", ()))
        nxt = ", ".join(m.get("next", ())) or "none"
        return (f"decide ({e['method']}): simulated {len(e.get('simulated', ()))} [{sims}]; "
                f"chose {m['path']} (from {m['current']}), demand {m['demand_mbps']} Mbit/s, "
                f"predicted {m.get('predicted_mbps')} Mbit/s; next: {nxt}")
    if name == "measured":
        return (f"measured on {e['path']}: {e['measured_mbps']} Mbit/s ({e['samples']} samples), "
                f"predicted {e['predicted_mbps']}")
    fields = {k: v for k, v in e.items() if k not in ("ts", "t", "event", "loop", "flow", "flow_id")}
    return f"{name} {json.dumps(fields, default=str)}" if fields else name
