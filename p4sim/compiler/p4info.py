"""P4Info (``p4.config.v1.P4Info``) exactly as p4c's control-plane serializer writes it.

IDs: an ``@id(N)`` annotation wins (the 8-bit resource-type prefix is added when
missing); every other object gets ``prefix << 24 | (jenkins_one_at_a_time(name) &
0xffffff)``, assigned per resource type in sorted-name order with linear probing on
collision -- p4c's P4RuntimeSymbolTable -- so that our IDs equal p4c's for the same
program (``NoAction`` is 0x01446c37 = 21257015 in every p4c-generated P4Info).
Aliases are the shortest dot-separated suffix that is unique among all names.
"""

from __future__ import annotations

from typing import Optional

from p4sim.compiler import ast
from p4sim.compiler import types as T
from p4sim.compiler.consteval import const_value
from p4sim.compiler.diagnostics import CompileError
from p4sim.compiler.midend.controlplane import ControlPlane
from p4sim.compiler.midend.names import annotation_string
from p4sim.proto import p4i

ARCH = "v1model"
P = p4i.P4Ids
MATCH_TYPES = {"exact": p4i.MatchField.EXACT, "lpm": p4i.MatchField.LPM, "ternary": p4i.MatchField.TERNARY,
               "range": p4i.MatchField.RANGE, "optional": p4i.MatchField.OPTIONAL}


def jenkins_one_at_a_time(data: bytes) -> int:
    h = 0
    for b in data:
        h = (h + b) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    h = (h + (h << 15)) & 0xFFFFFFFF
    return h


class IdAllocator:
    """p4c's id assignment: explicit @id first, then hashed names per resource type."""

    def __init__(self) -> None:
        self.assigned: set[int] = set()
        self.ids: dict[tuple[int, str], int] = {}
        self.pending: dict[int, list[str]] = {}

    def add(self, prefix: int, name: str, decl: Optional[ast.Decl]) -> None:
        key = (prefix, name)
        if key in self.ids or name in self.pending.get(prefix, []):
            return
        explicit = _id_annotation(decl)
        if explicit is not None:
            top = explicit & 0xFF000000
            if top and top != prefix << 24:
                raise CompileError(f"{name}: @id has the wrong 8-bit prefix", decl.pos if decl else None)
            explicit |= prefix << 24
            if explicit in self.assigned:
                raise CompileError(f"@id {explicit} is assigned to multiple declarations",
                                   decl.pos if decl else None)
            self.assigned.add(explicit)
            self.ids[key] = explicit
        else:
            self.pending.setdefault(prefix, []).append(name)

    def compute(self) -> None:
        for prefix, names in self.pending.items():
            for name in sorted(set(names)):
                h = jenkins_one_at_a_time(name.encode())
                start = h
                while True:
                    cand = (prefix << 24) | (h & 0xFFFFFF)
                    if cand not in self.assigned:
                        break
                    h = (h + 1) & 0xFFFFFFFF
                    if h == start:
                        raise CompileError(f"no available id to represent {name} in P4Runtime")
                self.assigned.add(cand)
                self.ids[(prefix, name)] = cand
        self.pending = {}

    def __call__(self, prefix: int, name: str) -> int:
        return self.ids[(prefix, name)]


def _id_annotation(decl: Optional[ast.Decl]) -> Optional[int]:
    if decl is None:
        return None
    a = decl.annotation("id")
    if a is None:
        return None
    v = const_value(a.args[0]) if a.args else None
    if v is None or v < 0 or v > 0xFFFFFFFF:
        raise CompileError("@id should be an unsigned integer", a.pos)
    return v


class SuffixSet:
    """Shortest unique dot-separated suffixes (p4c's P4SymbolSuffixSet)."""

    def __init__(self) -> None:
        self.root: dict = {}
        self.symbols: set[str] = set()

    def add(self, name: str) -> None:
        if name in self.symbols:
            return
        self.symbols.add(name)
        node = self.root
        for comp in reversed(name.split(".")):
            child = node.setdefault(comp, [0, {}])
            child[0] += 1
            node = child[1]

    def alias(self, name: str) -> str:
        comps = name.split(".")
        node = self.root
        needed = 0
        for comp in reversed(comps):
            count, node = node[comp]
            needed += 1
            if count < 2:
                break
        return ".".join(comps[len(comps) - needed:])


