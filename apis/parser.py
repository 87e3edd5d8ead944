"""Turn a model response into an `Action` or an `InvalidAction`, without running anything.

The response is `<think>…</think>` followed by a ```python block holding one call such as
`Agent.click([100, 200], num_clicks=2)`. The code is only ever given to `ast.parse`; an action is
exactly `Api.function(<literals>)` for a function in the registry whose arguments bind to its
signature. Everything else becomes an `InvalidAction` whose reason the env sends back as
"Invalid action: <reason>". `parse_action` never raises: every input is capped by length before
it reaches the parser, and the parser's own failures become reasons.

Departures from a plain `ast.literal_eval`: sets and tuples become lists and dict keys must be
strings (actions travel as JSON); `Agent` in Cyrillic or fullwidth letters is rejected, because
Python NFKC-normalizes identifiers and would otherwise accept the fullwidth form.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass

from computerrl.apis import agent as _agent  # noqa: F401  (registers Agent)
from computerrl.apis.registry import REGISTRY, ApiRegistry, to_source

MAX_CODE_CHARS = 20_000  # longer code is refused before ast.parse sees it
MAX_STR_CHARS = 10_000  # per string literal
MAX_ITEMS = 1_000  # per list / tuple / set / dict literal
MAX_DEPTH = 4  # [[[[1]]]] is 4 deep
MAX_INT = 2**63 - 1

_FENCE = re.compile(r"(```|~~~)[ \t]*(?:python3?|py)\b", re.IGNORECASE)
# A closing fence starts or ends a line, so text="```" inside the call does not close the block.
_CLOSE = {f: re.compile(rf"^[ \t]*{f}|{f}[ \t]*$", re.MULTILINE) for f in ("```", "~~~")}
_CALL_START = re.compile(r"[^\W\d][\w.]*\(")  # "Agent.click(" — prose like "Done (ok)" is not a call
_CALL_LINE = re.compile(r"[ \t`]*[^\W\d]\w*\.[^\W\d]\w*\(")  # a line that starts with Api.fn(
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
# Bidirectional embeddings, overrides and isolates: they make code read differently than it parses.
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")

_FORBIDDEN = {  # reasons that hold wherever the node appears
    ast.Lambda: "lambdas are not allowed",
    ast.JoinedStr: "f-strings are not allowed",
    ast.ListComp: "comprehensions are not allowed",
    ast.SetComp: "comprehensions are not allowed",
    ast.DictComp: "comprehensions are not allowed",
    ast.GeneratorExp: "comprehensions are not allowed",
}
_WHY = {  # reasons for nodes found where a literal argument belongs
    **_FORBIDDEN,
    ast.Name: "names and variables are not allowed as arguments; write literal values",
    ast.Attribute: "attribute access is not allowed in arguments",
    ast.Call: "nested calls are not allowed",
    ast.Starred: "starred arguments are not allowed",
    ast.NamedExpr: "assignment expressions are not allowed",
    ast.BinOp: "operators are not allowed; write the literal value",
    ast.Subscript: "subscripts are not allowed",
}


class _Reject(Exception):
    """Internal: the reason an action is invalid."""


@dataclass(frozen=True)
class Action:
    api: str  # "Agent" or an app API class such as "CalcTools"
    name: str  # function name, e.g. "click"
    args: dict  # every parameter by name, defaults filled in, JSON-able values

    def to_json(self) -> str:
        return json.dumps({"api": self.api, "name": self.name, "args": self.args},
                          sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, s: str, registry: ApiRegistry | None = None) -> Action:
        """Rebuild an action, re-checking it exactly as if the model had written it."""
        try:
            d = json.loads(s, parse_constant=_no_constant)
        except (TypeError, ValueError, RecursionError) as e:
            raise ValueError(f"not a JSON action: {e}") from None
        if not (isinstance(d, dict) and set(d) == {"api", "name", "args"}
                and isinstance(d["api"], str) and isinstance(d["name"], str) and isinstance(d["args"], dict)):
            raise ValueError('expected {"api": str, "name": str, "args": {...}}')
        if not all(n.isascii() and n.isidentifier() for n in (d["api"], d["name"], *d["args"])):
            raise ValueError("API, function and argument names must be ASCII identifiers")
        result = _parse_code(cls(d["api"], d["name"], d["args"]).code, registry or REGISTRY)
        if isinstance(result, InvalidAction):
            raise ValueError(result.reason)
        return result

    @property
    def code(self) -> str:
        """Canonical one-line source; parsing it gives back an equal Action."""
        args = ", ".join(f"{k}={to_source(v)}" for k, v in self.args.items())
        return f"{self.api}.{self.name}({args})"


@dataclass(frozen=True)
class InvalidAction:
    reason: str  # e.g. "attribute chains are not allowed"
    code: str  # the extracted code ("" if none was found)

    @property
    def message(self) -> str:
        return "Invalid action: " + self.reason


def _no_constant(name: str):
    raise ValueError(f"{name} is not a finite number")


def format_answer(code: str, thought: str = "") -> str:
    """An answer in the form the model is asked for: a thought, then one line in a ```python block."""
    return f"<think>{thought}</think>\n```python\n{code}\n```"


def extract_code(response: str) -> str | None:
    """The ```python (or ~~~python) block, else a last line that is itself a call, else None.

    Two blocks, or an unfenced answer with calls on two lines, come back joined by a newline, so
    the parser rejects them as two statements instead of silently running one of them."""
    if not isinstance(response, str):
        return None
    fences = list(_FENCE.finditer(response))
    if fences:
        blocks = []
        for fence in fences:
            end = _CLOSE[fence.group(1)].search(response, fence.end())  # unclosed: cut at a stop word
            blocks.append(response[fence.end():end.start() if end else len(response)].strip())
        return "\n".join(b for b in blocks if b) or blocks[-1]
    text = response.rstrip()
    line = text[max(text.rfind("\n"), text.rfind("\r")) + 1:].strip().strip("`").strip()
    if not _CALL_START.match(line):
        return None
    calls = [c.strip().strip("`") for c in _THINK.sub("", text).splitlines() if _CALL_LINE.match(c)]
    return "\n".join(calls) if len(calls) > 1 else line


def parse_action(response: str, registry: ApiRegistry | None = None) -> Action | InvalidAction:
    """The action in a model response, or why there is none. Never raises, never executes."""
    if not isinstance(response, str):
        return InvalidAction("the response is not text", "")
    if _BIDI.search(response):
        return InvalidAction("bidirectional control characters are not allowed", "")
    code = extract_code(response)
    if not code:
        return InvalidAction("no action found; end with one call in a ```python block", code or "")
    return _parse_code(code, registry or REGISTRY)


def _parse_code(code: str, registry: ApiRegistry) -> Action | InvalidAction:
    try:
        api, name, args, kwargs = _parse_call(code)
        return Action(api, name, registry.validate(api, name, tuple(args), kwargs))
    except (_Reject, ValueError) as e:
        return InvalidAction(str(e), code)
    except (RecursionError, MemoryError, OverflowError):
        return InvalidAction("the action is too complex", code)


def _parse_call(code: str) -> tuple[str, str, list, dict]:
    if len(code) > MAX_CODE_CHARS:
        raise _Reject(f"the action is too long ({len(code)} characters, limit {MAX_CODE_CHARS})")
    if "\x00" in code:
        raise _Reject("null bytes are not allowed")
    body = _statements(code)
    if len(body) > 1:
        raise _Reject("only one statement is allowed per action")
    stmt = body[0]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        raise _Reject("imports are not allowed")
    if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        raise _Reject("assignments are not allowed")
    if not isinstance(stmt, ast.Expr):
        raise _Reject(f"{type(stmt).__name__.lower()} statements are not allowed; write one call")
    call = stmt.value
    if not isinstance(call, ast.Call):
        if isinstance(call, ast.Attribute) and not isinstance(call.value, ast.Name):
            raise _Reject("attribute chains are not allowed")
        raise _Reject(_FORBIDDEN.get(type(call), "the action must be one call such as Agent.click([100, 200])"))

    func = call.func
    if isinstance(func, ast.Name):
        raise _Reject(f"bare calls such as {func.id}(...) are not allowed; call Agent.<function> "
                      "or <App>Tools.<function>")
    if not isinstance(func, ast.Attribute):
        raise _Reject("only calls of the form Api.function(...) are allowed")
    if not isinstance(func.value, ast.Name):
        raise _Reject("attribute chains are not allowed")
    # The AST holds NFKC-normalized names, so look at what was actually written.
    if not (ast.get_source_segment(code, func) or "").isascii():
        raise _Reject("identifiers must be plain ASCII")
    api, name = func.value.id, func.attr
    if api.startswith("_") or name.startswith("_"):
        raise _Reject("private names (leading underscore) are not allowed")

    args = []
    for a in call.args:
        if isinstance(a, ast.Starred):
            raise _Reject("starred arguments are not allowed")
        args.append(_literal(a, 0))
    kwargs = {}
    for k in call.keywords:
        if k.arg is None:
            raise _Reject("**kwargs are not allowed")
        if not (ast.get_source_segment(code, k) or "").split("=", 1)[0].isascii():
            raise _Reject("identifiers must be plain ASCII")
        kwargs[k.arg] = _literal(k.value, 0)
    return api, name, args, kwargs


def _statements(code: str) -> list[ast.stmt]:
    """The statements of `code`. Not mode="exec": on a syntax error in that mode CPython opens
    the "file" named by the filename argument to quote the bad line, and a parser of untrusted
    text should not touch the disk. "eval" and "single" modes quote from the string itself."""
    try:
        try:
            return [ast.Expr(ast.parse(code, mode="eval").body)]  # the usual case: one call
        except SyntaxError:
            if all(not line.strip() or line.lstrip().startswith("#") for line in code.splitlines()):
                raise _Reject("no action found; the code block holds no statement") from None
            return ast.parse(code + "\n", mode="single").body  # says why a statement is not a call
    except SyntaxError as e:
        if "multiple statements" in (e.msg or ""):  # "single" mode's word for two lines of code
            raise _Reject("only one statement is allowed per action") from None
        raise _Reject(f"syntax error: {e.msg}") from None
    except ValueError as e:  # e.g. lone surrogates, int literals over Python's digit limit
        raise _Reject(f"the code cannot be parsed: {e}") from None


def _literal(node: ast.AST, depth: int):
    """A JSON-able value for a literal node; recursion is bounded by MAX_DEPTH."""
    if isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, str):
            if len(v) > MAX_STR_CHARS:
                raise _Reject(f"strings are limited to {MAX_STR_CHARS} characters")
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise _Reject("strings must be valid unicode (no lone surrogates)") from None
            return v
        if v is None or isinstance(v, bool):
            return v
        if isinstance(v, int):
            if abs(v) > MAX_INT:
                raise _Reject("integers must fit in 64 bits")
            return v
        if isinstance(v, float):
            if not math.isfinite(v):
                raise _Reject("numbers must be finite")
            return v
        raise _Reject(f"{type(v).__name__} literals are not allowed")  # bytes, complex, Ellipsis
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd))
            and isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float)):
        v = _literal(node.operand, depth)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
        if depth >= MAX_DEPTH:
            raise _Reject(f"literals may be nested at most {MAX_DEPTH} levels deep")
        if len(node.keys if isinstance(node, ast.Dict) else node.elts) > MAX_ITEMS:
            raise _Reject(f"lists and dicts are limited to {MAX_ITEMS} items")
        if not isinstance(node, ast.Dict):
            return [_literal(e, depth + 1) for e in node.elts]
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise _Reject("** unpacking is not allowed")
            key = _literal(k, depth + 1)
            if not isinstance(key, str):
                raise _Reject("dict keys must be strings")
            out[key] = _literal(v, depth + 1)
        return out
    if isinstance(node, ast.UnaryOp):
        raise _Reject("operators are not allowed; write the literal value")
    raise _Reject(_WHY.get(type(node), f"{type(node).__name__} expressions are not allowed; "
                                        "write literal values"))
