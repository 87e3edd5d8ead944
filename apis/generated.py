"""Generated application APIs (`computerrl build-apis`): their signatures, the module they are kept
in, loading it with `--apis`, and the request that runs one inside a desktop's sandbox.

A generated API is a plain function, written by a model, with literal-typed parameters and a
one-line docstring, e.g. `def fill_down(range_str: str) -> None`. It joins its app's API class
(`CalcTools.fill_down`): the prompt shows it and the parser accepts it like a built-in one. Its
code is never imported or executed here, in the trainer or in the env server: signatures are read
with `ast`, and the code runs only in `apis/worker.py`, inside a desktop's sandbox.

An API folder (`build-apis --out DIR`, loaded with `--apis DIR`) holds `<app>_apis.py`, the
accepted APIs as one readable module, and `dataset/`, every API proposed with its verdict.
"""

from __future__ import annotations

import ast
import inspect
import json
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from computerrl.apis.app_api import IMPLEMENTATIONS
from computerrl.apis.registry import REGISTRY, ApiFunction, make_function
from computerrl.apis.worker import MARK

APPS = ("calc", "writer", "impress")
_SOURCES = Path(__file__).parent  # kit.py, guard.py and worker.py travel as text into the sandbox
_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "Any": Any, "list": list, "dict": dict,
          "tuple": tuple}


@dataclass
class GeneratedApi:
    app: str  # "calc", "writer", "impress"
    name: str
    code: str  # the whole function (and the imports it needs), as the model wrote it

    @property
    def api(self) -> str:
        """The API class it joins ("CalcTools")."""
        return api_class(self.app)

    def function(self) -> ApiFunction:
        """Its signature and doc as the registry holds them (read from the code with ast, never run)."""
        fn = function_def(self.code, self.name)
        return make_function(self.api, self.name, signature(fn), ast.get_docstring(fn) or "")


def api_class(app: str) -> str:
    for api, impl in IMPLEMENTATIONS.items():
        if impl.app == app:
            return api
    raise ValueError(f"no application API for {app!r} (apps: {', '.join(APPS)})")


# --- signatures, read with ast -----------------------------------------------------------------

def function_def(code: str, name: str | None = None) -> ast.FunctionDef:
    """The top-level `def` of `code` (named `name`, or the only one); ValueError if there is none."""
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        raise ValueError(f"does not parse: line {e.lineno}: {e.msg}") from None
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and (name is None or n.name == name)]
    if not defs:
        raise ValueError(f"no function {name or ''} defined".replace("  ", " "))
    return defs[-1]


