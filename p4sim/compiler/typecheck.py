"""Type checking: binds every name and gives every expression its type.

One walk over the program, declaration by declaration (P4 requires declaration before
use), with `resolve.Scope` for names: `Checker` here walks declarations, bodies and
tables; `exprcheck.ExprChecker`, its base, types expressions and type syntax. What
the back end can rely on afterwards (the front end's contract):

* every `ast.Expr` has ``.type`` (a `types.Type`); every `ast.TypeRef` has ``.type``;
* every `PathExpr`/`MemberExpr` that denotes a declaration has ``.ref``: a
  `VarDecl`, `ConstDecl`, `Param`, `ActionDecl`, `TableDecl`, `InstantiationDecl`,
  `ExternFunctionDecl`, `FunctionDecl`, `ValueSetDecl`, `EnumMember`, the chosen
  overload's `MethodProto` for an extern method (``r.read``, ``packet.extract``), or
  the parser/control declaration for a constructor; `EnumMember.enum` is its
  `EnumDecl`; built-in methods (``isValid``, ``apply``, ``push_front``...) and struct
  fields have no ref -- their meaning is the member name plus the object's type;
* an unsized integer literal takes the type its context requires (other operand,
  assignment target, parameter, key) -- the value is unchanged; a literal with no
  such context keeps `InfIntT`;
* ``error.X`` is ``MemberExpr(TypeNameExpr(BaseTypeRef("error")), "X")`` of type
  `ErrorT`; ``E.A`` has ref the `EnumMember` and type the `EnumT`;
* a constructor call (``MyParser()``, ``action_selector(...)``) is a `CallExpr`
  whose target is a `TypeNameExpr`, typed as the instance (`ParserT`, `ExternT`...);
* the type parameters of generic externs and extern functions are inferred from the
  arguments: ``.type`` of the call and of each argument is fully substituted, and
  the call target's ``MethodT`` lists the substituted parameter types;
* ``t.apply()`` has `ApplyResultT`, ``.action_run`` `ActionEnumT`; a switch label
  naming an action is a `PathExpr` with ref the `ActionDecl`;
* widths, stack sizes and slice bounds are evaluated (`consteval`), so e.g.
  ``SliceExpr.type`` is ``BitT(hi - lo + 1)``.

Errors are `CompileError`s at the offending expression: undefined names,
redefinitions, type and width mismatches, wrong argument counts and directions,
calls of things that are not callable; constructs p4sim does not support (among
them externs the program declares itself: only v1model's have an implementation)
are reported with kind "unsupported".
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from p4sim.compiler import ast
from p4sim.compiler import consteval
from p4sim.compiler import types as T
from p4sim.compiler.diagnostics import CompileError, SrcPos
from p4sim.compiler.exprcheck import ExprChecker, fmt, strip_newtype
from p4sim.compiler.resolve import ParserStateRef, ProgramNames, Scope, TypeParam, describe


class Checker(ExprChecker):
    """The walk over a whole program: declarations in order, bodies, tables."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Scope()
        self.loop_depth = 0  # for loops around the statement being checked

    # ================================================================ declarations
    def program(self, prog: ast.Program) -> None:
        for d in prog.decls:
            self.top_decl(d)
        mains = self.root.lookup_all("main")
        if not mains or not isinstance(mains[0], ast.InstantiationDecl):
            raise CompileError("the program has no package instance named 'main' "
                               "(e.g. V1Switch(...) main;)", prog.pos)

    def top_decl(self, d: ast.Decl) -> None:
        if isinstance(d, ast.ErrorDecl):
            self.names.add_errors(d)
            return
        if isinstance(d, ast.MatchKindDecl):
            self.names.add_match_kinds(d)
            return
        if isinstance(d, ast.VarDecl):
            raise CompileError("variables cannot be declared at the top level", d.pos)
        self.local_decl(d, self.root)

    def local_decl(self, d: ast.Decl, scope: Scope) -> None:
        """Check ``d`` and declare its name in ``scope``."""
        if isinstance(d, (ast.HeaderDecl, ast.HeaderUnionDecl, ast.StructDecl, ast.EnumDecl)):
            scope.declare(d.name, d, d.pos)
            self.decl_type(d, scope)
        elif isinstance(d, ast.TypedefDecl):
            self.type_of(d.type_ref, scope)
            scope.declare(d.name, d, d.pos)
        elif isinstance(d, ast.ExternDecl):
            scope.declare(d.name, d, d.pos)
            self.extern_decl(d, scope)
        elif isinstance(d, ast.ExternFunctionDecl):
            self.method_proto(d.proto, scope)
            scope.declare(d.name, d, d.pos)
        elif isinstance(d, ast.FunctionDecl):
            scope.declare(d.name, d, d.pos)
            self.function_decl(d, scope)
        elif isinstance(d, (ast.ParserTypeDecl, ast.ControlTypeDecl, ast.PackageTypeDecl)):
            inner = self._type_param_scope(scope, d.type_params, d.pos)
            self.params(d.params, inner)
            scope.declare(d.name, d, d.pos)
        elif isinstance(d, ast.ParserDecl):
            scope.declare(d.name, d, d.pos)
            self.parser_decl(d, scope)
        elif isinstance(d, ast.ControlDecl):
            scope.declare(d.name, d, d.pos)
            self.control_decl(d, scope)
        elif isinstance(d, ast.ActionDecl):
            self.action_decl(d, scope)
            scope.declare(d.name, d, d.pos)
        elif isinstance(d, ast.ConstDecl):
            t = self.type_of(d.type_ref, scope)
            self.expect(d.value, scope, t, "constant initializer")
            consteval.evaluate(d.value, f"the value of constant '{d.name}'")
            scope.declare(d.name, d, d.pos)
        elif isinstance(d, ast.VarDecl) and isinstance(d.type_ref, ast.InitTypeRef):
            t = self.expr(d.init, scope)
            if not isinstance(strip_newtype(t), T.BitT):
                raise CompileError(f"an index evaluated once must have a fixed-width type, not {fmt(t)}",
                                   d.init.pos)
            d.type_ref.type = t
            scope.declare(d.name, d, d.pos)
        elif isinstance(d, ast.VarDecl):
            t = self.type_of(d.type_ref, scope)
            if d.init is not None:
                self.expect(d.init, scope, t, "initializer")
            scope.declare(d.name, d, d.pos)
        elif isinstance(d, ast.InstantiationDecl):
            self.instantiation(d, scope)
            scope.declare(d.name, d, d.pos)
        elif isinstance(d, ast.ValueSetDecl):
            self.type_of(d.element, scope)
            self.const_int(d.size, scope, "a value_set size")
            scope.declare(d.name, d, d.pos)
        elif isinstance(d, ast.TableDecl):
            self.table_decl(d, scope)
            scope.declare(d.name, d, d.pos)
        elif isinstance(d, (ast.ErrorDecl, ast.MatchKindDecl)):
            raise CompileError(f"{d.name} declarations are only allowed at the top level", d.pos)
        else:
            raise CompileError(f"unexpected declaration '{d.name}' here", d.pos)

    def _type_param_scope(self, scope: Scope, names: Sequence[str], pos: SrcPos) -> Scope:
        inner = scope.child()
        for n in names:
            inner.declare(n, TypeParam(n, pos), pos)
        return inner

    def params(self, params: Sequence[ast.Param], scope: Scope) -> None:
        for p in params:
            t = self.type_of(p.type_ref, scope)
            if p.default is not None:
                self.expect(p.default, scope, t, f"default value of '{p.name}'")

    def declare_params(self, params: Sequence[ast.Param], scope: Scope) -> None:
        for p in params:
            scope.declare(p.name, p, p.pos)

    def extern_decl(self, d: ast.ExternDecl, scope: Scope) -> None:
        inner = self._type_param_scope(scope, d.type_params, d.pos)
        seen: dict[tuple[str, int], ast.MethodProto] = {}
        for m in d.methods:
            if m.return_type is None and m.name != d.name:
                raise CompileError(f"constructor '{m.name}' must be named like extern '{d.name}'", m.pos)
            key = (m.name, len(m.params))
            if key in seen:
                raise CompileError(f"redefinition of method '{m.name}' with {len(m.params)} parameters", m.pos)
            seen[key] = m
            self.method_proto(m, inner)

    def method_proto(self, m: ast.MethodProto, scope: Scope) -> None:
        inner = self._type_param_scope(scope, m.type_params, m.pos)
        if m.return_type is not None:
            self.type_of(m.return_type, inner)
        self.params(m.params, inner)

    def function_decl(self, d: ast.FunctionDecl, scope: Scope) -> None:
        inner = self._type_param_scope(scope, d.type_params, d.pos)
        ret = self.type_of(d.return_type, inner)
        self.params(d.params, inner)
        self.declare_params(d.params, inner)
        saved = self.return_type
        self.return_type = ret
        self.block(d.body, inner)
        self.return_type = saved

    def action_decl(self, d: ast.ActionDecl, scope: Scope) -> None:
        inner = scope.child()
        self.params(d.params, inner)
        self.declare_params(d.params, inner)
        saved = (self.return_type, self.in_action)
        self.return_type, self.in_action = T.VoidT(), True
        self.block(d.body, inner)
        self.return_type, self.in_action = saved

    def parser_decl(self, d: ast.ParserDecl, scope: Scope) -> None:
        inner = self._type_param_scope(scope, d.type_params, d.pos)
        self.params(d.params, inner)
        self.params(d.ctor_params, inner)
        self.declare_params(d.params, inner)
        self.declare_params(d.ctor_params, inner)
        for name in ("accept", "reject"):
            inner.declare(name, ParserStateRef(name, None), d.pos)
        for s in d.states:
            if s.name in ("accept", "reject"):
                raise CompileError(f"parser state '{s.name}' is predefined and cannot be declared", s.pos)
            inner.declare(s.name, ParserStateRef(s.name, s), s.pos)
        if not any(s.name == "start" for s in d.states):
            raise CompileError(f"parser '{d.name}' has no 'start' state", d.pos)
        saved = (self.in_parser, self.return_type)
        self.in_parser, self.return_type = True, None
        for loc in d.locals:
            self.local_decl(loc, inner)
        for s in d.states:
            body = inner.child()
            for st in _parser_statements(s.stmts):
                self.stmt(st, body)
            if isinstance(s.transition, ast.SelectExpr):
                self.select(s.transition, body)
            else:
                self._state_name(s.transition, body, s.pos)
        self.in_parser, self.return_type = saved

    def _state_name(self, name: str, scope: Scope, pos: SrcPos) -> None:
        found = scope.lookup_all(name)
        if not found or not isinstance(found[0], ParserStateRef):
            raise CompileError(f"undefined parser state '{name}'", pos)

    def select(self, sel: ast.SelectExpr, scope: Scope) -> None:
        key_types = [self.expr(k, scope) for k in sel.keys]
        for case in sel.cases:
            self.keyset(case.keyset, key_types, scope, case.pos)
            self._state_name(case.next_state, scope, case.pos)

    def keyset(self, keyset: list[ast.Expr], key_types: list[T.Type], scope: Scope, pos: SrcPos) -> None:
        if len(keyset) == 1 and isinstance(keyset[0], (ast.DefaultExpr, ast.DontCareExpr)):
            keyset[0].type = T.DontCareT()
            return
        if len(keyset) == 1 and len(key_types) > 1 and isinstance(keyset[0], ast.PathExpr):
            t = self.expr(keyset[0], scope)
            if isinstance(t, T.ValueSetT):  # a value_set of structs matches all the keys
                return
        if len(keyset) != len(key_types):
            raise CompileError(f"keyset has {len(keyset)} elements but there are {len(key_types)} keys", pos)
        for k, kt in zip(keyset, key_types):
            if isinstance(k, (ast.DefaultExpr, ast.DontCareExpr)):
                k.type = T.DontCareT()
            elif isinstance(k, ast.BinaryExpr) and k.op in ("&&&", ".."):
                mt = kt
                if k.op == "&&&" and isinstance(kt, T.EnumT) and kt.underlying is not None:
                    # value and mask are bit patterns of the enum's type (p4c accepts
                    # ``(bit<16>)E.X &&& 0xff00`` as well as ``E.X &&& 0xff00``)
                    mt = kt.underlying
                    vt = self.expr(k.left, scope, kt)
                    self.coerce(k.left, vt, mt if self.compatible(mt, vt) else kt, "keyset value")
                else:
                    self.expect(k.left, scope, kt, "keyset value")
                self.expect(k.right, scope, mt, "keyset mask" if k.op == "&&&" else "keyset bound")
                k.type = kt
            else:
                t = self.expr(k, scope, kt)
                if isinstance(t, T.ValueSetT):
                    continue
                self.coerce(k, t, kt, "keyset value")

    def control_decl(self, d: ast.ControlDecl, scope: Scope) -> None:
        inner = self._type_param_scope(scope, d.type_params, d.pos)
        self.params(d.params, inner)
        self.params(d.ctor_params, inner)
        self.declare_params(d.params, inner)
        self.declare_params(d.ctor_params, inner)
        saved = self.return_type
        self.return_type = T.VoidT()
        for loc in d.locals:
            self.local_decl(loc, inner)
        self.block(d.apply, inner)
        self.return_type = saved

    def instantiation(self, d: ast.InstantiationDecl, scope: Scope) -> None:
        call = ast.CallExpr(d.pos, ast.TypeNameExpr(d.type_ref.pos, d.type_ref), [], d.args)
        d.type_ref.type = self.expr(call, scope)
        if scope is self.root and isinstance(d.type_ref.type, (T.ParserT, T.ControlT)):
            raise CompileError(f"'{d.name}': a parser or control cannot be instantiated at the top level, "
                               "only inside a parser or control (or as a package argument)", d.pos)

    # ---------------------------------------------------------------- tables
    def table_decl(self, t: ast.TableDecl, scope: Scope) -> None:
        key_types = []
        for k in t.keys:
            key_types.append(self.expr(k.expr, scope))
            if k.match_kind not in self.names.match_kinds:
                raise CompileError(f"unknown match kind '{k.match_kind}'", k.pos)
            if not any(a.name == "name" for a in k.annotations):
                unnamed = _unnameable_key_part(k.expr)
                if unnamed is not None:
                    raise CompileError("a key expression other than fields, slices, masks, constants and "
                                       "isValid() needs a @name annotation (the control plane names keys)",
                                       unnamed.pos)
        listed: dict[str, ast.ActionRef] = {}
        for ref in t.actions:
            decl = self.action_ref(ref, scope, bound=False)
            if decl.name in listed:
                raise CompileError(f"action '{decl.name}' is listed twice in table '{t.name}'", ref.pos)
            listed[decl.name] = ref
        if t.default_action is not None:
            decl = self.action_ref(t.default_action, scope, bound=True)
            if decl.name not in listed:
                raise CompileError(f"default action '{decl.name}' is not in the actions of table '{t.name}'",
                                   t.default_action.pos)
            self.action_scope_fits(t.default_action, listed[decl.name], "tableonly", "the default action")
        if t.entries is not None:
            for e in t.entries:
                self.keyset(e.keys, key_types, scope, e.pos)
                decl = self.action_ref(e.action, scope, bound=True)
                if decl.name not in listed:
                    raise CompileError(f"action '{decl.name}' of an entry is not in the actions of table "
                                       f"'{t.name}'", e.action.pos)
                if e.priority is not None:
                    self.const_int(e.priority, scope, "an entry priority")
                    if t.entries_const:
                        raise CompileError("entries of 'const entries' cannot have priorities", e.priority.pos)
                    if all(k.match_kind in ("exact", "lpm") for k in t.keys):
                        raise CompileError(f"table '{t.name}' has only exact and lpm keys, which need no "
                                           "priorities, but an entry gives one", e.priority.pos)
                self.action_scope_fits(e.action, listed[decl.name], "defaultonly", "an entry")
        for p in t.properties:
            self.table_property(p, scope)

    @staticmethod
    def action_scope_fits(use: ast.ActionRef, listed: ast.ActionRef, excluded: str, what: str) -> None:
        """An action listed ``@defaultonly`` cannot be an entry's, one listed
        ``@tableonly`` cannot be the default action (p4c's type checker)."""
        if any(a.name == excluded for a in listed.annotations):
            raise CompileError(f"action '{listed.name.name}' is listed @{excluded}, so it cannot be {what}",
                               use.pos)

    def table_property(self, p: ast.TableProperty, scope: Scope) -> None:
        if p.name == "size":
            self.const_int(p.value, scope, "a table size")
        elif p.name in ("implementation", "counters", "meters"):
            t = self.expr(p.value, scope)
            if not isinstance(t, T.ExternT):
                raise CompileError(f"table property '{p.name}' must name an extern instance, not {fmt(t)}",
                                   p.value.pos)
        else:
            self.expr(p.value, scope)

    def action_ref(self, ref: ast.ActionRef, scope: Scope, bound: bool) -> ast.ActionDecl:
        """Check an action named in a table; ``bound``: the action data is given too."""
        name = ref.name
        assert isinstance(name, ast.PathExpr)
        found = scope.lookup_all(name.name, name.top_level)
        if not found:
            raise CompileError(f"undefined name '{name.name}'", name.pos)
        decls = [d for d in found if isinstance(d, ast.ActionDecl)]
        if not decls:
            raise CompileError(f"{describe(found[0])} is not an action", name.pos)
        decl = decls[0]
        name.ref = decl
        name.type = T.ActionT(decl.name)
        directional = [p for p in decl.params if p.direction is not None]
        if bound:
            params = decl.params if len(ref.args) == len(decl.params) else [
                p for p in decl.params if p.direction is None]
        else:
            params = directional
        self.arguments(ref.args, params, {}, decl.name, ref.pos, scope)
        return decl

    # ================================================================ statements
    def block(self, b: ast.BlockStmt, scope: Scope) -> None:
        inner = scope.child()
        for s in b.stmts:
            self.stmt(s, inner)

    def stmt(self, s: ast.Stmt, scope: Scope) -> None:
        if isinstance(s, ast.AssignStmt):
            lt = self.expr(s.lhs, scope)
            self.check_lvalue(s.lhs, scope, "the target of an assignment")
            self.expect(s.rhs, scope, lt, "assignment")
        elif isinstance(s, ast.CallStmt):
            self.expr(s.call, scope)
        elif isinstance(s, ast.BlockStmt):
            self.block(s, scope)
        elif isinstance(s, ast.IfStmt):
            self.expect(s.cond, scope, T.BoolT(), "if condition")
            self.stmt_in_child(s.then, scope)
            if s.else_ is not None:
                self.stmt_in_child(s.else_, scope)
        elif isinstance(s, ast.SwitchStmt):
            self.switch(s, scope)
        elif isinstance(s, ast.ExitStmt):
            if self.in_parser:
                raise CompileError("exit is not allowed in a parser", s.pos)
        elif isinstance(s, ast.ReturnStmt):
            self.return_stmt(s, scope)
        elif isinstance(s, ast.EmptyStmt):
            pass
        elif isinstance(s, ast.ForStmt):
            self.for_stmt(s, scope)
        elif isinstance(s, ast.ForInStmt):
            self.for_in_stmt(s, scope)
        elif isinstance(s, (ast.BreakStmt, ast.ContinueStmt)):
            if self.loop_depth == 0:
                raise CompileError(f"{'break' if isinstance(s, ast.BreakStmt) else 'continue'} "
                                   "outside of a for loop", s.pos)
        elif isinstance(s, (ast.VarDecl, ast.ConstDecl, ast.InstantiationDecl)):
            if isinstance(s, ast.InstantiationDecl) and not self.in_parser:
                raise CompileError("instantiations are not allowed inside a block", s.pos)
            self.local_decl(s, scope)
        else:
            raise CompileError(f"unexpected statement {type(s).__name__}", s.pos)

    def for_stmt(self, s: ast.ForStmt, scope: Scope) -> None:
        """The header's declarations are in scope in the condition, the updates and
        the body; the body has a scope of its own (P4-16 1.2.4, 12.8)."""
        inner = scope.child()
        for i in s.init:
            self.stmt(i, inner)
        if s.cond is not None:
            self.expect(s.cond, inner, T.BoolT(), "for-loop condition")
        for u in s.update:
            self.stmt(u, inner)
        self.loop_depth += 1
        self.stmt_in_child(s.body, inner)
        self.loop_depth -= 1

    def for_in_stmt(self, s: ast.ForInStmt, scope: Scope) -> None:
        """``for (T x in stack)``: ``x`` takes each element, so ``T`` must be the
        stack's element type (p4c: "does not match header stack type").
        ``for (T x in (list<T>) {a, b})``: each element must be a ``T`` (the cast
        gives the literals their type); the cast and the list are typed
        ``list<T>``, which nothing else accepts: the mid end unrolls the loop over
        the elements."""
        c = s.collection
        if isinstance(c, ast.CastExpr) and isinstance(c.type_ref, ast.ListTypeRef):
            if not isinstance(c.expr, ast.ListExpr):
                raise CompileError("a for-in loop over list<T> needs a list expression {a, b, ...} here",
                                   c.expr.pos, "unsupported")
            et = self.type_of(c.type_ref.element, scope)
            for e in c.expr.elements:
                self.expect(e, scope, et, "list element")
            c.type = c.expr.type = c.type_ref.type = T.ListT(et)
            what = "list"
        else:
            ct = self.expr(c, scope)
            if not isinstance(ct, T.StackT):
                raise CompileError(f"for-in over a value of type {fmt(ct)} is not supported (only header "
                                   "stacks, list<T> expressions and ranges a..b)", c.pos, "unsupported")
            et, what = ct.element, "header stack"
        inner = scope.child()
        self.local_decl(s.var, inner)
        vt = self.type_of(s.var.type_ref, inner)
        if strip_newtype(vt) != strip_newtype(et):
            raise CompileError(f"'{s.var.name}' of type {fmt(vt)} does not match the {what}'s element "
                               f"type {fmt(et)}", s.var.pos)
        self.loop_depth += 1
        self.stmt_in_child(s.body, inner)
        self.loop_depth -= 1

    def stmt_in_child(self, s: ast.Stmt, scope: Scope) -> None:
        self.stmt(s, scope.child())

    def return_stmt(self, s: ast.ReturnStmt, scope: Scope) -> None:
        rt = self.return_type
        if rt is None:
            raise CompileError("return is not allowed in a parser", s.pos)
        if s.value is None:
            if not isinstance(rt, T.VoidT):
                raise CompileError(f"return needs a value of type {fmt(rt)}", s.pos)
            return
        if isinstance(rt, T.VoidT):
            raise CompileError("return with a value in a block that returns nothing", s.value.pos)
        self.expect(s.value, scope, rt, "return value")

    def switch(self, s: ast.SwitchStmt, scope: Scope) -> None:
        if self.in_action:  # p4c's EliminateSwitch: BMv2 actions are straight-line primitives there
            raise CompileError("switch statements in actions are not supported on BMv2 (as in p4c): move the "
                               "switch to the apply block, or use if statements", s.pos, "unsupported")
        t = self.expr(s.expr, scope)
        seen: set[str] = set()
        for i, c in enumerate(s.cases):
            if isinstance(c.label, ast.DefaultExpr):
                c.label.type = T.DontCareT()
                if i != len(s.cases) - 1:
                    raise CompileError("'default' must be the last switch label", c.pos)
            elif isinstance(t, T.ActionEnumT):
                if not isinstance(c.label, ast.PathExpr):
                    raise CompileError("a switch on action_run needs action names as labels", c.label.pos)
                table = self._table_by_name(t.table, scope, s.pos)
                names = {r.name.name: r.name.ref for r in table.actions}
                if c.label.name not in names:
                    raise CompileError(f"'{c.label.name}' is not an action of table '{t.table}'", c.label.pos)
                c.label.ref = names[c.label.name]
                c.label.type = t
                key = c.label.name
                if key in seen:
                    raise CompileError(f"duplicate switch label '{key}'", c.label.pos)
                seen.add(key)
            else:
                if not isinstance(strip_newtype(t), (T.BitT, T.EnumT, T.ErrorT)):
                    raise CompileError(f"cannot switch on a value of type {fmt(t)}", s.expr.pos)
                lt = self.expr(c.label, scope, t)
                self.coerce(c.label, lt, t, "switch label")
                v = consteval.try_evaluate(c.label)
                key = repr(v) if v is not None else getattr(c.label, "member", repr(c.label))
                if key in seen:
                    raise CompileError("duplicate switch label", c.label.pos)
                seen.add(key)
            if c.body is not None:
                self.block(c.body, scope)

    def _table_by_name(self, name: str, scope: Scope, pos: SrcPos) -> ast.TableDecl:
        d = scope.lookup(name, pos)
        assert isinstance(d, ast.TableDecl)
        return d


