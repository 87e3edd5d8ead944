"""What `build-apis` asks a model and how it reads the answers: the prompts, specs from the
requirement analysis (and why one is dropped), the function and tests out of an answer, and
whether a test asserts anything about the document. Nothing here runs model-written code.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field

from computerrl.apis.generated import function_def, signature
from computerrl.apis.registry import REGISTRY, make_function, type_name

HELPERS_DOC = {  # what the worker (apis/worker.py) puts beside the model's code, as the prompt explains it
    "common": [
        "doc: the live UNO document (the one the agent has focused, or a new one in a test)",
        "parse_color(text) -> int: '#RRGGBB' or a name like 'red' as the colour number UNO takes",
        "file_url(path) -> str: the file URL of a path in /home/user (for storeToURL, loadComponentFromURL)",
        "home_path(path) -> str: a path, checked to lie in /home/user (open() takes only such paths)",
        "save(): store the document to its file",
        "ApiError(message): raise it for input the document cannot take; the message is what the agent reads",
    ],
    "calc": [
        "cell('B2'), cell_range('A1:C5') (also 'Sheet2.A1:C5'): UNO cell / cell range, bounds-checked",
        "sheet(name=None): a sheet by name (None: the active one); used_area(sheet) -> (last_row, last_col), 0-based",
        "parse_range('A1:C5') -> (sheet or None, col1, row1, col2, row2), 0-based; col_letter(0) -> 'A'; col_index('A') -> 0",
    ],
}
ALLOWED_IMPORTS = "uno, math, re, json, datetime, decimal, fractions, statistics, string, itertools, functools, " \
                  "collections, calendar, com.sun.star.* (types and constants)"
DOC_NAMES = {"doc", "cell", "cell_range", "sheet", "used_area"}  # reading the document goes through these
HELPER_NAMES = DOC_NAMES | {"parse_color", "col_letter", "col_index", "parse_range", "file_url", "home_path", "open",
                            "save", "ApiError"}  # what apis/worker.py defines beside the code


@dataclass
class Spec:
    name: str
    signature: str  # "def name(a: str, b: int = 2) -> None"
    doc: str
    tasks: list[str] = field(default_factory=list)  # the example tasks that need it


# --- prompts -------------------------------------------------------------------------------------

def analysis_prompt(app: str, api: str, tasks: list[dict], max_apis: int) -> list[dict]:
    shown = []
    for t in tasks:
        lines = [f"- [{t['task_id']}] {t['instruction']}"]
        if t.get("solution"):
            lines.append("  reference solution: " + " ; ".join(t["solution"]))
        shown.append("\n".join(lines))
    system = (f"You design the Python API an agent uses to operate {app} (LibreOffice). The agent answers each step "
              f"with one call like `{api}.set_cell_value(\"B2\", 42)`. These functions exist already:\n\n"
              f"```python\n{REGISTRY.render([api])}\n```")
    user = (f"Example tasks of {app}:\n" + "\n".join(shown) +
            f"\n\nPropose at most {max_apis} NEW general-purpose functions these tasks need and the existing ones "
            "lack (no duplicates of existing ones). Parameters take only literal types: str, int, float, bool, None, "
            "list[...], Literal[...], X | None. Answer with a JSON list only, each item: {\"name\": \"snake_case\", "
            "\"signature\": \"def name(param: str, count: int = 1) -> None\", \"doc\": \"one line\", "
            "\"tasks\": [\"ids of the example tasks that need it\"]}.")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def implement_prompt(app: str, api: str, spec: Spec) -> list[dict]:
    helpers = "\n".join(f"- {h}" for h in HELPERS_DOC["common"] + HELPERS_DOC.get(app, []))
    system = (f"You write one function of {api}, the API of LibreOffice {app}, in Python with UNO. It runs inside the "
              f"desktop, beside the office, with these names already defined (no import needed):\n{helpers}\n"
              f"You may import only: {ALLOWED_IMPORTS}. Never use exec, eval, compile, dunder names, sockets, "
              "subprocesses or files outside /home/user: such code is refused before it runs.")
    user = (f"Write this function, with exactly this signature and this one-line docstring:\n\n```python\n"
            f"{spec.signature}:\n    \"\"\"{spec.doc}\"\"\"\n```\n\nReturn None, or a short string the agent reads. "
            "Put everything it needs inside it (helpers as nested functions); imports may go above it. "
            "Answer with one ```python block holding the whole function.")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def tests_prompt(app: str, spec: Spec) -> list[dict]:
    system = ("You write tests for a LibreOffice API function. Each test runs on a new, empty document (`doc`), with "
              "the same helper names as the function (" + ", ".join(sorted(DOC_NAMES)) + ", …) and the function "
              "itself by its name.")
    user = (f"The function:\n```python\n{spec.signature}:\n    \"\"\"{spec.doc}\"\"\"\n```\n\nWrite 2 tests: "
            "functions named test_… with no parameters that set the document up (e.g. cell('A1').setValue(3), "
            "cell('A2').setString('x')), call the function, then assert on what the document holds afterwards "
            "(e.g. assert cell('B1').getValue() == 6). Answer with one ```python block.")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def fix_prompt(previous: list[dict], answer: str, error: str) -> list[dict]:
    return previous + [{"role": "assistant", "content": answer}, {"role": "user", "content": (
        f"That failed:\n{error}\n\nAnswer with the corrected function in one ```python block. If a test was "
        "wrong rather than the function, put corrected test_… functions in the same block.")}]


# --- reading answers -----------------------------------------------------------------------------

def parse_specs(answer: str, api: str) -> tuple[list[Spec], list[tuple[str, str, str]]]:
    """(specs to build, [(name, reason, why)] of those dropped) from an analysis answer; reason is
    "bad_spec", "clash" or "duplicate"."""
    items = _json_list(answer)
    if items is None:
        items = _stubs(answer)
    if items is None:
        return [], [("(answer)", "bad_spec", "no JSON list of specs (nor Python stubs that parse) in the answer")]
    specs: list[Spec] = []
    dropped: list[tuple[str, str, str]] = []
    existing = REGISTRY.functions(api)
    for item in items:
        name = str(item.get("name", "")) if isinstance(item, dict) else ""
        try:
            spec = _spec(item, api)
        except ValueError as e:
            dropped.append((name or "(unnamed)", "bad_spec", str(e)))
            continue
        if spec.name in existing:
            dropped.append((spec.name, "clash", f"clashes with the existing {api}.{spec.name}"))
        elif any(s.name == spec.name for s in specs):
            dropped.append((spec.name, "duplicate", "proposed twice"))
        elif twin := next((f for f in existing.values() if _alike(spec, f)), None):
            dropped.append((spec.name, "duplicate", f"duplicates {api}.{twin.name}"))
        else:
            specs.append(spec)
    return specs, dropped


def _spec(item, api: str) -> Spec:
    if not isinstance(item, dict):
        raise ValueError("not an object")
    name, sig, doc = (str(item.get(k, "")).strip() for k in ("name", "signature", "doc"))
    if not re.fullmatch(r"[a-z][a-z0-9_]{1,60}", name):
        raise ValueError(f"name {name!r} is not a snake_case identifier")
    if name in HELPER_NAMES or name.startswith("test"):
        raise ValueError(f"{name!r} is the name of a helper or of a test")
    if not doc or "\n" in doc:
        raise ValueError("needs a one-line doc")
    sig = sig.rstrip(":").strip()
    fn = function_def(f"{sig}:\n    ...\n", name)  # ValueError: no such def, or it does not parse
    try:
        make_function(api, name, signature(fn), doc)  # literal types, defaults that pass their own types
    except TypeError as e:
        raise ValueError(str(e)) from None
    tasks = item.get("tasks") or []
    return Spec(name, sig, doc.replace('"""', "'''"), [str(t) for t in tasks] if isinstance(tasks, list) else [])


