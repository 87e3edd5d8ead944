"""Text and rule metrics with OSWorld's semantics: compare_text_file, check_include_exclude,
exact_match, infeasible, check_text_enlarged, is_in_vm_clickboard; plus `fuzz_ratio`, the string
similarity the other metric files share.

Every metric is `fn(result, expected, **options) -> float in [0, 1]`; `result` is what the result
getter produced (a local file path, a string, None when the getter found nothing) and `expected`
what the expected getter produced (a path, or the `rules` dict of a `rule` getter).
Departure from OSWorld: a missing or unreadable result file scores 0 instead of raising.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from computerrl.tasks.registry import metric

log = logging.getLogger(__name__)


def fuzz_ratio(a: str, b: str) -> float:
    """rapidfuzz's `fuzz.ratio` in [0, 100]: 100 * 2 * LCS(a, b) / (len(a) + len(b)).

    Written out (bit-parallel LCS over Python ints) so the project needs no rapidfuzz.
    """
    if not a and not b:
        return 100.0
    masks: dict[str, int] = {}
    for i, ch in enumerate(a):
        masks[ch] = masks.get(ch, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full  # bit i set = a[i] not yet matched (Allison-Dix / Hyyro)
    for ch in b:
        u = v & masks.get(ch, 0)
        v = ((v + u) | (v - u)) & full
    lcs = len(a) - bin(v).count("1")
    return 100.0 * 2 * lcs / (len(a) + len(b))


def read_text(path) -> str | None:
    """A file's text, or None when it is missing or unreadable (the caller scores 0).

    UTF-8 (a BOM dropped), else Latin-1, which decodes any bytes: OSWorld's encoding fallbacks
    after Latin-1 can never be reached, so these two are all of them.
    """
    if not path:
        return None
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        log.info("cannot read %s: %s", path, e)
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


@metric("compare_text_file")
def compare_text_file(result, expected, **options) -> float:
    """1 if the two text files are equal; options `ignore_blanks` (all whitespace runs become one
    space, ends stripped) and `ignore_case`."""
    actual, gold = read_text(result), read_text(expected)
    if actual is None or gold is None:
        return 0.0

    def norm(text: str) -> str:
        if options.get("ignore_blanks", False):
            text = re.sub(r"\s+", " ", re.sub(r"[\t\n]", " ", text).strip())
        if options.get("ignore_case", False):
            text = text.lower()
        return text

    return float(norm(actual) == norm(gold))


@metric("check_include_exclude")
def check_include_exclude(result, expected, **options) -> float:
    """1 if the result string contains every `include` substring and none of `exclude`
    (`expected` is the rule dict {"include": [...], "exclude": [...]})."""
    if result is None:
        return 0.0
    result = str(result)
    include, exclude = expected.get("include", []), expected.get("exclude", [])
    return float(all(s in result for s in include) and all(s not in result for s in exclude))


@metric("exact_match")
def exact_match(result, expected, **options) -> float:
    """1 if the result equals `expected["expected"]` exactly (no stripping, as in OSWorld)."""
    return float(result == expected["expected"])


@metric("infeasible")
def infeasible(result=None, expected=None, **options) -> float:
    """An infeasible task passes only when the agent gave up: OSWorld scores 1 when the last
    action is FAIL. The evaluator passes that last action (a string or an action dict) as
    `result`; anything else scores 0."""
    if isinstance(result, dict):
        result = result.get("action_type")
    return float(isinstance(result, str) and result.strip().upper() == "FAIL")


@metric("check_text_enlarged")
def check_text_enlarged(scaling_factor, *_, **__) -> float:
    """1 if GNOME's text scaling factor (as `gsettings get` prints it) is above 1; text that is no
    number raises, as in OSWorld."""
    return float(float(scaling_factor) > 1.0)


@metric("is_in_vm_clickboard")
def is_in_vm_clickboard(rules, clipboard, **_) -> float:
    """1 if the clipboard's text (`xsel --clipboard --output`) contains `rules["expected"]`, or every
    string of it when it is a list. (OSWorld's name, misspelling included; its rules come as the result.)"""
    if clipboard is None:
        return 0.0
    expected = rules["expected"]
    return float(all(e in clipboard for e in expected) if isinstance(expected, list) else expected in clipboard)