def _type_annotations(node: Any, checker: Checker) -> None:
    """Annotation arguments are not checked against declarations (``@name("x")``
    names nothing in scope); literals get their type, a type argument
    (``@p4runtime_translation("uri", bit<32>)``) the type it names at the top level,
    anything else `DontCareT`."""
    if isinstance(node, list):
        for x in node:
            _type_annotations(x, checker)
        return
    if not isinstance(node, ast.Node):
        return
    if isinstance(node, ast.Annotation):
        for a in node.args:
            if isinstance(a, ast.TypeNameExpr) and a.type is None:
                a.type = checker.type_of(a.type_ref, checker.root)
            _type_literal_tree(a)
        return
    for f in dataclasses.fields(node):
        if f.name not in ("pos", "type", "ref", "enum"):
            v = getattr(node, f.name)
            if isinstance(v, (list, ast.Node)):
                _type_annotations(v, checker)


def _type_literal_tree(e: ast.Expr) -> None:
    if e.type is None:
        e.type = {ast.StringLit: T.StringT(), ast.BoolLit: T.BoolT()}.get(type(e), T.DontCareT())
        if isinstance(e, ast.IntLit):
            e.type = T.BitT(e.width, e.signed) if e.width is not None else T.InfIntT()
    for f in dataclasses.fields(e):
        v = getattr(e, f.name)
        if isinstance(v, ast.Expr) and f.name not in ("type", "ref"):
            _type_literal_tree(v)
        elif isinstance(v, list):
            for x in v:
                if isinstance(x, ast.Expr):
                    _type_literal_tree(x)
                elif isinstance(x, tuple) and len(x) == 2 and isinstance(x[1], ast.Expr):
                    _type_literal_tree(x[1])


