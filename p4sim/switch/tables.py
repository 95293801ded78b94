"""Match-action tables and action profiles with BMv2's lookup rules.

* exact: one dict lookup on the key tuple;
* lpm: longest prefix first (one dict per prefix length present);
* ternary / range / optional (BMv2 tables of match_type `ternary` or `range`): the
  matching entry with the lowest priority value wins (BMv2: "a high priority
  translates into a low numerical value"), ties going to the older entry;
* a miss runs the default entry; direct counters and meters only count hits;
* indirect tables run an action-profile member; with a selector, a group's member is
  `members_sorted_by_handle[hash % len(group)]` (BMv2's `get_nth`).
Handles are the lowest free non-negative integers, as BMv2 allocates them.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import match as m
from .errors import (BadActionData, BadMatch, DuplicateEntry, InUse, NoSuchEntry,
                     NoSuchName, StateError, TableFull)


#: Keys remembered per ternary/range table (the cache empties when full or changed).
SCAN_CACHE_SIZE = 4096


class HandleAllocator:
    """Lowest-free-first handle numbers, like BMv2's HandleMgr."""

    def __init__(self) -> None:
        self._next = 0
        self._free: list[int] = []

    def peek(self) -> int:
        """The handle `take()` would return, without taking it."""
        return self._free[0] if self._free else self._next

    def take(self) -> int:
        """Allocate the lowest free handle."""
        if self._free:
            return heapq.heappop(self._free)
        self._next += 1
        return self._next - 1

    def release(self, handle: int) -> None:
        """Give `handle` back."""
        heapq.heappush(self._free, handle)

    def reset(self) -> None:
        """Forget every handle (after a table clear)."""
        self._next = 0
        self._free.clear()


@dataclass
class ActionInfo:
    """A compiled action: name, id, parameter widths and its generated function."""

    name: str
    id: int
    widths: list[int]
    fn: Callable


class ActionRef:
    """An action bound to its data: what a hit (or a miss) runs.

    `fn` and `id` are copied out of `info` because generated code reads them per packet.
    """

    __slots__ = ("info", "args", "fn", "id")

    def __init__(self, info: ActionInfo, args: tuple) -> None:
        self.info = info
        self.args = args
        self.fn = info.fn
        self.id = info.id


def lookup_mode(match_type: str, kinds: list[str]) -> str:
    """How a table is searched: `exact` (dict), `lpm` (dict per prefix length) or
    `scan` (priority-ordered list, for ternary/range/optional keys)."""
    if match_type in ("ternary", "range") or any(k in ("ternary", "range", "optional")
                                                 for k in kinds):
        return "scan"
    return "lpm" if "lpm" in kinds else "exact"


@dataclass
class Entry:
    """Public view of a table entry (see docs/engine-api.md)."""

    handle: int
    match: list
    action: str | None
    args: list[int]
    priority: int | None = None
    member: int | None = None
    group: int | None = None


def check_args(info: ActionInfo, args: list[int], where: str) -> tuple:
    """Validate action data against the action's parameter widths."""
    if len(args) != len(info.widths):
        raise BadActionData(f"{where}: action {info.name!r} takes {len(info.widths)} "
                            f"argument(s), got {len(args)}")
    out = []
    for i, (value, width) in enumerate(zip(args, info.widths)):
        if not isinstance(value, int) or value < 0 or value >> width:
            raise BadActionData(f"{where}: argument {i} of action {info.name!r} "
                                f"({value!r}) does not fit in {width} bits")
        out.append(value)
    return tuple(out)


