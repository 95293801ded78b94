"""Agents forked from a process that has already imported them (``python -m tccl.spawner``).

An agent started as ``python -m tccl.agent`` spends most of its start-up importing:
numpy, grpc, protobuf, yaml, the native NIC -- 0.2 s of CPU each, 0.4-0.7 s of wall
time when a job's agents start together on two cores (measured with
PYTHONPROFILEIMPORTTIME on the default fabric: imports were 0.42-0.70 s of the
0.49-0.82 s to each agent's ready marker). The launchers start a job's agents many times
per fabric (GOR's prompt, the demo, the tests), so one spawner per launching process
imports all of that once and forks each agent from it, as multiprocessing's forkserver
and Android's zygote do. The child enters the Mininet host's network namespace (what
``mnexec -da`` does for the host's ``popen``), starts a session of its own, takes the
agent's niceness, sends its output to the agent's log and runs `tccl.agent.main`.

The spawner is a child of the launching process, single-threaded (fork-safe), and
reports each agent's exit status to it; when the launcher goes away (its end of the
pipe closes) the spawner stops the agents it forked and exits; a launcher that exits
normally waits for that. `SpawnedProcess` is the
launcher's handle on an agent: the part of `subprocess.Popen` the launchers use.

Protocol, one JSON object per line: requests ``{"id", "argv", "netns", "log", "cwd",
"nice"}`` on the spawner's stdin; on its stdout ``{"id", "pid"}`` or ``{"id", "error"}``
for each request, then ``{"exit": pid, "status": code}`` when that agent ends (code as
Popen's returncode: negative for a signal). A request's answer always comes before its
agent's exit.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from topo.namespaces import enter_for_good

ROOT = Path(__file__).resolve().parent.parent
# Seconds the spawner gives its agents to end after SIGTERM when the launcher is gone.
ORPHAN_GRACE_S = 5.0


class SpawnError(RuntimeError):
    """The spawner could not start an agent (or is gone)."""


# --- the spawner process --------------------------------------------------------------------

def _preload() -> None:
    """Import what an agent imports: the agent, and the native NIC where it builds (an
    agent on the Python transport does not need it; one on the native transport that
    cannot load it reports why itself, as a fresh process would)."""
    import tccl.agent  # noqa: F401
    from tccl.nic.build import build_error
    if build_error() is None:
        import tccl.nic.device  # noqa: F401


def _run_agent(request: dict[str, Any], keep: set[int]) -> int:
    """In the forked child: become the agent ``request`` asks for; its exit status."""
    os.setsid()
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # The log first: whatever fails next (the namespace, the directory) is written there.
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    for fd in keep | {log, null}:
        if fd > 2:
            os.close(fd)
    # Refusals are reported as the agent reports its own OSErrors (exit 2).
    if request.get("netns"):
        try:
            enter_for_good(request["netns"])
        except OSError as e:
            print(f"tccl agent: network namespace {request['netns']}: {e.strerror}", file=sys.stderr)
            return 2
    try:
        if request.get("nice"):
            os.nice(request["nice"])
        os.chdir(request["cwd"])
    except OSError as e:
        print(f"tccl agent: {e}", file=sys.stderr)
        return 2
    from tccl import agent
    sys.argv = ["tccl.agent", *request["argv"]]
    try:
        return agent.main(request["argv"])
    except SystemExit as e:         # argparse's errors, as `python -m` would exit
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
        return 1


def serve() -> int:
    """The spawner's loop (module docstring): requests from stdin, answers to stdout."""
    _preload()
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: set[int] = set()
    pending = b""

    def say(obj: dict[str, Any]) -> None:
        os.write(1, (json.dumps(obj) + "\n").encode())

    def reap() -> None:
        while children:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            children.discard(pid)
            say({"exit": pid, "status": os.waitstatus_to_exitcode(wait_status)})  # as Popen's returncode

    while True:
        readable, _, _ = select.select([0, wake_r], [], [])
        if wake_r in readable:
            while True:
                try:
                    if not os.read(wake_r, 512):
                        break
                except BlockingIOError:
                    break
            reap()
        if 0 not in readable:
            continue
        data = os.read(0, 65536)
        if not data:
            break
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            request = json.loads(line)
            try:
                pid = os.fork()
            except OSError as e:
                say({"id": request["id"], "error": f"fork: {e}"})
                continue
            if pid == 0:
                code = 1
                try:
                    code = _run_agent(request, {wake_r, wake_w})
                finally:
                    for stream in (sys.stdout, sys.stderr):
                        try:
                            stream.flush()
                        except (OSError, ValueError):
                            pass
                    os._exit(code & 0xFF)
            children.add(pid)
            say({"id": request["id"], "pid": pid})
        reap()
    # The launcher is gone: its agents would be orphans nobody waits for.
    for pid in children:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + ORPHAN_GRACE_S
    while children:
        if time.monotonic() > deadline:
            for pid in children:
                os.kill(pid, signal.SIGKILL)
            deadline = float("inf")
        pid, _ = os.waitpid(-1, os.WNOHANG)
        if pid:
            children.discard(pid)
        else:
            time.sleep(0.05)
    return 0


