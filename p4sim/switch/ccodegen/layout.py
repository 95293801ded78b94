"""The C file's preamble: what the runtime (native/runtime.h) and the driver
(native/driver.h) read from the program -- the PHV size and template, the slots and
masks of the standard metadata simple_switch reads and writes (as
`V1Switch._find_standard_metadata` finds them), the field and learn lists, the sizes of
the extern arrays -- and the check that the program's data fits the C engine at all.
"""

from __future__ import annotations

from ..errors import ProgramError
from ..program import Layout
from .context import CContext
from .expressions import M64

#: A register cell is one uint64_t, or two (least significant first) up to this width.
MAX_REGISTER_BITS = 128


def register_words(ctx: CContext, name: str) -> int:
    """uint64_t words per cell of register array `name`."""
    return 2 if ctx.declared_width(name) > 64 else 1


def check(ctx: CContext) -> None:
    """Unsupported for data the C engine does not hold: registers wider than 128
    bits, many-rate meters."""
    js = ctx.js
    for r in js.get("register_arrays", []):
        if int(r["bitwidth"]) > MAX_REGISTER_BITS:
            with ctx.at(f"register_arrays {r['name']!r}"):
                raise ctx.unsupported(f"register of {r['bitwidth']} bits (> {MAX_REGISTER_BITS})")
    for m in js.get("meter_arrays", []):
        if int(m.get("rate_count", 2)) > 4:
            with ctx.at(f"meter_arrays {m['name']!r}"):
                raise ctx.unsupported("a meter with more than 4 rates")


def _slot(L: Layout, *names: str) -> tuple[int, int]:
    """(slot, mask) of the first of `names` the program has, (-1, 0) if none."""
    for n in names:
        f = L.find_field(n)
        if f is not None:
            return f.slot, f.mask
    return -1, 0


def preamble(ctx: CContext, sizes: dict[str, int]) -> list[str]:
    """The #defines and tables that come before runtime.h."""
    L, js = ctx.layout, ctx.js
    out = [f"#define {k} {v}" for k, v in sizes.items()]
    std = {
        "IN": ("standard_metadata.ingress_port",),
        "LEN": ("standard_metadata.packet_length",),
        "INST": ("standard_metadata.instance_type",),
        "ESPEC": ("standard_metadata.egress_spec",),
        "EPORT": ("standard_metadata.egress_port",),
        "PERR": ("standard_metadata.parser_error",),
        "CERR": ("standard_metadata.checksum_error",),
        "MCAST": ("intrinsic_metadata.mcast_grp", "standard_metadata.mcast_grp"),
        "RID": ("intrinsic_metadata.egress_rid", "standard_metadata.egress_rid"),
        "IGTS": ("intrinsic_metadata.ingress_global_timestamp",
                 "standard_metadata.ingress_global_timestamp"),
        "EGTS": ("intrinsic_metadata.egress_global_timestamp",
                 "standard_metadata.egress_global_timestamp"),
        "PRIO": ("intrinsic_metadata.priority", "standard_metadata.priority"),
    }
    for short, names in std.items():
        slot, mask = _slot(L, *names)
        if slot < 0 and short in ("IN", "LEN", "INST", "ESPEC", "EPORT"):
            raise ProgramError(f"the program has no {names[0]} field (simple_switch requires it)")
        out.append(f"#define P4N_S_{short} {slot}")
        out.append(f"#define P4N_M_{short} {hex(mask)}ULL")
    espec = L.find_field("standard_metadata.egress_spec")
    out.append(f"#define P4N_ESPEC_RESET {hex((511 + 1) & espec.mask)}ULL")
    q = [_slot(L, "queueing_metadata." + n, "standard_metadata." + n)
         for n in ("enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth")]
    have_q = all(s >= 0 for s, _m in q)
    out.append(f"#define P4N_HAVE_Q {int(have_q)}")
    if have_q:
        for i, (s, m) in enumerate(q):
            out += [f"#define P4N_S_Q{i} {s}", f"#define P4N_M_Q{i} {hex(m)}ULL"]
    return out


