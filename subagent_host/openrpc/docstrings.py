"""The docstrings written under attrs fields, read from the source with `ast`.

Python keeps a class's docstring but drops the string literal written under a
field. The package ships its source, so the schema reads those literals back
from it: each becomes the `description` of the field's property.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from typing import Any


def class_description(cls: type[Any]) -> str | None:
    """The class's own docstring (not an inherited one), cleaned; None without one."""
    doc = cls.__dict__.get("__doc__")
    return unwrap(doc) if isinstance(doc, str) and doc.strip() else None


def field_description(cls: type[Any], name: str) -> str | None:
    """The literal under field `name`, from the class in `cls`'s MRO that declares it."""
    for owner in cls.__mro__:
        if name in owner.__dict__.get("__annotations__", {}):
            return _field_docstrings(owner).get(name)
    return None


@functools.cache
def _field_docstrings(owner: type[Any]) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(owner))
    except (OSError, TypeError):  # no source shipped: descriptions are left out
        return {}
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    found: dict[str, str] = {}
    for statement, following in zip(node.body, node.body[1:], strict=False):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            found[statement.target.id] = unwrap(following.value.value)
    return found


def unwrap(doc: str) -> str:
    """Cleaned, with lines wrapped for the source joined again (paragraphs kept)."""
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(p.split("\n")) for p in paragraphs)
