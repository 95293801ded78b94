"""Actions and their primitives: ``A_<id>(F, S, d)`` per action, each primitive call one
or a few statements.

The primitives are BMv2's (``assign``, ``add_header``, ``count``, ``register_write``,
``clone_ingress_pkt_to_egress``...). Those that hand work to the switch outside the
pipeline (clone, resubmit, recirculate, digest, truncate) only record it in the
`PacketState` `S`; `V1Switch` acts on it where simple_switch does. An action with
jumps (p4c lowers `if` inside actions to ``_jump_if_zero``) runs as a small loop over a
program counter; `exit` lets the action finish and then ends the control, as in BMv2.
"""

from __future__ import annotations

from ..errors import ProgramError
from ..program import FieldInfo
from .calculations import Calculations
from .context import Context
from .expressions import Expressions

#: simple_switch's drop port: `mark_to_drop` sets egress_spec to it, and a packet whose
#: egress_spec is this port at the end of ingress or of egress is dropped.
DROP_PORT = 511

#: Primitives that turn an action's body into a loop over a program counter or need
#: the `exit` flag: an action with one of these is always called, never inlined.
_CONTROL_PRIMITIVES = ("_jump", "_jump_if_zero", "exit")


class Actions:
    """Action functions and primitive statements of one program."""

    def __init__(self, ctx: Context, exprs: Expressions, calcs: Calculations) -> None:
        self.ctx = ctx
        self.L = ctx.layout
        self.exprs = exprs
        self.calcs = calcs
        L = self.L
        self.std = {n: L.find_field("standard_metadata." + n) for n in ("egress_spec", "mcast_grp")}
        mcast = L.find_field("intrinsic_metadata.mcast_grp")
        if mcast is not None:
            self.std["mcast_grp"] = mcast

    def action(self, act: dict) -> None:
        """Emit `A_<id>(F, S, d)`."""
        emit = self.ctx.emit
        prims = act.get("primitives", [])
        emit(f"def {self.ctx.symbols.action(act['id'])}(F, S, d):")
        exits = any(p["op"] == "exit" for p in prims)
        if exits:
            emit("ex = False", 1)
        if any(p["op"] in ("_jump", "_jump_if_zero") for p in prims):
            emit("pc = 0", 1)
            emit("while True:", 1)
            for i, p in enumerate(prims):
                emit(f"{'if' if i == 0 else 'elif'} pc == {i}:", 2)
                if p["op"] == "_jump":
                    emit(f"pc = {self.exprs.expr(p['parameters'][0])}", 3)
                    emit("continue", 3)
                elif p["op"] == "_jump_if_zero":
                    ps = p["parameters"]
                    emit(f"if ({self.exprs.expr(ps[0])}) == 0:", 3)
                    emit(f"pc = {self.exprs.expr(ps[1])}", 4)
                    emit("continue", 4)
                else:
                    self.primitive(p, 3)
            emit("else:", 2)
            emit("break", 3)
            emit("pc += 1", 2)
        elif not prims:
            emit("pass", 1)
        else:
            for p in prims:
                self.primitive(p, 1)
        if exits:
            emit("if ex: raise _Exit()", 1)
        emit("")

    def run(self, act: dict, data: list[int], ind: int) -> None:
        """Run action `act` with constant `data`: its primitives inline when it is
        straight-line code (no jumps, no exit), else a call."""
        prims = act.get("primitives", [])
        if any(p["op"] in _CONTROL_PRIMITIVES for p in prims):
            self.ctx.emit(f"{self.ctx.symbols.action(act['id'])}(F, S, {tuple(data)!r})", ind)
            return
        if data:
            self.ctx.emit(f"d = {tuple(data)!r}", ind)
        for p in prims:
            self.primitive(p, ind)

    def _std(self, name: str) -> FieldInfo:
        f = self.std.get(name)
        if f is None:
            raise ProgramError(f"program has no standard_metadata.{name} field")
        return f

    def primitive(self, p: dict, ind: int) -> None:
        """Emit the statements of one primitive call at indentation `ind`."""
        ctx, L, x = self.ctx, self.L, self.exprs
        emit, e = ctx.emit, x.expr
        op = p["op"]
        ps = p.get("parameters", [])
        if op in ("assign", "modify_field"):
            emit(x.assign(ps[0], e(ps[1])), ind)
        elif op == "assign_VL":
            dst_data, dst_len = x.varbit_ref(ps[0])
            src_data, src_len = x.varbit_ref(ps[1])
            emit(f"{dst_data} = {src_data}", ind)
            emit(f"{dst_len} = {src_len}", ind)
        elif op in ("assign_header", "copy_header"):
            _s, dcode, _h = x.href(ps[0])
            _s2, scode, _h2 = x.href(ps[1])
            emit(f"_HO.copy(F, {dcode}, {scode})", ind)
        elif op == "assign_union":
            d, sample = x.uref(ps[0])
            s, _ = x.uref(ps[1])
            for i in range(len(sample.header_ids)):
                emit(f"_HO.copy(F, UH[{d}][{i}], UH[{s}][{i}])", ind)
        elif op == "assign_header_stack":
            dst = x.stack(ps[0]["value"])
            src = x.stack(ps[1]["value"])
            for dh, sh in zip(dst.header_ids, src.header_ids):
                emit(f"_HO.copy(F, {dh}, {sh})", ind)
            emit(f"F[{dst.count_slot}] = F[{src.count_slot}]", ind)
        elif op == "assign_union_stack":
            dst = L.union_stacks[ps[0]["value"]]
            src = L.union_stacks[ps[1]["value"]]
            for du, su in zip(dst.header_ids, src.header_ids):
                for dh, sh in zip(L.union_by_id[du].header_ids, L.union_by_id[su].header_ids):
                    emit(f"_HO.copy(F, {dh}, {sh})", ind)
            emit(f"F[{dst.count_slot}] = F[{src.count_slot}]", ind)
        elif op in ("push", "pop"):
            name = ps[0]["value"]
            fn = "push_front" if op == "push" else "pop_front"
            if name in L.union_stacks:
                st = L.union_stacks[name]
                elements = tuple(tuple(L.union_by_id[u].header_ids) for u in st.header_ids)
            else:
                st = x.stack(name)
                elements = tuple((h,) for h in st.header_ids)
            emit(f"_HO.{fn}(F, {elements!r}, {st.count_slot}, {e(ps[1])})", ind)
        elif op in ("add_header", "add_header_fast"):
            _s, code, _h = x.href(ps[0])
            if op == "add_header_fast":
                emit(f"F[HV[{code}]] = True", ind)
            else:
                emit(f"_HO.set_valid(F, S, {code})", ind)
        elif op == "remove_header":
            _s, code, _h = x.href(ps[0])
            emit(f"_HO.set_invalid(F, S, {code})", ind)
        elif op in ("mark_to_drop", "drop"):
            emit(f"F[{self._std('egress_spec').slot}] = {DROP_PORT}", ind)
            if self.std.get("mcast_grp") is not None:
                emit(f"F[{self.std['mcast_grp'].slot}] = 0", ind)
        elif op == "exit":
            # BMv2 finishes the action, then skips the rest of the pipeline
            emit("ex = True", ind)
        elif op == "no_op":
            emit("pass", ind)
        elif op == "log_msg":
            values = ps[1]["value"] if len(ps) > 1 else []
            args = "".join(f"{e(v)}, " for v in values)
            emit(f"_log_msg({e(ps[0])}, ({args}))", ind)
        elif op in ("assert", "assume"):
            emit(f"if not {e(ps[0])}: raise _AssertFail({op!r} + ' failed')", ind)
        elif op == "count":
            name = ps[0]["value"]
            size = int(ctx.declared(ctx.counters, "counter array", name)["size"])
            t = ctx.tmp()
            emit(f"{t} = {e(ps[1])}", ind)
            emit(f"if {t} < {size}:", ind)
            emit(f"{ctx.symbols.counter_packets(name)}[{t}] += 1; "
                 f"{ctx.symbols.counter_bytes(name)}[{t}] += S.ilen", ind + 1)
        elif op == "execute_meter":
            name = ps[0]["value"]
            ctx.declared(ctx.meters, "meter array", name)
            t = ctx.tmp()
            emit(f"{t} = {ctx.symbols.meter(name)}.execute({e(ps[1])}, S.ilen)", ind)
            emit(f"if {t} is not None:", ind)
            emit(x.assign(ps[2], t), ind + 1)
        elif op == "register_read":
            name = ps[1]["value"]
            reg = x.register(name)
            t = ctx.tmp()
            emit(f"{t} = {e(ps[2])}", ind)
            emit(f"if {t} < {int(ctx.registers[name]['size'])}:", ind)
            emit(x.assign(ps[0], f"{reg}[{t}]"), ind + 1)
        elif op == "register_write":
            name = ps[0]["value"]
            reg = x.register(name)
            t = ctx.tmp()
            width = int(ctx.registers[name]["bitwidth"])
            emit(f"{t} = {e(ps[1])}", ind)
            emit(f"if {t} < {int(ctx.registers[name]['size'])}:", ind)
            emit(f"{reg}[{t}] = ({e(ps[2])}) & {hex((1 << width) - 1)}", ind + 1)
        elif op == "modify_field_with_hash_based_offset":
            calc = self.calcs.name(ps[2]["value"])
            t = ctx.tmp()
            emit(f"{t} = {e(ps[3])}", ind)
            emit(x.assign(ps[0], f"({calc}(F, S) % ({t} or 1)) + {e(ps[1])}"), ind)
        elif op == "modify_field_rng_uniform":
            emit(x.assign(ps[0], f"_rng({e(ps[1])}, {e(ps[2])})"), ind)
        elif op in ("clone_ingress_pkt_to_egress", "clone_egress_pkt_to_egress"):
            fl = e(ps[1]) if len(ps) > 1 else "0"
            emit(f"S.clone = ({e(ps[0])}) & 0xFFFF; S.clone_fl = ({fl}) & 0xFFFF", ind)
        elif op in ("resubmit", "resubmit_preserving_field_list"):
            fl = e(ps[0]) if ps else "0"
            emit(f"S.resubmit = ({fl}) & 0xFFFF", ind)
        elif op in ("recirculate", "recirculate_preserving_field_list"):
            fl = e(ps[0]) if ps else "0"
            emit(f"S.recirc = ({fl}) & 0xFFFF", ind)
        elif op == "generate_digest":
            emit(f"S.learn = ({e(ps[1])}) & 0xFFFF", ind)
        elif op == "truncate":
            t = ctx.tmp()
            emit(f"{t} = {e(ps[0])}", ind)
            emit(f"S.trunc = {t} if S.trunc is None or {t} < S.trunc else S.trunc", ind)
        elif op in ("add_to_field", "subtract_from_field"):
            sign = "+" if op == "add_to_field" else "-"
            code, _w, _s = x.lvalue(ps[0])
            emit(x.assign(ps[0], f"{code} {sign} {e(ps[1])}"), ind)
        elif op in _BINARY:
            emit(x.assign(ps[0], f"{e(ps[1])} {_BINARY[op]} {e(ps[2])}"), ind)
        else:
            raise ProgramError(f"unsupported primitive {op!r}")


#: P4-14's arithmetic primitives (``add(dst, a, b)``...) and their Python operator.
_BINARY = {"add": "+", "subtract": "-", "bit_and": "&", "bit_or": "|", "bit_xor": "^",
           "shift_left": "<<", "shift_right": ">>"}
