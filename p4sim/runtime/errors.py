"""Typed P4Runtime errors: every rejection carries the gRPC status code the spec asks for.

The codec and the pipeline state raise `P4RuntimeError`; the service turns it into the
RPC status (or, inside a Write batch, into the `p4.v1.Error` of that one update), so
the spec's choice of code lives next to the check that makes it.
"""

from __future__ import annotations

import grpc


class P4RuntimeError(Exception):
    """A request (or one update of a batch) the server rejects, with its status code."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, code: grpc.StatusCode | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class InvalidArgument(P4RuntimeError):
    """Malformed or semantically wrong input: bad id, bad width, bad prefix, ..."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class OutOfRange(P4RuntimeError):
    """A value outside its domain: a binary string wider than its P4Info bitwidth (or
    empty), an index past the end of an array -- the spec's OUT_OF_RANGE cases."""

    code = grpc.StatusCode.OUT_OF_RANGE


class NotFound(P4RuntimeError):
    """The entity (entry, member, group, session, ...) does not exist."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(P4RuntimeError):
    """INSERT of an entity that already exists."""

    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(P4RuntimeError):
    """The caller is not the primary controller, or the entity is const."""

    code = grpc.StatusCode.PERMISSION_DENIED


class FailedPrecondition(P4RuntimeError):
    """The device is not in a state to serve the request (e.g. no pipeline set)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class ResourceExhausted(P4RuntimeError):
    """A table, group or profile is full, or the server has no room for another stream."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class BatchRolledBack(P4RuntimeError):
    """A Write batch was undone whole: its per-update errors would not reach the client
    (service.py), so nothing of it is applied -- the transaction-abort code, no details."""

    code = grpc.StatusCode.ABORTED


class Unavailable(P4RuntimeError):
    """The server cannot serve now and a client should try again (the switch is
    stopping: a restarted switch answers the same address)."""

    code = grpc.StatusCode.UNAVAILABLE


class Unimplemented(P4RuntimeError):
    """A valid request for a feature p4sim does not provide."""

    code = grpc.StatusCode.UNIMPLEMENTED


NO_PIPELINE = "No forwarding pipeline config set for this device"
"""The FAILED_PRECONDITION message clients look for (finsy matches
``no .*forwarding pipeline config``; simple_switch_grpc says the same)."""
