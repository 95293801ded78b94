"""Parsing: preprocessed P4-16 text -> `ast.Program`.

The grammar (`p4_16.lark`) is LALR(1) over the tokens `lexer.py` classifies; lark
calls the `_Build` methods below as it reduces (no intermediate parse tree), so each
method turns one grammar rule into AST nodes. Syntax errors become `CompileError`
with the original file position.

Representation choices the later passes rely on:

* a constructor call in an expression (``MyParser()`` in ``V1Switch(...) main;``,
  ``action_selector(...)`` in a table property) is a `CallExpr` whose ``target`` is a
  `TypeNameExpr`;
* ``E.A`` / ``error.X`` are `MemberExpr` over a `TypeNameExpr`;
* a select/entry keyset is a list with one Expr per key; masks and ranges are
  `BinaryExpr` with op ``&&&`` / ``..``.
"""

from __future__ import annotations

import copy
import os
import threading
from typing import Any, Optional, Union

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from p4sim.compiler import ast
from p4sim.compiler.diagnostics import CompileError, SrcPos
from p4sim.compiler.lexer import TokenListLexer, classify, scan, to_lark
from p4sim.compiler.preprocess import Preprocessed

_GRAMMAR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "p4_16.lark")

_BIN_OPS = {
    "bin_or": "||", "bin_and": "&&", "bin_eq": "==", "bin_ne": "!=", "bin_lt": "<",
    "bin_gt": ">", "bin_le": "<=", "bin_ge": ">=", "bin_bor": "|", "bin_xor": "^",
    "bin_band": "&", "bin_shl": "<<", "bin_shr": ">>", "bin_add": "+", "bin_sub": "-",
    "bin_addsat": "|+|", "bin_subsat": "|-|", "bin_concat": "++", "bin_mul": "*",
    "bin_div": "/", "bin_mod": "%",
}


def parse_int(text: str) -> tuple[int, Optional[int], bool]:
    """``8w0x0a`` -> (10, 8, False); ``4s3`` -> (3, 4, True); ``42`` -> (42, None, False)."""
    width: Optional[int] = None
    signed = False
    for i, ch in enumerate(text):
        if ch in "ws" and text[:i].isdigit():
            width, signed, text = int(text[:i]), ch == "s", text[i + 1:]
            break
    digits = text.replace("_", "")
    low = digits[:2].lower()
    base = {"0x": 16, "0b": 2, "0o": 8, "0d": 10}.get(low)
    value = int(digits[2:], base) if base else int(digits, 10)
    return value, width, signed