def header_tables(ctx: CContext) -> list[str]:
    """Per header id its validity slot, words (`CContext.header_words`: its fields'
    slots, then their further words), word count and wire bytes, and per stack its
    header ids: the Python engine's ``HV``/``HF`` and ``STK_`` tables, for headers
    chosen at run time (native/headers.h)."""
    L = ctx.layout
    n = max((h.id for h in L.headers), default=0) + 1
    by_id = [L.by_id.get(i) for i in range(n)]
    rows = [ctx.header_words(h) if h else [] for h in by_id]
    maxf = max((len(r) for r in rows), default=0) + 1
    hv = [str(h.valid_slot if h else 0) for h in by_id]
    hf = ["{" + "".join(f"{w}, " for w in r) + "0}" for r in rows]
    out = [f"#define P4N_NHEADERS {n}",
           f"static const int p4n_hv[{n}] = {{{', '.join(hv)}}};",
           f"static const int p4n_hf[{n}][{maxf}] = {{{', '.join(hf)}}};",
           f"static const int p4n_hnf[{n}] = {{{', '.join(str(len(r)) for r in rows)}}};",
           f"static const int p4n_hneq[{n}] = "
           f"{{{', '.join(str(ctx.compared_words(h) if h else 0) for h in by_id)}}};",
           f"static const int p4n_hbytes[{n}] = {{{', '.join(str(h.nbytes if h else 0) for h in by_id)}}};"]
    sib = [h.union_siblings if h else [] for h in by_id]
    maxs = max((len(x) for x in sib), default=0) + 1
    out.append(f"static const int p4n_hnsib[{n}] = {{{', '.join(str(len(x)) for x in sib)}}};")
    out.append(f"static const int p4n_hsib[{n}][{maxs}] = "
               f"{{{', '.join('{' + ''.join(f'{L.by_id[x].valid_slot}, ' for x in xs) + '0}' for xs in sib)}}};")
    nu = max(L.union_by_id, default=0) + 1
    members = [L.union_by_id[i].header_ids if i in L.union_by_id else [] for i in range(nu)]
    maxm = max((len(m) for m in members), default=0) + 1
    out.append(f"#define P4N_NUNIONS {nu}")
    out.append(f"static const int p4n_unm[{nu}] = {{{', '.join(str(len(m)) for m in members)}}};")
    out.append(f"static const int p4n_uh[{nu}][{maxm}] = "
               f"{{{', '.join('{' + ''.join(f'{h}, ' for h in m) + '0}' for m in members)}}};")
    for i, st in enumerate(list(L.stacks.values()) + list(L.union_stacks.values())):
        out.append(f"static const int p4n_stk_{i}[{len(st.header_ids) + 1}] = "
                   f"{{{', '.join(map(str, st.header_ids))}, 0}};")
    return out


def tables(ctx: CContext) -> list[str]:
    """The PHV template, the metadata slots, the field and learn lists (after runtime.h)."""
    L, js = ctx.layout, ctx.js
    template = [int(v) for v in L.template()] + [0] * (ctx.nslots - L.nslots)
    for slot, more in ctx.more.items():   # a wide value's higher words
        for i, w in enumerate(more, 1):
            template[w] = (template[slot] >> (64 * i)) & M64
        template[slot] &= M64
    out = [f"static const uint64_t p4n_template[{ctx.nslots + 1}] = "
           f"{{{', '.join(f'{v}ULL' for v in template) or '0'}}};"]
    out += header_tables(ctx)
    meta = [w for h in L.headers if h.metadata for w in ctx.header_words(h)]
    out.append(f"#define P4N_NMETA {len(meta)}")
    out.append(f"static const int p4n_meta_slots[{len(meta) + 1}] = {{{', '.join(map(str, meta)) or '0'}}};")
    for kind, key in (("field", "field_lists"), ("learn", "learn_lists")):
        cases = []
        for fl in js.get(key, []):
            slots = []
            for e in fl.get("elements", []):
                if e.get("type") != "field":
                    raise ProgramError(f"{fl['name']}: only field elements are supported")
                # every word of a wide or varbit field (not a varbit's length: the
                # Python engine copies and reports the value slot alone)
                slots += ctx.words(L.field(*e["value"]))
            out.append(f"static const int p4n_{kind}_{fl['id']}[{len(slots) + 1}] = "
                       f"{{{', '.join(map(str, slots)) or '0'}}};")
            cases.append(f"case {fl['id']}: *n = {len(slots)}; return p4n_{kind}_{fl['id']};")
        out.append(f"static const int *p4n_{kind}_list(uint32_t id, int *n) {{")
        out.append(f"    switch (id) {{ {' '.join(cases)} default: *n = 0; return NULL; }}")
        out.append("}")
    return out
