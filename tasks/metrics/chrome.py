"""Chrome's metrics and OSWorld's general rule metrics, with the semantics of OSWorld's
(`metrics/chrome.py`, `metrics/general.py`, `compare_urls` in `metrics/utils.py`).

`expected` is a `rule` getter's rules; `result` what a Chrome getter read (`tasks/chrome.py`).
Where OSWorld's metric raises on an input (a None history, an unknown rule type), ours raises too:
the evaluator then tells the agent's fault (score 0) from the evaluator's.
"""

from __future__ import annotations

import itertools
import json
import re
from functools import lru_cache
from urllib.parse import urlparse, urlunparse

from computerrl.tasks.metrics.basic import fuzz_ratio
from computerrl.tasks.registry import metric


@lru_cache(maxsize=1)
def _suffixes():
    import tldextract

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)  # its bundled list: nothing downloaded


def normalize_url(url: str) -> str:
    """OSWorld's URL identity: scheme kept (http is not https); host without its public suffix, port and
    `www.` (amazon.co.uk is amazon.com); path as written, but a bare `/` dropped; query and fragment kept."""
    if not re.match(r"^[a-zA-Z][a-zA-Z0-9+\-.]*://", url):
        url = "http://" + url
    parts = urlparse(url)
    host = _suffixes()(parts.netloc.lower())
    netloc = host.domain if host.subdomain in ("", "www") else f"{host.subdomain}.{host.domain}"
    return urlunparse(parts._replace(scheme=parts.scheme.lower(), netloc=netloc,
                                     path="" if parts.path == "/" else parts.path))


