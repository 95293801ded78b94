"""The deparser, ``DEPARSE(F, S) -> bytes``, the last stage of a packet's way, and the
checksums around the pipeline: ``VERIFY_CKSUM`` runs after the parser, ``UPDATE_CKSUM``
before the deparser.

The deparser writes the valid headers in the JSON's order (the payload is the caller's),
each fixed-size header with one `struct.pack` (see `structs`). Both checksum functions
come from the one ``checksums`` list of the JSON: each entry says whether it is verified,
updated or both, under which condition, and with which calculation.
"""

from __future__ import annotations

from collections.abc import Iterator

from .actions import Actions
from .calculations import Calculations
from .context import Context
from .expressions import Expressions
from .structs import Structs


class Deparser:
    """The deparser and checksum functions of one program."""

    def __init__(self, ctx: Context, exprs: Expressions, structs: Structs,
                 actions: Actions, calcs: Calculations) -> None:
        self.ctx = ctx
        self.exprs = exprs
        self.structs = structs
        self.actions = actions
        self.calcs = calcs

    def emit(self, deparser: dict) -> None:
        """Emit `DEPARSE(F, S)`: the deparser's primitives, then the valid headers."""
        emit, L = self.ctx.emit, self.ctx.layout
        emit(f"def {self.ctx.symbols.DEPARSE}(F, S):")
        for p in deparser.get("primitives", []):
            self.actions.primitive(p, 1)
        emit("out = []", 1)
        for name in deparser.get("order", []):
            h = L.header(name)
            emit(f"if F[{h.valid_slot}]:", 1)
            if h.has_varbit:
                emit("v = 0", 2)
                emit("nb = 0", 2)
                for f in h.fields:
                    if f.varbit:
                        emit(f"v = (v << F[{f.len_slot}]) | F[{f.slot}]", 2)
                        emit(f"nb += F[{f.len_slot}]", 2)
                    else:
                        emit(f"v = (v << {f.width}) | (F[{f.slot}] & {hex(f.mask)})", 2)
                        emit(f"nb += {f.width}", 2)
                emit("out.append(v.to_bytes(nb >> 3, 'big'))", 2)
                continue
            st, args = self.structs.pack_header(h)
            emit(f"out.append({st}.pack({args}))", 2)
        emit("return b''.join(out)", 1)
        emit("")

    def emit_checksums(self) -> None:
        """Emit `VERIFY_CKSUM(F, S) -> bool ok` and `UPDATE_CKSUM(F, S)`."""
        emit, x = self.ctx.emit, self.exprs
        emit(f"def {self.ctx.symbols.VERIFY_CHECKSUMS}(F, S):")
        emit("ok = True", 1)
        for c, calc, cond in self._checksums("verify"):
            tgt, _w, _s = x.lvalue({"type": "field", "value": c["target"]})
            emit(f"if {cond} and {tgt} != {calc}(F, S): ok = False", 1)
        emit("return ok", 1)
        emit("")
        emit(f"def {self.ctx.symbols.UPDATE_CHECKSUMS}(F, S):")
        emit("pass", 1)
        for c, calc, cond in self._checksums("update"):
            emit(f"if {cond}:", 1)
            emit(x.assign({"type": "field", "value": c["target"]}, f"{calc}(F, S)"), 2)
        emit("")

    def _checksums(self, use: str) -> Iterator[tuple[dict, str, str]]:
        """(checksum, its calculation's function, its condition) for each checksum
        the JSON marks for `use` ("verify" or "update"; both by default)."""
        for c in self.ctx.js.get("checksums", []):
            if c.get(use, True):
                cond = self.exprs.expr(c["if_cond"]) if c.get("if_cond") else "True"
                yield c, self.calcs.name(c["calculation"]), cond