class _Build(Transformer):
    """One method per grammar rule/alias; children arrive already transformed."""

    def __init__(self, positions: list[SrcPos]):
        super().__init__(visit_tokens=False)
        self.positions = positions
        self.program_pos = SrcPos("<input>", 1, 1)

    # ------------------------------------------------------------ helpers
    def p(self, x: Any) -> SrcPos:
        if isinstance(x, Token):
            return self.positions[x.start_pos]
        if isinstance(x, ast.Node):
            return x.pos
        if isinstance(x, list) and x:
            return self.p(x[0])
        raise AssertionError(f"no position for {x!r}")

    @staticmethod
    def nodes(c: list) -> list:
        return [x for x in c if not isinstance(x, Token)]

    # ------------------------------------------------------------ program
    def start(self, c: list) -> ast.Program:
        return ast.Program(self.program_pos, [d for d in c if d is not None])

    def annotated(self, c: list) -> Any:
        annos, decl = c
        if annos:
            decl.annotations = annos + decl.annotations
        return decl

    def annotated_stmt(self, c: list) -> Any:
        annos, stmt = c
        if isinstance(stmt, ast.Decl):
            return self.annotated(c)
        # Statement annotations (@atomic, @likely ...) are hints that change nothing
        # for a software switch that runs one packet at a time.
        return stmt

    def empty_decl(self, c: list) -> None:
        return None

    def annotations(self, c: list) -> list:
        return list(c)

    def anno_plain(self, c: list) -> ast.Annotation:
        return ast.Annotation(self.p(c[0]), c[0][1:])

    def anno_args(self, c: list) -> ast.Annotation:
        return ast.Annotation(self.p(c[0]), c[0][1:], list(c[1] or []))

    def anno_arg_list(self, c: list) -> list:
        return list(c)

    def anno_type_arg(self, c: list) -> ast.Expr:
        return ast.TypeNameExpr(c[0].pos, c[0])

    def anno_kv(self, c: list) -> ast.Annotation:
        fields = c[1] or []
        return ast.Annotation(self.p(c[0]), c[0][1:], [ast.StructInitExpr(self.p(c[0]), fields)])

    def kv_list(self, c: list) -> list:
        return [x for x in c if x is not None]

    def kv_pair(self, c: list) -> tuple:
        return (str(c[0]), c[1])

    def name(self, c: list) -> Token:
        return c[0]

    def nontype_kw(self, c: list) -> Token:
        return c[0]

    def type_params(self, c: list) -> list[str]:
        return [str(t) for t in c if t.type == "IDENT"]

    # ------------------------------------------------------------ types
    def type_ref(self, c: list) -> ast.TypeRef:
        return c[0]

    ret_type = type_ref
    type_arg = type_ref

    def base_type(self, c: list) -> ast.TypeRef:
        return ast.BaseTypeRef(self.p(c[0]), str(c[0]))

    def bit1_type(self, c: list) -> ast.TypeRef:
        pos = self.p(c[0])
        return ast.BitTypeRef(pos, "bit", ast.IntLit(pos, 1))

    def bit_type(self, c: list) -> ast.TypeRef:
        return ast.BitTypeRef(self.p(c[0]), str(c[0]), c[2])

    def width_int(self, c: list) -> ast.Expr:
        v, w, s = parse_int(c[0])
        return ast.IntLit(self.p(c[0]), v, w, s)

    def width_name(self, c: list) -> ast.Expr:
        return ast.PathExpr(self.p(c[0]), str(c[0]))

    def width(self, c: list) -> ast.Expr:
        return c[0]

    def named_type(self, c: list) -> ast.TypeRef:
        return ast.NamedTypeRef(self.p(c[0]), str(c[0]))

    def specialized_type(self, c: list) -> ast.TypeRef:
        return ast.NamedTypeRef(self.p(c[0]), str(c[0]), c[2])

    def tuple_type(self, c: list) -> ast.TypeRef:
        return ast.TupleTypeRef(self.p(c[0]), c[1])

    def list_type(self, c: list) -> ast.TypeRef:
        pos = self.p(c[0])
        if len(c[1]) != 1:
            raise CompileError(f"list takes one type argument, not {len(c[1])}", pos)
        return ast.ListTypeRef(pos, c[1][0])

    def stack_type(self, c: list) -> ast.TypeRef:
        return ast.StackTypeRef(c[0].pos, c[0], c[1])

    def type_args(self, c: list) -> list:
        return list(c)

    def void_type(self, c: list) -> ast.TypeRef:
        return ast.BaseTypeRef(self.p(c[0]), "void")

    def dontcare_type(self, c: list) -> ast.TypeRef:
        return ast.DontCareTypeRef(self.p(c[0]))

    # ------------------------------------------------------------ type declarations
    def _fields(self, c: list) -> list:
        return [f for f in c if isinstance(f, ast.FieldDecl)]

    def header_decl(self, c: list) -> ast.Decl:
        self._no_type_params(c, "generic headers")
        return ast.HeaderDecl(self.p(c[0]), str(c[0]), self._fields(c[2:]))

    def header_union_decl(self, c: list) -> ast.Decl:
        self._no_type_params(c, "generic header unions")
        return ast.HeaderUnionDecl(self.p(c[0]), str(c[0]), self._fields(c[2:]))

    def struct_decl(self, c: list) -> ast.Decl:
        return ast.StructDecl(self.p(c[0]), str(c[0]), self._fields(c[2:]), c[1] or [])

    def _no_type_params(self, c: list, what: str) -> None:
        if c[1]:
            raise CompileError(f"{what} are not supported", self.p(c[0]), kind="unsupported")

    def field(self, c: list) -> ast.FieldDecl:
        annos, tref, name = c
        return ast.FieldDecl(self.p(name), str(name), tref, annotations=annos)

    def enum_decl(self, c: list) -> ast.Decl:
        members = [ast.EnumMember(self.p(t), str(t)) for t in c[1:] if t is not None]
        return ast.EnumDecl(self.p(c[0]), str(c[0]), members)

    def ser_enum_decl(self, c: list) -> ast.Decl:
        members = [m for m in c[2:] if m is not None]
        return ast.EnumDecl(self.p(c[1]), str(c[1]), members, c[0])

    def enum_init(self, c: list) -> ast.EnumMember:
        return ast.EnumMember(self.p(c[0]), str(c[0]), c[1])

    def error_decl(self, c: list) -> ast.Decl:
        return ast.ErrorDecl(self.p(c[0]), "error", [str(t) for t in c[1:] if t is not None])

    def match_kind_decl(self, c: list) -> ast.Decl:
        return ast.MatchKindDecl(self.p(c[0]), "match_kind", [str(t) for t in c[1:] if t is not None])

    def typedef_decl(self, c: list) -> ast.Decl:
        return ast.TypedefDecl(self.p(c[1]), str(c[1]), c[0])

    def newtype_decl(self, c: list) -> ast.Decl:
        return ast.TypedefDecl(self.p(c[1]), str(c[1]), c[0], is_new_type=True)

    # ------------------------------------------------------------ externs
    def extern_obj(self, c: list) -> ast.Decl:
        return ast.ExternDecl(self.p(c[0]), str(c[0]), c[1] or [], [m for m in c[2:]])

    def extern_fwd(self, c: list) -> ast.Decl:
        return ast.ExternDecl(self.p(c[0]), str(c[0]), [], [])

    def extern_func(self, c: list) -> ast.Decl:
        ret, name, tps, params = c
        proto = ast.MethodProto(self.p(name), str(name), tps or [], ret, params or [])
        return ast.ExternFunctionDecl(self.p(name), str(name), proto)

    def method(self, c: list) -> ast.MethodProto:
        annos, ret, name, tps, params = c
        return ast.MethodProto(self.p(name), str(name), tps or [], ret, params or [], annotations=annos)

    def ctor(self, c: list) -> ast.MethodProto:
        annos, name, params = c
        return ast.MethodProto(self.p(name), str(name), [], None, params or [], annotations=annos)

    def abstract_method(self, c: list) -> ast.MethodProto:
        annos, ret, name, tps, params = c
        return ast.MethodProto(self.p(name), str(name), tps or [], ret, params or [],
                               is_abstract=True, annotations=annos)

    def params(self, c: list) -> list:
        return list(c)

    def param(self, c: list) -> ast.Param:
        annos, direction, tref, name, default = c
        return ast.Param(self.p(name), str(name), direction, tref, default, annotations=annos)

    def direction(self, c: list) -> str:
        return str(c[0])

    # ------------------------------------------------------------ parser / control / package
    def parser_type_decl(self, c: list) -> ast.Decl:
        return ast.ParserTypeDecl(self.p(c[0]), str(c[0]), c[1] or [], c[2] or [])

    def parser_decl(self, c: list) -> ast.Decl:
        name, tps, params, ctor = c[:4]
        items = c[4:]
        states = [i for i in items if isinstance(i, ast.ParserState)]
        locals_ = [i for i in items if not isinstance(i, ast.ParserState)]
        return ast.ParserDecl(self.p(name), str(name), tps or [], params or [], ctor or [],
                              locals_, states)

    def ctor_params(self, c: list) -> list:
        return c[0] or []

    def parser_state(self, c: list) -> ast.ParserState:
        name, *stmts, trans = c
        return ast.ParserState(self.p(name), str(name), stmts, "reject" if trans is None else trans)

    def transition_name(self, c: list) -> str:
        return str(c[0])

    def transition_select(self, c: list) -> Union[ast.SelectExpr, str]:
        select, keys, cases = c[0], c[1], list(c[2:])
        if keys:
            return ast.SelectExpr(keys[0].pos, keys, cases)
        # select() on no keys: only `default` / `_` can label a case, and the first
        # one always matches, so it is a plain transition
        for case in cases:
            if not all(isinstance(k, (ast.DefaultExpr, ast.DontCareExpr)) for k in case.keyset):
                raise CompileError("a select on no keys can only have 'default' cases", case.pos)
        if not cases:
            raise CompileError("a select on no keys needs a 'default' case", self.p(select))
        return cases[0].next_state

    def select_case(self, c: list) -> ast.SelectCase:
        keyset, name = c
        return ast.SelectCase(keyset[0].pos, keyset, str(name))

    def keyset(self, c: list) -> list:
        return [c[0]]

    def tuple_keyset(self, c: list) -> list:
        return list(c)

    def mask_expr(self, c: list) -> ast.Expr:
        return ast.BinaryExpr(c[0].pos, "&&&", c[0], c[1])

    def range_expr(self, c: list) -> ast.Expr:
        return ast.BinaryExpr(c[0].pos, "..", c[0], c[1])

    def default_expr(self, c: list) -> ast.Expr:
        return ast.DefaultExpr(self.p(c[0]))

    def dontcare_expr(self, c: list) -> ast.Expr:
        return ast.DontCareExpr(self.p(c[0]))

    def value_set_decl(self, c: list) -> ast.Decl:
        _l_angle, elem, _r_angle, size, name = c
        return ast.ValueSetDecl(self.p(name), str(name), elem, size)

    def control_type_decl(self, c: list) -> ast.Decl:
        return ast.ControlTypeDecl(self.p(c[0]), str(c[0]), c[1] or [], c[2] or [])

    def control_decl(self, c: list) -> ast.Decl:
        name, tps, params, ctor = c[:4]
        locals_, body = list(c[4:-1]), c[-1]
        return ast.ControlDecl(self.p(name), str(name), tps or [], params or [], ctor or [],
                               locals_, body)

    def package_type_decl(self, c: list) -> ast.Decl:
        return ast.PackageTypeDecl(self.p(c[0]), str(c[0]), c[1] or [], c[2] or [])

    def instantiation(self, c: list) -> ast.Decl:
        tref, args, name = c
        return ast.InstantiationDecl(self.p(name), str(name), tref, args or [])

    def instantiation_init(self, c: list) -> ast.Decl:
        raise CompileError("instances with an initializer block (abstract method implementations) "
                           "are not supported", self.p(c[2]), kind="unsupported")

    def const_decl(self, c: list) -> ast.Decl:
        tref, name, value = c
        return ast.ConstDecl(self.p(name), str(name), tref, value)

    def var_decl(self, c: list) -> ast.Decl:
        tref, name, init = c
        return ast.VarDecl(self.p(name), str(name), tref, init)

    def function_decl(self, c: list) -> ast.Decl:
        ret, name, tps, params, body = c
        if isinstance(ret, Token):
            ret = (ast.BaseTypeRef(self.p(ret), "void") if ret.type == "VOID"
                   else ast.NamedTypeRef(self.p(ret), str(ret)))
        return ast.FunctionDecl(self.p(name), str(name), tps or [], ret, params or [], body)

    void_function_decl = function_decl
    tvar_function_decl = function_decl

    def action_decl(self, c: list) -> ast.Decl:
        name, params, body = c
        return ast.ActionDecl(self.p(name), str(name), params or [], body)

    # ------------------------------------------------------------ tables
    def table_decl(self, c: list) -> ast.Decl:
        name = c[0]
        t = ast.TableDecl(self.p(name), str(name), [], [])
        seen: dict[str, SrcPos] = {}
        for kind, pos, *rest in c[1:]:
            if kind in seen:
                raise CompileError(f"table property '{kind}' is defined twice", pos or t.pos)
            seen[kind] = pos
            if kind == "key":
                if "entries" in seen:  # p4c's type checker: entries are read against the key
                    raise CompileError(f"table '{t.name}': the entries must come after the key",
                                       seen["entries"] or t.pos)
                t.keys = rest[0]
            elif kind == "actions":
                t.actions = rest[0]
            elif kind == "default_action":
                t.default_action, t.default_action_const = rest
            elif kind == "entries":
                t.entries, t.entries_const = rest
            else:
                t.properties.append(rest[0])
        return t

    def annotated_prop(self, c: list) -> tuple:
        annos, prop = c
        if annos and isinstance(prop[-1], ast.TableProperty):
            prop[-1].annotations = annos
        return prop

    def key_prop(self, c: list) -> tuple:
        return ("key", self.p(c[0]) if c else None, list(c))

    def actions_prop(self, c: list) -> tuple:
        return ("actions", self.p(c[0]) if c else None, list(c))

    def default_action_prop(self, c: list) -> tuple:
        const, ref = c
        return ("default_action", ref.pos, ref, const is not None)

    def entries_prop(self, c: list) -> tuple:
        const, *entries = c
        return ("entries", entries[0].pos if entries else None, entries, const is not None)

    def generic_prop(self, c: list) -> tuple:
        const, name, value = c
        return (str(name), self.p(name), ast.TableProperty(self.p(name), str(name), value, const is not None))

    def key_element(self, c: list) -> ast.KeyElement:
        expr, kind, annos = c
        return ast.KeyElement(expr.pos, expr, str(kind), annos)

    def action_ref(self, c: list) -> ast.ActionRef:
        annos, name, args = c
        return ast.ActionRef(self.p(name), ast.PathExpr(self.p(name), str(name)), args or [], annos)

    def top_action_ref(self, c: list) -> ast.ActionRef:
        ref = self.action_ref(c)
        ref.name.top_level = True  # type: ignore[attr-defined]
        return ref

    def entry(self, c: list) -> ast.TableEntry:
        annos, _const, prio, keyset, action, annos2 = c
        return ast.TableEntry(keyset[0].pos, keyset, action, prio, annos + annos2)

    # ------------------------------------------------------------ statements
    def block(self, c: list) -> ast.BlockStmt:
        return ast.BlockStmt(self.p(c[0]), list(c[1:]))

    def assign(self, c: list) -> ast.Stmt:
        return ast.AssignStmt(c[0].pos, c[0], c[1])

    def call_stmt(self, c: list) -> ast.Stmt:
        return ast.CallStmt(c[0].pos, c[0])

    def direct_apply(self, c: list) -> ast.Stmt:
        """``T.apply(args)``: a control or parser applied by its type name (P4-16 1.2)."""
        pos = self.p(c[0])
        target = ast.MemberExpr(pos, ast.TypeNameExpr(pos, ast.NamedTypeRef(pos, str(c[0]))), "apply")
        target.member_pos = pos
        return ast.CallStmt(pos, ast.CallExpr(pos, target, [], c[1] or []))

    def if_stmt(self, c: list) -> ast.Stmt:
        return ast.IfStmt(self.p(c[0]), c[1], c[2], c[3] if len(c) > 3 else None)

    def block_stmt(self, c: list) -> ast.Stmt:
        return c[0]

    def exit_stmt(self, c: list) -> ast.Stmt:
        return ast.ExitStmt(self.p(c[0]))

    def return_stmt(self, c: list) -> ast.Stmt:
        return ast.ReturnStmt(self.p(c[0]), c[1])

    def empty_stmt(self, c: list) -> ast.Stmt:
        return ast.EmptyStmt(self.p(c[0]))

    def statement(self, c: list) -> ast.Stmt:
        return c[0]

    def assign_op(self, c: list) -> Token:
        return c[0]

    def compound_assign(self, c: list) -> ast.Stmt:
        """``a op= b`` -> ``a = a op b``. P4 evaluates the target once (P4-16 1.2.5,
        12.1) but the tree holds it twice, so an index with a call in it is first
        evaluated into a temporary, as p4c's side-effect ordering does:
        ``s[f()].x += 1`` -> ``{ tmp = f(); s[tmp].x = s[tmp].x + 1; }``."""
        lhs, op, rhs = c
        temps: list[ast.Stmt] = []
        lhs = self._hoist_index_calls(lhs, temps)
        value = ast.BinaryExpr(self.p(op), str(op)[:-1], copy.deepcopy(lhs), rhs)
        assign = ast.AssignStmt(lhs.pos, lhs, value)
        return ast.BlockStmt(lhs.pos, [*temps, assign]) if temps else assign

    def _hoist_index_calls(self, e: ast.Expr, temps: list[ast.Stmt]) -> ast.Expr:
        """``e`` with each index that contains a call replaced by a fresh temporary,
        whose declaration (initialised with that index) is appended to ``temps`` in
        evaluation order: left to right, outer stacks first."""
        if isinstance(e, ast.MemberExpr):
            e.expr = self._hoist_index_calls(e.expr, temps)
        elif isinstance(e, ast.SliceExpr):
            e.expr = self._hoist_index_calls(e.expr, temps)
        elif isinstance(e, ast.IndexExpr):
            e.expr = self._hoist_index_calls(e.expr, temps)
            if _has_call(e.index):
                name = f"__index_{e.index.pos.line}_{e.index.pos.col}"
                temps.append(ast.VarDecl(e.index.pos, name, ast.InitTypeRef(e.index.pos), e.index))
                e.index = ast.PathExpr(e.index.pos, name)
        return e

    def for_stmt(self, c: list) -> ast.Stmt:
        kw, inits, cond, updates, body = c
        return ast.ForStmt(self.p(kw), inits or [], cond, updates or [], body)

    def for_inits(self, c: list) -> list:
        return list(c)

    for_updates = for_inits

    def for_var(self, c: list) -> ast.Stmt:
        _annos, tref, name, init = c
        return ast.VarDecl(self.p(name), str(name), tref, init)

    def for_assign(self, c: list) -> ast.Stmt:
        return ast.AssignStmt(c[0].pos, c[0], c[1])

    def for_call(self, c: list) -> ast.Stmt:
        return ast.CallStmt(c[0].pos, c[0])

    def for_in_stmt(self, c: list) -> ast.Stmt:
        """``for (T x in a..b) body`` as the loop it means (P4-16 1.2.5): ``a..b``
        evaluated once, ``x`` taking each value from ``a`` to ``b`` inclusive. A
        flag ends the loop, not ``x <= b``, which would never turn false when ``b``
        is the largest value of ``T``. Over a collection (``for (T x in stack)``)
        it is an `ast.ForInStmt`, which the mid end unrolls."""
        kw, _annos, tref, name, start, end, body = c
        pos = self.p(kw)
        if end is None:  # a collection: its type decides (typecheck), the mid end unrolls it
            return ast.ForInStmt(pos, ast.VarDecl(self.p(name), str(name), tref), start, body)
        x, hi, more = str(name), f"__{name}_last", f"__{name}_more"

        def path(n: str) -> ast.PathExpr:  # a fresh node per use: the type checker annotates it
            return ast.PathExpr(pos, n)

        inits: list[ast.Stmt] = [
            ast.VarDecl(self.p(name), x, tref, start),
            ast.VarDecl(pos, hi, copy.deepcopy(tref), end),
            ast.VarDecl(pos, more, ast.BaseTypeRef(pos, "bool"), ast.BinaryExpr(pos, "<=", path(x), path(hi))),
        ]
        updates: list[ast.Stmt] = [
            ast.AssignStmt(pos, path(more), ast.BinaryExpr(pos, "!=", path(x), path(hi))),
            ast.AssignStmt(pos, path(x), ast.BinaryExpr(pos, "+", path(x), ast.IntLit(pos, 1, None, False))),
        ]
        return ast.ForStmt(pos, inits, path(more), updates, body, in_range=True)

    def break_stmt(self, c: list) -> ast.Stmt:
        return ast.BreakStmt(self.p(c[0]))

    def continue_stmt(self, c: list) -> ast.Stmt:
        return ast.ContinueStmt(self.p(c[0]))

    def switch_stmt(self, c: list) -> ast.Stmt:
        return ast.SwitchStmt(self.p(c[0]), c[1], list(c[2:]))

    def switch_case_body(self, c: list) -> ast.SwitchCase:
        return ast.SwitchCase(c[0].pos, c[0], c[1])

    def switch_case_fall(self, c: list) -> ast.SwitchCase:
        return ast.SwitchCase(c[0].pos, c[0], None)

    def switch_label(self, c: list) -> ast.Expr:
        return c[0]

    # ------------------------------------------------------------ expressions
    def path(self, c: list) -> ast.Expr:
        return ast.PathExpr(self.p(c[0]), str(c[0]))

    def top_path(self, c: list) -> ast.Expr:
        return ast.PathExpr(self.p(c[0]), str(c[0]), top_level=True)

    def lvalue(self, c: list) -> ast.Expr:
        return c[0]

    def member(self, c: list) -> ast.Expr:
        m = ast.MemberExpr(c[0].pos, c[0], str(c[1]))
        m.member_pos = self.p(c[1])
        return m

    def index(self, c: list) -> ast.Expr:
        return ast.IndexExpr(c[0].pos, c[0], c[1])

    def slice(self, c: list) -> ast.Expr:
        return ast.SliceExpr(c[0].pos, c[0], c[1], c[2])

    def call(self, c: list) -> ast.Expr:
        return ast.CallExpr(c[0].pos, c[0], [], c[1] or [])

    def generic_call(self, c: list) -> ast.Expr:
        return ast.CallExpr(c[0].pos, c[0], c[2], c[4] or [])

    call_expr = lvalue

    def args(self, c: list) -> list:
        return list(c)

    def arg_pos(self, c: list) -> ast.Argument:
        return ast.Argument(c[0].pos, c[0])

    def arg_named(self, c: list) -> ast.Argument:
        return ast.Argument(self.p(c[0]), c[1], str(c[0]))

    def expr_list(self, c: list) -> list:
        return list(c)

    def list_items(self, c: list) -> list:
        return [c[0]] + (c[1] if len(c) > 1 else [])

    def ternary(self, c: list) -> ast.Expr:
        return ast.TernaryExpr(c[0].pos, c[0], c[1], c[2])

    def unary(self, c: list) -> ast.Expr:
        return ast.UnaryExpr(self.p(c[0]), str(c[0]), c[1])

    def cast_expr(self, c: list) -> ast.Expr:
        return ast.CastExpr(self.p(c[0]), c[1], c[2])

    def int_lit(self, c: list) -> ast.Expr:
        v, w, s = parse_int(c[0])
        if w is not None and w <= 0:
            raise CompileError(f"integer literal '{c[0]}' has width 0", self.p(c[0]))
        return ast.IntLit(self.p(c[0]), v, w, s)

    def string_lit(self, c: list) -> ast.Expr:
        raw = str(c[0])[1:-1]
        return ast.StringLit(self.p(c[0]), bytes(raw, "utf-8").decode("unicode_escape"))

    def bool_lit(self, c: list) -> ast.Expr:
        return ast.BoolLit(self.p(c[0]), str(c[0]) == "true")

    def type_member(self, c: list) -> ast.Expr:
        pos = self.p(c[0])
        tn = ast.TypeNameExpr(pos, ast.NamedTypeRef(pos, str(c[0])))
        m = ast.MemberExpr(pos, tn, str(c[1]))
        m.member_pos = self.p(c[1])
        return m

    def error_member(self, c: list) -> ast.Expr:
        pos = self.p(c[0])
        m = ast.MemberExpr(pos, ast.TypeNameExpr(pos, ast.BaseTypeRef(pos, "error")), str(c[1]))
        m.member_pos = self.p(c[1])
        return m

    def ctor_call(self, c: list) -> ast.Expr:
        pos = self.p(c[0])
        if len(c) == 2:
            tref = ast.NamedTypeRef(pos, str(c[0]))
            args = c[1]
        else:
            tref = ast.NamedTypeRef(pos, str(c[0]), c[2])
            args = c[4]
        return ast.CallExpr(pos, ast.TypeNameExpr(pos, tref), [], args or [])

    def list_expr(self, c: list) -> ast.Expr:
        return ast.ListExpr(self.p(c[0]), c[1] or [])

    def struct_init(self, c: list) -> ast.Expr:
        return ast.StructInitExpr(self.p(c[0]), c[1])



