"""The action parser and the API registry: what the model may write, and why the rest is refused."""

import re
from typing import Annotated, Any, Literal

import pytest

from computerrl.apis import REGISTRY, Action, ApiRegistry, InvalidAction, Range, extract_code, parse_action


def fenced(code: str) -> str:
    return f"<think>The button is at the top left.</think>\n```python\n{code}\n```"


CLICK = {"coordinates": [100, 200], "num_clicks": 1, "button_type": "left"}
TYPE = {"coordinates": None, "text": "", "overwrite": False, "enter": False}

VALID = [
    ("Agent.click([100, 200])", "click", CLICK),
    ("Agent.click(coordinates=[100, 200], num_clicks=2, button_type='right')", "click",
     {**CLICK, "num_clicks": 2, "button_type": "right"}),
    ("Agent.click((100, 200), 3, 'middle')", "click", {**CLICK, "num_clicks": 3, "button_type": "middle"}),
    ("Agent.click([99.6, 200.2])", "click", CLICK),  # float pixels are rounded
    ("Agent.type(text='hello')", "type", {**TYPE, "text": "hello"}),
    ("Agent.type([5, 6], 'h\u00e9llo\\n\"w\"', True, enter=True)", "type",
     {"coordinates": [5, 6], "text": 'h\u00e9llo\n"w"', "overwrite": True, "enter": True}),
    ("Agent.type()", "type", TYPE),
    ("Agent.drag_and_drop([1, 2], drop_on_coordinates=[3, 4])", "drag_and_drop",
     {"drag_from_coordinates": [1, 2], "drop_on_coordinates": [3, 4]}),
    ("Agent.scroll([500, 400], 'down')", "scroll", {"coordinates": [500, 400], "direction": "down"}),
    ("Agent.scroll(direction='left', coordinates=[0, 0])", "scroll", {"coordinates": [0, 0], "direction": "left"}),
    ("Agent.open_app('libreoffice-calc')", "open_app", {"app_name": "libreoffice-calc"}),
    ("Agent.switch_window('0x3a00007')", "switch_window", {"window_id": "0x3a00007"}),
    ("Agent.switch_window(7)", "switch_window", {"window_id": 7}),
    ("Agent.hotkey(['ctrl', 'shift', 's'])", "hotkey", {"keys": ["ctrl", "shift", "s"]}),
    ("Agent.hotkey(keys=('enter',))", "hotkey", {"keys": ["enter"]}),
    ("Agent.quote(content='42 apples')", "quote", {"content": "42 apples"}),
    ("Agent.wait()", "wait", {}),
    ("Agent.exit(True)", "exit", {"success": True}),
    ("Agent.exit(success=False)  # gave up", "exit", {"success": False}),
]


@pytest.mark.parametrize("code,name,args", VALID)
def test_valid_actions_bind_fill_defaults_and_round_trip(code, name, args):
    action = parse_action(fenced(code))
    assert action == Action("Agent", name, args)
    assert Action.from_json(action.to_json()) == action
    assert parse_action(action.code) == action
    assert parse_action(fenced(action.code)) == action


def test_every_agent_function_has_a_valid_example():
    assert {name for _, name, _ in VALID} == set(REGISTRY.apis["Agent"])


def test_canonical_forms():
    action = parse_action("Agent.click([100, 200], num_clicks=2)")
    assert action.code == 'Agent.click(coordinates=[100, 200], num_clicks=2, button_type="left")'
    assert action.to_json() == (
        '{"api":"Agent","args":{"button_type":"left","coordinates":[100,200],"num_clicks":2},"name":"click"}'
    )


