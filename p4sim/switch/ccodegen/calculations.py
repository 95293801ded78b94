"""Calculations in C: every hash and checksum of a program, ``CALC_<n>(p, F, S)``, the
twin of `codegen.calculations`.

The inputs are serialised as BMv2's BufBuilder does (and the Python engine after it):
fields back to back MSB first, a header's fields only while it is valid, zero padding
to a whole byte, the payload last; then the algorithm of `p4sim/switch/hashes.py`,
bit-exact: crc16, crc32, crcCCITT and the *_custom CRCs as one table-driven CRC with
BMv2's parameters (`p4n_crc`, changed at run time by set_crc_parameters), csum16,
xor16/32, identity, round_robin. `random` and `round_robin_consistent` draw from or
remember state the Python engine keeps in Python: programs using them run on Python.
"""

from __future__ import annotations

from ..errors import ProgramError
from .context import CContext
from .expressions import pieces, slot_of

#: (width, poly, init, xor_out, reflect_in, reflect_out) of the CRC algorithms (hashes.py)
CRCS = {
    "crc16": (16, 0x8005, 0, 0, 1, 1),
    "crc32": (32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, 1, 1),
    "crcCCITT": (16, 0x1021, 0xFFFF, 0, 0, 0),
    "crc8_custom": (8, 0x07, 0, 0, 0, 0),
    "crc16_custom": (16, 0x8005, 0, 0, 1, 1),
    "crc32_custom": (32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, 1, 1),
    "crc64_custom": (64, 0x1B, 0, 0, 1, 1),
}
_OTHERS = ("csum16", "cksum16", "xor16", "xor32", "identity", "round_robin")


class CCalculations:
    """The calculation and selector-hash functions of one program."""

    def __init__(self, ctx: CContext) -> None:
        self.ctx = ctx
        self.L = ctx.layout
        self.crc_init: list[str] = []   # statements setting up the CRC tables
        self.max_bytes = 0              # the longest serialised input (P4N_HASH_BYTES)

    def function(self, calculation: str) -> str:
        """The C function computing calculation `calculation`."""
        if calculation not in self.ctx.calculations:
            raise ProgramError(f"unknown calculation {calculation!r}")
        return f"CALC_{self.ctx.calc_ix[calculation]}"

    def selector(self, profile: str) -> str:
        """The C function hashing an action selector's inputs."""
        return f"CALC_{self.ctx.calc_ix[profile]}"

    def emit_all(self) -> None:
        """Emit every calculation, then every selector hash."""
        for name, calc in self.ctx.calculations.items():
            with self.ctx.at(f"calculations {name!r}"):
                self.hash_function(self.ctx.calc_ix[name], calc["algo"], calc.get("input", []))
        for p in self.ctx.js.get("pipelines", []):
            for prof in p.get("action_profiles", []):
                sel = prof.get("selector")
                if sel:
                    with self.ctx.at(f"action_profiles {prof['name']!r} selector"):
                        self.hash_function(self.ctx.calc_ix[prof["name"]], sel["algo"],
                                           sel.get("input", []))

    def hash_function(self, ix: int, algo: str, inputs: list) -> None:
        """Emit `CALC_<ix>(p, F, S) -> uint64_t`: serialisation, then the algorithm."""
        if algo not in CRCS and algo not in _OTHERS:
            raise self.ctx.unsupported(f"hash algorithm {algo!r}")
        emit = self.ctx.emit
        emit(f"static uint64_t CALC_{ix}(p4n_pipeline *p, const uint64_t *F, const p4n_state *S) {{")
        emit("uint8_t buf[P4N_HASH_BYTES + 1];", 1)
        emit("p4n_bitbuf b = {buf, sizeof buf, 0, 0};", 1)
        emit("(void)p; (void)F; (void)S;", 1)
        payload = False
        nbits = 0
        for i, item in enumerate(inputs):
            t = item["type"]
            if t == "field":
                hdr = self.L.header(item["value"][0])
                f = self.L.field(item["value"][0], item["value"][1])
                guard = not hdr.metadata and item["value"][1] != "$valid$"
                nbits += f.width
                # (a varbit field: its value in its maximum width, as the Python engine has it)
                put = " ".join(f"p4n_put(&b, {code}, {w});" for code, w in pieces(slot_of(self.ctx, f)))
                emit(f"if (F[{hdr.valid_slot}]) {{ {put} }}" if guard else put, 1)
            elif t == "hexstr":
                width = int(item["bitwidth"])
                value = int(item["value"], 16) & ((1 << width) - 1)
                nbits += width
                rest = width
                while rest > 0:  # pieces of at most 64 bits, most significant first
                    w = rest % 64 or 64
                    rest -= w
                    emit(f"p4n_put(&b, {hex((value >> rest) & ((1 << w) - 1))}ULL, {w});", 1)
            elif t == "header":
                hdr = self.L.header(item["value"])
                if hdr.has_varbit:
                    raise self.ctx.unsupported(f"varbit header input {hdr.name!r}")
                emit(f"if (F[{hdr.valid_slot}]) {{", 1)
                nbits += hdr.fixed_bits
                for f in hdr.fields:
                    for code, w in pieces(slot_of(self.ctx, f)):
                        emit(f"p4n_put(&b, {code}, {w});", 2)
                emit("}", 1)
            elif t == "payload":
                payload = True
            else:
                raise self.ctx.unsupported(f"calculation input {i} of type {t!r}")
        self.max_bytes = max(self.max_bytes, (nbits + 7) // 8)
        pay = "S->payload, S->paylen" if payload else "NULL, 0"
        emit("if (b.overflow) return 0;", 1)
        emit("uint32_t n = p4n_bytes(&b);", 1)
        if algo in CRCS:
            self.crc_init.append(f"p4n_crc_set(&p->crcs[{ix}], {', '.join(hex(v) for v in CRCS[algo])});")
            emit(f"return p4n_crc_run(&p->crcs[{ix}], buf, n, {pay});", 1)
        elif algo in ("csum16", "cksum16"):
            emit(f"return p4n_csum16(buf, n, {pay});", 1)
        elif algo in ("xor16", "xor32"):
            emit(f"return p4n_xor_words({2 if algo == 'xor16' else 4}, buf, n, {pay});", 1)
        elif algo == "identity":
            emit(f"return p4n_identity(buf, n, {pay});", 1)
        else:  # round_robin: 0, 1, 2, ... whatever the input
            emit("(void)n;", 1)
            emit(f"return p->rr[{ix}]++;", 1)
        emit("}")
        emit("")