def compare_urls(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a == b
    return normalize_url(a) == normalize_url(b)


def _same_lists(expected: list, actual: list, same) -> bool:
    """OSWorld's are_lists_equal: as many, and each expected one matched by some actual one."""
    return len(expected) == len(actual) and all(any(same(e, a) for a in actual) for e in expected)


@metric("is_expected_tabs")
def is_expected_tabs(open_tabs, rule, **_) -> float:
    if not open_tabs or rule.get("type") != "url":
        return 0.0
    return float(_same_lists(rule["urls"], [t["url"] for t in open_tabs], compare_urls))


def _url_of(info) -> str | None:
    return info.get("url") if isinstance(info, dict) else info


@metric("is_expected_active_tab")
def is_expected_active_tab(active_tab_info, rule, **_) -> float:
    if not active_tab_info or rule.get("type") != "url":
        return 0.0
    return float(compare_urls(rule["url"], _url_of(active_tab_info)))


@metric("is_expected_active_tab_approximate")
def is_expected_active_tab_approximate(active_tab_info, rule, **_) -> float:
    if not active_tab_info or rule.get("type") != "url":
        return 0.0

    def no_query(url: str) -> str:
        return urlunparse(urlparse(url)._replace(query=""))

    return float(no_query(rule["url"]) == no_query(_url_of(active_tab_info)))


@metric("is_expected_url_pattern_match")
def is_expected_url_pattern_match(result, rules, **_) -> float:
    """Every pattern of `rules["expected"]` found (re.search) in the URL."""
    if not result:
        return 0.0
    url = result if isinstance(result, str) else result.get("url") if isinstance(result, dict) else None
    if not isinstance(url, str):
        return 0.0
    return float(all(re.search(pattern, url) for pattern in rules["expected"]))


@metric("is_expected_search_query")
def is_expected_search_query(active_tab_info, rules, **_) -> float:
    if not active_tab_info:
        return 0.0
    return float(bool(re.search(rules["expect"]["pattern"], active_tab_info["url"])))


@metric("is_expected_bookmarks")
def is_expected_bookmarks(bookmarks, rule, **_) -> float:
    if not bookmarks:
        return 0.0
    bar = bookmarks["bookmark_bar"]["children"]
    if rule["type"] == "bookmark_bar_folders_names":
        return float({b["name"] for b in bar if b["type"] == "folder"} == set(rule["names"]))
    if rule["type"] == "bookmark_bar_websites_urls":
        return float({b["url"] for b in bar if b["type"] == "url"} == set(rule["urls"]))
    if rule["type"] == "liked_authors_websites_urls":
        folder = next((b for b in bar if b["type"] == "folder" and b["name"] == "Liked Authors"), None)
        if folder is None:
            return 0.0
        saved = {b["url"] for b in folder["children"] if b["type"] == "url"}
        choices = [[u] if isinstance(u, str) else u for u in rule["urls"]]  # alternatives per author
        return float(any(set(combination) == saved for combination in itertools.product(*choices)))
    raise TypeError(f"{rule['type']} not support yet!")


@metric("check_history_deleted")
def check_history_deleted(history_data, rule, **_) -> float:
    if rule["type"] != "keywords":
        raise TypeError(f"{rule['type']} not support yet!")
    return float(not any(keyword in row[0] for row in history_data for keyword in rule["keywords"]))


@metric("is_cookie_deleted")
def is_cookie_deleted(cookie_data, rule, **_) -> float:
    if rule["type"] != "domains":
        raise TypeError(f"{rule['type']} not support yet!")
    return float(not any(compare_urls(domain, row[1]) for row in cookie_data for domain in rule["domains"]))


@metric("check_enabled_experiments")
def check_enabled_experiments(enabled_experiments, rule, **_) -> float:
    names = [e.split("@")[0] for e in enabled_experiments]
    if rule["type"] != "names":
        raise TypeError(f"{rule['type']} not support yet!")
    return float(names == rule["names"])  # in order, as OSWorld's


@metric("check_font_size")
def check_font_size(font_size, rule, **_) -> float:
    size = font_size["default_font_size"]
    if rule["type"] == "value":
        return float(size == rule["value"])
    if rule["type"] == "range":
        return float(rule["min"] < size < rule["max"])
    raise TypeError(f"{rule['type']} not support yet!")


@metric("is_added_to_steam_cart")
def is_added_to_steam_cart(active_tab_info, rule, **_) -> float:
    return float(all(item in active_tab_info["content"] for item in rule["items"]))


ZOOM_NAMES = {"Zoom Chrome Extension", "Zoom for Google Chrome"}  # one extension, two names over its versions


@metric("is_expected_installed_extensions")
def is_expected_installed_extensions(installed, expected, **_) -> float:
    if not installed:
        return 0.0

    def canonical(names) -> set:
        return {"Zoom Chrome Extension" if n in ZOOM_NAMES else n for n in names}

    return float(canonical(expected["expected"]) <= canonical(installed))


@metric("is_shortcut_on_desktop")
def is_shortcut_on_desktop(shortcuts, rule, **_) -> float:
    """A launcher whose Name= (any case, either way a substring) or Exec= (case kept) line matches the rule.
    Departure: an empty name matches nothing (OSWorld's substring test lets `Name=` match every rule)."""
    if rule["type"] not in ("name", "exec"):
        raise TypeError(f"{rule['type']} not support yet!")
    key, want = ("Name=", rule["name"]) if rule["type"] == "name" else ("Exec=", rule["exec"])
    fold = (lambda t: t.lower()) if rule["type"] == "name" else (lambda t: t)
    for content in shortcuts.values():
        if f"{key}{want}\n" in content:
            return 1.0
        for line in content.splitlines():
            if line.startswith(key):
                value = line[len(key):].strip()
                if value and (value == want or fold(want) in fold(value) or fold(value) in fold(want)):
                    return 1.0
    return 0.0


# ---- OSWorld's general rule metrics -----------------------------------------------------------
@metric("match_in_list")
def match_in_list(result, rules, **_) -> float:
    return float(result in rules["expected"])


@metric("is_in_list")
def is_in_list(result, rules, **_) -> float:
    return float(rules["expected"] in result)  # the expected value is the needle, the result the haystack


@metric("literal_match")
def literal_match(result, expected, **options) -> float:
    kind, fold = options.get("type", "str"), options.get("ignore_case", False)

    def text(v) -> str:
        return str(v).lower() if fold else str(v)

    if kind == "str":
        return float(text(result) == text(expected))
    if kind == "list":
        if not (isinstance(result, (list, tuple)) and isinstance(expected, (list, tuple))
                and len(result) == len(expected)):
            return 0.0
        return float(all(text(r) == text(e) for r, e in zip(result, expected)))
    raise NotImplementedError(f"Type {kind} not supported")


@metric("fuzzy_match")
def fuzzy_match(result, rules, **_) -> float:
    if result is None:
        return 0.0
    return fuzz_ratio(result, rules["expected"]) / 100


@metric("check_direct_json_object")
def check_direct_json_object(result, rules, **_) -> float:
    """Each key of `rules["expected"]` equal in the result (a dict, or its JSON text with ' for ");
    with `expect_in_result`, contained in it instead (a string in the result's string, a list's item in
    the result's list). `ignore_list_order` counts only inside `expected`, as OSWorld reads it."""
    if isinstance(result, str):
        result = json.loads(result.strip().replace("'", '"'))  # outside the guard, as OSWorld's: bad JSON raises
    if result is None:
        return 0.0
    try:
        expected = rules["expected"]
        if not isinstance(expected, dict) or "__EVALUATION_FAILED__" in expected.values():
            return 0.0
        if not rules.get("expect_in_result", False):
            if expected.get("ignore_list_order", False):
                return float(all(sorted(v) == sorted(result.get(k)) for k, v in expected.items()))
            return float(all(v == result.get(k) for k, v in expected.items()))
        for key, want in expected.items():
            got = result.get(key)
            if isinstance(want, list):
                if not any(isinstance(got, list) and w in got or isinstance(got, str) and w == got for w in want):
                    return 0.0
            elif isinstance(want, str):
                if want not in got:
                    return 0.0
            else:
                return 0.0
        return 1.0
    except Exception:  # noqa: BLE001 - OSWorld scores any failure inside as 0
        return 0.0


@metric("check_list")
def check_list(result, rules, **_) -> float:
    """Every `expect` pattern found on some line of the result file, no `unexpect` pattern on any."""
    from computerrl.tasks.metrics.basic import read_text

    text = read_text(result)
    if text is None:
        return 0.0
    lines = text.splitlines()
    expect, unexpect = [re.compile(p) for p in rules.get("expect", [])], [re.compile(p) for p in rules.get("unexpect", [])]
    return float(all(any(p.search(line) for line in lines) for p in expect)
                 and not any(p.search(line) for line in lines for p in unexpect))
