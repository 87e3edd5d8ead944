"""The `ast` check every piece of model-written API code passes before it runs.

It runs only in a desktop's sandbox anyway (`apis/worker.py`): this check is the first wall, the
sandbox the second. It refuses what an application API never needs and an escape always does:
imports outside a short allow-list, `exec`/`eval`/`compile`/`__import__` and friends, dunder names
and attributes, `getattr`-style access by a computed or private name, `open` of anything but a
home path, UNO services that run commands, macros or connections, and changing a module's
attributes. Each refusal keeps its reason and line. Standard library only: the worker carries
this file's source into the sandbox and checks again there.
"""

from __future__ import annotations

import ast
import re

ALLOWED_MODULES = {"uno", "math", "re", "json", "datetime", "decimal", "fractions", "statistics", "string",
                   "itertools", "functools", "collections", "calendar"}
UNO_MODULES = {"table", "awt", "beans", "style", "sheet", "text", "chart", "chart2", "util", "lang", "drawing",
               "presentation", "container", "uno", "i18n", "document"}  # com.sun.star.<these>
FORBIDDEN_CALLS = {"exec", "eval", "compile", "__import__", "globals", "locals", "vars", "breakpoint", "input",
                   "exit", "quit", "help", "memoryview", "setattr", "delattr"}
FORBIDDEN_TEXT = ("SystemShellExecute", "com.sun.star.system", "ScriptProvider", "com.sun.star.script",
                  "com.sun.star.connection", "com.sun.star.bridge", "com.sun.star.loader", "SimpleFileAccess",
                  "macro:", "vnd.sun.star.script", "RunMacro", "com.sun.star.task.Job")
SERVICE_FACTORIES = {"createInstance", "createInstanceWithContext", "createInstanceWithArguments",
                     "createInstanceWithArgumentsAndContext", "createUnoService"}
_DUNDER = re.compile(r"^__\w*__$")
HOME = "/home/user"


class Refused(Exception):
    """Model-written code the check refuses; the message says why (and where)."""


def refusals(source: str, helpers: frozenset[str] = frozenset()) -> list[str]:
    """Why `source` may not run ([] when it may). `helpers`: the names the worker provides (their
    attributes, like a module's, may not be changed)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return [f"line {e.lineno}: does not parse: {e.msg}"]
    modules = set(helpers)
    why: list[str] = []
    for node in ast.walk(tree):
        problem = _problem(node, modules)
        if problem:
            why.append(f"line {getattr(node, 'lineno', '?')}: {problem}")
    return why


def check(source: str, helpers: frozenset[str] = frozenset()) -> None:
    """Raise Refused with every reason, or return when the code may run."""
    why = refusals(source, helpers)
    if why:
        raise Refused("; ".join(why[:5]) + (f" (and {len(why) - 5} more)" if len(why) > 5 else ""))


def _problem(node: ast.AST, modules: set[str]) -> str | None:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        if isinstance(node, ast.ImportFrom) and node.level:
            return "relative imports are not allowed"
        for name in names:
            if not _allowed_module(name):
                return f"import of {name!r} is not allowed (allowed: {', '.join(sorted(ALLOWED_MODULES))}, com.sun.star.*)"
        for alias in node.names:
            modules.add((alias.asname or alias.name).split(".")[0])
        return None
    if isinstance(node, ast.Name) and _DUNDER.match(node.id):
        return f"the name {node.id} is not allowed"
    if isinstance(node, ast.Attribute) and _DUNDER.match(node.attr):
        return f"dunder attribute access (.{node.attr}) is not allowed"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        if _DUNDER.match(node.value.strip()):
            return f"the string {node.value!r} names a dunder attribute"
        bad = next((t for t in FORBIDDEN_TEXT if t.lower() in node.value.lower()), None)
        if bad:
            return f"{bad!r} (commands, macros, raw files or connections) is not allowed"
    if isinstance(node, ast.Call):
        return _call_problem(node)
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in modules:
                return f"changing {t.value.id}.{t.attr} is not allowed"
    return None


def _call_problem(call: ast.Call) -> str | None:
    fn = call.func
    name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
    if name in FORBIDDEN_CALLS:
        return f"{name}() is not allowed"
    if name in ("getattr", "hasattr"):
        attr = call.args[1] if len(call.args) > 1 else None
        if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str) and not attr.value.startswith("_")):
            return f"{name}() needs a literal, public attribute name"
    if name == "open" and isinstance(fn, ast.Name):
        path = call.args[0] if call.args else None
        literal = isinstance(path, ast.Constant) and isinstance(path.value, str)
        checked = (isinstance(path, ast.Call) and isinstance(path.func, ast.Name) and path.func.id == "home_path")
        if literal and not _in_home(path.value) or not (literal or checked):
            return "open() takes a literal path under /home/user, or home_path(path)"
    if name in SERVICE_FACTORIES:
        service = call.args[0] if call.args else None
        if not (isinstance(service, ast.Constant) and isinstance(service.value, str)):
            return f"{name}() needs the service's name as a literal string"
    return None


def _allowed_module(name: str) -> bool:
    parts = name.split(".")
    if parts[0] in ALLOWED_MODULES:
        return True
    return parts[:3] == ["com", "sun", "star"] and len(parts) > 3 and parts[3] in UNO_MODULES


def _in_home(path: str) -> bool:
    import posixpath

    p = posixpath.normpath(path)
    return p == HOME or p.startswith(HOME + "/")
