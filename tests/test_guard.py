"""The ast check on model-written API code, and how build-apis reads a model's answers (no desktop)."""

from __future__ import annotations

import json

import pytest

import computerrl.apis  # noqa: F401  (registers the app API classes)
from computerrl.apis import builder
from computerrl.apis.generated import GeneratedApi, annotation, function_def, module_text, read_module
from computerrl.apis.guard import refusals

FINE = '''
import math
from com.sun.star.table import CellRangeAddress

def fill_down(range_str: str, step: float = 1.0) -> str:
    """Fill a range."""
    rng = cell_range(range_str)
    rng.getCellByPosition(0, 0).CellBackColor = parse_color("red")
    with open(home_path("/home/user/log.txt"), "a") as f:
        f.write(str(math.floor(step)))
    shape = doc.createInstance("com.sun.star.drawing.RectangleShape")
    return getattr(rng, "AbsoluteName")
'''


def test_ordinary_uno_code_passes():
    assert refusals(FINE) == []


@pytest.mark.parametrize("code, why", [
    ("import os\nos.remove('/etc/hostname')", "import of 'os'"),
    ("import socket\nsocket.create_connection(('10.0.0.1', 80))", "import of 'socket'"),
    ("import subprocess", "import of 'subprocess'"),
    ("import importlib\nimportlib.import_module('os')", "import of 'importlib'"),
    ("from com.sun.star.system import SystemShellExecute", "import of 'com.sun.star.system'"),
    ("from . import kit", "relative imports"),
    ("m = __import__('os')", "__import__"),
    ("f = getattr(cell, '__globals__')", "private and dunder attributes"),
    ("f = getattr(cell, name)", "getattr() needs a literal attribute name"),
    ("x = cell.__class__.__mro__", "dunder attribute"),
    ("b = __builtins__", "the name __builtins__"),
    ("c = compile('1+1', 'x', 'eval')", "the name compile"),
    ("exec('print(1)')", "the name exec"),
    ("eval('1')", "the name eval"),
    ("g = globals()", "the name globals"),
    ("open('/etc/passwd').read()", "open() takes a literal path under /home/user"),
    ("open('/home/user/../../etc/passwd')", "open() takes a literal path under /home/user"),
    ("open(path)", "open() takes a literal path under /home/user"),
    ("s = ctx.ServiceManager.createInstanceWithContext('com.sun.star.system.SystemShellExecute', ctx)",
     "SystemShellExecute"),
    ("s = ctx.ServiceManager.createInstanceWithContext(name, ctx)", "takes a literal name"),
    ("d.executeDispatch(frame, 'macro:///Standard.Module1.Evil', '', 0, ())", "macro:"),
    ("import uno\nuno.systemPathToFileUrl = None", "changing uno.systemPathToFileUrl"),
    ("y = '__globals__'", "a string holding '__'"),
    ("def f(:\n  pass", "does not parse"),
    # found by review: ways around the first version of the check
    ("run = exec\nrun('1')", "the name exec"),
    ("def f(x=eval):\n    x('1')", "the name eval"),
    ("@exec\ndef f():\n    pass", "the name exec"),
    ("g = getattr\ng(print, 'x')", "getattr may only be called directly"),
    ("import functools\nfunctools.reduce(getattr, ['x'], print)", "getattr may only be called directly"),
    ("match print:\n    case object(__self__=b):\n        pass", "matching the attribute __self__"),
    ("import uno\nuno.os.system('id')", "uno.os is not allowed"),
    ("from uno import os", "importing 'os' from 'uno'"),
    ("import uno\nuno._builtin_import('subprocess')", "private and dunder attributes"),
    ("import collections\ncollections._sys.modules['os']", "private and dunder attributes"),
    ("import statistics\nstatistics.sys.modules['os']", "statistics.sys is a module"),
    ("from statistics import sys", "importing 'sys' from 'statistics'"),
    ("import re\nm = re", "may only be used as re.<name>"),
    ("import string\nstring.Formatter().get_field('0.x', [1], {})", "the attribute .Formatter"),
    ("'{0.real}'.format(1)", "str.format() only on a literal with plain fields"),
    ("import uno\nuno.invoke(doc, 'store', ())", "uno.invoke is not allowed"),
    ("mk = doc.createInstance\nmk('x')", ".createInstance may only be called directly"),
    ("doc.createInstance('com.sun.star.frame.DispatchHelper')", "takes a literal name of a service"),
    ("doc.getScriptProvider().getScript('x')", "the attribute .getScriptProvider"),
    ("doc.storeToURL('file:///tmp/x.ods', ())", "storeToURL() takes file_url(path)"),
    ("def home_path(p):\n    return p", "home_path may not be redefined"),
    ("import com.sun.star.table", "write `from com.sun.star.table import Name`"),
    # found by the second review: frames, generators, getattr of what an attribute may not be, macros
    ("def g():\n    yield 1\nb = g().gi_frame.f_builtins", "generators are not allowed"),
    ("b = (x for x in [1]).gi_frame.f_builtins", "the attribute .gi_frame"),
    ("async def c():\n    pass", "async functions are not allowed"),
    ("t = err.with_traceback(None)", "the attribute .with_traceback"),
    ("m = int.mro()", "the attribute .mro"),
    ("x = getattr(doc, 'BasicLibraries')", "getattr() of 'BasicLibraries'"),
    ("f = getattr(frame, 'loadComponentFromURL')", "it may only be called directly"),
    ("f = getattr(g, 'gi_frame')", "the attribute .gi_frame"),
    ("PropertyValue('MacroExecutionMode', 0, 4, 0)", "MacroExecutionMode"),
    ("doc.getEvents().replaceByName('OnLoad', x)", "the attribute .getEvents"),
    ("import uno\na = uno.Any('[]long', (1,))", "uno.Any is not allowed"),
    ("open('/home/user/.config/libreoffice/4/user/basic/x.xba', 'w')", "open() takes a literal path"),
])
def test_an_escape_is_refused_with_its_reason(code, why):
    found = refusals(code)
    assert found and any(why in w for w in found), found


