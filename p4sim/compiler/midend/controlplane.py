"""What the control plane sees of a program: the inventory P4Info is built from.

The BMv2 lowering records every control-plane-visible object here as it emits it
(tables with their keys as BMv2 sees them, actions with their parameters, extern
instances, digests, value sets, packet-I/O headers), so that the JSON and the P4Info
are built from one source and cannot disagree about names or widths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from p4sim.compiler import ast
from p4sim.compiler import types as T


@dataclass
class CPMatchField:
    name: str
    bitwidth: int
    match_kind: str  # exact | lpm | ternary | range | optional
    annotations: list[ast.Annotation] = field(default_factory=list)
    new_type: Optional[T.NewT] = None  # a `type`-declared key keeps its name in P4Info


@dataclass
class CPAction:
    name: str
    decl: ast.Decl
    params: list[tuple[str, int, Optional[T.NewT]]]  # name, bitwidth, `type`-declared type


@dataclass
class CPActionRef:
    action: str
    scope: str = "TABLE_AND_DEFAULT"  # | TABLE_ONLY | DEFAULT_ONLY
    annotations: list[ast.Annotation] = field(default_factory=list)


@dataclass
class CPTable:
    name: str
    decl: ast.TableDecl
    match_fields: list[CPMatchField]
    action_refs: list[CPActionRef]
    size: int
    const_default_action: Optional[str] = None
    initial_default_action: Optional[str] = None  # the default action the table starts with
    initial_default_args: list[tuple[int, int]] = field(default_factory=list)  # its action data: (value, bits)
    implementation: Optional[str] = None
    direct_resources: list[str] = field(default_factory=list)
    support_timeout: bool = False
    is_const: bool = False
    has_initial_entries: bool = False


@dataclass
class CPActionProfile:
    name: str
    decl: ast.Decl
    tables: list[str]
    with_selector: bool
    size: int
    max_group_size: int = 0


@dataclass
class CPCounter:
    name: str
    decl: ast.Decl
    unit: str  # BYTES | PACKETS | BOTH
    size: int
    direct_table: Optional[str] = None


@dataclass
class CPMeter:
    name: str
    decl: ast.Decl
    unit: str  # BYTES | PACKETS
    size: int
    direct_table: Optional[str] = None


@dataclass
class CPRegister:
    name: str
    decl: ast.Decl
    cell_type: T.Type
    size: int


@dataclass
class CPDigest:
    name: str
    struct: T.Type  # StructT (or a HeaderT/TupleT)


@dataclass
class CPValueSet:
    name: str
    decl: ast.Decl
    match: list[tuple[str, int]]
    size: int


@dataclass
class CPControllerHeader:
    name: str
    decl: ast.HeaderDecl
    fields: list[tuple[str, int, list[ast.Annotation]]]


@dataclass
class ControlPlane:
    """Everything a P4Runtime client can name, in emission order (deduplicated)."""

    tables: list[CPTable] = field(default_factory=list)
    actions: list[CPAction] = field(default_factory=list)
    action_profiles: list[CPActionProfile] = field(default_factory=list)
    counters: list[CPCounter] = field(default_factory=list)
    meters: list[CPMeter] = field(default_factory=list)
    registers: list[CPRegister] = field(default_factory=list)
    digests: list[CPDigest] = field(default_factory=list)
    value_sets: list[CPValueSet] = field(default_factory=list)
    controller_headers: list[CPControllerHeader] = field(default_factory=list)

    def add(self, kind: str, obj: object) -> None:
        items = getattr(self, kind)
        if all(o.name != obj.name for o in items):  # type: ignore[attr-defined]
            items.append(obj)