def _has_call(e: Any) -> bool:
    """Whether expression ``e`` contains a call anywhere (its evaluation may have effects)."""
    if isinstance(e, ast.CallExpr):
        return True
    if isinstance(e, ast.Node):
        return any(_has_call(v) for k, v in vars(e).items() if k not in ("pos", "ref", "type"))
    if isinstance(e, list):
        return any(_has_call(v) for v in e)
    return False


def _binary(op: str):
    def build(self: _Build, c: list) -> ast.Expr:
        left, right = self.nodes(c)
        return ast.BinaryExpr(left.pos, op, left, right)
    return build


for _rule, _op in _BIN_OPS.items():
    setattr(_Build, _rule, _binary(_op))

_BUILDER = _Build([])
_LOCK = threading.Lock()
_LARK: Optional[Lark] = None
_KEYWORDS: dict[str, str] = {}


def _parser() -> Lark:
    global _LARK
    if _LARK is None:
        with open(_GRAMMAR, encoding="utf-8") as f:
            grammar = f.read()
        lark = Lark(grammar, parser="lalr", lexer=TokenListLexer, maybe_placeholders=True,
                    transformer=_BUILDER, cache=True)
        _KEYWORDS.update({t.pattern.value: t.name for t in lark.terminals if t.pattern.type == "str"})
        _LARK = lark
    return _LARK