def test_literal_types_only_in_signatures():
    assert annotation(function_def("def f(a: list[str] | None) -> None:\n    ...").args.args[0].annotation) \
        == (list[str] | None)
    with pytest.raises(ValueError, match="not a literal type"):
        annotation(function_def("def f(a: os.PathLike) -> None:\n    ...").args.args[0].annotation)


def test_specs_that_clash_duplicate_or_cannot_be_read_are_dropped_with_the_reason():
    answer = '''Here you go:
```json
[{"name": "fill_down", "signature": "def fill_down(range_str: str) -> None", "doc": "Copy a range's first cell down.", "tasks": ["t1"]},
 {"name": "set_cell_value", "signature": "def set_cell_value(cell: str, value: str) -> None", "doc": "Set a cell."},
 {"name": "put_value", "signature": "def put_value(cell: str, value: str | int | float | None) -> None",
  "doc": "Set one cell: a number, text, a formula starting with =, or None to clear it."},
 {"name": "untyped", "signature": "def untyped(x) -> None", "doc": "No types."},
 {"name": "fill_down", "signature": "def fill_down(r: str) -> None", "doc": "Again."}]
```'''
    specs, dropped = builder.parse_specs(answer, "CalcTools")
    assert [s.name for s in specs] == ["fill_down"] and specs[0].tasks == ["t1"]
    assert [(n, r) for n, r, _ in dropped] == [("set_cell_value", "clash"), ("put_value", "duplicate"),
                                                ("untyped", "bad_spec"), ("fill_down", "duplicate")]
    assert "CalcTools.set_cell_value" in dropped[1][2]
    assert builder.parse_specs("I would add a fill_down function.", "CalcTools")[1][0][1] == "bad_spec"
    for name, sig, why in (("cell", "def cell(a: str) -> None", "name of a helper"),
                           ("odd", "def odd(x: tuple[()]) -> None", "cannot be read"),
                           ("typo", "def typo(x: int = 'a') -> None", "must be int")):
        (_, reason, text), = builder.parse_specs(json.dumps([{"name": name, "signature": sig, "doc": "D."}]),
                                                "CalcTools")[1]
        assert reason == "bad_spec" and why in text, text