INVALID = [
    ("import os", "imports are not allowed"),
    ("from os import system", "imports are not allowed"),
    ("Agent.click.__globals__", "attribute chains"),
    ("os.path.join('a')", "attribute chains"),
    ("Agent.click.__globals__['os'].system('ls')", "attribute chains"),
    ("__import__('os').system('ls')", "attribute chains"),
    ("__import__('os')", "__import__(...) are not allowed"),
    ("eval('1')", "bare calls"),
    ("Agent.click(pos)", "names"),
    ("Agent.click([x, 1])", "names"),
    ("Agent.type(text=Agent.__doc__)", "attribute access"),
    ("Agent.type(text=Agent.quote('x'))", "nested calls"),
    ("Agent.type(text=lambda: 1)", "lambdas"),
    ("lambda: Agent.wait()", "lambdas"),
    ("Agent.type(text=f'{1}')", "f-strings"),
    ("Agent.hotkey([k for k in 'ab'])", "comprehensions"),
    ("Agent.click(*[[1, 2]])", "starred"),
    ("Agent.click(**{'coordinates': [1, 2]})", "**kwargs"),
    ("Agent.wait(); Agent.wait()", "one statement"),
    ("Agent.wait()\nAgent.wait()", "one statement"),
    ("x = Agent.wait()", "assignments"),
    ("if True: Agent.wait()", "if statements"),
    ("Agent.exit((ok := True))", "assignment expressions"),
    ("Agent.wait", "must be one call"),
    ("Agent.wait()()", "Api.function"),
    ("Calc.set_cell('A1', 1)", "unknown API class 'Calc' (known: Agent"),
    ("Agent.fly()", "unknown function Agent.fly (Agent has: click,"),
    ("Agent._secret()", "private"),
    ("_Agent.click([1, 2])", "private"),
    ("Agent.__class__()", "private"),
    ("Agent.click()", "missing a required argument: 'coordinates'"),
    ("Agent.click([1, 2], 1, 'left', 9)", "too many positional arguments"),
    ("Agent.click([1, 2], clicks=2)", "unexpected keyword argument 'clicks'"),
    ("Agent.click([1, 2], num_clicks=4)", "num_clicks must be between 1 and 3"),
    ("Agent.click([1, 2], num_clicks='2')", "num_clicks must be int, got str"),
    ("Agent.click([1, 2], num_clicks=True)", "num_clicks must be int, got bool"),
    ("Agent.click([1, 2, 3])", "coordinates must have exactly 2 items"),
    ("Agent.click([1])", "coordinates must have exactly 2 items"),
    ("Agent.click([-5, 2])", "coordinates[0] must be >= 0"),
    ("Agent.click([1e300, 2])", "coordinates[0] must be int, got float"),
    ("Agent.click(['1', 2])", "coordinates[0] must be int, got str"),
    ("Agent.click('100, 200')", "coordinates must be list[int], got str"),
    ("Agent.type('100, 200')", "coordinates must be list[int] | None, got str"),
    ("Agent.click([1, 2], button_type='double')", "button_type must be one of"),
    ("Agent.scroll([1, 2], 'sideways')", "direction must be one of"),
    ("Agent.hotkey([])", "keys must have 1 to 5 items"),
    ("Agent.hotkey(['a', 'b', 'c', 'd', 'e', 'f'])", "keys must have 1 to 5 items"),
    ("Agent.hotkey(['ctrl', ''])", "keys[1] must not be empty"),
    ("Agent.hotkey('ctrl+s')", "keys must be list[str]"),
    ("Agent.exit('yes')", "success must be bool"),
    ("Agent.type(text='ab' * 3)", "operators"),
    ("Agent.hotkey(['a'] + ['b'])", "operators"),
    ("Agent.click([- -1, 2])", "operators"),
    ("Agent.click([1e999, 2])", "finite"),
    ("Agent.click([-1e999, 2])", "finite"),
    ("Agent.switch_window(" + "9" * 25 + ")", "64 bits"),
    ("Agent.type(text=b'x')", "bytes literals"),
    ("Agent.click([1j, 2])", "complex literals"),
    ("Agent.quote(...)", "ellipsis literals"),
    ("Agent.click({1: 2})", "dict keys must be strings"),
    ("Agent.click([[[[[1]]]]])", "nested at most 4 levels"),
    ("Agent.hotkey([" + ", ".join(["'a'"] * 1001) + "])", "limited to 1000 items"),
    ("Agent.type(text='" + "a" * 10_001 + "')", "limited to 10000 characters"),
    ("Agent.type(text='" + "a" * 20_001 + "')", "too long"),
    ("Agent.type(text='\\ud800')", "surrogates"),
    ("Agent.type(text='a\x00')", "null bytes"),
    ("Agent.click([1, 2]", "syntax error"),
    ("\u0410gent.click([1, 2])", "ASCII"),  # Cyrillic A
    ("\uff21gent.click([1, 2])", "ASCII"),  # fullwidth A, which Python normalizes to "Agent"
    ("Agent.\uff43lick([1, 2])", "ASCII"),
    ("Agent.click([1, 2], \uff4eum_clicks=2)", "ASCII"),
]


