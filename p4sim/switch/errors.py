"""Errors raised by the v1model engine.

Two families: `ProgramError` for a BMv2 JSON the engine cannot load (raised once, at
construction), and `StateError` for a runtime-state call that is refused (bad table
name, malformed match, duplicate entry...). A call that raises a `StateError` leaves
the switch state exactly as it was, so a control plane can report the error and go on.
"""

from __future__ import annotations


class ProgramError(ValueError):
    """The BMv2 JSON is malformed or uses a construct the engine does not support."""


class StateError(Exception):
    """A runtime-state operation was refused; the message names the problem."""


class NoSuchName(StateError):
    """A table, action, extern, session or group name/id does not exist."""


class BadMatch(StateError):
    """A match key does not fit the table's key (count, kind or value)."""


class DuplicateEntry(StateError):
    """An entry with the same match key (and priority) already exists."""


class NoSuchEntry(StateError):
    """An entry/member/group/node handle does not exist."""


class BadActionData(StateError):
    """Action arguments do not fit the action's parameters, or the action is not allowed."""


class TableFull(StateError):
    """The table (or action profile) already holds `max_size` entries."""


class InUse(StateError):
    """An object is still referenced (e.g. a member used by a table entry)."""


class BadIndex(StateError):
    """An index is outside an extern array."""


class P4AssertionError(RuntimeError):
    """A P4 `assert`/`assume` failed while processing a packet (BMv2 aborts)."""