# --- the launcher's side --------------------------------------------------------------------

class SpawnedProcess:
    """An agent the spawner forked: what the launchers use of `subprocess.Popen`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._ended = threading.Event()

    def _end(self, code: int) -> None:
        self.returncode = code
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"agent {self.pid}", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:      # ended; its status is on its way
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Spawner:
    """The launcher's end of one spawner process (module docstring)."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen([sys.executable, "-m", "tccl.spawner"], cwd=str(ROOT),
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      start_new_session=True)
        self._lock = threading.Lock()
        self._next_id = 0
        self._answers: dict[int, SpawnedProcess | str] = {}
        self._answered = threading.Condition(self._lock)
        self._agents: dict[int, SpawnedProcess] = {}
        self.alive = True
        threading.Thread(target=self._read, name="spawner-reader", daemon=True).start()

    def spawn(self, argv: list[str], log: Path, netns: str | None = None, nice: int = 0,
              cwd: Path = ROOT, timeout_s: float = 60.0) -> SpawnedProcess:
        """Fork an agent with arguments ``argv`` (`tccl.agent.main`'s) in network
        namespace ``netns`` (a /proc/<pid>/ns/net path; None: the spawner's), at
        niceness +``nice``, its output in ``log``."""
        with self._lock:
            if not self.alive:
                raise SpawnError("the agent spawner has exited")
            self._next_id += 1
            ident = self._next_id
            request = {"id": ident, "argv": argv, "netns": netns, "log": str(log), "cwd": str(cwd), "nice": nice}
            assert self._proc.stdin is not None
            try:
                self._proc.stdin.write((json.dumps(request) + "\n").encode())
                self._proc.stdin.flush()
            except BrokenPipeError as e:
                raise SpawnError("the agent spawner has exited") from e
            if not self._answered.wait_for(lambda: ident in self._answers or not self.alive, timeout_s):
                raise SpawnError(f"the agent spawner did not answer within {timeout_s:.0f} s")
            answer = self._answers.pop(ident, None)
            if answer is None:
                raise SpawnError("the agent spawner exited before answering")
            if isinstance(answer, str):
                raise SpawnError(f"the agent spawner could not start the agent: {answer}")
            return answer

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            message = json.loads(line)
            with self._lock:
                if "exit" in message:
                    agent = self._agents.pop(message["exit"], None)
                    if agent is not None:
                        agent._end(message["status"])
                else:
                    # Registered here, before the next line: that may be the agent's exit.
                    if "pid" in message:
                        agent = SpawnedProcess(message["pid"])
                        self._agents[agent.pid] = agent
                        self._answers[message["id"]] = agent
                    else:
                        self._answers[message["id"]] = message["error"]
                    self._answered.notify_all()
        # The spawner ended without being asked (killed outright): nothing reports its
        # agents' ends any more, so they are ended here, as it would have on leaving.
        self._proc.wait()
        with self._lock:
            self.alive = False
            self._answered.notify_all()
            lost, self._agents = self._agents, {}
        for agent in lost.values():
            agent.kill()
            agent._end(-signal.SIGKILL)

    def close(self) -> None:
        """End the spawner: it stops the agents still running (within ORPHAN_GRACE_S)."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            self._proc.stdin.close()
        try:
            self._proc.wait(ORPHAN_GRACE_S + 5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


_spawner: Spawner | None = None
_spawner_lock = threading.Lock()


def spawner() -> Spawner:
    """This process's spawner, started on first use (and again if it has exited)."""
    global _spawner
    with _spawner_lock:
        if _spawner is None or not _spawner.alive:
            _spawner = Spawner()
            # The launcher ends it as it exits, and waits: `make run` returns with
            # nothing of it left (it would notice the pipe close, but after the return).
            atexit.register(_spawner.close)
        return _spawner


if __name__ == "__main__":
    sys.exit(serve())
