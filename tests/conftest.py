"""Session-wide hooks: the fuzz and fault tests' closing note (tests/fuzz_figures.py)."""

from __future__ import annotations

from fuzz_figures import closing_note


def pytest_terminal_summary(terminalreporter) -> None:
    lines = closing_note()
    if lines:
        terminalreporter.section("fuzz and fault figures")
        for line in lines:
            terminalreporter.write_line(line)
