"""The package list in pyproject.toml is written by hand: a folder it misses would silently be
left out of the wheel and the Docker image."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_python_package_folder_is_in_pyproject():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {str(p.parent.relative_to(ROOT)) for p in ROOT.rglob("__init__.py")
               if not {".venv", "tests", "runs", "build"} & set(p.relative_to(ROOT).parts)}
    mapped = {folder: name for name, folder in setuptools["package-dir"].items()}
    missing = sorted(f for f in folders if mapped.get(f) not in setuptools["packages"])
    assert not missing, f"folders with an __init__.py missing from pyproject's package-dir/packages: {missing}"


ALLOWED = {  # package -> the project packages it may import (STYLE.md: layers point one way)
    "data": {"data"},
    "apis": {"apis", "data"},
    "envs": {"envs", "apis", "data"},
    "policy": {"policy", "apis", "data"},
    "stages": {"envs", "apis", "data", "policy"},  # and never another stage
    "cli": {"cli", "stages", "envs", "apis", "data", "policy"},
}


def test_layers_point_one_way():
    import ast

    wrong = []
    for package, allowed in ALLOWED.items():
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                for name in names:
                    parts = name.split(".")
                    if parts[0] == "computerrl" and len(parts) > 1 and parts[1] not in allowed | {"__init__"}:
                        wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not wrong, "\n".join(wrong)
