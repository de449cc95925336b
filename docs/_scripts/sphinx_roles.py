"""A Griffe extension for the docs build: the package's docstrings use Sphinx roles
(``:class:`~pytest_mgmtauth.ApiCall```, ``:meth:`auth_count```), which mkdocstrings shows
as plain text. Each role becomes an autorefs cross-reference to the public name of what
it names (``pytest_mgmtauth.MgmtServer.auth_count``, not the private module's path), so
the reference links it, and the strict build fails on a role that names nothing the
docs render or anchor (reference.md's ``[](){#...}`` anchors stand in for members its
tables still describe by hand)."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|data|exc|mod|obj):`(~?)([^`<>]+?)`")


class SphinxRoles(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        # Public name of each private path: pytest_mgmtauth's re-exports.
        public = {
            member.target_path: f"{pkg.path}.{name}"
            for name, member in pkg.members.items()
            if member.is_alias and not name.startswith("_")
        }
        for obj in _every_object(pkg):
            if obj.docstring is not None:
                obj.docstring.value = _ROLE.sub(
                    lambda m, obj=obj: _link(obj, m, public), obj.docstring.value
                )


def _every_object(obj: griffe.Object) -> list[griffe.Object]:
    found = [obj]
    for member in obj.members.values():
        if not member.is_alias and isinstance(member, griffe.Object):
            found += _every_object(member)
    return found


def _link(obj: griffe.Object, match: re.Match[str], public: dict[str, str]) -> str:
    short, target = match.group(1) == "~", match.group(2).strip()
    path = _resolve(obj, target)
    for private, name in public.items():
        if path == private or path.startswith(private + "."):
            path = name + path[len(private) :]
            break
    shown = target.rsplit(".", 1)[-1] if short or target.startswith(".") else target
    return f"[`{shown}`][{path}]"


def _resolve(obj: griffe.Object, target: str) -> str:
    """The full path a role names: relative (``.options.Options``) to the object's
    package, a bare name to the nearest class or module that has it, else as written."""
    if target.startswith("."):
        dots = len(target) - len(target.lstrip("."))
        return f"{obj.module.path.rsplit('.', dots)[0]}.{target.lstrip('.')}"
    head = target.split(".", 1)[0]
    scope: griffe.Object | None = obj if obj.is_class or obj.is_module else obj.parent
    while scope is not None:
        if head in scope.members:
            return f"{scope.path}.{target}"
        scope = scope.parent
    return target
