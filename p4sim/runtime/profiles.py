"""Action profiles and selectors: members, groups and one-shot action sets.

P4Runtime names members and groups by controller-chosen ids; the engine by handles.
This module keeps that mapping, the membership of groups and how many table entries
use each member or group (a member or group still in use cannot be deleted). One-shot
action selector programming (``action_profile_action_set``) is realised the way BMv2's
P4Runtime server does it: a hidden group of hidden members per entry, invisible to
Read of members and groups and destroyed with the entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

from p4sim.proto import p4r
from p4sim.runtime import codec
from p4sim.runtime.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Unimplemented,
)
from p4sim.runtime.schema import ActionInfo, ActionProfileInfo, Schema

Update = p4r.Update


@dataclass
class Member:
    handle: int
    action: ActionInfo
    args: list[int]
    groups: set[int] = field(default_factory=set)  # P4Runtime group ids holding this member
    entries: int = 0  # table entries (and defaults) pointing at it


@dataclass
class Group:
    handle: int
    members: dict[int, int]  # member id -> weight
    max_size: int
    entries: int = 0


@dataclass
class Profile:
    """Members and groups of one action profile; hidden ones back one-shot entries."""

    info: ActionProfileInfo
    members: dict[int, Member] = field(default_factory=dict)
    groups: dict[int, Group] = field(default_factory=dict)


@dataclass
class Target:
    """What an indirect entry points at: a member, a group or a hidden one-shot group."""

    kind: str  # "member" | "group" | "oneshot"
    ident: int = 0  # member or group id
    oneshot: tuple[int, list[int]] | None = None  # (engine group handle, engine member handles)


class Profiles:
    """P4Runtime view of the engine's action profiles."""

    def __init__(self, schema: Schema, switch, engine: Callable):
        """``engine(fn, *args)`` calls the engine, translating its errors to P4Runtime ones."""
        self.schema = schema
        self.switch = switch
        self._engine = engine
        self.profiles: dict[int, Profile] = {p.id: Profile(p) for p in schema.action_profiles}

    def write_member(self, kind: int, m: p4r.ActionProfileMember, policy_check: Callable[[int], None]) -> None:
        profile = self.get(m.action_profile_id)
        policy_check(profile.info.id)
        name = profile.info.name
        existing = profile.members.get(m.member_id)
        if kind in (Update.INSERT, Update.MODIFY):
            allowed = frozenset().union(*(self.schema.tables.get(t).entry_action_ids for t in profile.info.table_ids))
            info, args = codec.decode_action(self.schema, m.action, allowed, f"action profile '{name}' member {m.member_id}")
            if kind == Update.INSERT:
                if existing is not None:
                    raise AlreadyExists(f"action profile '{name}' already has member {m.member_id}")
                if profile.info.size and len(profile.members) >= profile.info.size:
                    raise ResourceExhausted(f"action profile '{name}' is full ({profile.info.size} members)")
                handle = self._engine(self.switch.act_prof_add_member, name, info.name, args)
                profile.members[m.member_id] = Member(handle, info, args)
            else:
                if existing is None:
                    raise NotFound(f"action profile '{name}' has no member {m.member_id}")
                self._engine(self.switch.act_prof_modify_member, name, existing.handle, info.name, args)
                existing.action, existing.args = info, args
        elif kind == Update.DELETE:
            if existing is None:
                raise NotFound(f"action profile '{name}' has no member {m.member_id}")
            if existing.groups or existing.entries:
                raise FailedPrecondition(
                    f"action profile '{name}' member {m.member_id} is still used by "
                    f"{len(existing.groups)} group(s) and {existing.entries} table entr(y/ies)"
                )
            self._engine(self.switch.act_prof_delete_member, name, existing.handle)
            del profile.members[m.member_id]
        else:
            raise InvalidArgument(f"update type {kind} is not INSERT, MODIFY or DELETE")

    def write_group(self, kind: int, g: p4r.ActionProfileGroup, policy_check: Callable[[int], None]) -> None:
        profile = self.get(g.action_profile_id)
        policy_check(profile.info.id)
        name = profile.info.name
        if not profile.info.with_selector:
            raise InvalidArgument(f"action profile '{name}' has no selector: it has no groups")
        existing = profile.groups.get(g.group_id)
        if kind == Update.DELETE:
            if existing is None:
                raise NotFound(f"action profile '{name}' has no group {g.group_id}")
            if existing.entries:
                raise FailedPrecondition(f"action profile '{name}' group {g.group_id} is still used by {existing.entries} table entr(y/ies)")
            self._set_group_members(profile, g.group_id, existing, {})
            self._engine(self.switch.act_prof_delete_group, name, existing.handle)
            del profile.groups[g.group_id]
            return
        if kind not in (Update.INSERT, Update.MODIFY):
            raise InvalidArgument(f"update type {kind} is not INSERT, MODIFY or DELETE")
        wanted: dict[int, int] = {}
        for mem in g.members:
            if mem.member_id not in profile.members:
                raise NotFound(f"action profile '{name}' group {g.group_id}: no member {mem.member_id}")
            if mem.member_id in wanted:
                raise InvalidArgument(f"action profile '{name}' group {g.group_id}: member {mem.member_id} listed twice")
            if mem.weight < 1:
                raise InvalidArgument(f"action profile '{name}' group {g.group_id}: member {mem.member_id} weight must be >= 1, got {mem.weight}")
            if mem.weight != 1:
                raise Unimplemented(f"action profile '{name}' group {g.group_id}: member weight {mem.weight}: only weight 1 is supported (as in BMv2)")
            wanted[mem.member_id] = mem.weight
        limit = profile.info.max_group_size
        max_size = g.max_size or (existing.max_size if existing and kind == Update.MODIFY else 0) or limit
        if g.max_size < 0 or (limit and max_size > limit):
            raise InvalidArgument(f"action profile '{name}' group {g.group_id}: max_size {g.max_size} exceeds the profile's max group size {limit}")
        if max_size and len(wanted) > max_size:
            raise ResourceExhausted(f"action profile '{name}' group {g.group_id}: {len(wanted)} members exceed max_size {max_size}")
        if kind == Update.INSERT:
            if existing is not None:
                raise AlreadyExists(f"action profile '{name}' already has group {g.group_id}")
            handle = self._engine(self.switch.act_prof_create_group, name)
            group = Group(handle, {}, max_size)
            try:
                self._set_group_members(profile, g.group_id, group, wanted)
            except Exception:
                self.switch.act_prof_delete_group(name, handle)
                raise
            profile.groups[g.group_id] = group
        else:
            if existing is None:
                raise NotFound(f"action profile '{name}' has no group {g.group_id}")
            self._set_group_members(profile, g.group_id, existing, wanted)
            existing.max_size = max_size

    def _set_group_members(self, profile: Profile, gid: int, group: Group, wanted: dict[int, int]) -> None:
        """Bring the group's membership to ``wanted``, undoing every step if one fails."""
        name = profile.info.name
        done: list[tuple[str, int]] = []
        try:
            for mid in [m for m in group.members if m not in wanted]:
                self._engine(self.switch.act_prof_remove_member_from_group, name, profile.members[mid].handle, group.handle)
                done.append(("removed", mid))
            for mid in [m for m in wanted if m not in group.members]:
                self._engine(self.switch.act_prof_add_member_to_group, name, profile.members[mid].handle, group.handle)
                done.append(("added", mid))
        except Exception:
            for what, mid in reversed(done):
                fn = self.switch.act_prof_add_member_to_group if what == "removed" else self.switch.act_prof_remove_member_from_group
                fn(name, profile.members[mid].handle, group.handle)
            raise
        for mid in group.members:
            profile.members[mid].groups.discard(gid)
        for mid in wanted:
            profile.members[mid].groups.add(gid)
        group.members = dict(wanted)

    def get(self, ident: int) -> Profile:
        """The profile with P4Runtime id ``ident`` (INVALID_ARGUMENT if unknown)."""
        info = self.schema.action_profiles.get(ident)
        return self.profiles[info.id]

    def read_members(self, req: p4r.ActionProfileMember) -> Iterator[p4r.ActionProfileMember]:
        profiles = [self.get(req.action_profile_id)] if req.action_profile_id else list(self.profiles.values())
        for profile in profiles:
            for mid, m in sorted(profile.members.items()):
                if req.member_id and mid != req.member_id:
                    continue
                yield p4r.ActionProfileMember(
                    action_profile_id=profile.info.id, member_id=mid, action=codec.encode_action(m.action, m.args)
                )

    def read_groups(self, req: p4r.ActionProfileGroup) -> Iterator[p4r.ActionProfileGroup]:
        profiles = [self.get(req.action_profile_id)] if req.action_profile_id else list(self.profiles.values())
        for profile in profiles:
            for gid, g in sorted(profile.groups.items()):
                if req.group_id and gid != req.group_id:
                    continue
                out = p4r.ActionProfileGroup(action_profile_id=profile.info.id, group_id=gid, max_size=g.max_size)
                for mid, weight in g.members.items():
                    out.members.add(member_id=mid, weight=weight)
                yield out

    def create_oneshot(self, profile: Profile, aset: p4r.ActionProfileActionSet, allowed: frozenset[int], what: str) -> Target:
        """A hidden group of hidden members realising a one-shot action set."""
        if not profile.info.with_selector:
            raise InvalidArgument(f"{what}: one-shot action sets need an action selector, '{profile.info.name}' is a plain profile")
        if not aset.action_profile_actions:
            raise InvalidArgument(f"{what}: empty one-shot action set")
        decoded = []
        for apa in aset.action_profile_actions:
            if apa.weight != 1:
                raise Unimplemented(f"{what}: one-shot weight {apa.weight}: only weight 1 is supported (as in BMv2)")
            decoded.append(codec.decode_action(self.schema, apa.action, allowed, what))
        if profile.info.max_group_size and len(decoded) > profile.info.max_group_size:
            raise ResourceExhausted(f"{what}: {len(decoded)} actions exceed max group size {profile.info.max_group_size}")
        grp = self._engine(self.switch.act_prof_create_group, profile.info.name)
        mbrs: list[int] = []
        try:
            for info, args in decoded:
                mbr = self._engine(self.switch.act_prof_add_member, profile.info.name, info.name, args)
                mbrs.append(mbr)
                self._engine(self.switch.act_prof_add_member_to_group, profile.info.name, mbr, grp)
        except Exception:
            self.destroy_oneshot(profile, grp, mbrs)
            raise
        return Target("oneshot", oneshot=(grp, mbrs))

    def destroy_oneshot(self, profile: Profile, grp: int, mbrs: list[int]) -> None:
        for mbr in mbrs:
            try:
                self.switch.act_prof_remove_member_from_group(profile.info.name, mbr, grp)
            except Exception:  # noqa: BLE001 - member never made it into the group
                pass
            self.switch.act_prof_delete_member(profile.info.name, mbr)
        self.switch.act_prof_delete_group(profile.info.name, grp)

    def acquire(self, profile_id: int, target: Target) -> None:
        """Count one more table entry (or default) pointing at the target."""
        profile = self.profiles[profile_id]
        if target.kind == "member":
            profile.members[target.ident].entries += 1
        elif target.kind == "group":
            profile.groups[target.ident].entries += 1

    def release(self, profile_id: int, target: Target | None) -> None:
        """The reverse of `acquire`; a one-shot target is destroyed."""
        if target is None:
            return
        profile = self.profiles[profile_id]
        if target.kind == "member" and target.ident in profile.members:
            profile.members[target.ident].entries -= 1
        elif target.kind == "group" and target.ident in profile.groups:
            profile.groups[target.ident].entries -= 1
        elif target.kind == "oneshot" and target.oneshot is not None:
            self.destroy_oneshot(profile, *target.oneshot)
