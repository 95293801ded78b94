"""The ``p4sim`` entry point dispatches to the sub-commands and rejects unknown ones."""

import subprocess
import sys


def run_p4sim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "p4sim.cli", *args], capture_output=True, text=True)


def test_help_lists_every_command():
    result = run_p4sim("--help")
    assert result.returncode == 0
    for command in ("compile", "stf", "switch"):
        assert f"  {command} " in result.stdout


def test_unknown_command_is_an_error_naming_it():
    result = run_p4sim("frobnicate")
    assert result.returncode == 2
    assert "unknown command 'frobnicate'" in result.stderr
