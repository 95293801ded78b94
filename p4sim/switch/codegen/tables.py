"""Applying a match-action table inside a control: the key, the lookup, and what runs on
a hit and on a miss.

A plain table's hit path is inline (the entry's action, its direct counter, the next
node); an exact-match table is looked up in its dict (``EX_<id>``) without a call, the
others through the run-time `Table` (``T_<id>``, see `p4sim.switch.tables`), which also
runs the hit and miss of indirect tables and tables with direct meters. When the
default entry is const the control generator runs the miss path inline as well (see
`controls`); otherwise the code reads the default the table has now.
"""

from __future__ import annotations

from ..errors import ProgramError
from ..tables import lookup_mode
from .context import Context
from .expressions import field_bits
from .walk import table_key


class Tables:
    """Table application code of one program."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.L = ctx.layout

    def fixed_default(self, table: dict) -> tuple[dict, list[int]] | None:
        """(action, data) of a table's default entry if no control plane can change it."""
        de = table.get("default_entry")
        if not de or not de.get("action_entry_const") or table.get("type", "simple") != "simple":
            return None
        act = self.ctx.actions.get(de["action_id"])
        if act is None:
            raise ProgramError(f"table {table['name']!r}: unknown default action id {de['action_id']}")
        return act, [int(x, 16) for x in de.get("action_data", [])]

    def miss_next(self, table: dict) -> str | None:
        """The node after a miss of a table whose default entry is fixed."""
        nt = table.get("next_tables", {})
        fixed = self.fixed_default(table)
        assert fixed is not None
        if "__HIT__" in nt or "__MISS__" in nt:
            return nt.get("__MISS__")
        return nt.get(fixed[0]["name"], table.get("base_default_next"))

    def key(self, table: dict) -> tuple[list[str], list[str]]:
        """(code of each key field, its match kind); a field of an invalid header
        matches as 0, as in BMv2."""
        terms = []
        parts = table_key(self.L, table)
        for part in parts:
            if part.field is None:
                terms.append(f"F[{part.header.valid_slot}]")
                continue
            term = field_bits(part.field)
            if part.mask is not None:
                term = f"({term}) & {part.mask}"
            if part.guarded:
                term = f"(({term}) if F[{part.header.valid_slot}] else 0)"
            terms.append(term)
        return terms, [part.kind for part in parts]

    def apply(self, table: dict, ind: int) -> tuple[dict, list[int]] | None:
        """Emit the lookup and the hit path (which always returns the next node), and
        the miss path unless the default entry is fixed; then return that fixed
        (action, data) for the caller to run and continue after, else None."""
        emit, sym = self.ctx.emit, self.ctx.symbols
        tid = table["id"]
        tbl = sym.table(tid)
        nt = table.get("next_tables", {})
        hitmiss = "__HIT__" in nt or "__MISS__" in nt
        simple = table.get("type", "simple") == "simple"
        terms, kinds = self.key(table)
        if terms:  # a key-less table always misses
            key = f"({', '.join(terms)},)"
            if lookup_mode(table.get("match_type", "exact"), kinds) == "exact":
                emit(f"rec = {sym.exact_index(tid)}.get({key})", ind)
            else:
                emit(f"rec = {tbl}.lookup({key})", ind)
            emit("if rec is not None:", ind)
            if not simple or table.get("direct_meters"):
                emit(f"return {tbl}.hit(F, S, rec)", ind + 1)
            else:
                emit("ref = rec.ref", ind + 1)
                if table.get("with_counters"):
                    emit("c = rec.counter", ind + 1)
                    emit("c[0] += 1", ind + 1)
                    emit("c[1] += S.ilen", ind + 1)
                emit("ref.fn(F, S, ref.args)", ind + 1)
                if hitmiss:
                    emit(f"return {tbl}.hit_next", ind + 1)
                else:
                    emit(f"return {tbl}.next_for[ref.id]", ind + 1)
        fixed = self.fixed_default(table)
        if fixed is not None:
            return fixed
        if not simple:
            emit(f"return {tbl}.miss(F, S)", ind)
        elif hitmiss:  # Table.miss for a plain table, inline: the default the table has now
            emit(f"ref = {tbl}.default", ind)
            emit("if ref is not None:", ind)
            emit("ref.fn(F, S, ref.args)", ind + 1)
            emit(f"return {tbl}.miss_next", ind)
        else:
            emit(f"ref = {tbl}.default", ind)
            emit("if ref is None:", ind)
            emit(f"return {tbl}.base_next", ind + 1)
            emit("ref.fn(F, S, ref.args)", ind)
            emit(f"return {tbl}.next_for[ref.id]", ind)
        return None
