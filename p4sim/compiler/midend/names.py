"""Control-plane names, exactly as p4c derives them.

A table, action or extern instance declared inside control ``MyIngress`` is called
``MyIngress.<name>`` in BMv2 JSON and P4Info; ``@name("x")`` replaces the local part,
and ``@name(".x")`` (leading dot) makes the name global: ``x``. Top-level declarations
(``NoAction``) keep their plain name. Instances of sub-controls extend the prefix with
the instance name: ``MyIngress.acl.t``.
"""

from __future__ import annotations

from p4sim.compiler import ast


def annotation_string(decl: ast.Decl, name: str) -> str | None:
    """The string argument of ``@name("...")``-style annotations, if present."""
    a = decl.annotation(name)
    if a is None or not a.args:
        return None
    arg = a.args[0]
    if isinstance(arg, ast.StringLit):
        return arg.value
    return None


def local_name(decl: ast.Decl) -> str:
    """The name a declaration has in its scope: ``@name`` if given, else its own."""
    return annotation_string(decl, "name") or decl.name


def control_plane_name(decl: ast.Decl, prefix: str) -> str:
    """Fully qualified name of ``decl`` declared in a scope called ``prefix``
    ("" for top level, "MyIngress" inside that control)."""
    n = local_name(decl)
    if n.startswith("."):
        return n[1:]
    return f"{prefix}.{n}" if prefix else n


def join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name
