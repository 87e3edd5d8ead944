"""Hostile model output: `parse_action` never raises, never runs any of it, and round-trips
whatever it accepts.

"Never runs" is checked three ways while each input is parsed: eval/exec/__import__ and any
compile() to a code object raise (compiling to an AST is allowed: that is what ast.parse does),
an audit hook records code execution, imports, file opens and process starts, and payloads that
would leave a sentinel (a file, a builtins attribute) must leave none.
"""

import ast
import builtins
import contextlib
import sys
import unicodedata  # noqa: F401  (imported before any guard; see unicodedata_only)
import warnings

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from computerrl.apis import Action, InvalidAction, parse_action
from computerrl.apis.parser import MAX_DEPTH

FUZZ = settings(max_examples=2000, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

_AUDITING: list[list[str]] = []  # the event log of the guard in progress, if any
_WATCHED = ("exec", "import", "open", "os.system", "os.exec", "os.spawn", "os.posix_spawn", "subprocess.Popen")


def _audit(event: str, args: tuple) -> None:
    if _AUDITING and event.startswith(_WATCHED):
        _AUDITING[-1].append(event)


sys.addaudithook(_audit)  # hooks cannot be removed; it only records while a guard is active


@contextlib.contextmanager
def no_execution():
    events: list[str] = []
    real_compile = builtins.compile

    def forbidden(name):
        def fail(*args, **kwargs):
            events.append(name)
            raise AssertionError(f"the parser called {name}")
        return fail

    def ast_only_compile(source, filename, mode, flags=0, *args, **kwargs):
        if not flags & ast.PyCF_ONLY_AST:
            return forbidden("compile")()
        return real_compile(source, filename, mode, flags, *args, **kwargs)

    def unicodedata_only(name, *args, **kwargs):
        # CPython's tokenizer imports unicodedata to NFKC-normalize non-ASCII identifiers.
        if name != "unicodedata":
            return forbidden(f"__import__({name!r})")()
        return real_import(name, *args, **kwargs)

    saved = {name: getattr(builtins, name) for name in ("eval", "exec", "compile", "__import__")}
    real_import = saved["__import__"]
    patches = {"eval": forbidden("eval"), "exec": forbidden("exec"), "compile": ast_only_compile,
               "__import__": unicodedata_only}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # printing a SyntaxWarning would import linecache
        for name, fn in patches.items():
            setattr(builtins, name, fn)
        _AUDITING.append(events)
        try:
            yield events
        finally:
            _AUDITING.pop()
            for name, fn in saved.items():
                setattr(builtins, name, fn)
    assert events == [], events


def check(response: str) -> Action | InvalidAction:
    with no_execution():
        result = parse_action(response)
    assert isinstance(result, (Action, InvalidAction))
    if isinstance(result, Action):
        assert Action.from_json(result.to_json()) == result
        assert parse_action(result.code) == result
    else:
        assert result.message.startswith("Invalid action: ") and result.reason
    return result


def fenced(code: str) -> str:
    return f"<think>plan</think>\n```python\n{code}\n```"


# --- strategies ----------------------------------------------------------------------------

FRAGMENTS = [
    "Agent", "CalcTools", ".", "click", "type", "wait", "exit", "hotkey", "(", ")", "[", "]", "{", "}",
    ",", "=", ":", ";", " ", "\n", "\r", "\t", "\\", "'", '"', "#", "*", "**", "-", "+", "1", "2.5",
    "1e999", "0x10", "True", "None", "...", "__import__", "'os'", "os", "system", "__globals__",
    "__class__", "lambda", " for ", " in ", "import ", "f'{", "yield", "await ", ":=", "```python\n", "```",
    "<think>", "</think>", "\x00", "\u0410gent", "\uff21gent", "\u200b", "\ud800", "\U0001f600", "\u2028",
    "\x85", "\ufeff", "[1, 2]", "'ctrl'",
]
hostile_text = st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join)

leaves = st.sampled_from([
    "1", "-1", "2.5", "1e999", "-1e999", "'x'", '"\\ud800"', "True", "None", "x", "os", "__import__",
    "...", "b'x'", "1j", "[100, 200]", "'ctrl'", "0",
])


