"""Registry of the API classes an agent may call (`Agent`, `CalcTools`, …).

An API class is a plain class of stub static methods: annotated parameters and a one-line
docstring. `@register_api` records each public function's signature, doc and one argument
checker per parameter, derived from its annotation. The checkers serve two masters: the parser
(reject a wrong call with a reason the model can learn from) and the prompt (`render`).

Supported annotations: `int`, `float` (ints accepted, stored as float), `str`, `bool`, `None`,
`Any`, `list[X]` / `tuple[X, ...]` (stored as lists), `dict[str, X]`, `X | Y`, `Literal[...]`,
and `Annotated[X, Range(lo, hi), Len(lo, hi), Round()]` for value constraints.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Collection, Literal


@dataclass(frozen=True)
class Range:
    """Inclusive numeric bounds; None = unbounded."""

    lo: float | None = None
    hi: float | None = None


@dataclass(frozen=True)
class Len:
    """Inclusive bounds on the length of a str or list; None = unbounded."""

    lo: int | None = None
    hi: int | None = None


@dataclass(frozen=True)
class Round:
    """On an `int`: also accept a finite float and round it (models often emit 12.0 pixels)."""


class _Mismatch(ValueError):
    # deep=True: the value had the right outer shape but a part or a constraint failed, which
    # makes a better message for a union than "must be X | Y".
    def __init__(self, msg: str, deep: bool = False):
        super().__init__(msg)
        self.deep = deep


Checker = Callable[[Any, str], Any]  # (value, path for messages) -> stored value


def _kind(v: Any) -> str:
    return "None" if v is None else type(v).__name__


def type_name(ann: Any) -> str:
    """How an annotation is shown to the model: constraints stripped, PEP 604 unions."""
    if ann is inspect.Parameter.empty or ann is Any:
        return "Any"
    if ann is None or ann is type(None):
        return "None"
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is Annotated:
        return type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is Literal:
        return "Literal[" + ", ".join(to_source(a) for a in args) + "]"
    if origin is not None:
        inner = [("..." if a is Ellipsis else type_name(a)) for a in args]
        return f"{origin.__name__}[{', '.join(inner)}]"
    return getattr(ann, "__name__", repr(ann))


_ESCAPED = re.compile("[`\u202a-\u202e\u2066-\u2069]")


def to_source(v: Any) -> str:
    """A literal's canonical Python source; json.dumps quoting and escapes are valid Python.

    Backticks and bidirectional controls are escaped: canonical code never holds a markdown fence,
    nor a character the parser refuses in a response."""
    if v is None or isinstance(v, bool):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(to_source(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{to_source(k)}: {to_source(x)}" for k, x in v.items()) + "}"
    if isinstance(v, str):
        return _ESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(v, ensure_ascii=False))
    return json.dumps(v)


def _scalar(t: type, round_floats: bool = False) -> Checker:
    def check(v: Any, path: str) -> Any:
        if isinstance(v, bool) and t is not bool:
            raise _Mismatch(f"{path} must be {t.__name__}, got bool")
        if t is float and isinstance(v, int) and not isinstance(v, bool):
            return float(v)
        if round_floats and isinstance(v, float) and abs(v) < 2**63:  # beyond that, not a pixel
            return int(round(v))
        if not isinstance(v, t):
            raise _Mismatch(f"{path} must be {t.__name__}, got {_kind(v)}")
        if isinstance(v, float) and not math.isfinite(v):
            raise _Mismatch(f"{path} must be a finite number", deep=True)
        return v

    return check


def _constrained(inner: Checker, meta: list) -> Checker:
    def check(v: Any, path: str) -> Any:
        v = inner(v, path)
        for m in meta:
            if isinstance(m, Range) and not (
                (m.lo is None or v >= m.lo) and (m.hi is None or v <= m.hi)
            ):
                bounds = f">= {m.lo}" if m.hi is None else f"between {m.lo} and {m.hi}"
                raise _Mismatch(f"{path} must be {bounds}, got {v}", deep=True)
            if isinstance(m, Len) and not (
                (m.lo is None or len(v) >= m.lo) and (m.hi is None or len(v) <= m.hi)
            ):
                if m.lo == 1 and m.hi is None:
                    raise _Mismatch(f"{path} must not be empty", deep=True)
                what = "characters" if isinstance(v, str) else "items"
                want = (f"exactly {m.lo}" if m.lo == m.hi else f"at least {m.lo}" if m.hi is None
                        else f"{m.lo or 0} to {m.hi}")
                raise _Mismatch(f"{path} must have {want} {what}, got {len(v)}", deep=True)
        return v

    return check


def make_checker(ann: Any) -> Checker:
    """Build the argument checker for one annotation (raises TypeError if unsupported)."""
    if ann is inspect.Parameter.empty or ann is Any:
        return lambda v, path: v
    if ann is None or ann is type(None):
        def check_none(v: Any, path: str) -> None:
            if v is not None:
                raise _Mismatch(f"{path} must be None, got {_kind(v)}")
        return check_none
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is Annotated:
        base, meta = args[0], list(args[1:])
        inner = _scalar(int, round_floats=True) if base is int and Round() in meta else make_checker(base)
        return _constrained(inner, meta)
    if ann in (int, float, str, bool):
        return _scalar(ann)
    if origin is Literal:
        def check_literal(v: Any, path: str) -> Any:
            if not any(type(v) is type(c) and v == c for c in args):
                raise _Mismatch(f"{path} must be one of {', '.join(map(to_source, args))}, got {to_source(v)[:40]}")
            return v
        return check_literal
    if origin in (typing.Union, types.UnionType):
        options = [make_checker(a) for a in args]

        def check_union(v: Any, path: str) -> Any:
            deep = None
            for opt in options:
                try:
                    return opt(v, path)
                except _Mismatch as e:
                    deep = deep or (e if e.deep else None)
            raise deep or _Mismatch(f"{path} must be {type_name(ann)}, got {_kind(v)}")
        return check_union
    if ann in (list, tuple) or origin in (list, tuple):
        item = make_checker(args[0] if args else Any)

        def check_list(v: Any, path: str) -> list:
            if not isinstance(v, (list, tuple)):
                raise _Mismatch(f"{path} must be {type_name(ann)}, got {_kind(v)}")
            try:
                return [item(x, f"{path}[{i}]") for i, x in enumerate(v)]
            except _Mismatch as e:
                raise _Mismatch(str(e), deep=True) from None
        return check_list
    if ann is dict or origin is dict:
        value = make_checker(args[1] if args else Any)

        def check_dict(v: Any, path: str) -> dict:
            if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
                raise _Mismatch(f"{path} must be a dict with str keys, got {_kind(v)}")
            try:
                return {k: value(x, f"{path}[{k!r}]") for k, x in v.items()}
            except _Mismatch as e:
                raise _Mismatch(str(e), deep=True) from None
        return check_dict
    raise TypeError(f"unsupported annotation {ann!r}")


@dataclass(frozen=True)
class ApiFunction:
    api: str
    name: str
    signature: inspect.Signature
    doc: str
    checkers: dict[str, Checker] = field(repr=False)

    def bind(self, args: tuple, kwargs: dict) -> dict:
        """Bind a call's arguments, fill defaults, check and normalize every value."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise ValueError(f"wrong arguments for {self.api}.{self.name}: {e}") from None
        bound.apply_defaults()
        try:
            return {k: self.checkers[k](v, k) for k, v in bound.arguments.items()}
        except _Mismatch as e:
            raise ValueError(f"bad argument for {self.api}.{self.name}: {e}") from None

    def render(self, doc: bool = True) -> str:
        """The `def` line the prompt shows, with the one-line doc as a comment unless `doc` is False."""
        params = []
        for p in self.signature.parameters.values():
            s = f"{p.name}: {type_name(p.annotation)}"
            params.append(s if p.default is p.empty else f"{s} = {to_source(p.default)}")
        ret = self.signature.return_annotation
        ret = "None" if ret is self.signature.empty else type_name(ret)
        line = f"def {self.name}({', '.join(params)}) -> {ret}:"
        return f"{line}  # {self.doc}" if doc else f"{line} ..."