@pytest.mark.parametrize("code,reason", INVALID)
def test_invalid_actions_say_why(code, reason):
    result = parse_action(fenced(code))
    assert isinstance(result, InvalidAction)
    assert reason in result.reason
    assert result.message == "Invalid action: " + result.reason
    assert result.code == code.strip()


def test_unicode_text_inside_strings_is_fine():
    assert parse_action(fenced("Agent.type(text='\u0410\uff21 \U0001f600')")).args["text"] == "\u0410\uff21 \U0001f600"


# --- response format -----------------------------------------------------------------------


@pytest.mark.parametrize("response", [
    "```python\nAgent.wait()\n```\nOn second thought:\n```python\nAgent.exit(True)\n```\n",  # two blocks
    "```python\nAgent.wait()\nAgent.exit(True)\n```",  # two lines in one block
    "<think>plan</think>\nAgent.click([10, 20])\nAgent.type(text='x')",  # two unfenced lines: not the last one
    "Agent.click([10, 20])\n\n`Agent.exit(True)`",
    "~~~python\nAgent.wait()\n~~~\n```python\nAgent.exit(True)\n```",
])
def test_two_statements_are_invalid_fenced_or_not(response):
    result = parse_action(response)
    assert isinstance(result, InvalidAction) and result.reason == "only one statement is allowed per action"


def test_calls_inside_the_thought_do_not_count_as_statements():
    response = "<think>Maybe Agent.click([1, 2])\nor Agent.wait() first</think>\nAgent.exit(True)"
    assert parse_action(response) == Action("Agent", "exit", {"success": True})


@pytest.mark.parametrize("char", ["\u202e", "\u202a", "\u2066", "\u2069"])
def test_bidirectional_controls_anywhere_make_the_answer_invalid(char):
    for response in (f"```python\nAgent.type(text='a{char}b')\n```", f"<think>{char}</think>\n```python\nAgent.wait()\n```"):
        result = parse_action(response)
        assert isinstance(result, InvalidAction) and "bidirectional" in result.reason


def test_fence_variants():
    assert parse_action("```py\nAgent.wait()\n```").name == "wait"
    assert parse_action("```Python   \nAgent.wait()\n```").name == "wait"
    assert parse_action("<think>ok</think>\n```python\nAgent.wait()").name == "wait"  # cut at a stop word
    assert parse_action("```python\nAgent.type(\n    text='multi-line call'\n)\n```").args["text"] == "multi-line call"
    assert parse_action("~~~python\nAgent.wait()\n~~~").name == "wait"  # tildes are fences too
    assert parse_action("~~~python\nAgent.type(text='```')\n~~~").args["text"] == "```"


def test_lenient_last_line_without_fence():
    assert parse_action("<think>Save it.</think>\nAgent.hotkey(['ctrl', 's'])\n\n").name == "hotkey"
    assert parse_action("I will wait.\n`Agent.wait()`").name == "wait"
    assert parse_action("Agent.wait()\r\n").name == "wait"


@pytest.mark.parametrize("response", [
    "",
    "   \n\n",
    "<think>I am not sure what to do.</think>",
    "Agent.wait()\nand then I am done.",
    "Done (finally).",
    "```python\n\n```",
    "```\nAgent.wait()\n```",  # an unlabelled fence is not a python block
])
def test_no_action_found(response):
    result = parse_action(response)
    assert isinstance(result, InvalidAction)
    assert "no action found" in result.reason


def test_non_text_response_is_invalid():
    assert isinstance(parse_action(None), InvalidAction)  # type: ignore[arg-type]


def test_extract_code():
    assert extract_code(fenced("Agent.wait()")) == "Agent.wait()"
    assert extract_code("thinking\nAgent.wait()") == "Agent.wait()"
    assert extract_code("just prose") is None
    assert extract_code("") is None


def test_from_json_revalidates():
    with pytest.raises(ValueError, match="num_clicks must be between 1 and 3"):
        Action.from_json('{"api":"Agent","name":"click","args":{"coordinates":[1,2],"num_clicks":9}}')
    with pytest.raises(ValueError, match="unknown function"):
        Action.from_json('{"api":"Agent","name":"rm","args":{}}')
    with pytest.raises(ValueError, match="ASCII identifiers"):
        Action.from_json('{"api":"Agent","name":"wait","args":{"x=1, y":2}}')
    with pytest.raises(ValueError, match="finite"):
        Action.from_json('{"api":"Agent","name":"click","args":{"coordinates":[NaN,2]}}')
    with pytest.raises(ValueError, match="expected"):
        Action.from_json('["Agent", "wait"]')
    with pytest.raises(ValueError, match="not a JSON action"):
        Action.from_json("{")


