"""Session-wide hooks: the fuzz and fault tests' closing note (tests/fuzzkit.py)."""

from __future__ import annotations

from fuzzkit import closing_note


def pytest_terminal_summary(terminalreporter) -> None:
    lines = closing_note()
    if lines:
        terminalreporter.section("fuzz and fault figures")
        for line in lines:
            terminalreporter.write_line(line)
