"""GOR's prompt as a person uses it (root, Mininet): `python -m testbed.run` (what `make
run` starts) in a pseudo-terminal -- show links, complete a command with Tab, start a
job on the agents, find its flow, reroute it to the other spine and see it there,
quit; nothing is left behind. A job's results table arriving at the idle prompt,
`jobs`, `sleep`, and p4runtime-shell through `p4sh` (backup, then --primary with GOR
giving the switch up and taking it back).
The same commands piped in (`echo links | make run`) work without a terminal, and a
script that gives a job time (`sleep`, `wait`) sees its traffic, flows and results."""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from topo.nodes import RUN_DIR
from topo.processes import stop_process
from testkit import wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mnexec") is None,
                                reason="needs root and Mininet")

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "astral> "
# Terminal escape sequences (colours, cursor moves, titles), which `expect` drops.
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[=>]")


def spec_file(tmp_path: Path, prefix: str, port_offset: int) -> Path:
    """2 blocks x 1 server x 2 rails, 2 spines: a NIC of one rail reaches the other
    rail of its own server through either spine."""
    spec = tmp_path / "repl.yaml"
    spec.write_text(f"name: repl\nblocks: 2\nservers_per_block: 1\nrails: 2\nspines: 2\n"
                    f"sample_rate: 16\nnode_prefix: {prefix}\n"
                    f"grpc_port_base: {42000 + (os.getpid() % 1000) * 16 + port_offset}\n")
    return spec


class Terminal:
    """A process on a pseudo-terminal; `expect` reads until a pattern appears."""

    def __init__(self, cmd: list[str]) -> None:
        self.master, slave = os.openpty()
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdin=slave, stdout=slave, stderr=slave,
                                     start_new_session=True)
        os.close(slave)
        self.text = ""

    def expect(self, pattern: str, timeout: float) -> re.Match:
        end = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.text)
            if found:
                self.text = self.text[found.end():]
                return found
            left = end - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                pytest.fail(f"no {pattern!r} within {timeout} s; output so far:\n{self.text[-3000:]}")
            ready, _, _ = select.select([self.master], [], [], min(left, 0.2))
            if ready:
                try:
                    chunk = os.read(self.master, 65536).decode(errors="replace")
                except OSError:
                    continue
                if "\x1b[6n" in chunk:          # a cursor position request (IPython's prompt)
                    os.write(self.master, b"\x1b[1;1R")
                self.text += ANSI.sub("", chunk).replace("\r", "")

    def command(self, line: str, timeout: float = 30.0) -> str:
        """Type a command; returns its output (up to the next prompt)."""
        self.text = ""
        os.write(self.master, (line + "\n").encode())
        return self.expect(rf"(?s)^.*?{re.escape(line)}\n(.*?){PROMPT}", timeout).group(1)

    def close(self) -> None:
        stop_process(self.proc, 60)
        os.close(self.master)


def assert_nothing_left(prefix: str) -> None:
    assert not list(RUN_DIR.glob(f"{prefix}*.pid"))
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f" {prefix}" not in links


