"""BMv2 JSON -> the packet-header-vector layout the generated code works on.

A packet's state is one flat Python list `F` ("the PHV"): for every header instance
a validity slot followed by one slot per field (an int; signed fields hold their
signed value), a bit-length slot after each varbit field, and one "next index" slot
per header stack / header-union stack. Generated code refers to slots by constant
index, so field access is a single list subscript.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import ProgramError

#: Core error codes BMv2 knows even when the JSON does not list them.
CORE_ERRORS = {
    "NoError": 0, "PacketTooShort": 1, "NoMatch": 2, "StackOutOfBounds": 3,
    "HeaderTooShort": 4, "ParserTimeout": 5, "ParserInvalidArgument": 6,
}


@dataclass
class FieldInfo:
    """One field of one header instance."""

    name: str
    width: int            # bits; for a varbit field, its maximum width
    signed: bool
    slot: int
    varbit: bool = False
    len_slot: int = -1    # varbit only: slot holding the current width in bits

    @property
    def mask(self) -> int:
        """All-ones mask of the field width."""
        return (1 << self.width) - 1


@dataclass
class HeaderInfo:
    """One header (or metadata) instance."""

    name: str
    id: int
    type_name: str
    metadata: bool
    valid_slot: int
    fields: list[FieldInfo]
    by_name: dict[str, FieldInfo]
    fixed_bits: int                   # bits of all non-varbit fields
    max_length: int | None = None     # bytes, varbit headers only
    union_siblings: list[int] = field(default_factory=list)  # other members' ids

    @property
    def has_varbit(self) -> bool:
        """Whether the header has a varbit field."""
        return any(f.varbit for f in self.fields)

    @property
    def nbytes(self) -> int:
        """Wire size of a fixed-size header."""
        return (self.fixed_bits + 7) // 8


@dataclass
class StackInfo:
    """A header stack (or header-union stack: then `members` are union names)."""

    name: str
    header_ids: list[int]
    count_slot: int


@dataclass
class UnionInfo:
    """A header union instance: its member header ids in declaration order."""

    name: str
    header_ids: list[int]
    member_names: list[str]


class Layout:
    """Slot assignment for every header, stack and union of a BMv2 JSON program."""

    def __init__(self, js: dict[str, Any]) -> None:
        types = {t["name"]: t for t in js.get("header_types", [])}
        self.headers: list[HeaderInfo] = []
        self.by_name: dict[str, HeaderInfo] = {}
        self.by_id: dict[int, HeaderInfo] = {}
        slot = 0
        for h in js.get("headers", []):
            tname = h["header_type"]
            if tname not in types:
                raise ProgramError(f"header {h['name']!r}: unknown header_type {tname!r}")
            htype = types[tname]
            valid_slot = slot
            slot += 1
            fields: list[FieldInfo] = []
            fixed = 0
            for fdesc in htype.get("fields", []):
                fname, width = fdesc[0], fdesc[1]
                signed = bool(fdesc[2]) if len(fdesc) > 2 else False
                if width == "*":
                    maxlen = htype.get("max_length")
                    if maxlen is None:
                        raise ProgramError(f"header type {tname!r}: varbit field {fname!r} "
                                           f"without max_length")
                    fi = FieldInfo(fname, 0, False, slot, varbit=True, len_slot=slot + 1)
                    slot += 2
                else:
                    fi = FieldInfo(fname, int(width), signed, slot)
                    fixed += int(width)
                    slot += 1
                fields.append(fi)
            info = HeaderInfo(h["name"], h["id"], tname, bool(h.get("metadata", False)),
                              valid_slot, fields, {f.name: f for f in fields}, fixed)
            if info.has_varbit:
                info.max_length = int(htype["max_length"])
                vb = next(f for f in fields if f.varbit)
                vb.width = info.max_length * 8 - fixed
            self.headers.append(info)
            self.by_name[info.name] = info
            self.by_id[info.id] = info

        self.stacks: dict[str, StackInfo] = {}
        for s in js.get("header_stacks", []):
            self.stacks[s["name"]] = StackInfo(s["name"], list(s["header_ids"]), slot)
            slot += 1

        self.unions: dict[str, UnionInfo] = {}
        union_types = {u["name"]: u for u in js.get("header_union_types", [])}
        self.union_by_id: dict[int, UnionInfo] = {}
        for u in js.get("header_unions", []):
            utype = union_types.get(u["union_type"], {"headers": []})
            members = [m[0] for m in utype.get("headers", [])]
            info = UnionInfo(u["name"], list(u["header_ids"]), members)
            self.unions[u["name"]] = info
            self.union_by_id[u["id"]] = info
            for hid in info.header_ids:
                self.by_id[hid].union_siblings = [x for x in info.header_ids if x != hid]

        self.union_stacks: dict[str, StackInfo] = {}
        for s in js.get("header_union_stacks", []):
            self.union_stacks[s["name"]] = StackInfo(s["name"], list(s["header_union_ids"]), slot)
            slot += 1

        self.nslots = slot
        self.aliases: dict[str, tuple[str, str]] = {
            a[0]: (a[1][0], a[1][1]) for a in js.get("field_aliases", [])}
        self.errors = dict(CORE_ERRORS)
        self.errors.update({e[0]: e[1] for e in js.get("errors", [])})

    # -- lookups --------------------------------------------------------------
    def header(self, name: str) -> HeaderInfo:
        """Header instance by name, or ProgramError."""
        try:
            return self.by_name[name]
        except KeyError:
            raise ProgramError(f"unknown header instance {name!r}") from None

    def field(self, hname: str, fname: str) -> FieldInfo:
        """Field by (header, field) name; `$valid$` gives the validity slot."""
        h = self.header(hname)
        if fname == "$valid$":
            return FieldInfo("$valid$", 1, False, h.valid_slot)
        try:
            return h.by_name[fname]
        except KeyError:
            raise ProgramError(f"header {hname!r} has no field {fname!r}") from None

    def find_field(self, dotted: str) -> FieldInfo | None:
        """Resolve a target-required name like `standard_metadata.egress_spec`.

        Field aliases (as p4c writes for `intrinsic_metadata.*`/`queueing_metadata.*`)
        are tried first; None when the program has no such field.
        """
        if dotted in self.aliases:
            hname, fname = self.aliases[dotted]
        else:
            hname, _, fname = dotted.partition(".")
        h = self.by_name.get(hname)
        if h is None or fname not in h.by_name:
            return None
        return h.by_name[fname]

    def template(self) -> list:
        """The PHV of a fresh packet: all zero, metadata valid, headers invalid."""
        phv: list = [0] * self.nslots
        for h in self.headers:
            phv[h.valid_slot] = h.metadata
        return phv

    def metadata_slots(self) -> list[int]:
        """Every field slot of every metadata header (what BMv2 resets)."""
        return [f.slot for h in self.headers if h.metadata for f in h.fields]
