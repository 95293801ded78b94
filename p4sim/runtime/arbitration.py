"""Client arbitration: election ids, primary and backups per role, advisory notifications.

Implements the rules of the P4Runtime spec ("Client Arbitration and Controller
Replication"): for each role the primary is the live controller whose election id is
at least the highest ever seen for that role; every change of primary (new primary,
downgrade, primary disconnect) is announced to all controllers of the role, a new
backup hears only about itself. Writes are accepted only from the primary, identified
by the (device_id, role, election_id) triple it puts in every request.

Role configs: an unset ``role.config`` means full pipeline access. A
``stratum.P4RoleConfig`` (the scheme Stratum and finsy use) restricts writes to its
exclusive/shared P4 ids, says whether the role receives PacketIns (optionally
filtered on one metadata value) and whether it may push a pipeline. Any other config
type is rejected with INVALID_ARGUMENT, as the spec requires for an unknown scheme.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Callable

from google.protobuf import any_pb2
from google.protobuf.message import DecodeError

from finsy.proto import stratum
from p4sim.proto import p4r, rpc_code, rpc_status
from p4sim.runtime.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied

Send = Callable[[p4r.StreamMessageResponse], None]


@dataclass(eq=False)
class Controller:
    """One StreamChannel: a client once it has sent its first MasterArbitrationUpdate."""

    send: Send
    number: int = field(default_factory=itertools.count(1).__next__)
    device_id: int | None = None
    role: str | None = None
    election_id: int | None = None  # None: unset, the client can never be primary

    @property
    def arbitrated(self) -> bool:
        return self.role is not None


@dataclass
class RolePolicy:
    """What a role may do; the default (no config) is full pipeline access."""

    writable_ids: frozenset[int] | None = None  # None: every entity
    receives_packet_ins: bool = True
    packet_in_filter: tuple[int, bytes] | None = None  # (metadata id, canonical value)
    can_push_pipeline: bool = True

    @classmethod
    def from_config(cls, config: any_pb2.Any | None, role: str) -> "RolePolicy":
        if config is None or not config.type_url:
            return cls()
        if not config.Is(stratum.P4RoleConfig.DESCRIPTOR):
            raise InvalidArgument(f"role '{role}': unsupported role config type '{config.type_url}'")
        rc = stratum.P4RoleConfig()
        try:
            config.Unpack(rc)
        except DecodeError:
            raise InvalidArgument(f"role '{role}': role config is not a serialized stratum.P4RoleConfig") from None
        flt = None
        if rc.HasField("packet_in_filter"):
            flt = (rc.packet_in_filter.metadata_id, rc.packet_in_filter.value)
        return cls(
            writable_ids=frozenset(rc.exclusive_p4_ids) | frozenset(rc.shared_p4_ids),
            receives_packet_ins=rc.receives_packet_ins,
            packet_in_filter=flt,
            can_push_pipeline=rc.can_push_pipeline,
        )


@dataclass
class _Role:
    controllers: list[Controller] = field(default_factory=list)
    primary: Controller | None = None
    highest: int | None = None  # election_id_past: highest id ever seen for the role
    config: any_pb2.Any | None = None
    policy: RolePolicy = field(default_factory=RolePolicy)


def _status(code: int, message: str) -> rpc_status.Status:
    return rpc_status.Status(code=code, message=message)


class Arbitrator:
    """Primary/backup bookkeeping for one device; thread-safe."""

    def __init__(self, device_id: int):
        self.device_id = device_id
        self._roles: dict[str, _Role] = {}
        self._lock = threading.Lock()

    # -- stream side ----------------------------------------------------------------------

    def update(self, ctl: Controller, msg: p4r.MasterArbitrationUpdate) -> None:
        """Handle a MasterArbitrationUpdate from ``ctl``; raise to terminate its stream."""
        role_name = msg.role.name if msg.HasField("role") else ""
        election_id = (msg.election_id.high << 64 | msg.election_id.low) if msg.HasField("election_id") else None
        config = msg.role.config if msg.HasField("role") and msg.role.HasField("config") else None
        with self._lock:
            if not ctl.arbitrated:
                if msg.device_id != self.device_id:
                    raise NotFound(f"device id {msg.device_id} not found (this device is {self.device_id})")
            else:
                if msg.device_id != ctl.device_id:
                    raise FailedPrecondition(
                        f"device id {msg.device_id} does not match this stream's device id {ctl.device_id}"
                    )
                if role_name != ctl.role:
                    raise FailedPrecondition(
                        f"role '{role_name}' does not match this stream's role '{ctl.role}'; open a new stream to change role"
                    )
            role = self._roles.setdefault(role_name, _Role())
            if election_id is not None and any(
                c is not ctl and c.election_id == election_id for c in role.controllers
            ):
                raise InvalidArgument(
                    f"election id {election_id} is already used by another controller for role '{role_name}'"
                )
            policy = RolePolicy.from_config(config, role_name)
            if not ctl.arbitrated:
                ctl.device_id, ctl.role = msg.device_id, role_name
                role.controllers.append(ctl)
            ctl.election_id = election_id
            was_primary = role.primary is ctl
            if election_id is not None and (role.highest is None or election_id >= role.highest):
                role.primary = ctl
                role.highest = election_id
                role.config, role.policy = config, policy
                self._notify(role_name, role, role.controllers)
            else:
                if was_primary:
                    role.primary = None
                    self._notify(role_name, role, role.controllers)
                else:
                    self._notify(role_name, role, [ctl])

    def remove(self, ctl: Controller) -> None:
        """The stream of ``ctl`` is gone; if it was primary, tell the others."""
        with self._lock:
            if not ctl.arbitrated:
                return
            role = self._roles[ctl.role or ""]
            if ctl in role.controllers:
                role.controllers.remove(ctl)
            if role.primary is ctl:
                role.primary = None
                self._notify(ctl.role or "", role, role.controllers)

    def _notify(self, role_name: str, role: _Role, targets: list[Controller]) -> None:
        for ctl in targets:
            update = p4r.MasterArbitrationUpdate(device_id=self.device_id)
            if role_name or role.config is not None:
                update.role.name = role_name
                if role.config is not None:
                    update.role.config.CopyFrom(role.config)
            if role.highest is not None:
                update.election_id.high = role.highest >> 64
                update.election_id.low = role.highest & 0xFFFFFFFFFFFFFFFF
            if role.primary is ctl:
                update.status.CopyFrom(_status(rpc_code.OK, "primary"))
            elif role.primary is not None:
                update.status.CopyFrom(_status(rpc_code.ALREADY_EXISTS, "backup: another controller is primary"))
            else:
                update.status.CopyFrom(_status(rpc_code.NOT_FOUND, "backup: there is no primary"))
            ctl.send(p4r.StreamMessageResponse(arbitration=update))

    # -- unary RPC side -------------------------------------------------------------------

    def check_device(self, device_id: int) -> None:
        if device_id != self.device_id:
            raise NotFound(f"device id {device_id} not found (this device is {self.device_id})")

    def check_primary(self, device_id: int, role_name: str, election: p4r.Uint128 | None) -> RolePolicy:
        """Raise PERMISSION_DENIED unless the triple names the current primary of the role."""
        self.check_device(device_id)
        election_id = None if election is None else election.high << 64 | election.low
        with self._lock:
            role = self._roles.get(role_name)
            primary = role.primary if role else None
            if primary is None or role is None:
                raise PermissionDenied(f"not primary: role '{role_name}' has no primary controller")
            if primary.election_id != election_id:
                raise PermissionDenied(
                    f"not primary: election id {election_id} is not the primary's for role '{role_name}'"
                )
            return role.policy

    def primaries(self) -> list[tuple[Controller, RolePolicy]]:
        """The primary of every role with its policy (receivers of PacketIn and digests)."""
        with self._lock:
            return [(r.primary, r.policy) for r in self._roles.values() if r.primary is not None]
