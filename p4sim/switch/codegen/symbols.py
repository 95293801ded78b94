"""Every name in a generated module, made in one place.

The generated Python refers by name to the run-time objects `V1Switch` binds into its
namespace (tables, extern arrays, value sets) and to its own functions (actions, parse
states, control nodes, calculations), which `V1Switch` fetches after running it. The
code generators write the names `Symbols` gives into the code and `V1Switch` binds and
fetches under the same names, so neither spells a prefix of its own.

Besides these per-object names every module shares a fixed vocabulary, bound by
`fixed_bindings`: the run-time helpers of `phv` (``_sx``, ``_HO``, ``_PE``...) and the
layout tables (``HF``, ``HV``, ``UH``) that code choosing a header at run time indexes.
The code templates write those literally, as they write the parameters every generated
function takes (``F`` the PHV, ``S`` the `PacketState`, ``d`` the action data).
"""

from __future__ import annotations

from typing import Any

from .. import phv
from ..errors import P4AssertionError, ProgramError
from ..program import HeaderInfo, Layout


def ident(name: str) -> str:
    """A Python identifier fragment for a P4 name; injective (every character that is not
    an ASCII letter or digit becomes `_` plus its code), so names never collide."""
    return "".join(c if c.isascii() and c.isalnum() else f"_{ord(c):x}_" for c in name)


def _prefixed(prefix: str, doc: str) -> staticmethod[[str | int], str]:
    """A `Symbols` method naming an object by its P4 name or JSON id: `prefix` + `ident`."""
    def name(key: str | int) -> str:
        return prefix + ident(str(key))
    name.__doc__ = doc
    return staticmethod(name)


class Symbols:
    """The names of one generated module (see the module docstring)."""

    #: ``PARSE(F, S, data) -> (bytes parsed, error code)``
    PARSE = "PARSE"
    #: ``DEPARSE(F, S) -> bytes`` of the valid headers (the payload is the caller's)
    DEPARSE = "DEPARSE"
    #: ``VERIFY_CKSUM(F, S) -> bool`` (all verified checksums hold)
    VERIFY_CHECKSUMS = "VERIFY_CKSUM"
    #: ``UPDATE_CKSUM(F, S)`` writes every updated checksum field
    UPDATE_CHECKSUMS = "UPDATE_CKSUM"

    # -- objects V1Switch binds, by P4 name or table id ---------------------------
    register = _prefixed("REG_", "A register array's cell list.")
    counter_packets = _prefixed("CP_", "An (indirect) counter array's packet counts.")
    counter_bytes = _prefixed("CB_", "An (indirect) counter array's byte counts.")
    meter = _prefixed("MTR_", "An (indirect) `MeterArray`.")
    value_set = _prefixed("VSET_", "A parser `ValueSet`.")
    table = _prefixed("T_", "The run-time `Table` of a table.")
    exact_index = _prefixed("EX_", "The dict of an exact-match table's entries (`Table._exact`).")

    # -- functions the module defines, by P4 name or JSON id ----------------------
    action = _prefixed("A_", "``A_<id>(F, S, d)``: one action, `d` its action data.")
    calculation = _prefixed("CALC_", "``CALC_<name>(F, S) -> int``: a named calculation "
                                     "(hash or checksum).")
    selector = _prefixed("SEL_", "``SEL_<profile>(F, S) -> int``: an action selector's hash "
                                 "of its inputs.")
    parse_state = _prefixed("P_", "``P_<id>(F, S, data, pos, dlen) -> (next state, pos)``: "
                                  "one parse state.")
    stack_extractors = _prefixed("XS_", "The extractors of a header stack's elements, by index.")
    header_struct = _prefixed("_ST_", "The `struct.Struct` a fixed-size header (by id) is read "
                                      "and written with.")
    packer = _prefixed("_PK_", "The `n`th `struct.Struct` packing hash inputs.")

    # -- layout tables, by P4 name ----------------------------------------------
    stack = _prefixed("STK_", "A header stack's header ids, by index.")
    union_stack = _prefixed("USTK_", "A union stack's union ids, by index.")

    def __init__(self) -> None:
        self._nodes: dict[tuple[str, str], str] = {}

    @staticmethod
    def hash_of(function: str) -> str:
        """The hash object the calculation or selector function `function` calls."""
        return "H_" + function

    @staticmethod
    def extractor(h: HeaderInfo) -> str:
        """``X_<id>(F, data, pos, dlen) -> pos`` for a fixed-size header, or
        ``XV_<id>(F, data, pos, dlen, nbits) -> pos`` for one with a varbit field."""
        return f"XV_{h.id}" if h.has_varbit else f"X_{h.id}"

    @staticmethod
    def union_stack_extractors(stack: str, member: int) -> str:
        """The extractors of member `member` of a union stack's elements, by index."""
        return f"XU_{ident(stack)}_{member}"

    def node(self, pipeline: str, node: str) -> str:
        """``N_<pipeline>_<node>(F, S) -> next node``: a control node's function."""
        return self._nodes.setdefault((pipeline, node), f"N_{ident(pipeline)}_{ident(node)}")

    def defined_node(self, pipeline: str, node: str) -> str:
        """`node` for a node the control generator gave a function, else ProgramError."""
        name = self._nodes.get((pipeline, node))
        if name is None:
            raise ProgramError(f"pipeline {pipeline!r}: unknown next node {node!r}")
        return name

    def fixed_bindings(self, layout: Layout) -> dict[str, Any]:
        """The fixed vocabulary (see the module docstring) and the stack tables."""
        out: dict[str, Any] = {
            "_sx": phv.sx, "_usat": phv.usat, "_sat": phv.sat, "_peek": phv.peek,
            "_rng": phv.rng, "_shl": phv.shl, "_PE": phv.ParserException,
            "_Exit": phv.ExitPipeline, "_HO": phv.HeaderOps(layout), "_log_msg": phv.log_msg,
            "_AssertFail": P4AssertionError,
            # header id -> its field slots / its validity slot; union id -> header ids
            "HF": {h.id: tuple(f.slot for f in h.fields) for h in layout.headers},
            "HV": {h.id: h.valid_slot for h in layout.headers},
            "UH": {uid: tuple(u.header_ids) for uid, u in layout.union_by_id.items()},
        }
        for s in layout.stacks.values():
            out[self.stack(s.name)] = tuple(s.header_ids)
        for s in layout.union_stacks.values():
            out[self.union_stack(s.name)] = tuple(s.header_ids)
        return out
