"""Semantic types of P4-16 (spec section 7), as the type checker assigns them.

The back end reads widths and layouts from these, never from source type syntax.
Types are immutable values: two ``BitT(8)`` compare equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


class Type:
    """Base class of all semantic types."""


@dataclass(frozen=True)
class BitT(Type):
    """``bit<W>`` (signed=False) or ``int<W>`` (signed=True)."""

    width: int
    signed: bool = False


@dataclass(frozen=True)
class VarbitT(Type):
    max_width: int


@dataclass(frozen=True)
class InfIntT(Type):
    """The type of an unsized integer literal / compile-time ``int``."""


@dataclass(frozen=True)
class BoolT(Type):
    pass


@dataclass(frozen=True)
class StringT(Type):
    pass


@dataclass(frozen=True)
class VoidT(Type):
    pass


@dataclass(frozen=True)
class ErrorT(Type):
    """The single ``error`` type; members are collected program-wide (ordered)."""


@dataclass(frozen=True)
class MatchKindT(Type):
    pass


@dataclass(frozen=True)
class DontCareT(Type):
    pass


@dataclass(frozen=True)
class FieldT:
    name: str
    type: Type


@dataclass(frozen=True)
class StructLikeT(Type):
    """Header, header union and struct share the shape: an ordered list of fields."""

    name: str
    fields: tuple[FieldT, ...]

    def field(self, name: str) -> Optional[FieldT]:
        for f in self.fields:
            if f.name == name:
                return f
        return None


@dataclass(frozen=True)
class HeaderT(StructLikeT):
    @property
    def bit_width(self) -> int:
        """Fixed part only; a varbit field counts 0 here."""
        return sum(f.type.width for f in self.fields if isinstance(f.type, BitT))


@dataclass(frozen=True)
class HeaderUnionT(StructLikeT):
    pass


@dataclass(frozen=True)
class StructT(StructLikeT):
    pass


@dataclass(frozen=True)
class StackT(Type):
    element: Type
    size: int


@dataclass(frozen=True)
class TupleT(Type):
    elements: tuple[Type, ...]


@dataclass(frozen=True)
class ListT(Type):
    """``list<T>``: the type of the collection of ``for (T x in (list<T>) {a, b})``,
    the only place p4sim has list values (the mid end unrolls the loop)."""

    element: Type


@dataclass(frozen=True)
class EnumT(Type):
    """Plain enum (``underlying`` None) or serializable enum over a BitT."""

    name: str
    members: tuple[str, ...]
    underlying: Optional[BitT] = None
    values: tuple[int, ...] = ()


@dataclass(frozen=True)
class NewT(Type):
    """``type bit<9> PortId_t;``: a distinct type over ``base``."""

    name: str
    base: Type


@dataclass(frozen=True)
class ExternT(Type):
    """An extern object type, specialised: ``register<bit<32>, bit<32>>``."""

    name: str
    args: tuple[Type, ...] = ()
    decl: Any = field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class ParserT(Type):
    name: str
    decl: Any = field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class ControlT(Type):
    name: str
    decl: Any = field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class PackageT(Type):
    name: str
    decl: Any = field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class TableT(Type):
    """The type of a table name; ``t.apply()`` has type ``ApplyResultT``."""

    name: str


@dataclass(frozen=True)
class ApplyResultT(Type):
    """``{hit, miss, action_run}`` of a table apply."""

    table: str


@dataclass(frozen=True)
class ActionEnumT(Type):
    """The type of ``t.apply().action_run``: one of the table's actions."""

    table: str


@dataclass(frozen=True)
class ActionT(Type):
    name: str


@dataclass(frozen=True)
class ValueSetT(Type):
    element: Type


@dataclass(frozen=True)
class TypeVarT(Type):
    """A type parameter (``T`` of ``extern register<T>``, ``H`` of ``Parser<H, M>``)
    where it is not bound: inside a generic declaration, or an extern instance's
    parameter that nothing determines (matches any type)."""

    name: str


@dataclass(frozen=True)
class MethodT(Type):
    """The type of a callable expression (before it is called)."""

    params: tuple[Any, ...]
    return_type: Type


def width_of(t: Type) -> int:
    """Serialised width in bits of a type with a fixed size (used for hash inputs,
    digest field lists, header layout)."""
    if isinstance(t, BitT):
        return t.width
    if isinstance(t, BoolT):
        return 1
    if isinstance(t, NewT):
        return width_of(t.base)
    if isinstance(t, EnumT) and t.underlying is not None:
        return t.underlying.width
    if isinstance(t, StructLikeT):
        return sum(width_of(f.type) for f in t.fields)
    if isinstance(t, StackT):
        return width_of(t.element) * t.size
    if isinstance(t, TupleT):
        return sum(width_of(e) for e in t.elements)
    raise TypeError(f"type {t} has no fixed width")