def build_p4info(cp: ControlPlane) -> p4i.P4Info:
    ids = IdAllocator()
    suffixes = SuffixSet()
    kinds: list[tuple[int, list]] = [
        (P.TABLE, [(t.name, t.decl) for t in cp.tables]),
        (P.ACTION, [(a.name, a.decl) for a in cp.actions]),
        (P.ACTION_PROFILE, [(a.name, a.decl) for a in cp.action_profiles]),
        (P.COUNTER, [(c.name, c.decl) for c in cp.counters if c.direct_table is None]),
        (P.DIRECT_COUNTER, [(c.name, c.decl) for c in cp.counters if c.direct_table is not None]),
        (P.METER, [(m.name, m.decl) for m in cp.meters if m.direct_table is None]),
        (P.DIRECT_METER, [(m.name, m.decl) for m in cp.meters if m.direct_table is not None]),
        (P.REGISTER, [(r.name, r.decl) for r in cp.registers]),
        (P.DIGEST, [(d.name, None) for d in cp.digests]),
        (P.VALUE_SET, [(v.name, v.decl) for v in cp.value_sets]),
    ]
    for prefix, items in kinds:
        for name, decl in items:
            ids.add(prefix, name, decl)
            suffixes.add(name)
    # p4c's symbol for packet-I/O metadata is the header *type*; the preamble is
    # named after the annotation ("packet_in"), which is also its alias
    for h in cp.controller_headers:
        ids.add(P.CONTROLLER_HEADER, h.decl.name, h.decl)
    ids.compute()

    info = p4i.P4Info()
    info.pkg_info.arch = ARCH

    info.type_info.SetInParent()  # p4c always writes type_info, even empty

    def preamble(msg: object, prefix: int, name: str, decl: Optional[ast.Decl] = None) -> None:
        pre = msg.preamble  # type: ignore[attr-defined]
        if prefix == P.CONTROLLER_HEADER:
            pre.id, pre.alias = ids(prefix, decl.name), name  # type: ignore[union-attr]
        else:
            pre.id, pre.alias = ids(prefix, name), suffixes.alias(name)
        pre.name = name
        pre.annotations.extend(render_annotations(decl))
        for key in ("brief", "description"):  # p4c moves these into the doc field
            text = annotation_string(decl, key) if decl is not None else None
            if text is not None:
                setattr(pre.doc, key, text)

    for t in cp.tables:
        m = info.tables.add()
        preamble(m, P.TABLE, t.name, t.decl)
        for i, f in enumerate(t.match_fields, 1):
            mf = m.match_fields.add(id=i, name=f.name, bitwidth=f.bitwidth)
            mf.match_type = MATCH_TYPES[f.match_kind]
            if f.new_type is not None:
                mf.type_name.name = _new_type(info, f.new_type)
        for r in t.action_refs:
            if (P.ACTION, r.action) not in ids.ids:
                continue  # a @hidden action
            ar = m.action_refs.add(id=ids(P.ACTION, r.action))
            ar.scope = getattr(p4i.ActionRef, r.scope)
            if r.scope == "DEFAULT_ONLY":
                ar.annotations.append("@defaultonly")
            elif r.scope == "TABLE_ONLY":
                ar.annotations.append("@tableonly")
        if t.const_default_action is not None:
            m.const_default_action_id = ids(P.ACTION, t.const_default_action)
        if t.initial_default_action is not None and (P.ACTION, t.initial_default_action) in ids.ids:
            m.initial_default_action.action_id = ids(P.ACTION, t.initial_default_action)
            for i, (value, bits) in enumerate(t.initial_default_args, 1):  # full-width bytes, as p4c writes them
                m.initial_default_action.arguments.add(param_id=i, value=value.to_bytes((bits + 7) // 8, "big"))
        if t.implementation is not None:
            m.implementation_id = ids(P.ACTION_PROFILE, t.implementation)
        for r in t.direct_resources:
            kind = P.DIRECT_COUNTER if any(c.name == r for c in cp.counters) else P.DIRECT_METER
            m.direct_resource_ids.append(ids(kind, r))
        m.size = t.size
        if t.support_timeout:
            m.idle_timeout_behavior = p4i.Table.NOTIFY_CONTROL
        if t.is_const:
            m.is_const_table = True
        if t.has_initial_entries:
            m.has_initial_entries = True

    for a in cp.actions:
        m = info.actions.add()
        preamble(m, P.ACTION, a.name, a.decl)
        for i, (pname, w, nt) in enumerate(a.params, 1):
            param = m.params.add(id=i, name=pname, bitwidth=w)
            if nt is not None:
                param.type_name.name = _new_type(info, nt)

    for ap in cp.action_profiles:
        m = info.action_profiles.add()
        preamble(m, P.ACTION_PROFILE, ap.name, ap.decl)
        m.table_ids.extend(ids(P.TABLE, t) for t in ap.tables)
        m.with_selector = ap.with_selector
        m.size = ap.size
        m.max_group_size = ap.max_group_size

    for c in cp.counters:
        if c.direct_table is None:
            m = info.counters.add()
            preamble(m, P.COUNTER, c.name, c.decl)
            m.size = c.size
        else:
            m = info.direct_counters.add()
            preamble(m, P.DIRECT_COUNTER, c.name, c.decl)
            m.direct_table_id = ids(P.TABLE, c.direct_table)
        m.spec.unit = getattr(p4i.CounterSpec, c.unit)

    for mt in cp.meters:
        if mt.direct_table is None:
            m = info.meters.add()
            preamble(m, P.METER, mt.name, mt.decl)
            m.size = mt.size
        else:
            m = info.direct_meters.add()
            preamble(m, P.DIRECT_METER, mt.name, mt.decl)
            m.direct_table_id = ids(P.TABLE, mt.direct_table)
        m.spec.unit = getattr(p4i.MeterSpec, mt.unit)

    for h in cp.controller_headers:
        m = info.controller_packet_metadata.add()
        preamble(m, P.CONTROLLER_HEADER, h.name, h.decl)
        for i, (fname, w, anns) in enumerate(h.fields, 1):
            fid = i
            for a in anns:
                if a.name == "id" and a.args and const_value(a.args[0]) is not None:
                    fid = const_value(a.args[0])
            m.metadata.add(id=fid, name=fname, bitwidth=w)

    for v in cp.value_sets:
        m = info.value_sets.add()
        preamble(m, P.VALUE_SET, v.name, v.decl)
        for i, (fname, w) in enumerate(v.match, 1):
            mf = m.match.add(id=i, name=fname, bitwidth=w)
            mf.match_type = p4i.MatchField.EXACT
        m.size = v.size

    for r in cp.registers:
        m = info.registers.add()
        preamble(m, P.REGISTER, r.name, r.decl)
        _type_spec(m.type_spec, r.cell_type, info)
        m.size = r.size

    for d in cp.digests:
        m = info.digests.add()
        preamble(m, P.DIGEST, d.name)
        _type_spec(m.type_spec, d.struct, info)
    return info


#: Annotations p4c consumes itself instead of copying them into the preamble.
_STRUCTURAL = {"name", "id", "hidden", "field_list", "defaultonly", "tableonly", "brief", "description"}


def render_annotations(decl: Optional[ast.Decl]) -> list[str]:
    """``@noWarn("unused")``-style strings, as p4c lists them in a preamble."""
    out = []
    for a in getattr(decl, "annotations", None) or []:
        if a.name in _STRUCTURAL:
            continue
        args = []
        for x in a.args:
            if isinstance(x, ast.StringLit):
                args.append('"' + x.value.replace("\\", "\\\\").replace('"', '\\"') + '"')
            elif isinstance(x, ast.IntLit):
                args.append(str(x.value))
            elif isinstance(x, ast.BoolLit):
                args.append("true" if x.value else "false")
            elif isinstance(x, ast.PathExpr):
                args.append(x.name)
        out.append(f"@{a.name}" + (f"({', '.join(args)})" if a.args else ""))
    return out


def _new_type(info: p4i.P4Info, t: T.NewT) -> str:
    """Register ``type`` declaration ``t`` in ``type_info.new_types``; its name."""
    nt = info.type_info.new_types[t.name]
    if not nt.HasField("original_type"):
        _type_spec(nt.original_type, t.base, info)
    return t.name


def _type_spec(spec: object, t: T.Type, info: p4i.P4Info) -> None:
    """Fill a P4DataTypeSpec for ``t``, registering named types in ``type_info``."""
    if isinstance(t, T.NewT):
        spec.new_type.name = _new_type(info, t)  # type: ignore[attr-defined]
        return
    if isinstance(t, T.BitT):
        _bitstring(spec.bitstring, t)  # type: ignore[attr-defined]
    elif isinstance(t, T.BoolT):
        spec.bool.SetInParent()  # type: ignore[attr-defined]
    elif isinstance(t, T.EnumT) and t.underlying is not None:
        spec.serializable_enum.name = t.name  # type: ignore[attr-defined]
        se = info.type_info.serializable_enums[t.name]
        if not se.members:
            se.underlying_type.bitwidth = t.underlying.width
            for name, value in zip(t.members, t.values):
                se.members.add(name=name, value=value.to_bytes((t.underlying.width + 7) // 8, "big"))
    elif isinstance(t, T.HeaderT):
        spec.header.name = t.name  # type: ignore[attr-defined]
        h = info.type_info.headers[t.name]
        if not h.members:
            for f in t.fields:
                mem = h.members.add(name=f.name)
                _bitstring(mem.type_spec, f.type)
    elif isinstance(t, T.StructT):
        spec.struct.name = t.name  # type: ignore[attr-defined]
        s = info.type_info.structs[t.name]
        if not s.members:
            for f in t.fields:
                mem = s.members.add(name=f.name)
                _type_spec(mem.type_spec, f.type, info)
    elif isinstance(t, T.TupleT):
        for e in t.elements:
            _type_spec(spec.tuple.members.add(), e, info)  # type: ignore[attr-defined]
    else:
        raise CompileError(f"type {t} cannot be described in P4Info")


def _bitstring(spec: object, t: T.Type) -> None:
    while isinstance(t, T.NewT):
        t = t.base
    if isinstance(t, T.BitT):
        if t.signed:
            spec.int.bitwidth = t.width  # type: ignore[attr-defined]
        else:
            spec.bit.bitwidth = t.width  # type: ignore[attr-defined]
    elif isinstance(t, T.VarbitT):
        spec.varbit.max_bitwidth = t.max_width  # type: ignore[attr-defined]
    else:
        raise CompileError(f"type {t} cannot be described in P4Info")
