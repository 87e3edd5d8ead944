"""The chat a policy sees at one step, in ComputerRL's form; one pure function for every policy.

    system: set-up + the API classes (Agent and the focused app's `<App>Tools`) + notes + task
    user:   * Apps / * Current App / * A11y Tree / * App Info / * Previous Action Result
    older turns: collapsed to "**Environment State (Omitted)**" + that turn's action result,
                 beside the answer the model gave then.

The system prompt is rebuilt every step because the API classes follow the focused app, as in
ComputerRL's harness. Coordinates are absolute screen pixels, the centre positions the a11y tree
shows: that is the form of ComputerRL's text agent (AutoGLM-OS-9B), so its checkpoints act here as
they were trained, and a small model only has to copy numbers from the tree (the 0-1000 form is
the screenshot agent's, which reads no tree). Parts are cut to token budgets chosen per model:
`BUDGETS["small"]` keeps a 135M model on a CPU at a few hundred tokens per part, `"paper"` is
ComputerRL's (300 tree lines, 5000 characters of app info, 30 turns of history).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

from computerrl.apis.app_api import api_for_app
from computerrl.apis.registry import REGISTRY, ApiRegistry
from computerrl.data.registry import Registry

CountTokens = Callable[[str], int]
OMITTED = "**Environment State (Omitted)**"
CUT = "…"


@dataclasses.dataclass(frozen=True)
class Budgets:
    tree_tokens: int  # a11y tree, whole rows kept from the top
    app_info_tokens: int  # app info (used range, paragraphs, slides)
    result_tokens: int  # the previous action's result
    history_turns: int  # earlier turns shown (collapsed); 0 = none
    history_answer_tokens: int  # each earlier answer, cut to this
    api_docs: bool = True  # each API function's one-line doc beside its signature (False: signatures only)
    functions: tuple[str, ...] = ()  # the API functions listed, as Class.function (() = all; the parser takes any)


BUDGETS = Registry("prompt budget")
BUDGETS.add("small", Budgets(tree_tokens=400, app_info_tokens=120, result_tokens=60, history_turns=2,
                             history_answer_tokens=60, api_docs=False))
BUDGETS.add("tiny", Budgets(tree_tokens=120, app_info_tokens=80, result_tokens=40, history_turns=1,
                            history_answer_tokens=40, api_docs=False))  # the CPU demo: API tasks need little tree
# The quick demo's (`entropulse --quick`): tiny's, listing only the functions its templates' reference
# solutions call. Its prompts are 2.4 times shorter (~680 tokens against ~1,620), and so is every forward pass
# of the 135M model in float32, which sets how long a CPU takes.
BUDGETS.add("quick", dataclasses.replace(BUDGETS["tiny"], functions=(
    "Agent.exit", "CalcTools.format_range", "CalcTools.freeze_panes", "CalcTools.rename_sheet", "CalcTools.save")))
BUDGETS.add("paper", Budgets(tree_tokens=8000, app_info_tokens=1300, result_tokens=500, history_turns=30,
                             history_answer_tokens=400))


def budgets_for(n_parameters: int) -> str:
    """The budget name for a model size: a model under 1B parameters gets short prompts."""
    return "small" if n_parameters < 1_000_000_000 else "paper"


def approx_tokens(text: str) -> int:
    """A tokenizer-free estimate (4 characters a token), for callers without a tokenizer."""
    return (len(text) + 3) // 4


SETUP = """You are an agent that completes tasks on a Linux desktop by calling Python functions.
Each step you see: the open windows, the focused app, the accessibility tree of the focused app \
(one row per element: tag, name, text, centre position (x, y) and size (w, h) in screen pixels), \
information about the open document, and the result of your previous action.
Think first, then answer with exactly ONE line of code, in this form:
<think>your plan</think>
```python
Agent.click([960, 540])
```"""

NOTES = """Notes:
- One call per answer, with literal arguments; anything else is an invalid action and nothing runs.
- Coordinates are screen pixels: use the centre positions from the accessibility tree.
- Files are under /home/user; the password for sudo is 'password'.
- When the task is done, answer Agent.exit(success=True); if it cannot be done, Agent.exit(success=False)."""


def api_classes(focused_app: str) -> list[str]:
    """The API classes the model is shown: Agent, plus the focused app's tools when it has them."""
    api = api_for_app(focused_app)
    return ["Agent"] + ([api] if api else [])


def system_prompt(instruction: str, focused_app: str, *, docs: bool = True, registry: ApiRegistry = REGISTRY,
                  functions: tuple[str, ...] = ()) -> str:
    classes = api_classes(focused_app)
    intro = "You can call these functions (Agent acts on the screen" + \
        (f"; {classes[1]} acts on the open {focused_app} document):" if len(classes) > 1 else "):")
    return "\n\n".join([SETUP, f"{intro}\n```python\n{registry.render(classes, docs, functions)}\n```", NOTES,
                        f"Task: {instruction}"])


def cut(text: str, max_tokens: int, count: CountTokens) -> str:
    """`text` if it fits, else its longest prefix that fits with "…" after it."""
    if count(text) <= max_tokens:
        return text
    lo, hi = 0, len(text)  # binary search on characters: count is monotone enough for a budget
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:mid] + CUT) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo] + CUT


def cut_lines(text: str, max_tokens: int, count: CountTokens) -> str:
    """Whole lines from the top while they fit (a row of the tree is never cut in half)."""
    kept, used = [], 0
    lines = text.splitlines()
    for line in lines:
        n = count(line) + 1
        if used + n > max_tokens:
            break
        kept.append(line)
        used += n
    return "\n".join(kept + ([CUT] if len(kept) < len(lines) else []))


def window_table(windows: Sequence[dict]) -> str:
    if not windows:
        return "None"
    rows = [f"{w['id']}    {w['app']}    {w['title']}" for w in windows]
    return "\n".join(["Window ID    App Name    Title", *rows])


def user_message(obs: dict, budgets: Budgets, count: CountTokens) -> str:
    tree = cut_lines(obs.get("a11y_tree", ""), budgets.tree_tokens, count) or "None"
    info = cut(obs.get("app_info", ""), budgets.app_info_tokens, count) or "None"
    result = cut(obs.get("last_result", ""), budgets.result_tokens, count) or "None"
    return "\n\n".join([f"* Apps: {window_table(obs.get('windows', []))}",
                        f"* Current App: {obs.get('focused_app') or 'None'}",
                        f"* A11y Tree: {tree}", f"* App Info: {info}", f"* Previous Action Result: {result}"])


def build_messages(instruction: str, obs: dict, history: Sequence[tuple[str, str]], budgets: Budgets,
                   count: CountTokens = approx_tokens, registry: ApiRegistry = REGISTRY) -> list[dict[str, str]]:
    """The chat for one step.

    `obs`: the observation fields (`focused_app`, `windows`, `a11y_tree`, `app_info`, `last_result`);
    `history`: (answer, its action's result) of every earlier step, oldest first.
    """
    system = system_prompt(instruction, obs.get("focused_app", ""), docs=budgets.api_docs, registry=registry,
                           functions=budgets.functions)
    messages = [{"role": "system", "content": system}]
    first = max(0, len(history) - budgets.history_turns)
    for i in range(first, len(history)):
        before = f"\nPrevious Action Result: {cut(history[i - 1][1], budgets.result_tokens, count)}" if i else ""
        messages.append({"role": "user", "content": OMITTED + before})
        messages.append({"role": "assistant", "content": cut(history[i][0], budgets.history_answer_tokens, count)})
    messages.append({"role": "user", "content": user_message(obs, budgets, count)})
    return messages