def test_links_job_reroute_and_quit_through_a_terminal(tmp_path):
    prefix = f"p{os.getpid() % 1000}"
    term = Terminal([sys.executable, "-m", "testbed.run", "--fabric", str(spec_file(tmp_path, prefix, 0))])
    try:
        term.expect(r"ready in .*GOR polling", 90)
        term.expect(PROMPT, 30)
        links = term.command("links")
        assert re.search(r"^link +util +Mbit/s +ecn +maxq +drops +pause +paused +alarm$", links, re.M), links
        # the first rates need two telemetry polls
        links = wait_for("a rate on b0l0->sp1 in `links`", lambda: (
            out if re.search(rf"^{prefix}b0l0->{prefix}sp1 +\d+% ", out := term.command("links"), re.M) else None), 10, 0.1)
        assert re.search(rf"^{prefix}b0l0->{prefix}sp1 +\d+% +\d+\.\d\d +\d+\.\d% ", links, re.M), links
        assert "usage: reroute" in term.command("reroute 1")
        # Tab completes a command name (readline).
        term.text = ""
        os.write(term.master, b"topol\t\n")
        term.expect(r"fabric 'repl': 2 blocks", 10)
        term.expect(PROMPT, 10)
        term.command("set auto off")
        assert "usage: tccl" in term.command("job allreduce")
        started = term.command("job sendrecv 100000 --iters 80 --warmup 0 --ports random --nvlink 0")
        assert f"agents on {prefix}b0h0" in started, started
        # The job's one flow: rank 0 (b0h0 rail 0) -> rank 1 (b0h0 rail 1), via a spine.
        row = wait_for("the job's flow in `flows`", lambda: re.search(
            rf"^ +(\d+) (10\.0\.0\.1:\d+->10\.1\.0\.1) +{prefix}b0h0 .* ({prefix}sp\w+) ", term.command("flows"), re.M),
            30, 0.3)
        flow_id, label, via = row.groups()
        assert via in (f"{prefix}sp0", f"{prefix}sp1"), row.group(0)    # one of the fabric's two spines
        other = f"{prefix}sp1" if via == f"{prefix}sp0" else f"{prefix}sp0"
        paths = term.command(f"paths {flow_id}")
        assert re.search(rf"^\* {prefix}b0h0-{prefix}b0l0-{via}-", paths, re.M), paths
        moved = term.command(f"reroute {flow_id} {other}", timeout=40)
        assert f"flow {flow_id}: moved" in moved, moved
        flows = term.command("flows")
        assert re.search(rf"^ +{flow_id} 10\.0\.0\.1:\d+->10\.1\.0\.1 .* {other} ", flows, re.M), flows
        assert f"flow {flow_id} pinned" in term.command(f"pin {flow_id}")
        assert re.search(rf"^ +{flow_id} .* yes$", term.command("flows"), re.M)
        assert f"flow {flow_id} unpinned" in term.command(f"unpin {flow_id}")
        events = term.command("events 50 moved")
        assert f"{prefix}b0h0-{prefix}b0l0-{other}-" in events, events
        why = term.command(f"why {flow_id}")
        assert "detect: manual reroute" in why and re.search(rf"moved .*{prefix}b0h0-{prefix}b0l0-{other}-", why), why
        # The job's frames left rate-limited ports: the fidelity monitor counted them.
        fidelity = term.command("fidelity")
        sent = re.search(r"^fabric +departures on time [\d.]+ % of (\d+), p99 lateness .* dilation",
                         fidelity, re.M)
        assert sent is not None and int(sent.group(1)) > 0, fidelity
        assert re.search(rf"^{prefix}b0l0 +departures on time", fidelity, re.M), fidelity
        assert "new window" in term.command("fidelity mark")
        assert "over the last" in term.command("fidelity")
        os.write(term.master, b"quit\n")
        assert term.proc.wait(60) == 0
    finally:
        term.close()
    assert_nothing_left(prefix)


