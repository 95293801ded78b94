"""What every C generator of the package shares: the program, its layout, the index
of every run-time object in the pipeline's arrays, the file being written, and the
refusal of a construct the C engine does not run.

An unsupported construct raises `Unsupported` naming the construct and where it is in
the JSON (``actions[3] 'MyIngress.a' primitives[1]``): `p4sim switch --engine auto`
then runs the Python engine and says so once; ``--engine native`` refuses with it.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

from ..errors import ProgramError
from ..program import FieldInfo, HeaderInfo, Layout


class Unsupported(ProgramError):
    """A construct of the program that the C engine does not run (the Python one does)."""


class CContext:
    """The program being generated and its C file so far (`lines`)."""

    def __init__(self, js: dict[str, Any], layout: Layout) -> None:
        self.js = js
        self.layout = layout
        self.lines: list[str] = []
        self._tmp = itertools.count()
        self._where: list[str] = []
        self.calculations = {c["name"]: c for c in js.get("calculations", [])}
        self.actions = {a["id"]: a for a in js.get("actions", [])}
        # index of each run-time object in the pipeline's arrays (p4n_pipeline)
        self.counter_ix = _index(c["name"] for c in js.get("counter_arrays", []) if not c.get("is_direct"))
        self.meter_ix = _index(m["name"] for m in js.get("meter_arrays", []) if not m.get("is_direct"))
        self.register_ix = _index(r["name"] for r in js.get("register_arrays", []))
        self.vset_ix = _index(v["name"] for v in js.get("parse_vsets", []))
        self.stack_ix = _index(list(layout.stacks) + list(layout.union_stacks))
        self.counters = {c["name"]: c for c in js.get("counter_arrays", [])}
        self.meters = {m["name"]: m for m in js.get("meter_arrays", [])}
        self.registers = {r["name"]: r for r in js.get("register_arrays", [])}
        pipes = js.get("pipelines", [])
        self.table_ix = _index(t["name"] for p in pipes for t in p.get("tables", []))
        self.profile_ix = _index(a["name"] for p in pipes for a in p.get("action_profiles", []))
        # calculations first, then one selector hash per profile with a selector
        names = list(self.calculations) + [a["name"] for p in pipes
                                           for a in p.get("action_profiles", []) if a.get("selector")]
        self.calc_ix = _index(names)
        # The native PHV is the Python engine's slots, then more 64-bit words: a field
        # wider than 64 bits (a varbit field: as wide as it may be) keeps its low word
        # in its own slot and its higher words (least significant first) here.
        self.nslots = layout.nslots
        self.more: dict[int, list[int]] = {}   # field slot -> its further words
        # what the engine splits into words when it writes the C tables: per action
        # with a parameter wider than 64 bits its parameters' widths, per table with a
        # key wider than 64 bits its key fields' widths
        self.wide_args: dict[int, list[int]] = {}
        self.wide_keys: dict[str, list[int]] = {}
        for h in layout.headers:
            for f in h.fields:
                words = (f.width + 63) // 64 - 1
                if words > 0:
                    self.more[f.slot] = list(range(self.nslots, self.nslots + words))
                    self.nslots += words

    def words(self, f: FieldInfo) -> list[int]:
        """Every word a field occupies in the native PHV, least significant first."""
        return [f.slot] + self.more.get(f.slot, [])

    def header_words(self, h: HeaderInfo) -> list[int]:
        """The slots of a header's fields, then their further words (`more`), then its
        varbit lengths: the header's row of ``p4n_hf``, which copies, swaps and zeroes
        all of them and compares all but the lengths (`compared_words`), as the Python
        engine's HeaderOps."""
        return ([f.slot for f in h.fields] + [w for f in h.fields for w in self.more.get(f.slot, [])]
                + [f.len_slot for f in h.fields if f.varbit])

    def compared_words(self, h: HeaderInfo) -> int:
        """How many words of `header_words` `==` compares (not the varbit lengths)."""
        return len(self.header_words(h)) - sum(1 for f in h.fields if f.varbit)

    def word_positions(self, h: HeaderInfo, off: int) -> list[int]:
        """Where the words of field `off` of `h` are in its ``p4n_hf`` row (the same in
        every header of a stack: they share a type)."""
        row = self.header_words(h)
        return [row.index(w) for w in self.words(h.fields[off])]

    def tmp(self) -> str:
        """A fresh local variable name."""
        return f"t{next(self._tmp)}"

    def emit(self, line: str, indent: int = 0) -> None:
        """Append one line at indentation `indent`."""
        self.lines.append("    " * indent + line)

    @contextlib.contextmanager
    def at(self, where: str) -> Iterator[None]:
        """Generate inside JSON location `where` (for `unsupported`'s message)."""
        self._where.append(where)
        try:
            yield
        finally:
            self._where.pop()

    def unsupported(self, construct: str) -> Unsupported:
        """The error for `construct` at the current JSON location."""
        where = " ".join(self._where) or "the program"
        return Unsupported(f"{construct} at {where}")

    def index(self, table: dict[str, int], kind: str, name: str) -> int:
        """The index of run-time object `name` (a ProgramError naming `kind` if none)."""
        try:
            return table[name]
        except KeyError:
            raise ProgramError(f"unknown {kind} {name!r}") from None

    def declared_width(self, register: str) -> int:
        """The bit width of register array `register`."""
        self.index(self.register_ix, "register array", register)
        return int(self.registers[register]["bitwidth"])

    def source(self) -> str:
        """The complete C file."""
        return "\n".join(self.lines) + "\n"


def _index(names: Iterator[str] | Any) -> dict[str, int]:
    return {n: i for i, n in enumerate(names)}