def parse(pre: Preprocessed) -> ast.Program:
    """Parse preprocessed text into a Program (no names resolved yet)."""
    with _LOCK:  # the one builder holds per-parse state
        return _parse_locked(pre)


def _parse_locked(pre: Preprocessed) -> ast.Program:
    lark = _parser()
    toks = scan(pre.text, pre.lines, _KEYWORDS)
    classify(toks)
    positions = [pre.lines.pos(t.line, t.col) for t in toks]
    _BUILDER.positions = positions
    _BUILDER.program_pos = pre.lines.pos(_first_line_of(pre), 1)
    try:
        return lark.parse(to_lark(toks))
    except UnexpectedToken as e:
        tok = e.token
        if tok.type == "$END":
            pos = positions[-1] if positions else SrcPos("<input>", 1, 1)
            raise CompileError("syntax error, unexpected end of file", pos) from None
        pos = positions[tok.start_pos]
        if tok.type == "IDENT" and "TYPE_IDENT" in e.expected and "IDENT" not in e.expected:
            raise CompileError(f"syntax error: '{tok}' is not a declared type", pos) from None
        hint = ""
        if "SEMI" in e.expected and tok.start_pos > 0 and positions[tok.start_pos - 1].line != pos.line:
            hint = " (missing ';' at the end of the previous line?)"
        raise CompileError(f"syntax error, unexpected {_describe(tok)}{hint}", pos) from None
    except (UnexpectedEOF, UnexpectedCharacters, UnexpectedInput) as e:
        pos = positions[-1] if positions else SrcPos("<input>", 1, 1)
        raise CompileError(f"syntax error: {e}", pos) from None


def _first_line_of(pre: Preprocessed) -> int:
    """The output line holding line 1 of the main file (where cpp starts it)."""
    main = pre.lines.origins[0][0] if pre.lines.origins else "<input>"
    for i, (file, line) in enumerate(pre.lines.origins):
        if file == main and line == 1:
            return i + 1
    return 1


def _describe(tok: Token) -> str:
    kinds = {"IDENT": "identifier", "TYPE_IDENT": "type name", "INTEGER": "integer",
             "STRING_LIT": "string"}
    if tok.type in kinds:
        return f"{kinds[tok.type]} '{tok}'"
    return f"'{tok}'"
