"""Applying a match-action table inside a control, in C: the key, the lookup in the
pipeline's C table (native/runtime.h), the hit (direct counter, direct meter, the
entry's action or an action-profile member), the miss (the default entry the table
has now) and the next node -- the twin of `codegen.tables` and of `Table.hit`/`miss`.
"""

from __future__ import annotations

from ..tables import lookup_mode
from .actions import CActions
from .calculations import CCalculations
from .context import CContext
from ..codegen.walk import table_key
from .expressions import pieces, slot_of

#: runtime.h's P4N_MAX_LPM: prefix lengths it counts.
MAX_LPM_BITS = 128
_MODES = {"exact": "P4N_EXACT", "lpm": "P4N_LPM", "scan": "P4N_SCAN"}
_KINDS = {"simple": "P4N_SIMPLE", "indirect": "P4N_INDIRECT", "indirect_ws": "P4N_INDIRECT_WS"}


class CTables:
    """Table setup and application code of one program."""

    def __init__(self, ctx: CContext, actions: CActions, calcs: CCalculations) -> None:
        self.ctx = ctx
        self.L = ctx.layout
        self.actions = actions
        self.calcs = calcs
        self.setup: list[str] = []    # statements configuring the C tables (p4n_setup)
        self.max_keys = 1

    def key(self, table: dict) -> tuple[list[str], list[str], list[int]]:
        """(code of each key word, match kinds, widths) -- a key field wider than 64
        bits is several words, most significant first; a field of an invalid header
        matches as 0, as in BMv2."""
        terms, widths = [], []
        parts = table_key(self.L, table)
        for i, part in enumerate(parts):
            f = part.field
            if f is None:
                terms.append(f"F[{part.header.valid_slot}]")
                widths.append(1)
                continue
            if f.varbit:
                raise self.ctx.unsupported(f"key[{i}]: varbit field {part.header.name}.{f.name}")
            words = pieces(slot_of(self.ctx, f))
            if f.width > MAX_LPM_BITS and part.kind == "lpm":
                raise self.ctx.unsupported(f"key[{i}]: an LPM match on {f.width} bits (> {MAX_LPM_BITS})")
            rest = len(words)
            for code, w in words:
                rest -= 1
                if part.mask is not None:
                    code = f"({code} & {hex((part.mask >> (64 * rest)) & ((1 << w) - 1))}ULL)"
                if part.guarded:
                    code = f"(F[{part.header.valid_slot}] ? {code} : 0)"
                terms.append(code)
            widths.append(f.width)
        if any(w > 64 for w in widths):
            self.ctx.wide_keys[table["name"]] = widths
        return terms, [part.kind for part in parts], widths

    def configure(self, table: dict) -> None:
        """The setup statements of the C table for `table`."""
        t = self.ctx.index(self.ctx.table_ix, "table", table["name"])
        terms, kinds, widths = self.key(table)
        self.max_keys = max(self.max_keys, len(terms))
        mode = lookup_mode(table.get("match_type", "exact"), kinds)
        kind = table.get("type", "simple")
        if kind not in _KINDS:
            raise self.ctx.unsupported(f"table type {kind!r}")
        lpm = [i for i, k in enumerate(kinds) if k == "lpm"]
        # the LPM field's first word among the key's words
        lpm_word = sum(1 if w <= 64 else (w + 63) // 64 for w in widths[:lpm[0]]) if lpm else 0
        prof = -1
        if kind != "simple":
            prof = self.ctx.index(self.ctx.profile_ix, "action profile", table.get("action_profile"))
        self.setup.append(
            f"p->tables[{t}] = (p4n_table){{.nkeys = {len(terms)}, .mode = {_MODES[mode]}, "
            f".kind = {_KINDS[kind]}, .lpm_idx = {lpm_word}, "
            f".lpm_width = {widths[lpm[0]] if lpm else 0}, .profile = {prof}, "
            f".def_action = -1, .def_mbr = -1, .def_grp = -1}};")

    def apply(self, table: dict, next_node: dict[str | None, int], ind: int) -> None:
        """Statements applying `table` and returning the next node's number."""
        emit = self.ctx.emit
        t = self.ctx.index(self.ctx.table_ix, "table", table["name"])
        nt = table.get("next_tables", {})
        hitmiss = "__HIT__" in nt or "__MISS__" in nt
        kind = table.get("type", "simple")
        terms, _kinds, _w = self.key(table)
        emit(f"p4n_table *tb = &p->tables[{t}];", ind)
        emit("int32_t act = -1; const uint64_t *args = NULL; p4n_member *m = NULL;", ind)
        emit("(void)m;", ind)
        sel = ""
        if kind == "indirect_ws":
            sel = f"{self.calcs.selector(table['action_profile'])}(p, F, S)"
        if terms:
            emit(f"uint64_t key[{len(terms)}] = {{{', '.join(terms)}}};", ind)
            emit("p4n_entry *e = p4n_lookup(tb, key);", ind)
            emit("if (e) {", ind)
            if kind == "simple":
                emit("act = e->action; args = e->args;", ind + 1)
            else:
                pr = f"&p->profiles[{self.ctx.profile_ix[table['action_profile']]}]"
                choose = (f"(p4n_group_size({pr}, e->grp) ? p4n_group_pick({pr}, e->grp, {sel}) : NULL)"
                          if sel else "NULL")
                emit(f"m = e->grp >= 0 ? {choose} : p4n_member_of({pr}, e->mbr);", ind + 1)
                emit("if (m) { act = m->action; args = m->args; }", ind + 1)
            if table.get("with_counters"):
                emit("e->pkts += 1; e->bytes += S->ilen;", ind + 1)
            dm = table.get("direct_meters")
            if dm:
                mj = self.ctx.meters.get(dm)
                if mj is None:
                    raise self.ctx.unsupported(f"unknown direct meter {dm!r}")
                if mj.get("result_target"):
                    f = self.L.field(*mj["result_target"])
                    emit(f"F[{f.slot}] = (uint64_t)p4n_meter_execute(&e->meter, p->now, S->ilen);", ind + 1)
            self.run_and_next(table, next_node, "__HIT__", hitmiss, ind + 1)
            emit("}", ind)
        # miss: the default entry the table has now
        if kind == "indirect_ws":
            pr = f"&p->profiles[{self.ctx.profile_ix[table['action_profile']]}]"
            emit(f"if (tb->def_grp >= 0) {{ if (p4n_group_size({pr}, tb->def_grp)) "
                 f"m = p4n_group_pick({pr}, tb->def_grp, {sel}); "
                 f"if (m) {{ act = m->action; args = m->args; }} }}", ind)
            emit("else { act = tb->def_action; args = tb->def_args; }", ind)
        else:
            emit("act = tb->def_action; args = tb->def_args;", ind)
        self.run_and_next(table, next_node, "__MISS__", hitmiss, ind)

    def run_and_next(self, table: dict, next_node: dict[str | None, int], which: str,
                     hitmiss: bool, ind: int) -> None:
        """Run `act` with `args` (if any) and return the next node."""
        emit = self.ctx.emit
        nt = table.get("next_tables", {})
        base = next_node[table.get("base_default_next")]
        if hitmiss:
            emit("if (act >= 0) p4n_action(p, act, F, S, args);", ind)
            emit(f"return {next_node[nt.get(which)]};", ind)
            return
        emit(f"if (act < 0) return {base};", ind)
        emit("p4n_action(p, act, F, S, args);", ind)
        ids = list(table.get("action_ids", []))
        de = table.get("default_entry")
        if de is not None and de.get("action_id") not in ids:
            ids.append(de["action_id"])
        cases = []
        for aid in ids:
            act = self.ctx.actions.get(aid)
            if act is None:
                continue
            target = next_node[nt.get(act["name"], table.get("base_default_next"))]
            if target != base:
                cases.append(f"case {aid}: return {target};")
        if cases:
            emit(f"switch (act) {{ {' '.join(cases)} default: return {base}; }}", ind)
        else:
            emit(f"return {base};", ind)