def _extend(children):
    pair = st.tuples(children, children)
    return st.one_of(
        st.lists(children, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.lists(children, max_size=3).map(lambda xs: "(" + ", ".join(xs) + ",)"),
        pair.map(lambda kv: "{%s: %s}" % kv),
        children.map(lambda x: f"-{x}"),
        children.map(lambda x: f"{x}.__class__"),
        pair.map(lambda ab: "%s(%s)" % ab),
        children.map(lambda x: f"lambda: {x}"),
        children.map(lambda x: f"[y for y in {x}]"),
        children.map(lambda x: "f'{%s}'" % x),
        children.map(lambda x: f"*{x}"),
        children.map(lambda x: f"**{x}"),
        pair.map(lambda ab: "%s + %s" % ab),
    )


exprs = st.recursive(leaves, _extend, max_leaves=8)
callees = st.sampled_from([
    "Agent.click", "Agent.type", "Agent.hotkey", "Agent.wait", "Agent.exit", "Agent.fly", "Agent._x",
    "Agent.click.__globals__", "os.path.join", "__import__", "__import__('os').system", "\u0410gent.click",
    "\uff21gent.click", "Agent.\uff43lick", "eval", "exec", "CalcTools.set_cell_value", "Agent.__class__",
])
keywords = st.sampled_from(["", "", "coordinates=", "text=", "keys=", "success=", "\uff4eum_clicks=", "__x="])
calls = st.builds(lambda f, args: f"{f}({', '.join(args)})", callees,
                  st.lists(st.tuples(keywords, exprs).map("".join), max_size=4))
statements = st.one_of(
    calls,
    calls.map(lambda c: f"import os; {c}"),
    st.tuples(calls, calls).map("; ".join),
    st.tuples(calls, calls).map("\n".join),
    calls.map(lambda c: f"x = {c}"),
    calls.map(lambda c: f"{c}.__globals__"),
)
wrappers = st.sampled_from([
    lambda c: c,
    fenced,
    lambda c: f"```python\n{c}",
    lambda c: f"<think>{c}</think>",
    lambda c: f"```python\n{c}\n```\nthen\n```python\n{c}\n```",
    lambda c: c + "\x00",
    lambda c: c.replace("A", "\u0410"),
    lambda c: c.replace("a", "\uff41"),
])
hostile_calls = st.builds(lambda wrap, code: wrap(code), wrappers, statements)

NESTERS = [("[", "]"), ("(", ")"), ("{'k': ", "}"), ("-", ""), ("~", ""), ("not ", ""), ("f(", ")"),
           ("lambda: ", ""), ("x[", "]"), ("(1, ", ")")]


# --- never raises --------------------------------------------------------------------------


@FUZZ
@given(st.text())
def test_any_text(response):
    check(response)


@FUZZ
@given(hostile_text)
def test_hostile_alphabet(response):
    check(response)
    check(fenced(response))


@FUZZ
@given(hostile_calls)
def test_hostile_calls(response):
    check(response)


@FUZZ
@given(st.integers(MAX_DEPTH + 1, 6000), st.sampled_from(NESTERS), st.booleans())
def test_deep_nesting(depth, nester, fence):
    code = "Agent.click(" + nester[0] * depth + "1" + nester[1] * depth + ")"
    result = check(fenced(code) if fence else code)
    assert isinstance(result, InvalidAction)


@settings(FUZZ, max_examples=300)  # each example allocates up to a megabyte
@given(st.one_of(st.integers(9_990, 20_010), st.sampled_from([10**5, 10**6])),
       st.sampled_from(["text", "list", "digits", "blank lines", "statements"]))
def test_huge_inputs(n, kind):
    code = {
        "text": lambda: 'Agent.type(text="' + "a" * n + '")',
        "list": lambda: "Agent.hotkey([" + "'a', " * (n // 5) + "])",
        "digits": lambda: "Agent.switch_window(" + "9" * n + ")",
        "blank lines": lambda: "\n" * n + "Agent.wait()",
        "statements": lambda: "Agent.wait();" * (n // 13),
    }[kind]()
    check(code)
    check(fenced(code))


@FUZZ
@given(st.text(alphabet="Agent\u0410\u0435\uff21\uff47\U0001d400\u212f_", min_size=1, max_size=8))
def test_only_the_ascii_spelling_of_an_api_is_accepted(name):
    result = check(f"{name}.wait()")
    assert isinstance(result, Action) == (name == "Agent")


# --- valid calls always round-trip ---------------------------------------------------------

pixels = st.integers(0, 10_000) | st.floats(0, 1e15)  # float pixels are rounded
points = st.lists(pixels, min_size=2, max_size=2)
texts = st.text(max_size=200)
valid_calls = st.one_of(
    st.builds(lambda p, n, b: (f"Agent.click({p}, num_clicks={n}, button_type={b!r})",
                               {"coordinates": [round(x) for x in p], "num_clicks": n, "button_type": b}),
              points, st.integers(1, 3), st.sampled_from(["left", "right", "middle"])),
    st.builds(lambda p, t, o, e: (f"Agent.type({p}, {t!r}, overwrite={o}, enter={e})",
                                  {"coordinates": p, "text": t, "overwrite": o, "enter": e}),
              st.none() | st.lists(st.integers(0, 10_000), min_size=2, max_size=2), texts, st.booleans(),
              st.booleans()),
    st.builds(lambda ks: (f"Agent.hotkey({ks!r})", {"keys": ks}),
              st.lists(st.text(min_size=1, max_size=10), min_size=1, max_size=5)),
    st.builds(lambda t: (f"Agent.quote(content={t!r})", {"content": t}), texts),
    st.builds(lambda w: (f"Agent.switch_window({w!r})", {"window_id": w}), st.integers(0, 2**31) | texts),
)


@FUZZ
@given(valid_calls)
def test_valid_calls_round_trip(call):
    code, args = call
    assume("```" not in code)  # a fence inside a string would end the block, as in markdown
    for response in (code, fenced(code)):
        result = check(response)
        assert isinstance(result, Action) and result.args == args


# --- nothing runs --------------------------------------------------------------------------

SENTINEL_PAYLOADS = [
    "open({path!r}, 'w').write('x')",
    "__import__('pathlib').Path({path!r}).write_text('x')",
    "__import__('os').system('touch {path}')",
    "setattr(__import__('builtins'), 'PWNED', 1)",
    "Agent.type(text=setattr(__import__('builtins'), 'PWNED', 1))",
    "Agent.type(text=open({path!r}, 'w'))",
    "Agent.type(text=(lambda: setattr(__import__('builtins'), 'PWNED', 1))())",
    "Agent.type(text=f\"{{setattr(__import__('builtins'), 'PWNED', 1)}}\")",
    "Agent.type(text=[setattr(__import__('builtins'), 'PWNED', 1) for _ in [0]][0])",
    "Agent.type(text=globals().update(PWNED=1))",
    "Agent.click.__globals__['__builtins__']['setattr'](__import__('builtins'), 'PWNED', 1)",
    "import builtins; builtins.PWNED = 1",
    "exec('import builtins; builtins.PWNED = 1')",
    "eval(compile('open({path!r}, \"w\")', '', 'eval'))",
    "Agent.wait(); setattr(__import__('builtins'), 'PWNED', 1)",
    "Agent.wait()\nopen({path!r}, 'w')",
    "Agent.exit(True) if setattr(__import__('builtins'), 'PWNED', 1) else 0",
    "Agent.exit(success=(PWNED := True))",
    "Agent.__class__.__subclasses__()[0]",
    "Agent.click = setattr",
    "del Agent",
    "breakpoint()",
]


def test_payloads_leave_no_trace(tmp_path):
    path = str(tmp_path / "pwned")
    for payload in SENTINEL_PAYLOADS:
        code = payload.format(path=path)
        for response in (code, fenced(code), f"thinking\n{code}", code.replace("\n", "\r\n")):
            assert isinstance(check(response), InvalidAction), response
    assert not (tmp_path / "pwned").exists()
    assert not hasattr(builtins, "PWNED")
    assert parse_action("Agent.wait()") == Action("Agent", "wait", {})  # the API class is intact


def test_the_guard_would_notice_execution():
    # Without this, a broken guard would make every test above pass vacuously.
    events: list[str] = []
    try:
        with no_execution() as events:
            exec("1")
    except AssertionError:
        pass
    assert events == ["exec"]
