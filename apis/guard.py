"""The `ast` check every piece of model-written API code passes before it runs.

It runs only in a desktop's sandbox anyway (`apis/worker.py`): this check is the first wall, the
sandbox the second. It refuses what an application API never needs and an escape always does:
imports and module attributes outside allow-lists, `exec`/`eval`/`compile`/`__import__` and
friends (named at all, not only called), private and dunder attributes, `getattr` by a computed or
private name, format strings that reach attributes, `open` of anything but a home path, document
URLs not made by `file_url`, UNO services outside the document's own modules and the methods that
run macros, scripts or dispatches, and rebinding the names this check relies on. Each refusal
keeps its reason and line. Standard library only: the worker carries this file's source into the
sandbox and checks again there.
"""

from __future__ import annotations

import ast
import posixpath
import re
import string

ALLOWED_MODULES = {"uno", "math", "re", "json", "datetime", "decimal", "fractions", "statistics", "string",
                   "itertools", "functools", "collections", "calendar"}
UNO_MODULES = {"table", "awt", "beans", "style", "sheet", "text", "chart", "chart2", "util", "lang", "drawing",
               "presentation", "container", "uno", "i18n", "document"}  # com.sun.star.<these>: the document's own
UNO_FUNCTIONS = {"systemPathToFileUrl", "fileUrlToSystemPath", "createUnoStruct", "Enum", "Bool", "Char",
                 "ByteSequence", "getConstantByName", "getTypeByName", "isInterface", "absolutize",
                 "generateUuid"}  # what code may take from the `uno` module
FORBIDDEN_NAMES = {"exec", "eval", "compile", "__import__", "globals", "locals", "vars", "breakpoint", "input",
                   "exit", "quit", "help", "memoryview", "setattr", "delattr", "Formatter"}
MODULE_NAMES = {"os", "sys", "socket", "subprocess", "importlib", "builtins", "shutil", "pathlib", "io", "ctypes",
                "signal", "threading", "multiprocessing", "posix", "types", "inspect", "gc", "marshal", "pickle",
                "runpy", "code", "codeop", "modules", "pyuno", "unohelper", "linecache", "tempfile", "enum"}
# (an attribute by such a name is refused on any object; on an imported module, any attribute that is a module)
FORBIDDEN_ATTRIBUTES = {"getScriptProvider", "getScript", "executeDispatch", "queryDispatch", "queryDispatches",
                        "dispatch", "invoke", "BasicLibraries", "DialogLibraries", "getBasicLibraries",
                        "getDialogLibraries", "ScriptProvider", "format_map", "vformat", "get_field", "Formatter",
                        "getEvents", "Events"}
INTERNALS = re.compile(r"^(f|tb|gi|cr|ag|co)_|^(mro|with_traceback)$")  # frames, code, tracebacks: the way to globals
FORBIDDEN_TEXT = ("SystemShellExecute", "ScriptProvider", "macro:", "vnd.sun.star.script", "RunMacro", "__",
                  "MacroExecutionMode", "UpdateDocMode")
SERVICE_FACTORIES = {"createInstance", "createInstanceWithContext", "createInstanceWithArguments",
                     "createInstanceWithArgumentsAndContext", "createUnoService"}
URL_METHODS = {"storeToURL", "storeAsURL", "loadComponentFromURL", "insertDocumentFromURL"}
RELIED_ON = {"open", "home_path", "file_url", "getattr", "hasattr"}  # never rebound: the rules trust them
HOME = "/home/user"


class Refused(Exception):
    """Model-written code the check refuses; the message says why (and where)."""


