"""Source positions and compile errors.

Every error the compiler reports names ``file:line:col``, shows the offending source
line and a caret under the column -- the format p4c uses -- and is raised as
`CompileError`, which the command line turns into a message and exit status 1 (never a
traceback).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class SrcPos:
    """A position in the *original* source (after mapping preprocessor line markers)."""

    file: str
    line: int
    col: int
    text: str = ""  # the whole source line, for the caret display

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NO_POS = SrcPos("<builtin>", 0, 0)


class CompileError(Exception):
    """A program the compiler rejects. ``kind`` is "error" or "unsupported"."""

    def __init__(self, message: str, pos: Optional[SrcPos] = None, kind: str = "error"):
        super().__init__(message)
        self.message = message
        self.pos = pos or NO_POS
        self.kind = kind

    def where(self) -> str:
        """``file:line:col``; just ``file`` for an error about a whole file (line 0);
        empty when nothing is known (never a made-up position)."""
        if self.pos.line > 0:
            return str(self.pos)
        return "" if self.pos is NO_POS else self.pos.file

    def in_file(self, path: str) -> "CompileError":
        """This error, placed in file ``path`` when it has no position of its own."""
        if self.pos is NO_POS:
            self.pos = SrcPos(path, 0, 0)
        return self

    def render(self) -> str:
        """``file:line:col: error: message`` + source line + caret, like p4c."""
        where = self.where()
        head = f"{where}: {self.kind}: {self.message}" if where else f"{self.kind}: {self.message}"
        if not self.pos.text:
            return head
        caret = " " * max(self.pos.col - 1, 0) + "^"
        return f"{head}\n{self.pos.text.rstrip()}\n{caret}"

    def __str__(self) -> str:
        return self.render()