def _alike(spec: Spec, existing) -> bool:
    """Same parameter types in order and mostly the same words in the doc: a duplicate by another name."""
    params = signature(function_def(f"{spec.signature}:\n    ...\n")).parameters.values()
    if [type_name(p.annotation) for p in params] != [type_name(p.annotation)
                                                     for p in existing.signature.parameters.values()]:
        return False
    a, b = (set(re.findall(r"[a-z]+", d.lower())) for d in (spec.doc, existing.doc))
    return len(a & b) / max(1, len(a | b)) >= 0.6


def _json_list(answer: str):
    fenced = re.search(r"```(?:json)?\s*(\[.*?\])\s*```", answer, re.S)
    candidates = [fenced.group(1)] if fenced else []
    if "[" in answer and "]" in answer:
        candidates.append(answer[answer.index("["):answer.rindex("]") + 1])
    for text in candidates:
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, list):
            return value
    return None


def _stubs(answer: str) -> list[dict] | None:
    """Specs written as Python stubs instead (`def name(...) -> None: \"\"\"doc\"\"\"`), as models often do."""
    try:
        tree = ast.parse(code_blocks(answer))
    except SyntaxError:
        return None
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    return [{"name": d.name, "doc": (ast.get_docstring(d) or "").strip().split("\n")[0],
             "signature": f"def {d.name}({ast.unparse(d.args)})" + (f" -> {ast.unparse(d.returns)}" if d.returns else "")}
            for d in defs] or None