def refusals(source: str, helpers: frozenset[str] = frozenset()) -> list[str]:
    """Why `source` may not run ([] when it may). `helpers`: names the worker provides (modules'
    and their attributes may not be changed)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return [f"line {e.lineno}: does not parse: {e.msg}"]
    checker = _Checker(set(helpers))
    checker.visit(tree)
    return [f"line {line}: {why}" for line, why in checker.found]


def check(source: str, helpers: frozenset[str] = frozenset()) -> None:
    """Raise Refused with every reason, or return when the code may run."""
    why = refusals(source, helpers)
    if why:
        raise Refused("; ".join(why[:5]) + (f" (and {len(why) - 5} more)" if len(why) > 5 else ""))


class _Checker(ast.NodeVisitor):
    def __init__(self, helpers: set[str]):
        self.modules: dict[str, str] = {}  # local name -> module imported under it
        self.helpers = helpers
        self.found: list[tuple[int, str]] = []
        self.calls: set[int] = set()  # id() of the nodes that are a call's function
        self.attribute_bases: set[int] = set()  # id() of module names used as `module.attribute`

    def refuse(self, node: ast.AST, why: str) -> None:
        self.found.append((getattr(node, "lineno", 0), why))

    # imports
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.startswith("com."):
                self.refuse(node, f"write `from {alias.name} import Name` to use UNO types")
            elif not _allowed_module(alias.name):
                self.refuse(node, f"import of {alias.name!r} is not allowed (allowed: "
                                  f"{', '.join(sorted(ALLOWED_MODULES))}, com.sun.star.*)")
            self._bind(node, alias.asname or alias.name.split(".")[0])
            self.modules[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else \
                alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.refuse(node, "relative imports are not allowed")
        elif not _allowed_module(module):
            self.refuse(node, f"import of {module!r} is not allowed (allowed: {', '.join(sorted(ALLOWED_MODULES))}, "
                              "com.sun.star.*)")
        for alias in node.names:
            if alias.name == "*" or alias.name.startswith("_") or alias.name in MODULE_NAMES or (
                    module == "uno" and alias.name not in UNO_FUNCTIONS) or _is_module(module, alias.name):
                self.refuse(node, f"importing {alias.name!r} from {module!r} is not allowed")
            self._bind(node, alias.asname or alias.name)

    # names and bindings
    def visit_Name(self, node: ast.Name) -> None:
        if node.id in FORBIDDEN_NAMES or node.id.startswith("__"):
            self.refuse(node, f"the name {node.id} is not allowed")
        elif node.id in ("getattr", "hasattr") and id(node) not in self.calls:
            self.refuse(node, f"{node.id} may only be called directly")
        elif node.id in self.modules and isinstance(node.ctx, ast.Load) and id(node) not in self.attribute_bases:
            self.refuse(node, f"the module {node.id} may only be used as {node.id}.<name>")
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self._bind(node, node.id)

    def _bind(self, node: ast.AST, name: str) -> None:
        if name in RELIED_ON:
            self.refuse(node, f"{name} may not be redefined")

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._bind(node, node.name)
        for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
            self._bind(a, a.arg)
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._bind(node, node.name)
        self.generic_visit(node)

    # attributes
    def visit_Attribute(self, node: ast.Attribute) -> None:
        why = _attribute_problem(node.attr)
        if why:
            self.refuse(node, why)
        elif node.attr in SERVICE_FACTORIES | URL_METHODS and id(node) not in self.calls:
            self.refuse(node, f".{node.attr} may only be called directly")
        base = node.value
        if isinstance(base, ast.Name) and base.id in self.modules:
            self.attribute_bases.add(id(base))
            if self.modules[base.id] == "uno" and node.attr not in UNO_FUNCTIONS:
                self.refuse(node, f"uno.{node.attr} is not allowed (allowed: {', '.join(sorted(UNO_FUNCTIONS))})")
            elif _is_module(self.modules[base.id], node.attr):
                self.refuse(node, f"{base.id}.{node.attr} is a module: not allowed")
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                self.refuse(node, f"changing {base.id}.{node.attr} is not allowed")
        if isinstance(base, ast.Name) and base.id in self.helpers and isinstance(node.ctx, (ast.Store, ast.Del)):
            self.refuse(node, f"changing {base.id}.{node.attr} is not allowed")
        self.generic_visit(node)

    # calls
    def visit_Call(self, node: ast.Call) -> None:
        self.calls.add(id(node.func))
        fn = node.func
        name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
        first = node.args[0] if node.args else None
        if name in ("getattr", "hasattr") and isinstance(fn, ast.Name):
            attr = node.args[1] if len(node.args) > 1 else None
            if not _literal(attr):
                self.refuse(node, f"{name}() needs a literal attribute name")
            elif _attribute_problem(attr.value) or attr.value in SERVICE_FACTORIES | URL_METHODS:
                self.refuse(node, f"{name}() of {attr.value!r}: " + (_attribute_problem(attr.value)
                                                                     or "it may only be called directly"))
        elif name == "open" and isinstance(fn, ast.Name):
            if not (_literal(first) and _in_home(first.value) or _call_to(first, "home_path")):
                self.refuse(node, "open() takes a literal path under /home/user, or home_path(path)")
        elif name in SERVICE_FACTORIES:
            if not (_literal(first) and _document_service(first.value)):
                self.refuse(node, f"{name}() takes a literal name of a service of com.sun.star."
                                  f"{{{', '.join(sorted(UNO_MODULES))}}}")
        elif name in URL_METHODS:
            if not (_call_to(first, "file_url") or _literal(first) and first.value.startswith("private:factory/")):
                self.refuse(node, f"{name}() takes file_url(path) (a path in /home/user)")
        elif name == "format" and isinstance(fn, ast.Attribute):
            if not (_literal(fn.value) and _plain_fields(fn.value.value)):
                self.refuse(node, "str.format() only on a literal with plain fields ({}, {0}, {name}); use f-strings")
        self.generic_visit(node)

    def visit_Yield(self, node: ast.AST) -> None:
        self.refuse(node, "generators are not allowed (write a list)")

    visit_YieldFrom = visit_Yield

    def visit_AsyncFunctionDef(self, node: ast.AST) -> None:
        self.refuse(node, "async functions are not allowed")

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        for attr in node.kwd_attrs:
            if attr.startswith("_"):
                self.refuse(node, f"matching the attribute {attr} is not allowed")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, (str, bytes)):
            text = node.value.decode(errors="replace") if isinstance(node.value, bytes) else node.value
            bad = next((t for t in FORBIDDEN_TEXT if t.lower() in text.lower()), None)
            if bad:
                self.refuse(node, f"a string holding {bad!r} is not allowed")


def _attribute_problem(attr: str) -> str:
    """Why `.attr` may not be read ('' when it may)."""
    if attr.startswith("_"):
        return f"private and dunder attributes (.{attr}) are not allowed"
    if attr in MODULE_NAMES or attr in FORBIDDEN_ATTRIBUTES or INTERNALS.search(attr):
        return f"the attribute .{attr} is not allowed"
    return ""


def _literal(node) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _call_to(node, name: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def _is_module(module: str, name: str) -> bool:
    """Whether `module.name` is itself a module (statistics.sys, json.decoder…): a way to others."""
    import importlib
    import types

    if module == "uno" or module not in ALLOWED_MODULES:
        return False  # uno: its allow-list decides; com.sun.star: types and constants; others: refused anyway
    try:
        return isinstance(getattr(importlib.import_module(module), name, None), types.ModuleType)
    except ImportError:  # not on this Python: nothing to reach through it
        return False


def _allowed_module(name: str) -> bool:
    parts = name.split(".")
    if len(parts) == 1 and parts[0] in ALLOWED_MODULES:
        return True
    return parts[:3] == ["com", "sun", "star"] and len(parts) > 3 and parts[3] in UNO_MODULES


def _document_service(name: str) -> bool:
    parts = name.split(".")
    return parts[:3] == ["com", "sun", "star"] and len(parts) > 4 and parts[3] in UNO_MODULES


def _plain_fields(template: str) -> bool:
    try:
        return all(not field or field.isidentifier() or field.isdigit()
                   for _, field, _, _ in string.Formatter().parse(template) if field is not None)
    except ValueError:
        return False


def _in_home(path: str) -> bool:
    """Inside /home/user, and not in a hidden folder or file (the apps' settings live there)."""
    p = posixpath.normpath(path)
    return (p == HOME or p.startswith(HOME + "/")) and not any(part.startswith(".") for part in p.split("/"))
