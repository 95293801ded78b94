"""Calculations: the hash and checksum functions of a program, one Python function each.

A BMv2 calculation (``calculations`` in the JSON: hashes, checksums, and an action
selector's input) serialises its inputs as BMv2's BufBuilder does -- fields back to
back, a header's fields only while it is valid, the payload last -- and hashes the
bytes. Whole-byte runs of inputs are packed with `struct` (see `structs`); others are
shifted together into one integer. Every calculation is emitted up front, since actions,
checksums and selectors call them from anywhere.
"""

from __future__ import annotations

from typing import Any

from .. import hashes
from ..errors import ProgramError
from .context import Context
from .expressions import field_bits
from .structs import Structs


class Calculations:
    """The calculation and selector functions of one program. `named` maps each
    calculation's (or action profile's) name to its hash object, for the control
    plane's ``set_crc_parameters``."""

    def __init__(self, ctx: Context, structs: Structs) -> None:
        self.ctx = ctx
        self.L = ctx.layout
        self.structs = structs
        self.named: dict[str, Any] = {}

    def name(self, calculation: str) -> str:
        """Name of the generated function computing calculation `calculation`."""
        self.ctx.declared(self.ctx.calculations, "calculation", calculation)
        return self.ctx.symbols.calculation(calculation)

    def emit_all(self) -> None:
        """Emit every named calculation."""
        for name, calc in self.ctx.calculations.items():
            self.hash_function(self.ctx.symbols.calculation(name), calc["algo"],
                               calc.get("input", []), name)

    def emit_selector(self, profile: dict) -> None:
        """Emit the hash of an action profile's selector (a profile without one has none)."""
        sel = profile.get("selector")
        if sel:
            self.hash_function(self.ctx.symbols.selector(profile["name"]), sel["algo"],
                               sel.get("input", []), profile["name"])

    def hash_function(self, fname: str, algo: str, inputs: list, name: str) -> None:
        """Emit `fname(F, S) -> int`: BufBuilder serialisation then the hash."""
        hname = self.ctx.symbols.hash_of(fname)
        self.ctx.constants[hname] = self.named[name] = hashes.make_hash(algo)
        body: list[str] = ["v = 0", "n = 0"]
        payload = False
        runs: list[list] = []   # [valid slot or None, [(term, width)...]]
        for item in inputs:
            t = item["type"]
            if t == "field":
                hdr = self.L.header(item["value"][0])
                f = self.L.field(item["value"][0], item["value"][1])
                guard = None if hdr.metadata or item["value"][1] == "$valid$" else hdr.valid_slot
                terms = [(field_bits(f), f.width)]
            elif t == "hexstr":
                width = int(item["bitwidth"])
                guard, terms = None, [(str(int(item["value"], 16) & ((1 << width) - 1)), width)]
            elif t == "header":
                hdr = self.L.header(item["value"])
                if hdr.has_varbit:
                    raise ProgramError(f"calculation {name!r}: varbit header input unsupported")
                guard = hdr.valid_slot
                terms = [(field_bits(f), f.width) for f in hdr.fields]
            elif t == "payload":
                payload = True
                continue
            else:
                raise ProgramError(f"calculation {name!r}: unsupported input type {t!r}")
            if runs and runs[-1][0] == guard:
                runs[-1][1].extend(terms)
            else:
                runs.append([guard, terms])
        if all(sum(w for _t, w in terms) % 8 == 0 for _g, terms in runs):
            self.hash_function_packed(fname, hname, algo, runs, payload)
            return
        for guard, terms in runs:
            total = sum(w for _t, w in terms)
            parts = [f"(v << {total})"]
            shift = total
            for term, w in terms:
                shift -= w
                parts.append(f"(({term}) << {shift})" if shift else f"({term})")
            step = [f"v = {' | '.join(parts)}", f"n += {total}"]
            if guard is None:
                body += step
            else:
                body.append(f"if F[{guard}]:")
                body += ["    " + line for line in step]
        if algo in ("csum16", "cksum16") and not payload:
            # zero padding to whole 16-bit words, then one modulo (hashes.csum16_int)
            self.ctx.constants[hname] = hashes.csum16_int
            body.append(f"return {hname}(v << (-n & 15))")
        else:
            body.append("pad = -n & 7")
            body.append("buf = (v << pad).to_bytes((n + pad) >> 3, 'big')")
            if payload:
                body.append("buf += S.payload")
            body.append(f"return {hname}(buf)")
        self.emit_def(fname, body)

    def hash_function_packed(self, fname: str, hname: str, algo: str, runs: list,
                             payload: bool) -> None:
        """`hash_function` when every run of inputs is whole bytes: `struct` packs
        them (much cheaper than shifting one big integer together)."""
        body: list[str] = []
        if len(runs) == 1 and runs[0][0] is None:
            st, args = self.structs.pack_terms(runs[0][1])
            body.append(f"buf = {st}.pack({args})")
        else:
            body.append("parts = []")
            for guard, terms in runs:
                st, args = self.structs.pack_terms(terms)
                line = f"parts.append({st}.pack({args}))"
                if guard is None:
                    body.append(line)
                else:
                    body += [f"if F[{guard}]:", "    " + line]
            body.append("buf = b''.join(parts)")
        if algo in ("csum16", "cksum16") and not payload:
            # zero padding to whole 16-bit words, then one modulo (hashes.csum16_int)
            self.ctx.constants[hname] = hashes.csum16_int
            body.append("v = int.from_bytes(buf, 'big')")
            body.append(f"return {hname}(v << 8 if len(buf) & 1 else v)")
        else:
            if payload:
                body.append("buf += S.payload")
            body.append(f"return {hname}(buf)")
        self.emit_def(fname, body)

    def emit_def(self, fname: str, body: list[str]) -> None:
        """Emit ``def fname(F, S)`` with ``body`` (the two hash-function builders' tail)."""
        self.ctx.emit(f"def {fname}(F, S):")
        for line in body:
            self.ctx.emit(line, 1)
        self.ctx.emit("")
