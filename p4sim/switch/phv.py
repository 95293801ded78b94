"""Run-time support for the code `codegen` generates: operations on the packet header
vector (PHV, the flat list `F` described in `program`) that are not worth inlining,
and the exceptions generated code raises.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from .program import Layout


class ParserException(Exception):
    """Raised by generated parser code; carries the error code and bytes parsed."""

    def __init__(self, code: int, pos: int) -> None:
        super().__init__(code)
        self.code = code
        self.pos = pos


class ExitPipeline(Exception):
    """The P4 `exit` statement: stops the current control (BMv2 `mark_for_exit`)."""


def sx(value: int, width: int) -> int:
    """Wrap `value` into a signed `width`-bit integer (two's complement)."""
    half = 1 << (width - 1)
    return ((value + half) & ((1 << width) - 1)) - half


def usat(value: int, width: int) -> int:
    """BMv2 `usat_cast`: clamp into the unsigned `width`-bit range."""
    top = (1 << width) - 1
    return 0 if value < 0 else top if value > top else value


def sat(value: int, width: int) -> int:
    """BMv2 `sat_cast`: clamp into the signed `width`-bit range."""
    lo = -(1 << (width - 1))
    hi = (1 << (width - 1)) - 1
    return lo if value < lo else hi if value > hi else value


def peek(data: bytes, pos: int, bitoff: int, width: int) -> int:
    """`width` bits starting `bitoff` bits after `pos`, zero beyond the packet end."""
    start = pos + (bitoff >> 3)
    lead = bitoff & 7
    nbytes = (lead + width + 7) >> 3
    chunk = data[start:start + nbytes]
    if len(chunk) < nbytes:
        chunk = chunk + b"\x00" * (nbytes - len(chunk))
    return (int.from_bytes(chunk, "big") >> (nbytes * 8 - lead - width)) & ((1 << width) - 1)


def shl(value: int, amount: int) -> int:
    """`value << amount`, without building huge integers for absurd run-time amounts
    (every P4 result is masked to at most a few thousand bits, so those give 0)."""
    return value << amount if amount < 4096 else 0


_p4log = logging.getLogger("p4sim.switch.log_msg")


def log_msg(fmt: str, values: tuple) -> None:
    """P4 `log_msg`: BMv2 prints it with --log-console; p4sim logs it at INFO."""
    if _p4log.isEnabledFor(logging.INFO):
        parts = fmt.split("{}")
        text = parts[0] + "".join(str(v) + p for v, p in zip(values, parts[1:]))
        _p4log.info("%s", text)


_random = random.random


def rng(lo: int, hi: int) -> int:
    """v1model `random(lo, hi)`: uniform on [lo, hi] (BMv2 leaves lo > hi unspecified;
    p4sim gives lo). Scaling `random()` is uniform to within 2**-53 for any span a P4
    field can hold up to 53 bits and much cheaper than `randint`; wider spans use it."""
    span = hi - lo + 1
    if span <= 0:
        return lo
    if span < 1 << 53:
        return lo + int(_random() * span)
    return random.randint(lo, hi)


class HeaderOps:
    """Run-time header operations for headers only known at run time (stack items).

    `info[hid]` = (valid_slot, field slots, wire bytes, sibling valid slots,
    varbit length slots) for every header id.
    """

    def __init__(self, layout: Layout) -> None:
        self.info: dict[int, tuple] = {}
        for h in layout.headers:
            self.info[h.id] = (
                h.valid_slot, tuple(f.slot for f in h.fields), h.nbytes,
                tuple(layout.by_id[s].valid_slot for s in h.union_siblings),
                tuple(f.len_slot for f in h.fields if f.varbit))

    def set_valid(self, F: list, S: Any, hid: int) -> None:
        """BMv2 `add_header`: zero an invalid header and make it valid."""
        vslot, slots, nbytes, siblings, lens = self.info[hid]
        if not F[vslot]:
            for s in slots:
                F[s] = 0
            for s in lens:
                F[s] = 0
            F[vslot] = True
            for s in siblings:
                F[s] = False
            S.plen += nbytes

    def set_invalid(self, F: list, S: Any, hid: int) -> None:
        """BMv2 `remove_header`."""
        vslot, _slots, nbytes, _siblings, _lens = self.info[hid]
        if F[vslot]:
            S.plen -= nbytes
            F[vslot] = False

    def copy(self, F: list, dst: int, src: int) -> None:
        """BMv2 `assign_header`: copy validity and (when valid) every field."""
        dv, dslots, _n, dsib, dlens = self.info[dst]
        sv, sslots, _n2, _ssib, slens = self.info[src]
        if not F[sv]:
            F[dv] = False
            return
        F[dv] = True
        for s in dsib:
            F[s] = False
        for d, s in zip(dslots, sslots):
            F[d] = F[s]
        for d, s in zip(dlens, slens):
            F[d] = F[s]

    def swap(self, F: list, a: int, b: int) -> None:
        """Exchange validity and fields of two headers of the same type."""
        av, aslots, _n, _as, alens = self.info[a]
        bv, bslots, _n2, _bs, blens = self.info[b]
        for x, y in zip((av,) + aslots + alens, (bv,) + bslots + blens):
            F[x], F[y] = F[y], F[x]

    def equal(self, F: list, a: int, b: int) -> bool:
        """BMv2 `==h`: both invalid, or both valid with equal fields."""
        av, aslots, _n, _as, _al = self.info[a]
        bv, bslots, _n2, _bs, _bl = self.info[b]
        if not F[av] or not F[bv]:
            return not F[av] and not F[bv]
        return all(F[x] == F[y] for x, y in zip(aslots, bslots))

    def _swap_elements(self, F: list, a: tuple, b: tuple) -> None:
        for x, y in zip(a, b):
            self.swap(F, x, y)

    def _invalidate(self, F: list, element: tuple) -> None:
        for hid in element:
            F[self.info[hid][0]] = False

    def push_front(self, F: list, elements: tuple, count_slot: int, num: int) -> None:
        """P4-16 `push_front(num)` as BMv2's StackP4_16 does it.

        `elements` are the stack items, each a tuple of header ids (one header for a
        header stack, the union's members for a header-union stack).
        """
        if num <= 0:
            return
        size = len(elements)
        F[count_slot] = min(size, F[count_slot] + num)
        for i in range(size - 1, num - 1, -1):
            self._swap_elements(F, elements[i], elements[i - num])
        for i in range(min(size, num)):
            self._invalidate(F, elements[i])

    def pop_front(self, F: list, elements: tuple, count_slot: int, num: int) -> None:
        """P4-16 `pop_front(num)` as BMv2's StackP4_16 does it (see `push_front`)."""
        if num <= 0:
            return
        size = len(elements)
        F[count_slot] -= min(F[count_slot], num)
        i = 0
        if num < size:
            for i in range(size - num):
                self._swap_elements(F, elements[i], elements[i + num])
            i = size - num
        for j in range(i, size):
            self._invalidate(F, elements[j])