def test_piped_commands_without_a_terminal(tmp_path):
    prefix = f"i{os.getpid() % 1000}"
    done = subprocess.run([sys.executable, "-m", "testbed.run", "--fabric", str(spec_file(tmp_path, prefix, 8))],
                          cwd=ROOT, input="sh sleep 1\nlinks\nalarms\nset interval 0.5\nset\nbogus\ntopology\n"
                          f"watch 0.6 {prefix}sp1\nlink x y sideways\n"
                          f"link {prefix}b0l0 {prefix}sp0 down\ntopology\nlink {prefix}b0l0 {prefix}sp0 up\n",
                          capture_output=True, text=True, timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert re.search(rf"^{prefix}sp0->{prefix}b1l1 +\d+% ", out, re.M), out
    assert "no alarms" in out and "interval = 0.5" in out
    assert re.search(r"^(astral> )?interval +0\.5 ", out, re.M), out
    assert "*** Unknown command: bogus" in out
    assert f"published: {tmp_path}" not in out and "/tccl/gor-topology.json (version 1)" in out
    # watch without a terminal: the refreshing view for 0.6 s, filtered to sp1's links.
    views = re.findall(r"GOR \d\d:\d\d:\d\d  alarms: [^\n]*\nlink [^\n]*\n(.*?)\n\n", out, re.S)
    assert len(views) >= 2, out
    rows = views[0].splitlines()
    assert len(rows) == 8 and all(f"{prefix}sp1" in row for row in rows), rows
    assert "usage: link NODE1 NODE2 down|up" in out
    assert f"{prefix}b0l0-{prefix}sp0 down; routes repaired (topology version 2)" in out, out
    assert re.search(rf"{prefix}b0l0 +servers .* uplinks x{prefix}sp0\(port 2\) -{prefix}sp1", out), out
    assert f"{prefix}b0l0-{prefix}sp0 up; routes repaired (topology version 3)" in out, out
    assert_nothing_left(prefix)


RESULTS_HEADER = r"#\s+size\s+count\s+type\s+redop\s+time\s+algbw\s+busbw\s+#wrong"
RESULTS_ROW = r"^\s+65536\s+65536\s+uint8\s+bxor\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s+0$"
LPM = "AstralIngress.ipv4_lpm"
SHELL_PROMPT = r"P4Runtime sh >>> ?"


def shell_line(term: Terminal, line: str, pattern: str, timeout: float = 30.0) -> re.Match:
    """Type one line at p4runtime-shell's prompt; the match of ``pattern`` in its output."""
    term.text = ""
    os.write(term.master, (line + "\r").encode())
    return term.expect(pattern, timeout)


def test_job_results_sleep_and_p4sh_through_a_terminal(tmp_path):
    """A finished job prints its results table at the idle prompt by itself; p4sh
    opens p4runtime-shell: as a backup it reads GOR's entries and may not write; with
    --primary it writes, GOR says it lost the switch, and takes it back (the hand-made
    entry gone) when the shell exits."""
    prefix = f"q{os.getpid() % 1000}"
    term = Terminal([sys.executable, "-m", "testbed.run", "--fabric", str(spec_file(tmp_path, prefix, 4))])
    try:
        term.expect(r"ready in .*GOR polling", 90)
        term.expect(PROMPT, 30)
        # The first command already has GOR's rates (the prompt waited for them).
        assert re.search(rf"^{prefix}b0l0->{prefix}sp0 +\d+% ", term.command("links"), re.M)
        term.command("set auto off")
        started = term.command("job allreduce 64K --iters 2 --warmup 0 --ports random --nvlink 0")
        assert "job allreduce-random: agents on" in started
        # Nothing typed: the table arrives at the idle prompt, which is drawn again.
        term.text = ""
        term.expect(r"job allreduce-random finished: .*exit 0.*exit 0", 90)
        table = term.expect(rf"(?s){RESULTS_HEADER}.*?Avg bus bandwidth +: [\d.]+ Mb/s", 10).group(0)
        assert re.search(RESULTS_ROW, table, re.M), table
        term.expect(PROMPT, 10)
        again = term.command("jobs")
        assert re.search(RESULTS_ROW, again, re.M) and "finished" in again, again
        assert term.command("sleep 0.5").strip() == ""

        # A backup client: reads GOR's routes, may not write.
        term.text = ""
        os.write(term.master, f"p4sh {prefix}b0l0\n".encode())
        term.expect(r"backup: read-only", 300)        # the first use makes the client venv
        term.expect(SHELL_PROMPT, 60)
        count = 'print("count=%d" % len(list(table_entry["' + LPM + '"].read())))'
        routes = int(shell_line(term, count, r"count=(\d+)").group(1))
        assert routes > 0
        insert = (f'te = table_entry["{LPM}"](action="AstralIngress.drop"); '
                  f'te.match["hdr.ipv4.dstAddr"] = "10.9.9.0/24"; te.insert(); print("ins" + "erted")')
        shell_line(term, insert, r"PERMISSION_DENIED|not the primary|[Pp]ermission")
        term.expect(SHELL_PROMPT, 10)
        term.text = ""
        os.write(term.master, b"exit\r")
        term.expect(PROMPT, 30)

        # Primary: the write goes through; GOR notices, and takes the switch back on exit.
        term.text = ""
        os.write(term.master, f"p4sh {prefix}b0l0 --primary\n".encode())
        term.expect(SHELL_PROMPT, 60)
        shell_line(term, insert, r"inserted")
        assert int(shell_line(term, count, r"count=(\d+)").group(1)) == routes + 1
        term.text = ""
        os.write(term.master, b"exit\r")
        term.expect(rf"GOR took {prefix}b0l0 back: program pushed again \(push 2\)", 30)
        # GOR's notices, held while the shell had the terminal, follow in order.
        term.expect(rf"GOR: another controller is primary on {prefix}b0l0 \(election id \d+\)", 10)
        term.expect(rf"GOR: primary again on {prefix}b0l0", 10)
        term.expect(PROMPT, 10)
        events = term.command("events 50 switch_backup switch_primary")
        assert "switch_backup" in events and "switch_primary" in events, events
        assert re.search(rf"^{prefix}b0l0 +leaf .* up \(pushed 2x\)$", term.command("switches"), re.M)
        # GOR's program is back, the hand-made entry gone.
        term.text = ""
        os.write(term.master, f"p4sh {prefix}b0l0\n".encode())
        term.expect(SHELL_PROMPT, 60)
        assert int(shell_line(term, count, r"count=(\d+)").group(1)) == routes
        os.write(term.master, b"exit\r")
        term.expect(PROMPT, 30)
        os.write(term.master, b"quit\n")
        assert term.proc.wait(60) == 0
    finally:
        term.close()
    assert_nothing_left(prefix)


def test_piped_script_sees_the_job(tmp_path):
    """The issue's script, with the time it needs: `sleep` lets the job run before
    `links` and `flows`, `wait` prints its results."""
    prefix = f"w{os.getpid() % 1000}"
    script = ("links\njob allreduce 1M --iters 4 --ports random\nsleep 2\nlinks\nflows\nwait\n"
              f"jobs\nwait nosuch\nsleep x\np4sh {prefix}b0l0\nquit\n")
    done = subprocess.run([sys.executable, "-m", "testbed.run", "--fabric", str(spec_file(tmp_path, prefix, 12))],
                          cwd=ROOT, input=script, capture_output=True, text=True, timeout=150)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    tables = re.findall(r"link +util .*?(?=astral> )", out, re.S)
    assert len(tables) == 2, out
    # Before the job: rates already (not dashes); during it, some fabric link busy.
    assert re.search(rf"^{prefix}b0l0->{prefix}sp\d +\d+% +\d+\.\d\d ", tables[0], re.M), tables[0]
    busy = [float(m) for m in re.findall(r"^\S+ +\d+% +(\d+\.\d\d) ", tables[1], re.M)]
    assert max(busy) > 1.0, tables[1]
    # The job's flows: from its agents' listing (every 2 s) or from sampled packets.
    assert re.search(r"^ +\d+ 10\.\d\.\d\.1:\d+->10\.\d\.\d\.1 +(" + prefix + r"b\dh0|\(sampled\)) ", out, re.M), out
    assert len(re.findall(r"job allreduce-random finished: ", out)) == 2, out    # wait, then jobs
    assert re.search(r"^\s+1048576\s+1048576\s+uint8\s+bxor\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+0$", out, re.M), out
    assert "error: no job nosuch; jobs: allreduce-random" in out
    assert "error: could not convert string to float: 'x'" in out
    assert "error: p4sh needs a terminal" in out
    assert_nothing_left(prefix)


def test_sigterm_at_an_idle_prompt_tears_everything_down(tmp_path):
    """A `kill` (a closed terminal, a test's cleanup) while the prompt waits for a key:
    the signal may reach any of the process's threads, yet the prompt ends at once and
    stops everything (it used to sleep on until a key was pressed)."""
    prefix = f"s{os.getpid() % 1000}"
    term = Terminal([sys.executable, "-m", "testbed.run", "--fabric", str(spec_file(tmp_path, prefix, 14))])
    try:
        term.expect(r"ready in .*GOR polling", 90)
        term.expect(PROMPT, 30)
        term.command("sleep 0.3")        # GOR's, finsy's and gRPC's threads are all running
        term.proc.send_signal(signal.SIGTERM)
        assert term.proc.wait(20) == 128 + signal.SIGTERM
    finally:
        term.close()
    assert_nothing_left(prefix)
