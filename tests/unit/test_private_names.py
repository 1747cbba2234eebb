"""No module of lab/ imports another module's private name (`from lab.x import _name`): a leading underscore says
the name may change with its module alone, so a module that needs it gets it public (as lab.vm.debtools needed
lab.vm.kernels' lock, command runner and tool lookup). Importing a public name under a private alias is the
importer's own business, and is allowed."""

from __future__ import annotations

import ast

from support.host import REPO


def private_imports(source: str) -> list[str]:
    """`module.name` of each private name a module's source imports from another lab module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lab"):
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    return found


def test_a_private_name_imported_from_another_module_is_found():
    source = "from lab.vm.kernels import _locked, updated_apt\nfrom lab.describe import families as _families\n"
    assert private_imports(source) == ["lab.vm.kernels._locked"]


def test_no_lab_module_imports_another_module_s_private_name():
    imported = {
        str(path.relative_to(REPO)): names
        for path in sorted((REPO / "lab").rglob("*.py"))
        if (names := private_imports(path.read_text()))
    }
    assert not imported, f"private names imported across modules (make them public): {imported}"
