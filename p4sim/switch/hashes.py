"""Hash algorithms with BMv2's numbers (`calculations.cpp`).

Every function takes the byte-serialised input (fields concatenated bit-wise, MSB
first, zero-padded at the end to a whole byte, exactly as BMv2's BufBuilder does) and
returns an unsigned integer. `crc16` is CRC-16/ARC, `crc32` is zlib's CRC-32,
`crcCCITT` is CRC-16/CCITT-FALSE, `csum16` the Internet checksum.
"""

from __future__ import annotations

import binascii
import random as _random
import zlib
from collections.abc import Callable

from .errors import ProgramError

HashFn = Callable[[bytes], int]


def _reflect(value: int, nbits: int) -> int:
    out = 0
    for _ in range(nbits):
        out = (out << 1) | (value & 1)
        value >>= 1
    return out


class Crc:
    """A table-driven CRC with BMv2's parameter set (poly, init, xor-out, reflections).

    The parameters can be changed at run time like BMv2's `set_crcNN_parameters`.
    """

    def __init__(self, width: int, poly: int, init: int, xor_out: int,
                 reflect_in: bool, reflect_out: bool) -> None:
        self.width = width
        self.set_parameters(poly, init, xor_out, reflect_in, reflect_out)

    def set_parameters(self, poly: int, init: int, xor_out: int,
                       reflect_in: bool, reflect_out: bool) -> None:
        """Replace the CRC parameters (and recompute the lookup table)."""
        w = self.width
        top = 1 << (w - 1)
        mask = (1 << w) - 1
        table = []
        for dividend in range(256):
            rem = (dividend << (w - 8)) & mask
            for _ in range(8):
                rem = ((rem << 1) ^ poly) & mask if rem & top else (rem << 1) & mask
            table.append(rem)
        self._table = table
        self._init = init & mask
        self._xor = xor_out & mask
        self._refin = [_reflect(b, 8) for b in range(256)] if reflect_in else list(range(256))
        self._refout = reflect_out
        self._mask = mask

    def __call__(self, data: bytes) -> int:
        w = self.width
        shift = w - 8
        mask = self._mask
        table = self._table
        refin = self._refin
        rem = self._init
        for byte in data:
            rem = table[refin[byte] ^ (rem >> shift)] ^ ((rem << 8) & mask)
        if self._refout:
            rem = _reflect(rem, w)
        return rem ^ self._xor


def crc32(data: bytes) -> int:
    """BMv2 `crc32` (= zlib CRC-32)."""
    return zlib.crc32(data)


def crc_ccitt(data: bytes) -> int:
    """BMv2 `crcCCITT` (CRC-16/CCITT-FALSE)."""
    return binascii.crc_hqx(data, 0xFFFF)


def csum16(data: bytes) -> int:
    """Internet checksum (ones' complement of the ones' complement sum of 16-bit words)."""
    if len(data) & 1:
        data = data + b"\x00"
    return csum16_int(int.from_bytes(data, "big"))


def csum16_int(value: int) -> int:
    """`csum16` of the bytes of `value` (whose bit length is a multiple of 16).

    Since 2**16 = 1 (mod 0xFFFF), the ones' complement sum of the 16-bit words is the
    value modulo 0xFFFF (0xFFFF instead of 0 unless every word is 0); one big-integer
    modulo replaces the word loop.
    """
    folded = value % 0xFFFF
    if folded == 0 and value:
        folded = 0xFFFF
    return (~folded) & 0xFFFF


def _xor_words(nbytes: int) -> HashFn:
    def xor_hash(data: bytes) -> int:
        """XOR of the big-endian words, the last one zero-padded."""
        out = 0
        for i in range(0, len(data), nbytes):
            chunk = data[i:i + nbytes]
            out ^= int.from_bytes(chunk.ljust(nbytes, b"\x00"), "big")
        return out
    return xor_hash


def identity(data: bytes) -> int:
    """BMv2 `identity`: the first (at most) 8 bytes read as a big-endian integer."""
    return int.from_bytes(data[:8], "big")


def _random_hash(data: bytes) -> int:
    return _random.getrandbits(64)


class RoundRobin:
    """BMv2 `round_robin`: 0, 1, 2, ... regardless of the input."""

    def __init__(self) -> None:
        self.next = 0

    def __call__(self, data: bytes) -> int:
        value = self.next
        self.next += 1
        return value


class RoundRobinConsistent:
    """BMv2 `round_robin_consistent`: a new number per distinct input, stable after."""

    def __init__(self) -> None:
        self.seen: dict[bytes, int] = {}

    def __call__(self, data: bytes) -> int:
        return self.seen.setdefault(bytes(data), len(self.seen))


def make_hash(algo: str) -> HashFn:
    """Return a fresh hash function for a BMv2 algorithm name.

    Custom CRCs and round-robin hashes carry state, so each calculation gets its own.
    """
    if algo == "crc16":
        return Crc(16, 0x8005, 0, 0, True, True)
    if algo == "crc32":
        return crc32
    if algo == "crcCCITT":
        return crc_ccitt
    if algo in ("csum16", "cksum16"):
        return csum16
    if algo == "xor16":
        return _xor_words(2)
    if algo == "xor32":
        return _xor_words(4)
    if algo == "identity":
        return identity
    if algo == "random":
        return _random_hash
    if algo == "crc8_custom":
        return Crc(8, 0x07, 0, 0, False, False)
    if algo == "crc16_custom":
        return Crc(16, 0x8005, 0, 0, True, True)
    if algo == "crc32_custom":
        return Crc(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True)
    if algo == "crc64_custom":
        return Crc(64, 0x1B, 0, 0, True, True)
    if algo == "round_robin":
        return RoundRobin()
    if algo == "round_robin_consistent":
        return RoundRobinConsistent()
    raise ProgramError(f"unsupported hash algorithm {algo!r}")