class ActionProfile:
    """Members (action + data) and groups of members, shared by indirect tables."""

    def __init__(self, name: str, max_size: int, actions: dict[str, ActionInfo],
                 selector: Callable | None) -> None:
        self.name = name
        self.max_size = max_size
        self.actions = actions
        self.selector = selector          # generated calc function, or None
        self.members: dict[int, ActionRef] = {}
        self.groups: dict[int, list[int]] = {}   # sorted member handles
        self.mbr_refs: dict[int, int] = {}       # member -> #groups + #entries using it
        self.grp_refs: dict[int, int] = {}
        self._mbr_h = HandleAllocator()
        self._grp_h = HandleAllocator()

    def _action(self, name: str) -> ActionInfo:
        info = self.actions.get(name)
        if info is None:
            raise BadActionData(f"action profile {self.name!r}: unknown action {name!r}")
        return info

    def member(self, mbr: int) -> ActionRef:
        """The member with handle `mbr`, or NoSuchEntry."""
        if mbr not in self.members:
            raise NoSuchEntry(f"action profile {self.name!r}: no member {mbr}")
        return self.members[mbr]

    def check_group(self, grp: int) -> list[int]:
        """Group `grp`'s sorted member handles, or NoSuchEntry."""
        if grp not in self.groups:
            raise NoSuchEntry(f"action profile {self.name!r}: no group {grp}")
        return self.groups[grp]

    def add_member(self, action: str, args: list[int]) -> int:
        """New member running `action` with `args`; returns its handle."""
        info = self._action(action)
        data = check_args(info, args, f"action profile {self.name!r}")
        if self.max_size and len(self.members) >= self.max_size:
            raise TableFull(f"action profile {self.name!r} is full ({self.max_size} members)")
        h = self._mbr_h.take()
        self.members[h] = ActionRef(info, data)
        self.mbr_refs[h] = 0
        return h

    def modify_member(self, mbr: int, action: str, args: list[int]) -> None:
        """Replace the action and data of member `mbr`."""
        self.member(mbr)
        info = self._action(action)
        data = check_args(info, args, f"action profile {self.name!r}")
        self.members[mbr] = ActionRef(info, data)

    def delete_member(self, mbr: int) -> None:
        """Delete an unreferenced member."""
        self.member(mbr)
        if self.mbr_refs[mbr]:
            raise InUse(f"action profile {self.name!r}: member {mbr} is still used")
        del self.members[mbr]
        del self.mbr_refs[mbr]
        self._mbr_h.release(mbr)

    def create_group(self) -> int:
        """New empty group (selector profiles only)."""
        if self.selector is None:
            raise StateError(f"action profile {self.name!r} has no selector: no groups")
        h = self._grp_h.take()
        self.groups[h] = []
        self.grp_refs[h] = 0
        return h

    def delete_group(self, grp: int) -> None:
        """Delete an unreferenced group, releasing its members."""
        members = self.check_group(grp)
        if self.grp_refs[grp]:
            raise InUse(f"action profile {self.name!r}: group {grp} is still used")
        for mbr in members:
            self.mbr_refs[mbr] -= 1
        del self.groups[grp]
        del self.grp_refs[grp]
        self._grp_h.release(grp)

    def add_member_to_group(self, mbr: int, grp: int) -> None:
        """Add member `mbr` to group `grp`."""
        self.member(mbr)
        members = self.check_group(grp)
        if mbr in members:
            raise DuplicateEntry(f"action profile {self.name!r}: member {mbr} already "
                                 f"in group {grp}")
        members.append(mbr)
        members.sort()
        self.mbr_refs[mbr] += 1

    def remove_member_from_group(self, mbr: int, grp: int) -> None:
        """Remove member `mbr` from group `grp`."""
        self.member(mbr)
        members = self.check_group(grp)
        if mbr not in members:
            raise NoSuchEntry(f"action profile {self.name!r}: member {mbr} not in group {grp}")
        members.remove(mbr)
        self.mbr_refs[mbr] -= 1

    def choose(self, grp: int, F: list, S: Any) -> ActionRef | None:
        """The member a packet gets from group `grp` (None for an empty group)."""
        members = self.groups[grp]
        if not members:
            return None
        return self.members[members[self.selector(F, S) % len(members)]]


class _Rec:
    """Internal table entry."""

    __slots__ = ("handle", "match", "priority", "ref", "mbr", "grp", "counter", "meter",
                 "dkey", "checks")

    def __init__(self, handle: int, match_: list, priority: int | None) -> None:
        self.handle = handle
        self.match = match_
        self.priority = priority
        self.ref: ActionRef | None = None
        self.mbr: int | None = None
        self.grp: int | None = None
        self.counter = [0, 0]
        self.meter: Any = None
        self.dkey: Any = None
        self.checks: tuple = ()


@dataclass
class KeyField:
    """One element of a table key."""

    name: str
    match_type: str   # exact, lpm, ternary, range, optional, valid
    width: int


