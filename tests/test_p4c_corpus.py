"""The conformance checker (tests/p4c_corpus.py) on the corpora this project ships.

p4c's own corpora stay outside the repository (the checker reads a fetched copy of
p4c's ``testdata``, see docs/p4sim-conformance.md); the project's regression
programs are laid out here the way p4c's are -- tests/p4/good as
``p4_16_samples/NAME-bmv2.p4`` with its STF, tests/p4/bad as ``p4_16_errors`` --
and the checker must find both lists closed. It must also notice when they are not:
a program that compiles, filed among the errors, is reported as accepted.
"""

from __future__ import annotations

import io
import os
import sys
from contextlib import redirect_stdout
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import p4c_corpus  # noqa: E402  (tests/ is not a package)

P4 = Path(__file__).parent / "p4"


def _lay_out(root: Path, good: list[Path], bad: list[Path]) -> None:
    samples, errors = root / "p4_16_samples", root / "p4_16_errors"
    samples.mkdir(parents=True)
    errors.mkdir()
    for p in good:
        (samples / f"{p.stem}-bmv2.p4").symlink_to(p)
        (samples / f"{p.stem}-bmv2.stf").symlink_to(p.with_suffix(".stf"))
    for p in bad:
        (errors / p.name).symlink_to(p)


def _run(root: Path, *options: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        status = p4c_corpus.main([str(root), "--stf", "--jobs", "2", *options])
    return status, out.getvalue()


def test_shipped_corpora_are_closed(tmp_path):
    good = sorted((P4 / "good").glob("*.p4"))
    bad = sorted((P4 / "bad").glob("*.p4"))
    _lay_out(tmp_path, good, bad)
    status, out = _run(tmp_path)
    assert status == 0, out
    assert f"samples compiled: {len(good)} of {len(good)} (100.0 %)" in out
    assert f"error programs refused: {len(bad)} of {len(bad)}; accepted: 0" in out
    assert "refusals without file:line: 0; compiler bugs/timeouts: 0" in out
    assert f"STF tests of the accepted samples (less p4c's XFAILs): {len(good)} of {len(good)} pass" in out


def test_a_compiling_error_program_and_a_failing_stf_are_reported(tmp_path):
    good = [P4 / "good" / "basic_ipv4.p4"]
    _lay_out(tmp_path, good, [P4 / "bad" / "width_mismatch.p4", P4 / "good" / "checksum16.p4"])
    broken = tmp_path / "p4_16_samples" / "broken-bmv2.stf"
    broken.write_text("packet 0 00\nexpect 1 00\n")  # the program drops a runt: no packet comes out
    (tmp_path / "p4_16_samples" / "broken-bmv2.p4").symlink_to(good[0])
    status, out = _run(tmp_path)
    assert status == 1
    assert "error programs refused: 1 of 2; accepted: 1" in out
    assert "  checksum16: accepted: " in out
    assert "STF tests of the accepted samples (less p4c's XFAILs): 1 of 2 pass (50.0 %)" in out
    assert "  broken-bmv2: " in out and "FAIL" in out


def test_on_the_native_engine_a_program_it_does_not_run_is_counted_as_falling_back(tmp_path):
    # basic_ipv4 runs native; python_only's `random` hash keeps it on Python.
    _lay_out(tmp_path, [P4 / "good" / "basic_ipv4.p4",
                        P4.parent / "engine_fixtures" / "python_only.p4"], [])
    status, out = _run(tmp_path, "--engine", "native")
    assert status == 0, out
    assert "STF tests of the accepted samples (less p4c's XFAILs): 1 of 2 pass (50.0 %); " \
           "1 fall back to python" in out
    assert "  python_only-bmv2: falls back to python: hash algorithm 'random' " in out
