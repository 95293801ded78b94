"""Byte images through `struct`: how a fixed-size header, or a run of hash inputs, maps
onto one `struct.Struct` format.

The parser unpacks headers with these formats, the deparser and the calculations pack
with them. `struct` does the byte work in C, which makes extracting and emitting
headers several times faster than shifting one big integer per header.
"""

from __future__ import annotations

import struct

from ..errors import ProgramError
from ..program import FieldInfo, HeaderInfo
from .context import Context
from .expressions import field_bits

#: A chunk: the `struct` items (code, bytes) covering a run of fields or terms that
#: ends on a byte boundary, and those fields or terms (bits of the chunk's value).
Chunk = tuple[list[tuple[str, int]], list]


def _pieces(nbytes: int) -> list[tuple[str, int]]:
    """`struct` items (code, bytes) covering `nbytes` bytes, widest first."""
    out = []
    for size, code in ((8, "Q"), (4, "I"), (2, "H"), (1, "B")):
        while nbytes >= size:
            out.append((code, size))
            nbytes -= size
    return out


def _pack_args(chunks: list[Chunk], terms: list[list[tuple[str, int]]]) -> list[str]:
    """`struct.pack` arguments: each chunk's terms (code, bit width) joined into one
    value (left-aligned in the chunk's bytes), then cut into the chunk's items."""
    args = []
    for (pieces, _fields), chunk_terms in zip(chunks, terms):
        total = sum(size for _c, size in pieces) * 8
        shift = total
        parts = []
        for code, width in chunk_terms:
            shift -= width
            parts.append(f"(({code}) << {shift})" if shift else f"({code})")
        chunk = parts[0] if len(parts) == 1 else "(" + " | ".join(parts) + ")"
        if len(pieces) == 1:
            args.append(chunk)
            continue
        shift = total
        for _c, size in pieces:
            shift -= size * 8
            args.append(f"({chunk} >> {shift}) & {hex((1 << size * 8) - 1)}" if shift
                        else f"{chunk} & {hex((1 << size * 8) - 1)}")
    return args


def _format(chunks: list[Chunk]) -> str:
    return "!" + "".join(code for pieces, _f in chunks for code, _n in pieces)


class Structs:
    """The `struct.Struct`s of one program, bound as constants of its module."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._layouts: dict[str, list[Chunk]] = {}  # struct name -> chunks of a header
        self._packers: dict[str, str] = {}          # struct format -> name

    def header_layout(self, h: HeaderInfo) -> tuple[str, list[Chunk]]:
        """How fixed-size header `h` maps onto one `struct` format: (struct name,
        chunks). A header that is not a whole number of bytes ends in padding bits."""
        name = self.ctx.symbols.header_struct(h.id)
        if name in self._layouts:
            return name, self._layouts[name]
        chunks: list[Chunk] = []
        fields: list[FieldInfo] = []
        bits = 0
        for k, f in enumerate(h.fields):
            fields.append(f)
            bits += f.width
            if bits % 8 == 0 or k == len(h.fields) - 1:
                chunks.append((_pieces((bits + 7) // 8), fields))
                fields, bits = [], 0
        self.ctx.constants[name] = struct.Struct(_format(chunks))
        self._layouts[name] = chunks
        return name, chunks

    def pack_header(self, h: HeaderInfo) -> tuple[str, str]:
        """(struct name, argument list) packing header `h`'s fields for `struct.pack`."""
        st, chunks = self.header_layout(h)
        terms = [[(field_bits(f), f.width) for f in fields] for _pieces, fields in chunks]
        return st, ", ".join(_pack_args(chunks, terms))

    def pack_terms(self, terms: list[tuple[str, int]]) -> tuple[str, str]:
        """(struct name, argument list) packing `terms` ((code, bit width), a whole
        number of bytes in all) back to back, as the header code does."""
        chunks: list[Chunk] = []
        run: list[tuple[str, int]] = []
        bits = 0
        for term in terms:
            run.append(term)
            bits += term[1]
            if bits % 8 == 0:
                chunks.append((_pieces(bits // 8), run))
                run, bits = [], 0
        if run:
            raise ProgramError("internal: packed terms are not a whole number of bytes")
        fmt = _format(chunks)
        name = self._packers.setdefault(fmt, self.ctx.symbols.packer(len(self._packers)))
        self.ctx.constants[name] = struct.Struct(fmt)
        return name, ", ".join(_pack_args(chunks, [r for _p, r in chunks]))