def check_program(prog: ast.Program) -> ProgramNames:
    """Resolve and type-check ``prog`` in place; returns the program-wide names."""
    c = Checker()
    c.program(prog)
    _type_annotations(prog, c)
    return c.names


def _parser_statements(stmts: list[ast.Stmt]) -> list[ast.Stmt]:
    """The statements of a parser state, which P4-16's grammar (``parserStatement``,
    also inside a ``parserBlockStatement``) builds without ``for``: p4c reports a
    syntax error there. (A loop inside an ``if`` branch is a ``statement`` and
    parses; the mid end unrolls it.)"""
    for st in stmts:
        if isinstance(st, (ast.ForStmt, ast.ForInStmt)):
            raise CompileError("a for loop is not allowed in a parser state (P4-16's parser statements have "
                               "no for; it may appear only inside an if)", st.pos)
        if isinstance(st, ast.BlockStmt):
            _parser_statements(st.stmts)
    return stmts


def _unnameable_key_part(e: ast.Expr) -> ast.Expr | None:
    """The part of a key expression p4c cannot name after its source (its
    KeyNameGenerator names fields, indexes, slices, constants, ``&`` and
    ``isValid()``), or None when the whole key can be named."""
    if isinstance(e, (ast.PathExpr, ast.IntLit)):
        return None
    if isinstance(e, ast.MemberExpr):
        return _unnameable_key_part(e.expr)
    if isinstance(e, ast.IndexExpr):
        return _unnameable_key_part(e.expr) or _unnameable_key_part(e.index)
    if isinstance(e, ast.SliceExpr):
        return _unnameable_key_part(e.expr)
    if isinstance(e, ast.BinaryExpr) and e.op == "&":
        return _unnameable_key_part(e.left) or _unnameable_key_part(e.right)
    if (isinstance(e, ast.CallExpr) and not e.args and isinstance(e.target, ast.MemberExpr)
            and e.target.member == "isValid"):
        return _unnameable_key_part(e.target.expr)
    return e