def make_function(api: str, name: str, sig: inspect.Signature, doc: str) -> ApiFunction:
    """An API function from its signature (annotations resolved) and docstring, its checkers built."""
    lines = doc.strip().splitlines()
    if not lines:
        raise TypeError(f"{api}.{name} needs a one-line docstring")
    checkers = {}
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"{api}.{name}: *args/**kwargs are not supported")
        checkers[p.name] = make_checker(p.annotation)
        if p.default is not p.empty:  # a default that fails its own check is a typo
            checkers[p.name](p.default, p.name)
    return ApiFunction(api, name, sig, lines[0], checkers)


class ApiRegistry:
    """API classes by name; `register` is a class decorator."""

    def __init__(self) -> None:
        self.apis: dict[str, dict[str, ApiFunction]] = {}

    def register(self, cls: type) -> type:
        functions = {}
        for name, attr in vars(cls).items():
            fn = attr.__func__ if isinstance(attr, staticmethod) else attr
            if name.startswith("_") or not inspect.isfunction(fn):
                continue  # private names are never callable by the model
            hints = typing.get_type_hints(fn, include_extras=True)
            sig = inspect.signature(fn)
            sig = sig.replace(
                parameters=[p.replace(annotation=hints.get(p.name, p.empty)) for p in sig.parameters.values()],
                return_annotation=hints.get("return", sig.empty),
            )
            functions[name] = make_function(cls.__name__, name, sig, inspect.getdoc(fn) or "")
        self.apis[cls.__name__] = functions
        return cls

    def add(self, function: ApiFunction) -> None:
        """One more function of an existing API class (a generated API: see apis/generated.py)."""
        self.functions(function.api)[function.name] = function

    def functions(self, api: str) -> dict[str, ApiFunction]:
        """The functions of one API class by name; KeyError (listing the known classes) if unknown."""
        if api not in self.apis:
            raise KeyError(f"unknown API class {api!r} (known: {', '.join(sorted(self.apis))})")
        return self.apis[api]

    def get(self, api: str, name: str) -> ApiFunction:
        self.functions(api)
        if name not in self.apis[api]:
            raise KeyError(f"unknown function {api}.{name} ({api} has: {', '.join(sorted(self.apis[api]))})")
        return self.apis[api][name]

    def validate(self, api: str, name: str, args: tuple = (), kwargs: dict | None = None) -> dict:
        """Bound arguments with defaults filled; ValueError(reason) if the call is wrong."""
        try:
            fn = self.get(api, name)
        except KeyError as e:
            raise ValueError(e.args[0]) from None
        return fn.bind(tuple(args), dict(kwargs or {}))

    def render(self, app_names: list[str], docs: bool = True, only: Collection[str] = ()) -> str:
        """Prompt text for exactly these API classes, one `def` line per function (`docs`: with its doc; `only`:
        just these functions, named `Class.function`, when given)."""
        blocks = []
        for api in app_names:
            lines = [f"    {fn.render(docs)}" for name, fn in self.functions(api).items()
                     if not only or f"{api}.{name}" in only]
            if lines:  # `only` may leave a class nothing to show
                blocks.append("\n".join([f"class {api}:", *lines]))
        return "\n\n".join(blocks)


REGISTRY = ApiRegistry()  # the default registry the parser uses


def register_api(cls: type) -> type:
    """Class decorator: add an API class to the default registry."""
    return REGISTRY.register(cls)