def test_only_a_test_that_reads_the_document_after_the_call_counts():
    tests = '''
def test_reads_back():
    cell("A1").setValue(3)
    fill_down("A1:A3")
    value = cell("A3").getValue()
    assert value == 3

def test_asserts_nothing_about_the_document():
    fill_down("A1:A3")
    assert True

def test_reads_before_the_call_only():
    before = cell("A1").getValue()
    fill_down("A1:A3")
    assert before == 0

def test_in_a_loop():
    fill_down("A1:A3")
    for row in range(1, 4):
        assert cell(f"A{row}").getString() == ""

def test_asserts_the_document_exists():
    fill_down("A1:A3")
    assert doc
    assert cell("A1") is not None

def test_calls_it_in_a_function_never_run():
    def later():
        fill_down("A1:A3")
    assert cell("A1").getValue() == 0
'''
    assert builder.asserting_tests(tests, "fill_down") == ["test_reads_back", "test_in_a_loop"]


def test_the_function_and_its_tests_come_out_of_an_answer():
    answer = "Sure.\n```python\nimport math\n\ndef f(a: int) -> int:\n    \"\"\"Doc.\"\"\"\n    return a\n\n" \
             "def test_f():\n    assert f(1) == 1\n```\nDone."
    code, tests = builder.split_code(builder.code_blocks(answer), "f")
    assert code.startswith("import math\ndef f(a: int)") and "test_f" not in code
    assert tests.startswith("import math") and "def test_f" in tests
    with pytest.raises(ValueError, match="no function g"):
        builder.split_code(builder.code_blocks(answer), "g")
    spec = builder.Spec("f", "def f(a: int) -> int", "Doc.")
    assert builder.signature_problem(code, spec) == ""
    assert "differs" in builder.signature_problem("def f(a: str) -> int:\n    \"\"\"Doc.\"\"\"", spec)
    assert "no docstring" in builder.signature_problem("def f(a: int) -> int:\n    return a", spec)


def test_the_module_of_accepted_apis_reads_back_without_running_them(tmp_path):
    apis = [GeneratedApi("calc", "fill_down", "import math\ndef fill_down(range_str: str) -> None:\n"
                                              "    \"\"\"Copy down.\"\"\"\n    raise SystemExit(math.pi)\n")]
    path = tmp_path / "calc_apis.py"
    path.write_text(module_text("calc", apis))
    (back,) = read_module(path)
    assert back.name == "fill_down" and back.code.startswith("import math\n") and "SystemExit" in back.code
    fn = back.function()
    assert fn.api == "CalcTools" and fn.render() == "def fill_down(range_str: str) -> None:  # Copy down."


def test_specs_written_as_python_stubs_are_read_too():
    answer = ('Sure:\n```python\ndef fill_down(range_str: str, times: int = 2) -> None:\n    """Copy the top cell '
              'down."""\n\ndef nodoc(a: int) -> None:\n    pass\n```')
    specs, dropped = builder.parse_specs(answer, "CalcTools")
    assert [(s.name, s.doc) for s in specs] == [("fill_down", "Copy the top cell down.")]
    assert dropped == [("nodoc", "bad_spec", "needs a one-line doc")]
    assert "nor Python stubs" in builder.parse_specs("```python\ndef cut(a: int,\n```", "CalcTools")[1][0][2]