class Table:
    """A BMv2 match table: entries, default entry, lookup and `apply`."""

    def __init__(self, tjs: dict, keys: list[KeyField], actions: dict[int, ActionInfo],
                 profile: ActionProfile | None,
                 meter_factory: Callable[[], Any] | None, meter_slot: int | None) -> None:
        self.name: str = tjs["name"]
        self.id = tjs.get("id")
        self.keys = keys
        self.match_type = tjs.get("match_type", "exact")
        self.kind = tjs.get("type", "simple")
        self.max_size = int(tjs.get("max_size", 0)) or 1 << 24
        self.with_counters = bool(tjs.get("with_counters", False))
        self.profile = profile
        self.meter_factory = meter_factory
        self.meter_slot = meter_slot
        self.actions = {actions[i].name: actions[i] for i in tjs.get("action_ids", [])
                        if i in actions}
        self.next_tables: dict[str, str | None] = dict(tjs.get("next_tables", {}))
        self.base_default_next: str | None = tjs.get("base_default_next")
        self.hitmiss = "__HIT__" in self.next_tables or "__MISS__" in self.next_tables
        self.entries: dict[int, _Rec] = {}
        self._handles = HandleAllocator()
        self.const_entries = False
        self.default: ActionRef | None = None
        self.default_mbr: int | None = None
        self.default_grp: int | None = None
        self.default_const = False        # action function fixed
        self.default_entry_const = False  # action and data fixed
        self.initial_default: ActionRef | None = None
        lpm = [i for i, k in enumerate(keys) if k.match_type == "lpm"]
        self._lpm_idx = lpm[0] if lpm else None
        self.mode = lookup_mode(self.match_type, [k.match_type for k in keys])
        self._exact: dict = {}
        self._lpm: dict[int, dict] = {}
        self._plens: list[int] = []
        self._scan: list[_Rec] = []
        self._scan_cache: dict[tuple, _Rec | None] = {}
        self._single = len(keys) == 1
        self.next_for: dict[int, Any] = {}
        self.hit_next: Any = None
        self.miss_next: Any = None
        self.base_next: Any = None
        self.lookup: Callable[[tuple], _Rec | None] = {
            "exact": self._lookup_exact, "lpm": self._lookup_lpm,
            "scan": self._lookup_scan}[self.mode]

    # -- wiring ---------------------------------------------------------------
    def bind_nodes(self, resolve: Callable[[str | None], Any]) -> None:
        """Resolve next-node names into the generated node functions."""
        self.base_next = resolve(self.base_default_next)
        for info in self.actions.values():
            target = self.next_tables.get(info.name, self.base_default_next)
            self.next_for[info.id] = resolve(target)
        if self.hitmiss:
            self.hit_next = resolve(self.next_tables.get("__HIT__"))
            self.miss_next = resolve(self.next_tables.get("__MISS__"))

    # -- per packet -------------------------------------------------------------
    def _lookup_exact(self, k: tuple) -> _Rec | None:
        return self._exact.get(k)

    def _lookup_lpm(self, k: tuple) -> _Rec | None:
        i = self._lpm_idx
        full = (1 << self.keys[i].width) - 1
        if self._single:
            v = k[0]
            for plen in self._plens:
                rec = self._lpm[plen].get(v & (full ^ (full >> plen)))
                if rec is not None:
                    return rec
            return None
        for plen in self._plens:
            rec = self._lpm[plen].get(k[:i] + (k[i] & (full ^ (full >> plen)),) + k[i + 1:])
            if rec is not None:
                return rec
        return None

    def _lookup_scan(self, k: tuple) -> _Rec | None:
        # like BMv2's ternary cache: remember the result per key until the table changes
        cache = self._scan_cache
        if k in cache:
            return cache[k]
        found = None
        for rec in self._scan:
            for idx, lo, hi, rng in rec.checks:
                if rng:
                    if not lo <= k[idx] <= hi:
                        break
                elif k[idx] & hi != lo:
                    break
            else:
                found = rec
                break
        if len(cache) >= SCAN_CACHE_SIZE:
            cache.clear()
        cache[k] = found
        return found

    def miss(self, F: list, S: Any) -> Any:
        """Run the default entry; return the next control node."""
        ref = self.default
        if self.default_grp is not None:
            # BMv2: a lookup yielding an empty group runs no action
            ref = self.profile.choose(self.default_grp, F, S)
        if ref is None:
            return self.miss_next if self.hitmiss else self.base_next
        ref.fn(F, S, ref.args)
        return self.miss_next if self.hitmiss else self.next_for[ref.id]

    def hit(self, F: list, S: Any, rec: _Rec) -> Any:
        """Direct counter and meter, then the entry's action; return the next node.

        Generated table nodes inline this for plain tables; this general form serves
        indirect tables and tables with a direct meter.
        """
        if self.kind == "simple":
            ref = rec.ref
        elif rec.grp is not None:
            ref = self.profile.choose(rec.grp, F, S)
        else:
            ref = self.profile.members[rec.mbr]
        if self.with_counters:
            c = rec.counter
            c[0] += 1
            c[1] += S.ilen
        if self.meter_slot is not None and rec.meter is not None:
            F[self.meter_slot] = rec.meter.execute(S.ilen)
        if ref is None:
            return self.hit_next if self.hitmiss else self.base_next
        ref.fn(F, S, ref.args)
        return self.hit_next if self.hitmiss else self.next_for[ref.id]

    # -- control plane ------------------------------------------------------------
    def action(self, name: str) -> ActionInfo:
        """One of the actions the table lists, or BadActionData."""
        info = self.actions.get(name)
        if info is None:
            raise BadActionData(f"table {self.name!r}: action {name!r} is not one of its "
                                f"actions {sorted(self.actions)}")
        return info

    def _mutable(self) -> None:
        if self.const_entries:
            raise StateError(f"table {self.name!r} has const entries and cannot be changed")

    def _normalise(self, match_: list, priority: int | None) -> tuple[list, Any, tuple, int | None]:
        """Check a match list; return (match, duplicate key, scan checks, priority)."""
        if len(match_) != len(self.keys):
            raise BadMatch(f"table {self.name!r}: expected {len(self.keys)} match "
                           f"field(s), got {len(match_)}")
        norm: list = []
        checks = []
        plen_total = None
        for i, (mv, kf) in enumerate(zip(match_, self.keys)):
            where = f"table {self.name!r}, key field {i} ({kf.name})"
            full = (1 << kf.width) - 1
            kind = kf.match_type

            def fits(v: int) -> None:
                if not isinstance(v, int) or v < 0 or v > full:
                    raise BadMatch(f"{where}: value {v!r} does not fit in {kf.width} bits")
            if kind == "valid":
                if isinstance(mv, m.Valid):
                    val = 1 if mv.value else 0
                elif isinstance(mv, m.Exact) and mv.value in (0, 1):
                    val = mv.value
                else:
                    raise BadMatch(f"{where}: expected a Valid match, got {mv!r}")
                norm.append(m.Valid(bool(val)))
                checks.append((i, val, 1, False))
            elif kind == "exact":
                if not isinstance(mv, m.Exact):
                    raise BadMatch(f"{where}: expected an Exact match, got {mv!r}")
                fits(mv.value)
                norm.append(mv)
                checks.append((i, mv.value, full, False))
            elif kind == "lpm":
                if isinstance(mv, m.Exact):
                    mv = m.Lpm(mv.value, kf.width)
                if not isinstance(mv, m.Lpm):
                    raise BadMatch(f"{where}: expected an Lpm match, got {mv!r}")
                fits(mv.value)
                if not 0 <= mv.prefix_len <= kf.width:
                    raise BadMatch(f"{where}: prefix length {mv.prefix_len} outside "
                                   f"0..{kf.width}")
                pmask = full ^ (full >> mv.prefix_len)
                mv = m.Lpm(mv.value & pmask, mv.prefix_len)
                norm.append(mv)
                plen_total = mv.prefix_len
                checks.append((i, mv.value, pmask, False))
            elif kind in ("ternary", "optional"):
                if isinstance(mv, m.Exact):
                    val, mask = mv.value, full
                elif isinstance(mv, m.Optional):
                    val, mask = mv.value, 0 if mv.wildcard else full
                elif isinstance(mv, m.Ternary):
                    val, mask = mv.value, mv.mask
                elif isinstance(mv, m.Lpm) and kind == "ternary":
                    val, mask = mv.value, full ^ (full >> mv.prefix_len)
                else:
                    raise BadMatch(f"{where}: expected a Ternary match, got {mv!r}")
                fits(val)
                fits(mask)
                norm.append(m.Ternary(val & mask, mask) if kind == "ternary"
                            else (mv if isinstance(mv, m.Optional) else m.Optional(val, mask == 0)))
                checks.append((i, val & mask, mask, False))
            elif kind == "range":
                if isinstance(mv, m.Exact):
                    mv = m.Range(mv.value, mv.value)
                if not isinstance(mv, m.Range):
                    raise BadMatch(f"{where}: expected a Range match, got {mv!r}")
                fits(mv.low)
                fits(mv.high)
                if mv.low > mv.high:
                    raise BadMatch(f"{where}: range low {mv.low} > high {mv.high}")
                norm.append(mv)
                checks.append((i, mv.low, mv.high, True))
            else:
                raise BadMatch(f"{where}: unsupported match kind {kind!r}")
        if self.mode == "scan":
            if priority is None:
                raise BadMatch(f"table {self.name!r}: a {self.match_type} table needs a priority")
            dkey = (tuple((c[1], c[2]) for c in checks), priority)
        else:
            priority = None
            if self.mode == "lpm":
                dkey = (plen_total, tuple(c[1] for c in checks))
            else:
                dkey = tuple(c[1] for c in checks)
        return norm, dkey, tuple(checks), priority

    def _index(self, rec: _Rec) -> None:
        if self.mode == "exact":
            self._exact[rec.dkey] = rec
        elif self.mode == "lpm":
            plen, values = rec.dkey
            bucket = self._lpm.setdefault(plen, {})
            bucket[values[0] if self._single else values] = rec
            self._plens = sorted(self._lpm, reverse=True)
        else:
            self._scan.append(rec)
            self._scan.sort(key=lambda r: (r.priority, r.handle))
            self._scan_cache.clear()

    def _unindex(self, rec: _Rec) -> None:
        if self.mode == "exact":
            del self._exact[rec.dkey]
        elif self.mode == "lpm":
            plen, values = rec.dkey
            bucket = self._lpm[plen]
            del bucket[values[0] if self._single else values]
            if not bucket:
                del self._lpm[plen]
                self._plens = sorted(self._lpm, reverse=True)
        else:
            self._scan.remove(rec)
            self._scan_cache.clear()

    def _exists(self, dkey: Any) -> bool:
        if self.mode == "exact":
            return dkey in self._exact
        if self.mode == "lpm":
            plen, values = dkey
            return (values[0] if self._single else values) in self._lpm.get(plen, {})
        return any(r.dkey == dkey for r in self._scan)

    def _new_rec(self, match_: list, priority: int | None) -> _Rec:
        if not self.keys:
            raise BadMatch(f"table {self.name!r} has no key: entries cannot be added")
        norm, dkey, checks, priority = self._normalise(match_, priority)
        if self._exists(dkey):
            raise DuplicateEntry(f"table {self.name!r}: an entry with this match key "
                                 f"already exists")
        if len(self.entries) >= self.max_size:
            raise TableFull(f"table {self.name!r} is full ({self.max_size} entries)")
        rec = _Rec(self._handles.peek(), norm, priority)
        rec.dkey = dkey
        rec.checks = checks
        if self.meter_factory is not None:
            rec.meter = self.meter_factory()
        return rec

    def _commit(self, rec: _Rec) -> int:
        rec.handle = self._handles.take()
        self.entries[rec.handle] = rec
        self._index(rec)
        return rec.handle

    def add(self, match_: list, action: str, args: list[int], priority: int | None) -> int:
        """Add a direct entry; returns its handle."""
        self._mutable()
        if self.kind != "simple":
            raise StateError(f"table {self.name!r} is indirect: use table_indirect_add")
        info = self.action(action)
        data = check_args(info, args, f"table {self.name!r}")
        rec = self._new_rec(match_, priority)
        rec.ref = ActionRef(info, data)
        return self._commit(rec)

    def add_indirect(self, match_: list, mbr: int | None, grp: int | None,
                     priority: int | None) -> int:
        """Add an entry pointing to a member or a group; returns its handle."""
        self._mutable()
        if self.profile is None:
            raise StateError(f"table {self.name!r} is not indirect")
        if grp is not None:
            if self.kind != "indirect_ws":
                raise StateError(f"table {self.name!r} has no selector: no groups")
            if not self.profile.check_group(grp):
                raise StateError(f"table {self.name!r}: group {grp} is empty (BMv2 refuses "
                                 f"entries pointing to an empty group)")
        else:
            self.profile.member(mbr)
        rec = self._new_rec(match_, priority)
        rec.mbr, rec.grp = mbr, grp
        if grp is not None:
            self.profile.grp_refs[grp] += 1
        else:
            self.profile.mbr_refs[mbr] += 1
        return self._commit(rec)

    def get(self, handle: int) -> _Rec:
        """Entry `handle`, or NoSuchEntry."""
        rec = self.entries.get(handle)
        if rec is None:
            raise NoSuchEntry(f"table {self.name!r}: no entry with handle {handle}")
        return rec

    def modify(self, handle: int, action: str, args: list[int]) -> None:
        """Replace a direct entry's action and data."""
        self._mutable()
        rec = self.get(handle)
        if self.kind != "simple":
            raise StateError(f"table {self.name!r} is indirect: modify its members")
        info = self.action(action)
        rec.ref = ActionRef(info, check_args(info, args, f"table {self.name!r}"))

    def delete(self, handle: int) -> None:
        """Remove entry `handle`, releasing any member/group reference."""
        self._mutable()
        rec = self.get(handle)
        self._unindex(rec)
        del self.entries[handle]
        self._handles.release(handle)
        if rec.grp is not None:
            self.profile.grp_refs[rec.grp] -= 1
        elif rec.mbr is not None:
            self.profile.mbr_refs[rec.mbr] -= 1

    def clear(self) -> None:
        """Remove every entry."""
        self._mutable()
        for handle in list(self.entries):
            self.delete(handle)
        self._handles.reset()

    def set_default(self, action: str, args: list[int]) -> None:
        """Set the default action (respecting the JSON const flags)."""
        info = self.action(action)
        data = check_args(info, args, f"table {self.name!r}")
        if self.default_entry_const:
            raise StateError(f"table {self.name!r}: the default entry is const")
        if self.default_const and (self.default is None or self.default.info.name != action):
            raise BadActionData(f"table {self.name!r}: the default action is const "
                                f"({self.default.info.name if self.default else None!r})")
        self._release_default()
        self.default = ActionRef(info, data)

    def reset_default(self) -> None:
        """Back to the default entry given by the JSON."""
        self._release_default()
        self.default = self.initial_default

    def _release_default(self) -> None:
        """Drop the reference an indirect default entry holds on its member/group."""
        if self.default_mbr is not None:
            self.profile.mbr_refs[self.default_mbr] -= 1
        if self.default_grp is not None:
            self.profile.grp_refs[self.default_grp] -= 1
        self.default_mbr = self.default_grp = None

    def set_default_indirect(self, mbr: int | None, grp: int | None) -> None:
        """Default entry of an indirect table: a member, or (with a selector) a group."""
        if self.profile is None:
            raise StateError(f"table {self.name!r} is not indirect")
        if self.default_entry_const:
            raise StateError(f"table {self.name!r}: the default entry is const")
        if grp is not None:
            if self.kind != "indirect_ws":
                raise StateError(f"table {self.name!r} has no action selector")
            self.profile.check_group(grp)
            self._release_default()
            self.default, self.default_grp = None, grp
            self.profile.grp_refs[grp] += 1
            return
        ref = self.profile.member(mbr)
        self.action(ref.info.name)
        self._release_default()
        self.default, self.default_mbr = ref, mbr
        self.profile.mbr_refs[mbr] += 1

    def public(self, rec: _Rec) -> Entry:
        """The public `Entry` view of an internal entry."""
        if rec.ref is not None:
            return Entry(rec.handle, list(rec.match), rec.ref.info.name, list(rec.ref.args),
                         rec.priority)
        return Entry(rec.handle, list(rec.match), None, [], rec.priority, rec.mbr, rec.grp)

    def list_entries(self) -> list[Entry]:
        """Public views of all entries, by handle."""
        return [self.public(self.entries[h]) for h in sorted(self.entries)]


def lookup_name(mapping: dict, name: str, what: str) -> Any:
    """`mapping[name]` or a NoSuchName error naming the kind of object."""
    try:
        return mapping[name]
    except KeyError:
        raise NoSuchName(f"no {what} named {name!r}") from None
