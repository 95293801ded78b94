"""The P4Runtime clients P4 users know, in a venv of their own: ``.venv-clients/``.

p4runtime-shell (the P4 tutorials' interactive client) pins protobuf < 3.21 and the
PyPI ``p4runtime`` 1.4.1 bindings, while the project and p4sim's server live in
protobuf 6, so the shell cannot share ``.venv``. `p4runtime_shell` makes its venv on
first use (the prompt's ``p4sh``, tests/test_compat_p4runtime_shell.py) and reuses it.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-clients" / "p4runtime-shell"
# The one place the client's versions are chosen, pinned exactly so that the client
# never drifts. p4runtime-shell 0.0.6 (the newest) requires p4runtime==1.4.1 and
# protobuf >=3.15,<3.21; protobuf 3.20.3 is the last release below 3.21 (its
# pure-Python wheel runs on Python 3.11); googleapis-common-protos 1.63.0 accepts
# protobuf >=3.19.5,<5 (3.20.0/3.20.1 excluded); grpcio 1.62.2 has Python 3.11 wheels
# and no protobuf requirement of its own. The rest (IPython 7.31 etc.) follows from
# p4runtime-shell's own exact pins.
CLIENT_PINS = (
    "p4runtime-shell==0.0.6",
    "p4runtime==1.4.1",
    "protobuf==3.20.3",
    "grpcio==1.62.2",
    "googleapis-common-protos==1.63.0",
)


def p4runtime_shell(progress: Callable[[str], None] = lambda _line: None) -> Path:
    """The p4runtime-shell venv's python, created with CLIENT_PINS if not already there
    (``progress`` hears that it is, since pip takes a minute).

    Idempotent and safe for concurrent processes: a lock file serialises creation, and
    a stamp holding the pins marks a finished install (a changed pin list rebuilds). A
    failed install raises RuntimeError with pip's output.
    """
    python = VENV / "bin" / "python"
    stamp = VENV / ".pins"
    wanted = "\n".join(CLIENT_PINS) + "\n"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / ".p4runtime-shell.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == wanted and python.exists():
            return python
        progress(f"creating {VENV.relative_to(ROOT)} (p4runtime-shell and its pinned packages; once) ...")
        shutil.rmtree(VENV, ignore_errors=True)
        steps = [
            ["/usr/bin/python3", "-m", "venv", str(VENV)],
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *CLIENT_PINS],
            [str(python), "-c", "import p4runtime_sh.shell"],
        ]
        for cmd in steps:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                raise RuntimeError(f"creating the p4runtime-shell venv failed: {' '.join(cmd)}\n"
                                   f"{done.stdout}{done.stderr}")
        stamp.write_text(wanted)
    return python