def signature(fn: ast.FunctionDef) -> inspect.Signature:
    """The signature of a `def`, its annotations and defaults read as literals (nothing evaluated)."""
    args = fn.args
    if args.vararg or args.kwarg or args.posonlyargs:
        raise ValueError(f"{fn.name}: only plain named parameters are allowed")
    defaults = [None] * (len(args.args) - len(args.defaults)) + list(args.defaults)
    params = [(a, d, inspect.Parameter.POSITIONAL_OR_KEYWORD) for a, d in zip(args.args, defaults)]
    params += [(a, d, inspect.Parameter.KEYWORD_ONLY) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    out = []
    for a, default, kind in params:
        if a.annotation is None:
            raise ValueError(f"{fn.name}: parameter {a.arg} needs a type")
        try:
            value = inspect.Parameter.empty if default is None else ast.literal_eval(default)
        except ValueError:
            raise ValueError(f"{fn.name}: the default of {a.arg} must be a literal") from None
        out.append(inspect.Parameter(a.arg, kind, default=value, annotation=annotation(a.annotation)))
    ret = annotation(fn.returns) if fn.returns is not None else inspect.Signature.empty
    return inspect.Signature(out, return_annotation=ret)


def annotation(node: ast.expr) -> Any:
    """A literal type (`str`, `int | None`, `list[str]`, `Literal["a", "b"]`, …) from its ast;
    ValueError for anything else."""
    try:
        return _annotation(node)
    except (TypeError, IndexError, SyntaxError) as e:  # tuple[()], Literal[[1]]…
        raise ValueError(f"type {ast.unparse(node)!r} cannot be read: {e}") from None


def _annotation(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and node.value is None:
        return None
    if isinstance(node, ast.Name) and node.id in _TYPES:
        return _TYPES[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return typing.Union[_annotation(node.left), _annotation(node.right)]
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        head = node.value.id
        if head == "Literal":
            values = [ast.literal_eval(i) for i in items]
            if not values or not all(isinstance(v, (str, int, float, bool)) for v in values):
                raise ValueError("Literal[...] takes strings, numbers or booleans")
            return Literal[tuple(values)]
        if head == "Optional" and len(items) == 1:
            return typing.Optional[_annotation(items[0])]
        if head in ("list", "dict", "tuple"):
            inner = tuple(Ellipsis if isinstance(i, ast.Constant) and i.value is Ellipsis else _annotation(i)
                          for i in items)
            return {"list": list, "dict": dict, "tuple": tuple}[head][inner if len(inner) > 1 else inner[0]]
    raise ValueError(f"type {ast.unparse(node)!r} is not a literal type (use str, int, float, bool, None, "
                     "list[...], dict[str, ...], Literal[...] or X | Y)")


# --- the module of accepted APIs ---------------------------------------------------------------

def module_path(folder: Path, app: str) -> Path:
    return Path(folder) / f"{app}_apis.py"


def module_text(app: str, apis: list[GeneratedApi]) -> str:
    head = (f'"""{api_class(app)}: APIs written by a model and accepted by `computerrl build-apis` (each passed\n'
            f'its tests in a live desktop). Loaded with `--apis DIR`; run only inside a desktop\'s sandbox."""\n')
    return head + "".join(f"\n\n{api.code.strip()}\n" for api in apis)


def read_module(path: Path) -> list[GeneratedApi]:
    """The APIs of a module `module_text` wrote: each top-level function with the module's imports."""
    app = Path(path).name.removesuffix("_apis.py")
    if app not in APPS:
        raise ValueError(f"{path}: the file name must be <app>_apis.py, app one of {', '.join(APPS)}")
    text = Path(path).read_text()
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        raise ValueError(f"{path}: line {e.lineno}: {e.msg}") from None
    imports = "".join(ast.get_source_segment(text, n) + "\n" for n in tree.body
                      if isinstance(n, (ast.Import, ast.ImportFrom)))
    return [GeneratedApi(app, n.name, imports + ast.get_source_segment(text, n)) for n in tree.body
            if isinstance(n, ast.FunctionDef)]


LOADED: dict[tuple[str, str], GeneratedApi] = {}  # (API class, name) -> its code


def read_modules(folder: Path | str) -> list[tuple[GeneratedApi, ApiFunction]]:
    """The accepted APIs of a `build-apis` folder with their registry entries; ValueError naming the file
    and the function for anything wrong (a name a built-in API has, a type that is not literal…)."""
    folder = Path(folder)
    modules = sorted(folder.glob("*_apis.py"))
    if not modules:
        raise ValueError(f"{folder} holds no <app>_apis.py module (write one with `computerrl build-apis`)")
    out = []
    for path in modules:
        for api in read_module(path):
            if api.name in REGISTRY.functions(api.api) and (api.api, api.name) not in LOADED:
                raise ValueError(f"{path}: {api.name} is already a built-in {api.api} function")
            try:
                out.append((api, api.function()))
            except (TypeError, ValueError) as e:
                raise ValueError(f"{path}: {api.name}: {e}") from None
    return out


def load(folder: Path | str) -> list[GeneratedApi]:
    """Register the accepted APIs of a `build-apis` folder beside the built-in ones: the prompt shows
    them, the parser accepts them, an env server runs them in its desktops' sandboxes."""
    loaded = read_modules(folder)
    for api, function in loaded:
        REGISTRY.add(function)
        LOADED[(api.api, api.name)] = api
    return [api for api, _ in loaded]


def unload() -> None:
    """Forget every loaded generated API (the built-in ones stay)."""
    for api, name in LOADED:
        REGISTRY.functions(api).pop(name, None)
    LOADED.clear()


# --- running one inside a desktop ---------------------------------------------------------------

def worker_argv() -> list[str]:
    return ["/usr/bin/python3", "-I", "-c", (_SOURCES / "worker.py").read_text()]


def worker_request(app: str, code: str, *, mode: str, function: str = "", args: dict | None = None,
                   tests: str = "", check: bool = True) -> dict:
    """What the worker reads on its standard input (the desktop adds its office's pipe and the app's
    document factory and service)."""
    return {"modules": {name: (_SOURCES / f"{name}.py").read_text() for name in ("kit", "guard")},
            "app": app, "mode": mode, "code": code, "function": function, "args": args or {}, "tests": tests,
            "check": check}


def worker_reply(stdout: str) -> dict | None:
    """The worker's answer from its output; None when it printed none (it died first)."""
    for line in reversed(stdout.split("\n")):  # not splitlines: the mark begins with \x1e, a line break to it
        if line.startswith(MARK):
            try:
                return json.loads(line[len(MARK):])
            except ValueError:  # cut short (the keeper keeps the first MiB of output)
                return None
    return None
