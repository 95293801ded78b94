"""What every code generator of the package shares: the program's declarations, its
layout, the names (`Symbols`), and the module being written.

p4c's BMv2 back end hands each converter a `ConversionContext` for the same reason: a
construct's generator needs the program's declarations and a place to write, not the
state of the other generators.
"""

from __future__ import annotations

import itertools
from typing import Any

from ..errors import ProgramError
from ..program import Layout
from .symbols import Symbols


class Context:
    """The program being generated (`js`, `layout`, `symbols`) and its module so far:
    `lines` (functions, in the order written), `late` (module-level lines that refer to
    functions and so come after all of them), `constants` (objects the code refers to
    by name, such as `struct.Struct`s and hash functions)."""

    def __init__(self, js: dict[str, Any], layout: Layout, symbols: Symbols) -> None:
        self.js = js
        self.layout = layout
        self.symbols = symbols
        self.lines: list[str] = []
        self.late: list[str] = []
        self.constants: dict[str, Any] = symbols.fixed_bindings(layout)
        self._tmp = itertools.count()
        self.calculations = {c["name"]: c for c in js.get("calculations", [])}
        self.counters = {c["name"]: c for c in js.get("counter_arrays", [])}
        self.meters = {m["name"]: m for m in js.get("meter_arrays", [])}
        self.registers = {r["name"]: r for r in js.get("register_arrays", [])}
        self.value_sets = {v["name"]: v for v in js.get("parse_vsets", [])}
        self.actions = {a["id"]: a for a in js.get("actions", [])}

    def tmp(self) -> str:
        """A fresh local variable name."""
        return f"_t{next(self._tmp)}"

    def emit(self, line: str, indent: int = 0) -> None:
        """Append one source line at indentation `indent`."""
        self.lines.append("    " * indent + line)

    @staticmethod
    def declared(declarations: dict[str, dict], kind: str, name: str) -> dict:
        """The JSON object declaring `name` (one of `declarations`), or ProgramError."""
        try:
            return declarations[name]
        except KeyError:
            raise ProgramError(f"unknown {kind} {name!r}") from None

    def source(self) -> str:
        """The complete module."""
        return "\n".join(self.lines + self.late) + "\n"
