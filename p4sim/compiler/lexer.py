"""Tokens of P4-16, classified the way p4c's lexer classifies them.

P4's grammar is LALR(1) only if the lexer tells two things apart, which p4c's lexer
does with the parser's symbol table:

* a **type name** (TYPE_IDENT) from any other name (IDENT): ``T x;`` declares, while
  ``a = b;`` assigns; ``(T) e`` is a cast, ``(a) + b`` is not;
* an angle bracket that opens/closes a **type-argument list** (L_ANGLE/R_ANGLE) from
  the comparison operators (LT/GT); ``>>`` is two R_ANGLEs in ``bit<bit<8>>`` and a
  shift (SHR) in an expression.

We do the same in two passes over the token list: pass 1 collects every name a
declaration introduces as a type (header, struct, enum, typedef, extern, parser,
control, package ...); pass 2 classifies names and brackets, with type parameters
(``<T, U>`` after a declared name) in scope until the end of their declaration.

Positions: the input is cpp output, whose lines are mapped back to the original
files by `preprocess.LineMap`; each token's column is found by locating the token
in the original line (cpp collapses white space); a token a macro produced points at
the macro.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Optional

from lark import Token
from lark.lexer import Lexer

from p4sim.compiler.diagnostics import CompileError
from p4sim.compiler.preprocess import LineMap

_INT = r"(?:\d+[ws])?(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|0[dD][0-9_]+|[0-9][0-9_]*)"
_SCAN = re.compile(
    r"(?P<ws>[ \t\r\f\v]+)|(?P<nl>\n)|(?P<comment>//[^\n]*|/\*.*?\*/)"
    r"|(?P<annot>@[A-Za-z_][A-Za-z0-9_]*)"
    rf"|(?P<int>{_INT})(?![A-Za-z0-9_])"
    r"|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)"
    r'|(?P<string>"(?:[^"\\\n]|\\.)*")'
    r"|(?P<punct>\|\+\|=|\|-\|=|<<=|>>=|[-+*/%&^|]=(?!=)|&&&|\|\+\||\|-\||\.\.|\+\+|&&|\|\||==|!=|<=|>=|<<|[-+*/%&|^~!?:;,.=<>(){}\[\]#])",
    re.S,
)

#: What may lie between two tokens of the original line that cpp passed through
#: unchanged: white space, or a macro invocation that cpp replaced (name, arguments).
_MACRO_GAP = re.compile(r"[\s\w(),]*")

#: Keywords after which the next ``<`` opens a type-argument list.
_TYPE_KEYWORDS = {"bit", "int", "varbit", "tuple", "list", "value_set"}
#: Tokens that can end a type (so a following ``name<`` declares type parameters).
_TYPE_END = {"TYPE_IDENT", "R_ANGLE", "IDENT", "VOID", "BOOL", "BIT", "INT", "STRING", "ERROR"}
#: Tokens that can start a type argument.
_TYPE_START = {"TYPE_IDENT", "BIT", "INT", "VARBIT", "BOOL", "TUPLE", "LIST", "STRING", "ERROR",
               "VOID", "UNDERSCORE", "MATCH_KIND"}
#: Keywords whose following name is a type being declared.
_TYPE_DECL_KW = {"struct", "header", "header_union", "parser", "control", "package"}
_DECL_WITH_PARAMS = _TYPE_DECL_KW | {"extern"}


@dataclass
class Tok:
    kind: str  # terminal name
    value: str
    line: int  # line in the preprocessed text
    col: int  # 1-based column in the original source line
    end: int  # character offset just after the token in the preprocessed text


def scan(text: str, lines: LineMap, keywords: dict[str, str]) -> list[Tok]:
    """Split cpp output into raw tokens (names not yet classified)."""
    toks: list[Tok] = []
    line = 1
    pos = 0
    n = len(text)
    orig_line = ""
    cursor = 0
    line_start = True
    while pos < n:
        if line_start and text.startswith("#", pos):
            # a cpp line marker (or a stray directive): skip the whole line
            nl = text.find("\n", pos)
            pos = n if nl < 0 else nl
            continue
        if line_start:
            file, ln = lines.origin(line)
            orig_line = lines.code_line(file, ln)
            cursor = 0
            line_start = False
        m = _SCAN.match(text, pos)
        if m is None:
            col = orig_line.find(text[pos], cursor) + 1 or cursor + 1
            raise CompileError(f"unexpected character '{text[pos]}'", lines.pos(line, col))
        kind = m.lastgroup
        value = m.group()
        pos = m.end()
        if kind == "nl":
            line += 1
            line_start = True
            continue
        if kind in ("ws", "comment"):
            line += value.count("\n")
            if "\n" in value:
                line_start = True
            continue
        found = orig_line.find(value, cursor)
        if found < 0 or not _MACRO_GAP.fullmatch(orig_line, cursor, found):
            col = cursor + 1  # produced by a macro expansion: point at the macro
        else:
            col = found + 1
            cursor = found + len(value)
        if kind == "int":
            t = "INTEGER"
        elif kind == "ident":
            t = keywords.get(value, "IDENT")
        elif kind == "string":
            t = "STRING_LIT"
        elif kind == "annot":
            t = "ANNOT"
        elif value == "<":
            t = "LT"
        elif value == ">":
            t = "GT"
        else:
            t = keywords.get(value)
            if t is None:
                raise CompileError(f"unexpected token '{value}'", lines.pos(line, col))
        toks.append(Tok(t, value, line, col, pos))
    return toks


def _declared_types(toks: list[Tok]) -> set[str]:
    """Pass 1: names that declarations introduce as types, program-wide."""
    types: set[str] = set()
    n = len(toks)
    for i, t in enumerate(toks):
        v = t.value
        if t.kind == "IDENT" or i + 1 >= n:
            continue
        nxt = toks[i + 1]
        if v in _TYPE_DECL_KW and nxt.kind == "IDENT":
            types.add(nxt.value)
        elif v == "extern" and nxt.kind == "IDENT":
            after = toks[i + 2] if i + 2 < n else None
            if after is None or after.kind != "IDENT":
                types.add(nxt.value)
        elif v == "enum":
            j = i + 1
            while j < n and toks[j].value != "{":
                j += 1
            if j < n and toks[j - 1].kind == "IDENT":
                types.add(toks[j - 1].value)
        elif v in ("typedef", "type"):
            if v == "type" and not _starts_declaration(toks, i):
                continue
            j = i + 1
            while j < n and toks[j].value != ";":
                j += 1
            if j < n and toks[j - 1].kind == "IDENT":
                types.add(toks[j - 1].value)
    return types


def _starts_declaration(toks: list[Tok], i: int) -> bool:
    """Whether token ``i`` begins a declaration (after ``;``, a brace, or annotations)."""
    j = i - 1
    while j >= 0:
        t = toks[j]
        if t.value in (";", "}", "{"):
            return True
        if t.kind == "ANNOT":
            j -= 1
            continue
        if t.value == ")":  # the argument list of an annotation?
            depth = 0
            while j >= 0:
                depth += {")": 1, "(": -1}.get(toks[j].value, 0)
                if depth == 0:
                    break
                j -= 1
            if j > 0 and toks[j - 1].kind == "ANNOT":
                j -= 2
                continue
        return False
    return True


def classify(toks: list[Tok]) -> None:
    """Pass 2: IDENT -> TYPE_IDENT where a type is meant; LT/GT -> L_ANGLE/R_ANGLE/SHR."""
    globals_ = _declared_types(toks)
    # scopes of type parameters: (names, brace depth where the declaration sits)
    scopes: list[tuple[set[str], int]] = []
    brackets: list[str] = []  # '<' for type-argument lists, '(' '[' '{' otherwise
    depth = 0
    declaring: Optional[set[str]] = None  # inside a type-parameter list being declared
    out: list[Tok] = []
    n = len(toks)
    i = 0
    while i < n:
        t = toks[i]
        k = t.kind
        if t.value == "type" and k != "IDENT" and not _starts_declaration(toks, i):
            t.kind = k = "IDENT"  # `type` naming a parameter or variable (p4c's nonTypeName), also when used
        if k == "IDENT":
            if declaring is not None:
                declaring.add(t.value)
            elif t.value in globals_ or any(t.value in s for s, _ in scopes):
                t.kind = "TYPE_IDENT"
        elif k == "LT":
            prev = out[-1] if out else None
            pprev = out[-2] if len(out) > 1 else None
            nxt = toks[i + 1] if i + 1 < n else None
            is_decl = prev is not None and pprev is not None and (
                (prev.kind == "TYPE_IDENT" and pprev.value in _DECL_WITH_PARAMS)
                or (prev.kind == "IDENT" and pprev.kind in _TYPE_END)
                # a generic method named like a type declared elsewhere (`bit<16>
                # update<T>(...)` next to `control update`): methods have names of their own
                or (prev.kind == "TYPE_IDENT" and pprev.kind in _TYPE_END - {"IDENT", "TYPE_IDENT"}
                    and nxt is not None and nxt.kind == "IDENT")
            )
            if is_decl:
                t.kind = "L_ANGLE"
                declaring = set()
                brackets.append("<")
            elif prev is not None and (
                prev.kind == "TYPE_IDENT" or prev.value in _TYPE_KEYWORDS
                or (prev.kind == "IDENT" and nxt is not None
                    and (nxt.kind in _TYPE_START or _is_type_name(nxt, globals_, scopes)))
            ):
                t.kind = "L_ANGLE"
                brackets.append("<")
        elif k == "GT":
            if brackets and brackets[-1] == "<":
                brackets.pop()
                t.kind = "R_ANGLE"
                if declaring is not None:
                    scopes.append((declaring, depth))
                    declaring = None
            elif i + 1 < n and toks[i + 1].kind == "GT" and toks[i + 1].end == t.end + 1:
                t = Tok("SHR", ">>", t.line, t.col, toks[i + 1].end)
                out.append(t)
                i += 2
                continue
        elif k in ("LPAR", "LSQB"):
            brackets.append("(")
        elif k in ("RPAR", "RSQB"):
            _pop_to(brackets, "(")
        elif k == "LBRACE":
            brackets.append("{")
            depth += 1
        elif k == "RBRACE":
            _pop_to(brackets, "{")
            depth -= 1
            while scopes and scopes[-1][1] >= depth:
                scopes.pop()
        elif k == "SEMI":
            while scopes and scopes[-1][1] == depth:
                scopes.pop()
        out.append(t)
        i += 1
    toks[:] = out


def _is_type_name(t: Tok, globals_: set[str], scopes: list[tuple[set[str], int]]) -> bool:
    return t.kind == "IDENT" and (t.value in globals_ or any(t.value in s for s, _ in scopes))


def _pop_to(brackets: list[str], opener: str) -> None:
    while brackets:
        b = brackets.pop()
        if b == opener:
            return


class TokenListLexer(Lexer):
    """Hands lark a prepared token list (the "text" given to `Lark.parse`)."""

    def __init__(self, lexer_conf: object) -> None:
        """lark passes its lexer configuration; the tokens are already made."""

    def lex(self, tokens: list[Token]) -> Iterator[Token]:  # type: ignore[override]
        # lark's interface 0 for custom lexers: called with the parse() input itself
        return iter(tokens)


def to_lark(toks: list[Tok]) -> list[Token]:
    """lark tokens; ``start_pos`` is the index into the position list."""
    return [Token(t.kind, t.value, start_pos=i, line=t.line, column=t.col) for i, t in enumerate(toks)]
