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
