"""The deparser in C, ``p4n_deparse(p, F, S, &b)`` writing the valid headers (the
driver appends the payload), and the checksums verified after the parser
(``p4n_verify``) and updated before the deparser (``p4n_update``) -- the twin of
`codegen.deparser`.
"""

from __future__ import annotations

from collections.abc import Iterator

from .actions import CActions
from .calculations import CCalculations
from .context import CContext
from .expressions import CExpressions, pieces, read, slot_of


class CDeparser:
    """The deparser and checksum functions of one program."""

    def __init__(self, ctx: CContext, exprs: CExpressions, actions: CActions,
                 calcs: CCalculations) -> None:
        self.ctx = ctx
        self.exprs = exprs
        self.actions = actions
        self.calcs = calcs

    def emit(self, deparser: dict) -> None:
        """Emit `p4n_deparse`: the deparser's primitives, then the valid headers."""
        emit, L = self.ctx.emit, self.ctx.layout
        emit("static void p4n_deparse(p4n_pipeline *p, uint64_t *F, p4n_state *S, p4n_bitbuf *b) {")
        emit("(void)p; (void)S;", 1)
        for i, pr in enumerate(deparser.get("primitives", [])):
            with self.ctx.at(f"deparser primitives[{i}]"):
                self.actions.primitive(pr, 1)
        for name in deparser.get("order", []):
            h = L.header(name)
            emit(f"if (F[{h.valid_slot}]) {{", 1)
            for f in h.fields:
                if f.varbit:   # as many bits as it has now
                    words = self.ctx.words(f)
                    emit(f"{{ uint64_t w_[{len(words)}] = {{{', '.join(f'F[{w}]' for w in words)}}}; "
                         f"p4n_put_vl(b, w_, {len(words)}, F[{f.len_slot}]); }}", 2)
                    continue
                for code, width in pieces(slot_of(self.ctx, f)):
                    emit(f"p4n_put(b, {code}, {width});", 2)
            if h.fixed_bits % 8:
                emit(f"p4n_put(b, 0, {8 - h.fixed_bits % 8});", 2)
            emit("}", 1)
        emit("}")
        emit("")

    def emit_checksums(self) -> None:
        """Emit `p4n_verify(p, F, S) -> ok` and `p4n_update(p, F, S)`."""
        emit, x = self.ctx.emit, self.exprs
        emit("static int p4n_verify(p4n_pipeline *p, uint64_t *F, p4n_state *S) {")
        emit("int ok = 1;", 1)
        emit("(void)p; (void)F; (void)S;", 1)
        for c, calc, cond in self._checksums("verify"):
            f = x.lvalue({"type": "field", "value": c["target"]})
            emit(f"if (({cond}) && {read(f)} != (v_t){calc}(p, F, S)) ok = 0;", 1)
        emit("return ok;", 1)
        emit("}")
        emit("")
        emit("static void p4n_update(p4n_pipeline *p, uint64_t *F, p4n_state *S) {")
        emit("(void)p; (void)F; (void)S;", 1)
        for c, calc, cond in self._checksums("update"):
            emit(f"if ({cond}) {{ {x.assign({'type': 'field', 'value': c['target']}, f'(v_t){calc}(p, F, S)')} }}", 1)
        emit("}")
        emit("")

    def _checksums(self, use: str) -> Iterator[tuple[dict, str, str]]:
        for i, c in enumerate(self.ctx.js.get("checksums", [])):
            if c.get(use, True):
                with self.ctx.at(f"checksums[{i}]"):
                    cond = self.exprs.expr(c["if_cond"]) if c.get("if_cond") else "1"
                    yield c, self.calcs.function(c["calculation"]), cond