# --- registry ------------------------------------------------------------------------------


def calc_registry() -> ApiRegistry:
    registry = ApiRegistry()

    @registry.register
    class CalcTools:
        @staticmethod
        def set_cell_value(cell: str, value: str | int | float) -> None:
            """Put a value into one cell, e.g. "B2"."""

        @staticmethod
        def sort_column(
            column: str,
            order: Literal["asc", "desc"] = "asc",
            rows: Annotated[int, Range(1, 100)] | None = None,
        ) -> None:
            """Sort the sheet by one column."""

        @staticmethod
        def fill(grid: list[list[float]], options: dict[str, Any] = {}) -> None:  # noqa: B006
            """Write a block of numbers."""

        @staticmethod
        def _helper() -> None:
            """Never exposed."""

    return registry


def test_registry_render_is_the_prompt_text():
    assert calc_registry().render(["CalcTools"]) == (
        "class CalcTools:\n"
        '    def set_cell_value(cell: str, value: str | int | float) -> None:  # Put a value into one cell, e.g. "B2".\n'
        '    def sort_column(column: str, order: Literal["asc", "desc"] = "asc", rows: int | None = None) -> None:'
        "  # Sort the sheet by one column.\n"
        "    def fill(grid: list[list[float]], options: dict[str, Any] = {}) -> None:  # Write a block of numbers."
    )
    agent = REGISTRY.render(["Agent"])
    assert agent.startswith("class Agent:\n    def click(coordinates: list[int], num_clicks: int = 1, "
                            'button_type: Literal["left", "right", "middle"] = "left") -> None:  # Click')
    assert len(agent.splitlines()) == 1 + len(REGISTRY.apis["Agent"])


def test_registry_parses_app_calls():
    registry = calc_registry()
    assert parse_action("CalcTools.set_cell_value('B2', 42)", registry).args == {"cell": "B2", "value": 42}
    assert parse_action("CalcTools.set_cell_value('B2', 4.5)", registry).args["value"] == 4.5
    action = parse_action("CalcTools.fill([[1, 2.5]], {'bold': True})", registry)
    assert action.args == {"grid": [[1.0, 2.5]], "options": {"bold": True}}
    assert parse_action(action.code, registry) == action
    assert "rows must be between 1 and 100" in parse_action("CalcTools.sort_column('A', rows=0)", registry).reason
    assert "order must be one of" in parse_action("CalcTools.sort_column('A', 'up')", registry).reason
    assert "private" in parse_action("CalcTools._helper()", registry).reason
    assert "unknown API class 'Agent' (known: CalcTools)" in parse_action("Agent.wait()", registry).reason


def test_registry_lookups_name_what_is_known():
    registry = calc_registry()
    with pytest.raises(KeyError, match="known: CalcTools"):
        registry.get("WriterTools", "save")
    with pytest.raises(KeyError, match="CalcTools has: fill, set_cell_value, sort_column"):
        registry.get("CalcTools", "_helper")
    with pytest.raises(KeyError, match="known: CalcTools"):
        registry.render(["CalcTools", "Nope"])
    assert registry.validate("CalcTools", "sort_column", ("A",), {}) == {"column": "A", "order": "asc", "rows": None}
    with pytest.raises(ValueError, match=re.escape("value must be str | int | float, got bool")):
        registry.validate("CalcTools", "set_cell_value", ("A1", True), {})


def test_registration_rejects_bad_stubs():
    def check(cls):
        ApiRegistry().register(cls)

    class NoDoc:
        @staticmethod
        def f(x: int) -> None: ...

    class VarArgs:
        @staticmethod
        def f(*xs: int) -> None:
            """Doc."""

    class Unsupported:
        @staticmethod
        def f(xs: set[int]) -> None:
            """Doc."""

    class BadDefault:
        @staticmethod
        def f(x: int = "one") -> None:
            """Doc."""

    with pytest.raises(TypeError, match="docstring"):
        check(NoDoc)
    with pytest.raises(TypeError, match=r"\*args"):
        check(VarArgs)
    with pytest.raises(TypeError, match="unsupported annotation"):
        check(Unsupported)
    with pytest.raises(ValueError, match="x must be int"):
        check(BadDefault)