def code_blocks(answer: str) -> str:
    """The Python of an answer: its ```python blocks joined (the whole answer when it has none)."""
    blocks = re.findall(r"```(?:python|py)?[ \t]*\n(.*?)```", answer, re.S)
    return "\n\n".join(b.strip() for b in blocks) if blocks else answer.strip()


def split_code(source: str, name: str) -> tuple[str, str]:
    """(the function `name` with the module's imports, the test_… functions) of answer code;
    ValueError when the function is missing or the code does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise ValueError(f"the answer's code does not parse: line {e.lineno}: {e.msg}") from None
    imports = [ast.get_source_segment(source, n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    if not fns:
        raise ValueError(f"the answer defines no function {name}")
    code = "\n".join(imports + [ast.get_source_segment(source, fns[-1])]) + "\n"
    return code, tests_of(source)


def tests_of(answer: str) -> str:
    """The test_… functions of an answer, with its imports ('' when it has none or does not parse)."""
    source = code_blocks(answer)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    tests = [ast.get_source_segment(source, n) for n in tree.body
             if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]
    imports = [ast.get_source_segment(source, n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return "\n".join(imports) + "\n\n" * bool(imports and tests) + "\n\n".join(tests)


def signature_problem(code: str, spec: Spec) -> str:
    """Why the function's signature is not the spec's ('' when it is)."""
    want = signature(function_def(f"{spec.signature}:\n    ...\n"))
    try:
        fn = function_def(code, spec.name)
        got = signature(fn)
    except ValueError as e:
        return str(e)
    if not (ast.get_docstring(fn) or "").strip():
        return f"{spec.name} has no docstring (its first line is the doc the agent reads)"
    return "" if got == want else f"its signature {spec.name}{got} differs from the spec's {spec.name}{want}"


def asserting_tests(tests: str, name: str) -> list[str]:
    """The test_… functions that assert on the document's state after calling `name`: an `assert`
    after the call whose expression reads the document (an attribute or method of doc, cell(…),
    cell_range(…), sheet(…)…, or a variable assigned from such a read after the call). `assert doc`
    or `assert cell("A1") is not None` read nothing; a call inside a nested function is no call."""
    try:
        tree = ast.parse(tests)
    except SyntaxError:
        return []
    good = []
    for fn in tree.body:
        if not (isinstance(fn, ast.FunctionDef) and fn.name.startswith("test")):
            continue
        called, tainted = False, set()
        for stmt in _statements(fn.body):
            if not called:
                called = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
                             for n in _walk(stmt))
                continue
            if isinstance(stmt, ast.Assert) and _reads_document(stmt.test, tainted):
                good.append(fn.name)
                break
            if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and stmt.value is not None \
                    and _reads_document(stmt.value, tainted):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                tainted |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return good


def _reads_document(expr: ast.AST, tainted: set[str]) -> bool:
    for n in _walk(expr):
        if isinstance(n, ast.Name) and n.id in tainted:
            return True
        if isinstance(n, ast.Attribute) and any(isinstance(m, ast.Name) and m.id in DOC_NAMES for m in _walk(n.value)):
            return True
    return False


def _walk(node: ast.AST):
    """ast.walk, but not into nested functions, lambdas or classes (their code may never run)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        todo.extend(c for c in ast.iter_child_nodes(n)
                    if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)))


def _statements(body: list[ast.stmt]):
    """Statements in source order, those of nested blocks (for, if, with, try) included; nested
    functions and classes left out (their code may never run)."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        yield stmt
        for attr in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, attr, None)
            if isinstance(inner, list):
                yield from _statements(inner)
        for handler in getattr(stmt, "handlers", []):
            yield from _statements(handler.body)
