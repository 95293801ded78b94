"""The C preprocessor step, run exactly as p4c runs it, plus the map back to sources.

p4c feeds every program through the system C preprocessor (``cpp -undef -nostdinc``)
so that ``#include``, ``#define`` and ``#if`` behave like C's. We do the same and keep
cpp's ``# <line> "<file>"`` markers, so that every line of the output is known to come
from one line of one original file. Diagnostics then point at the file the user wrote,
not at the preprocessed text.

cpp collapses white space inside a line, so columns are recovered later by finding
each token in the original line (`LineMap.column`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

from p4sim.compiler.diagnostics import CompileError, SrcPos

#: Directory holding our core.p4 and v1model.p4 (``#include <core.p4>``).
P4INCLUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "p4include")

_MARKER = re.compile(r'^#\s*(\d+)\s+"((?:[^"\\]|\\.)*)"')
_CPP_DIAG = re.compile(r"^(.*?):(\d+):(\d+): (?:fatal )?error: (.*)$")


_COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:[^"\\\n]|\\.)*"', re.S)


def mask_comments(text: str) -> str:
    """``text`` with every comment character replaced by a space (newlines kept), so
    that searching a line for a token never lands inside a comment."""
    def blank(m: re.Match) -> str:
        s = m.group()
        return s if s.startswith('"') else re.sub(r"[^\n]", " ", s)
    return _COMMENT_OR_STRING.sub(blank, text)


@dataclass
class LineMap:
    """Maps a line of the preprocessed text (1-based) to (file, line) of the source."""

    origins: list[tuple[str, int]] = field(default_factory=list)
    _sources: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)

    def _load(self, file: str) -> tuple[list[str], list[str]]:
        found = self._sources.get(file)
        if found is None:
            try:
                with open(file, encoding="utf-8", errors="replace") as f:
                    text = f.read()
            except OSError:
                text = ""
            found = (text.split("\n"), mask_comments(text).split("\n"))
            self._sources[file] = found
        return found

    def source_line(self, file: str, line: int) -> str:
        """Text of ``line`` (1-based) of ``file`` as written, '' when unavailable."""
        lines = self._load(file)[0]
        return lines[line - 1] if 1 <= line <= len(lines) else ""

    def code_line(self, file: str, line: int) -> str:
        """Like `source_line` with comments blanked out (same columns)."""
        lines = self._load(file)[1]
        return lines[line - 1] if 1 <= line <= len(lines) else ""

    def origin(self, out_line: int) -> tuple[str, int]:
        if 1 <= out_line <= len(self.origins):
            return self.origins[out_line - 1]
        return self.origins[-1] if self.origins else ("<input>", out_line)

    def pos(self, out_line: int, col: int) -> SrcPos:
        """Position of column ``col`` (1-based, already in original-line terms)."""
        file, line = self.origin(out_line)
        return SrcPos(file, line, col, self.source_line(file, line))


@dataclass
class Preprocessed:
    text: str
    lines: LineMap


def _cpp_command() -> list[str]:
    for name in ("cpp", "cpp-12", "gcc"):
        exe = shutil.which(name)
        if exe:
            return [exe, "-E"] if name == "gcc" else [exe]
    raise CompileError("the C preprocessor 'cpp' is not installed (apt-get install cpp)")


def preprocess(
    path: str,
    include_dirs: Sequence[str] = (),
    defines: Optional[Mapping[str, str]] = None,
) -> Preprocessed:
    """Run cpp on ``path`` and return the text with its line map.

    A cpp failure (missing include, ``#error``) becomes a `CompileError` at the
    position cpp names.
    """
    if not os.path.isfile(path):
        why = "is a directory" if os.path.isdir(path) else "no such file"
        raise CompileError(f"cannot open source file ({why})", SrcPos(path, 0, 0))
    # p4c-bm2-ss defines __TARGET_BMV2__ for every program it compiles.
    cmd = _cpp_command() + ["-undef", "-nostdinc", "-x", "c", "-I", P4INCLUDE, "-D__TARGET_BMV2__"]
    for d in include_dirs:
        cmd += ["-I", d]
    for k, v in (defines or {}).items():
        cmd.append(f"-D{k}={v}" if v is not None and v != "" else f"-D{k}")
    cmd.append(path)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise _cpp_error(proc.stderr, path)
    return Preprocessed(proc.stdout, _line_map(proc.stdout))


def _cpp_error(stderr: str, path: str) -> CompileError:
    lines = LineMap()
    for line in stderr.splitlines():
        m = _CPP_DIAG.match(line)
        if m:
            file, ln, col, msg = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
            msg = msg.removeprefix("#error ").strip() if msg.startswith("#error") else msg
            return CompileError(msg, SrcPos(file, ln, col, lines.source_line(file, ln)))
    text = stderr.strip().splitlines()
    return CompileError(f"preprocessing {path} failed: {text[0] if text else 'cpp error'}")


def _line_map(text: str) -> LineMap:
    """Follow cpp's line markers: each output line gets the (file, line) it came from.

    Marker lines themselves map to where the next line comes from, which never
    matters since they carry no tokens (the lexer skips them).
    """
    origins: list[tuple[str, int]] = []
    file, line = "<input>", 1
    for raw in text.split("\n"):
        m = _MARKER.match(raw) if raw.startswith("#") else None
        if m:
            line = int(m.group(1))
            file = m.group(2).encode().decode("unicode_escape")
            origins.append((file, line))
            continue
        origins.append((file, line))
        line += 1
    return LineMap(origins)
