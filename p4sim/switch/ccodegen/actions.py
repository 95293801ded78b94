"""Actions and their primitives in C: ``A_<id>(p, F, S, d)`` per action, the twin of
`codegen.actions`.

Primitives that hand work to the switch outside the pipeline (clone, resubmit,
recirculate, digest, truncate) record it in the packet registers `S`; native/driver.h
acts on it where simple_switch does. p4c's ``_jump``/``_jump_if_zero`` become gotos.
"""

from __future__ import annotations

from collections.abc import Callable

from ..codegen.actions import DROP_PORT
from .calculations import CCalculations
from .context import CContext
from .expressions import MAX_EXPR_BITS, CExpressions, arg_layout, lit, read

#: P4-14's arithmetic primitives and the C helper or operator for each.
_BINARY = {"add": "p4n_add", "subtract": "p4n_sub", "shift_left": "p4n_shl",
           "shift_right": "p4n_shr", "bit_and": "&", "bit_or": "|", "bit_xor": "^"}


class CActions:
    """Action functions and primitive statements of one program."""

    def __init__(self, ctx: CContext, exprs: CExpressions, calcs: CCalculations) -> None:
        self.ctx = ctx
        self.L = ctx.layout
        self.exprs = exprs
        self.calcs = calcs
        L = self.L
        self.espec = L.find_field("standard_metadata.egress_spec")
        self.mcast = (L.find_field("intrinsic_metadata.mcast_grp")
                      or L.find_field("standard_metadata.mcast_grp"))
        self._in_action = False   # primitives emitted inside an action function

    @staticmethod
    def name(action_id: int) -> str:
        """The C function of action `action_id`."""
        return f"A_{int(action_id)}"

    def declare(self, act: dict) -> None:
        """Emit the prototype of an action's function."""
        self.ctx.emit(f"static void {self.name(act['id'])}(p4n_pipeline *p, uint64_t *F, "
                      f"p4n_state *S, const uint64_t *d);")

    def action(self, act: dict) -> None:
        """Emit `A_<id>`."""
        emit = self.ctx.emit
        widths = [int(w["bitwidth"]) for w in act.get("runtime_data", [])]
        for w, wj in zip(widths, act.get("runtime_data", [])):
            if w > MAX_EXPR_BITS:
                raise self.ctx.unsupported(f"action parameter {wj.get('name')!r} of "
                                           f"{w} bits (> {MAX_EXPR_BITS})")
        self.exprs.args = dict(enumerate(arg_layout(widths)))
        if any(w > 64 for w in widths):
            self.ctx.wide_args[int(act["id"])] = widths
        emit(f"static void {self.name(act['id'])}(p4n_pipeline *p, uint64_t *F, p4n_state *S, "
             f"const uint64_t *d) {{")
        emit("(void)p; (void)F; (void)S; (void)d;", 1)
        prims = act.get("primitives", [])
        jumps = any(pr["op"] in ("_jump", "_jump_if_zero") for pr in prims)
        self._in_action = True
        for i, pr in enumerate(prims):
            with self.ctx.at(f"primitives[{i}]"):
                if jumps:
                    emit(f"L{i}:;", 1)
                op = pr["op"]
                ps = pr.get("parameters", [])
                if op == "_jump":
                    emit(f"goto L{self._target(ps[0], len(prims))};", 1)
                elif op == "_jump_if_zero":
                    emit(f"if (({self.exprs.expr(ps[0])}) == 0) goto L{self._target(ps[1], len(prims))};", 1)
                else:
                    self.primitive(pr, 1)
        self._in_action = False
        self.exprs.args = {}
        if jumps:
            emit(f"L{len(prims)}:;", 1)
        emit("}")
        emit("")

    def _target(self, tv: dict, n: int) -> int:
        if tv.get("type") != "hexstr" or not 0 <= int(tv["value"], 16) <= n:
            raise self.ctx.unsupported("a jump whose target is not a constant")
        return int(tv["value"], 16)

    def cell(self, ix: dict[str, int], decls: dict[str, dict], kind: str, name: str,
             index: dict, ind: int, body: Callable[[int, str], str]) -> None:
        """``body`` on cell `index` of extern array `name` when the index is inside it
        (BMv2 and the Python engine skip the primitive otherwise)."""
        i = self.ctx.index(ix, kind, name)
        size = int(decls[name]["size"])
        t = self.ctx.tmp()
        self.ctx.emit(f"{{ v_t {t} = {self.exprs.expr(index)};", ind)
        self.ctx.emit(f"if ({t} >= 0 && {t} < {size}) {{ {body(i, f'(size_t){t}')} }} }}", ind + 1)

    def primitive(self, pr: dict, ind: int) -> None:
        """Emit the statements of one primitive call."""
        ctx, x = self.ctx, self.exprs
        emit, e = ctx.emit, x.expr
        op = pr["op"]
        ps = pr.get("parameters", [])
        if op in ("assign", "modify_field"):
            emit(x.assign(ps[0], e(ps[1])), ind)
        elif op == "assign_VL":
            (dst, dlen), (src, slen) = x.varbit(ps[0]), x.varbit(ps[1])
            emit(" ".join(f"F[{d}] = F[{s}];" for d, s in zip(dst, src)) + f" F[{dlen}] = F[{slen}];", ind)
        elif op in ("assign_header", "copy_header"):
            emit(f"p4n_h_copy(F, {x.href(ps[0])[1]}, {x.href(ps[1])[1]});", ind)
        elif op == "assign_header_stack":
            dst, src = x.stack(ps[0]["value"]), x.stack(ps[1]["value"])
            for dh, sh in zip(dst.header_ids, src.header_ids):
                emit(f"p4n_h_copy(F, {dh}, {sh});", ind)
            emit(f"F[{dst.count_slot}] = F[{src.count_slot}];", ind)
        elif op == "assign_union":
            _s, d, sample = x.uref(ps[0])
            _s2, src, _u = x.uref(ps[1])
            for i in range(len(sample.header_ids)):
                emit(f"p4n_h_copy(F, p4n_uh[{d}][{i}], p4n_uh[{src}][{i}]);", ind)
        elif op == "assign_union_stack":
            dst, src = x.stack(ps[0]["value"]), x.stack(ps[1]["value"])
            for du, su in zip(dst.header_ids, src.header_ids):
                for dh, sh in zip(self.L.union_by_id[du].header_ids, self.L.union_by_id[su].header_ids):
                    emit(f"p4n_h_copy(F, {dh}, {sh});", ind)
            emit(f"F[{dst.count_slot}] = F[{src.count_slot}];", ind)
        elif op in ("push", "pop"):
            name = ps[0]["value"]
            st = x.stack(name)
            fn = "p4n_push_front" if op == "push" else "p4n_pop_front"
            unions = int(name in self.L.union_stacks)
            emit(f"{fn}(F, p4n_stk_{ctx.stack_ix[st.name]}, {len(st.header_ids)}, "
                 f"{st.count_slot}, {e(ps[1])}, {unions});", ind)
        elif op == "add_header":
            emit(f"p4n_h_set_valid(F, S, {x.href(ps[0])[1]});", ind)
        elif op == "add_header_fast":
            emit(f"F[{x.valid_slot(ps[0])}] = 1;", ind)
        elif op == "remove_header":
            emit(f"p4n_h_set_invalid(F, S, {x.href(ps[0])[1]});", ind)
        elif op in ("mark_to_drop", "drop"):
            if self.espec is None:
                raise ctx.unsupported("mark_to_drop without standard_metadata.egress_spec")
            emit(f"F[{self.espec.slot}] = {DROP_PORT};", ind)
            if self.mcast is not None:
                emit(f"F[{self.mcast.slot}] = 0;", ind)
        elif op == "exit":
            emit("S->ex = 1;", ind)
        elif op in ("no_op", "log_msg"):
            # log_msg only logs (INFO) in the Python engine: no packet-visible effect
            emit(";", ind)
        elif op in ("assert", "assume"):
            # the Python engine raises P4AssertionError: the packet's run stops here
            if not self._in_action:
                raise ctx.unsupported(f"{op} outside an action")
            code = "P4N_ERR_ASSERT" if op == "assert" else "P4N_ERR_ASSUME"
            emit(f"if (!({e(ps[0])})) {{ S->err = {code}; S->ex = 1; return; }}", ind)
        elif op == "count":
            self.cell(ctx.counter_ix, ctx.counters, "counter array", ps[0]["value"], ps[1], ind,
                      lambda c, t: f"p->cnt_pkts[{c}][{t}] += 1; p->cnt_bytes[{c}][{t}] += S->ilen;")
        elif op == "execute_meter":
            self.cell(ctx.meter_ix, ctx.meters, "meter array", ps[0]["value"], ps[1], ind,
                      lambda m, t: x.assign(ps[2], f"(v_t)p4n_meter_execute(&p->meters[{m}][{t}], "
                                                   f"p->now, S->ilen)"))
        elif op == "register_read":
            wide = ctx.declared_width(ps[1]["value"]) > 64   # a cell of two words (layout.py)
            self.cell(ctx.register_ix, ctx.registers, "register array", ps[1]["value"], ps[2], ind,
                      lambda r, t: x.assign(ps[0], f"p4n_w2(p->regs[{r}][2 * {t}], p->regs[{r}][2 * {t} + 1])"
                                            if wide else f"(v_t)p->regs[{r}][{t}]"))
        elif op == "register_write":
            width = ctx.declared_width(ps[0]["value"])
            value = f"(({e(ps[2])}) & {lit((1 << width) - 1)})"
            self.cell(ctx.register_ix, ctx.registers, "register array", ps[0]["value"], ps[1], ind,
                      lambda r, t: (f"v_t w_ = {value}; p->regs[{r}][2 * {t}] = (uint64_t)w_; "
                                    f"p->regs[{r}][2 * {t} + 1] = (uint64_t)((u_t)w_ >> 64);")
                      if width > 64 else f"p->regs[{r}][{t}] = (uint64_t){value};")
        elif op == "modify_field_with_hash_based_offset":
            calc = self.calcs.function(ps[2]["value"])
            t = ctx.tmp()
            emit(f"{{ v_t {t} = {e(ps[3])};", ind)
            emit(x.assign(ps[0], f"p4n_add(p4n_mod((v_t){calc}(p, F, S), {t} ? {t} : 1), {e(ps[1])})")
                 + " }", ind + 1)
        elif op == "modify_field_rng_uniform":
            emit(x.assign(ps[0], f"p4n_rng(&p->rng, {e(ps[1])}, {e(ps[2])})"), ind)
        elif op in ("clone_ingress_pkt_to_egress", "clone_egress_pkt_to_egress"):
            fl = e(ps[1]) if len(ps) > 1 else "0"
            emit(f"S->clone = (int32_t)(({e(ps[0])}) & 0xFFFF); S->clone_fl = (uint32_t)(({fl}) & 0xFFFF);", ind)
        elif op in ("resubmit", "resubmit_preserving_field_list"):
            emit(f"S->resubmit = (uint32_t)(({e(ps[0]) if ps else '0'}) & 0xFFFF);", ind)
        elif op in ("recirculate", "recirculate_preserving_field_list"):
            emit(f"S->recirc = (uint32_t)(({e(ps[0]) if ps else '0'}) & 0xFFFF);", ind)
        elif op == "generate_digest":
            emit(f"S->learn = (uint32_t)(({e(ps[1])}) & 0xFFFF);", ind)
        elif op == "truncate":
            t = ctx.tmp()
            emit(f"{{ v_t {t} = {e(ps[0])};", ind)
            emit(f"if (S->trunc < 0 || {t} < S->trunc) S->trunc = {t} < 0 ? 0 : (int64_t){t}; }}", ind + 1)
        elif op in ("add_to_field", "subtract_from_field"):
            fn = "p4n_add" if op == "add_to_field" else "p4n_sub"
            emit(x.assign(ps[0], f"{fn}({read(x.lvalue(ps[0]))}, {e(ps[1])})"), ind)
        elif op in _BINARY:
            fn = _BINARY[op]
            src = (f"{fn}({e(ps[1])}, {e(ps[2])})" if fn.startswith("p4n")
                   else f"({e(ps[1])} {fn} {e(ps[2])})")
            emit(x.assign(ps[0], src), ind)
        else:
            raise ctx.unsupported(f"primitive {op!r}")
