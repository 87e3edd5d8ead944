"""VS Code's metrics, with the semantics of OSWorld's `metrics/vscode.py`: its settings and keybindings
files (JSON; VS Code writes keybindings.json after a comment line) and its list of extensions."""

from __future__ import annotations

import json

from computerrl.envs.tasks.registry import metric

MAX_BYTES = 4 << 20  # a settings file the agent inflated is not read whole


def _json(path, skip_first_line: bool = False):
    """The file's JSON, or None (absent, too big, not JSON)."""
    try:
        with open(path, encoding="utf-8") as f:
            if skip_first_line:
                f.readline()
            text = f.read(MAX_BYTES + 1)
    except (OSError, UnicodeDecodeError):
        return None
    try:
        return json.loads(text) if len(text) <= MAX_BYTES else None
    except ValueError:
        return None


@metric("check_json_settings")
def check_json_settings(actual, expected, **_) -> float:
    """1 if every key of `expected["expected"]` is in the settings file with that value."""
    data = _json(actual) if actual else None
    if not isinstance(data, dict):
        return 0.0
    return float(all(key in data and data[key] == value for key, value in expected["expected"].items()))


@metric("check_json_keybindings")
def check_json_keybindings(actual, expected, **_) -> float:
    """1 if the keybindings file (a list; read as it is, else past its first line) holds `expected["expected"]`."""
    for skip in (False, True):
        data = _json(actual, skip) if actual else None
        if isinstance(data, list):
            return float(expected["expected"] in data)
    return 0.0


@metric("is_extension_installed")
def is_extension_installed(actual, rules, **_) -> float:
    """`rules["type"]` "contain" (or "not_contain"): whether `rules["expected"]` is in the command's output."""
    if rules.get("type") not in ("contain", "not_contain"):
        raise ValueError(f"is_extension_installed: rule type {rules.get('type')!r} (known: contain, not_contain)")
    if actual is None:  # the command did not run
        return 0.0
    found = rules["expected"] in actual
    return float(found if rules["type"] == "contain" else not found)
