"""Chrome's setup steps and getters, with the semantics of OSWorld's (`desktop_env/evaluators/getters/chrome.py`).

The desktop's browser is Chromium under Google Chrome's names (compat/bin/chromium): its profile
where OSWorld's getters read Chrome's, `~/.config/google-chrome`, and DevTools on the sandbox's
loopback, which the env server reaches through the keeper (`envs/desktop/devtools.py`). Profile getters
read the profile's files through the keeper, as OSWorld's read them from the VM; what OSWorld
asks the accessibility tree (the address bar) is asked of ours.

Where we depart, and why:
- `active_tab_info` and `active_tab_html_parse` read the active tab itself. OSWorld's first loads
  the address bar's URL again in a fresh context (without the user's cookies) — a second visit,
  which needs the network and may see another page than the agent did.
- `cookie_data` reads `Default/Network/Cookies` when `Default/Cookies` is absent: Chrome moved its
  cookies there (version 96), where OSWorld's getter finds none and its metric then fails.
- Chrome's own waits (Playwright's 'networkidle', 15 connection attempts 5 s apart) are bounded by
  the evaluation's time budget.
"""

from __future__ import annotations

import base64
import contextlib
import json
import sqlite3
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlparse

from computerrl.envs.desktop.devtools import DevTools, DevToolsError
from computerrl.tasks.getters import check_any, getter
from computerrl.tasks.metrics.chrome import compare_urls
from computerrl.tasks.registry import LAUNCH_SETTLES
from computerrl.tasks.setup import STEP_FILES, Budget, check_string, cached, step

if TYPE_CHECKING:
    from computerrl.envs.desktop.desktop import Desktop

PROFILE = "/home/user/.config/google-chrome"  # as OSWorld's getters find Chrome's on Linux
DEFAULT = f"{PROFILE}/Default"
HISTORY_TEMPLATE = ("https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/chrome/"
                    "44ee5668-ecd5-4366-a6ce-c1c9b8d4e938/history_empty.sqlite?download=true")  # OSWorld's own
CONNECT_S = 30.0  # how long a step waits for a browser just launched to answer
LOAD_S = 15.0  # how long a step waits for one tab to load (a page without network fails at once)
ADDRESS_BAR = ("entry", "Address and search bar")  # the omnibox, as Chromium shows it to AT-SPI
WEBKIT_EPOCH = datetime(1601, 1, 1)


def _urls(v) -> str:
    return "" if isinstance(v, list) and all(isinstance(u, str) for u in v) else "expected a list of URLs"


def _history(v) -> str:
    ok = isinstance(v, list) and all(isinstance(h, dict) and isinstance(h.get("url"), str) and isinstance(
        h.get("visit_time_from_now_in_seconds", 0), (int, float)) for h in v)
    return "" if ok else "expected a list of {url, title, visit_time_from_now_in_seconds}"


def browser(desktop: "Desktop", budget: Budget, wait_s: float = CONNECT_S) -> DevTools:
    """The desktop's browser, once it answers (a task launches it a step before it uses it)."""
    devtools, deadline = DevTools(desktop.sandbox), time.monotonic() + budget.left(wait_s)
    while True:
        try:
            devtools.tabs()
            return devtools
        except DevToolsError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _wait_loaded(devtools: DevTools, tab: dict, budget: Budget) -> None:
    deadline = time.monotonic() + budget.left(LOAD_S)
    while time.monotonic() < deadline:
        try:
            if devtools.evaluate(tab, "document.readyState") == "complete":
                return
        except DevToolsError:
            pass  # the tab is between documents
        time.sleep(0.1)


@LAUNCH_SETTLES.register("chromium")
def settle(desktop: "Desktop", budget: Budget) -> None:
    """A browser just started, done starting: DevTools answers and its first tab has loaded (until then
    Chromium may still take the focus from a window opened after its own)."""
    devtools = browser(desktop, budget)
    for tab in devtools.tabs()[:1]:
        _wait_loaded(devtools, tab, budget)


# ---- setup steps ---------------------------------------------------------------------------
@step("chrome_open_tabs", urls_to_open=(_urls, True))
def chrome_open_tabs(desktop: "Desktop", budget: Budget, urls_to_open: list[str], **_) -> None:
    """Each URL in a new tab, loaded (or failed to load) before the next; the tab Chrome started with
    is closed after the first, as OSWorld's step does."""
    devtools = browser(desktop, budget)
    start = devtools.tabs()
    for i, url in enumerate(urls_to_open):
        tab = devtools.open(url)
        _wait_loaded(devtools, tab, budget)
        if i == 0 and start and start[-1]["id"] != tab["id"]:  # the oldest: Chrome's own first tab
            devtools.close(start[-1]["id"])


@step("chrome_close_tabs", urls_to_close=(_urls, True))
def chrome_close_tabs(desktop: "Desktop", budget: Budget, urls_to_close: list[str], **_) -> None:
    """For each URL, the first tab showing it (as compare_urls has it) closed; none: nothing."""
    devtools = browser(desktop, budget)
    for url in urls_to_close:
        tab = next((t for t in reversed(devtools.tabs()) if compare_urls(t["url"], url)), None)
        if tab is not None:
            devtools.close(tab["id"])


@step("update_browse_history", history=(_history, True))
def update_browse_history(desktop: "Desktop", budget: Budget, history: list[dict], **_) -> None:
    """The profile's History: OSWorld's empty History database (from the file cache) with these visits,
    each `visit_time_from_now_in_seconds` ago (local time, as OSWorld writes them)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "History"
        db.write_bytes(cached(desktop, HISTORY_TEMPLATE).read_bytes())
        with sqlite3.connect(db) as conn:
            for item in history:
                when = datetime.now() - timedelta(seconds=item.get("visit_time_from_now_in_seconds", 0))
                stamp = int((when - WEBKIT_EPOCH).total_seconds() * 1_000_000)
                row = conn.execute("INSERT INTO urls (url, title, visit_count, typed_count, last_visit_time, hidden) "
                                   "VALUES (?, ?, 1, 0, ?, 0)", (item["url"], item.get("title", ""), stamp))
                conn.execute("INSERT INTO visits (url, visit_time, from_visit, transition, segment_id, visit_duration) "
                             "VALUES (?, ?, 0, 805306368, 0, 0)", (row.lastrowid, stamp))
        desktop.sandbox.write(f"{DEFAULT}/History", db.read_bytes())


STEP_FILES["update_browse_history"] = [HISTORY_TEMPLATE]


# ---- the address bar and the active tab ------------------------------------------------------
def address_bar(desktop: "Desktop") -> str | None:
    """What the browser's address bar shows (the focused window's first), None without a browser window."""
    from computerrl.envs.desktop.actions import app_of

    windows = sorted((w for w in desktop.screen.windows() if app_of(w) == "chromium" and w.pid),
                     key=lambda w: not w.focused)
    for w in windows:
        for line in desktop.a11y_rows(w.pid, "chromium"):
            tag, name, text = (line.split("\t") + ["", "", ""])[:3]
            if (tag, name) == ADDRESS_BAR:
                return text or None
    return None


def active_url(desktop: "Desktop", spec: dict) -> str | None:
    text = address_bar(desktop)
    return None if text is None else spec.get("goto_prefix", "https://") + text


def _active_tab(desktop: "Desktop", budget: Budget) -> tuple[DevTools, dict] | None:
    """The tab the user sees: the most recently active one that is visible."""
    try:
        devtools = browser(desktop, budget, wait_s=2.0)
        tabs = devtools.tabs()
    except DevToolsError:
        return None
    for tab in tabs:
        try:
            if devtools.evaluate(tab, "document.visibilityState") == "visible":
                return devtools, tab
        except DevToolsError:
            continue
    return (devtools, tabs[0]) if tabs else None


@getter("active_url_from_accessTree", goto_prefix=(check_any, False))
def active_url_from_access_tree(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str | None:
    return active_url(desktop, spec)


@getter("active_tab_info", goto_prefix=(check_any, False))
def active_tab_info(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> dict | None:
    found = _active_tab(desktop, budget)
    if found is None or active_url(desktop, spec) is None:
        return None
    devtools, tab = found
    _wait_loaded(devtools, tab, budget)
    try:
        content = devtools.evaluate(tab, "document.documentElement ? document.documentElement.outerHTML : ''")
        return {"title": devtools.evaluate(tab, "document.title"), "url": tab["url"], "content": content}
    except DevToolsError:
        return None


@getter("active_tab_url_parse", goto_prefix=(check_any, False), parse_keys=(check_any, True),
        replace=(check_any, False), split_list=(check_any, False))
def active_tab_url_parse(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> dict | None:
    url = active_url(desktop, spec)
    if url is None:
        return None
    query = parse_qs(urlparse(url).query)
    parsed = {key: query.get(key, [""])[0] for key in spec["parse_keys"]}
    for old, new in (spec.get("replace") or {}).items():
        parsed[new] = parsed.pop(old)
    if spec.get("split_list"):
        parsed = {key: value.split(",") for key, value in parsed.items()}
    return parsed


@getter("url_dashPart", goto_prefix=(check_any, False), partIndex=(check_any, True), needDeleteId=(check_any, False),
        returnType=(check_any, True), key=(check_any, False))
def url_dash_part(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> Any:
    url = active_url(desktop, spec)
    if url is None:
        return None
    try:
        index = int(spec["partIndex"])
    except (TypeError, ValueError):
        return None
    parts = url.split("/")
    if index >= len(parts) or index < -len(parts):
        return None
    part = parts[index].split("?")[0] if spec.get("needDeleteId") else parts[index]
    return part if spec["returnType"] == "string" else {spec.get("key"): part} if spec["returnType"] == "json" else None


# What OSWorld's html-parse getter asks of a page, as JavaScript run in it (the selector comes in `S`).
PAGE_QUERIES = {
    "texts": "Array.from(document.querySelectorAll(S), e => (e.textContent || '').trim())",
    "direct_text_nodes": "(e => e ? Array.from(e.childNodes).filter(n => n.nodeType === 3)"
                         ".map(n => n.textContent.trim()).filter(t => t) : [])(document.querySelector(S))",
    "only_child": "Array.from(document.querySelectorAll(S)).map(e => e.querySelector('h3')).filter(h => h)"
                  ".map(h => (h.textContent || '').trim())",
    "li": "Array.from(document.querySelectorAll(S + ' li.catAllProducts'), e => e.querySelector('span'))"
          ".filter(s => s).map(s => s.innerText.trim())",
    "xpath": "(n => n ? (n.textContent || '').trim() : '')(document.evaluate(S, document, null, "
             "XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue)",
    "input": "(n => n && n.value !== undefined ? String(n.value).trim() : '')(document.evaluate(S, document, null, "
             "XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue)",
    # Playwright's `text=` picks the first element (in document order) whose text holds it, case folded,
    # with no child that holds it too
    "label": "(t => { const has = e => (e.textContent || '').replace(/\\s+/g, ' ').toLowerCase().includes(t); "
             "const all = Array.from(document.body.querySelectorAll('*')).filter(has); "
             "const e = all.find(e => !Array.from(e.children).some(has)); "
             "return e ? (e.textContent || '').trim() : ''; })(S.toLowerCase())",
}


def _html_parse(ask, spec: dict, url: str) -> dict:
    """OSWorld's html-parse result for one page; `ask(query, selector)` runs a PAGE_QUERIES entry there."""
    out: dict = {}

    def pick(values: list, index) -> str:
        i = int(index)
        return values[i] if -len(values) <= i < len(values) else ""

    category = spec.get("category")
    if category == "class":
        for key, query in (("class_multiObject", "texts"), ("class_multiObject_child", "direct_text_nodes"),
                           ("class_multiObject_only_child", "only_child")):
            for cls, slots in (spec.get(key) or {}).items():
                values = ask(query, "." + cls)
                out.update({name: pick(values, index) for index, name in slots.items()})
        for cls, labels in (spec.get("class_multiObject_search_exist") or {}).items():
            values = ask("texts", "." + cls)
            for label in labels:
                if label == "is_other_exist":
                    out[label] = any(v not in labels for v in values)
                else:
                    out[label] = label in values
        for cls, name in (spec.get("class_singleObject") or {}).items():
            out[name] = pick(ask("texts", "." + cls), 0)
    elif category == "label":
        out.update({name: ask("label", text) for text, name in (spec.get("labelObject") or {}).items()})
    elif category in ("xpath", "input"):
        objects = spec.get("xpathObject" if category == "xpath" else "inputObject") or {}
        out.update({name: ask(category, path) for path, name in objects.items()})
    elif category == "class&url":
        for key, query in (("class_multiObject", "texts"), ("class_multiObject_li", "li")):
            for cls, labels in (spec.get(key) or {}).items():
                values = ask(query, "." + cls)
                for label in labels:
                    if any(v.lower() == label.lower() for v in values):
                        out[label.lower()] = True
                others = any(all(v.lower() not in item.lower() for item in labels) for v in values)
                out["is_other_exist"] = True if others else out.get("is_other_exist", False)
        for key in spec.get("url_include_expected") or []:
            out.setdefault(key.lower(), key.lower() in url.lower())
        for part, label in (spec.get("url_include_expected_multichoice") or {}).items():
            out.setdefault(label.lower(), part.lower() in url.lower())  # the first writer wins, as OSWorld's
    return out


@getter("active_tab_html_parse", goto_prefix=(check_any, False), category=(check_any, True))
def active_tab_html_parse(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> dict | None:
    """Values the rule names, read from the page the address bar shows (by class, label, xpath or input)."""
    url = active_url(desktop, spec)
    if not isinstance(url, str):
        return None
    try:
        devtools = browser(desktop, budget, wait_s=5.0)
        tabs = devtools.tabs()
    except DevToolsError:
        return {}
    tab = next((t for t in tabs if unquote(t["url"]).rstrip("/") == unquote(url).rstrip("/")), None)
    if tab is None:
        return {}
    _wait_loaded(devtools, tab, budget)

    def ask(query: str, selector: str):
        try:
            return devtools.evaluate(tab, f"(S => {PAGE_QUERIES[query]})({json.dumps(selector)})")
        except DevToolsError:
            return [] if query in ("texts", "direct_text_nodes", "only_child", "li") else ""

    return _html_parse(ask, spec, tab["url"])


@getter("time_diff_range", diff_range_in_minutes=(check_any, True))
def time_diff_range(desktop: "Desktop", spec: dict, out: Path, budget: Budget):
    return spec["diff_range_in_minutes"]


@getter("open_tabs_info")
def open_tabs_info(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> list[dict]:
    """The tabs of the browser's windows on the screen, oldest first: a window moved off the screen or
    minimised shows the task nothing (a window covered by another is not told apart: which X window is
    the browser's, the X server cannot say, and the browser does not know what covers it)."""
    try:
        devtools = browser(desktop, budget, wait_s=5.0)
        tabs = [t for t in devtools.tabs() if _on_screen(devtools.window(t), desktop.width, desktop.height)]
    except DevToolsError:
        return []
    return [{"title": t.get("title", ""), "url": t.get("url", "")} for t in reversed(tabs)]  # oldest first


def _on_screen(bounds: dict, width: int, height: int) -> bool:
    """Whether a window with these bounds (DevTools') shows on a screen of width x height: not minimised, and
    at least half of it on the screen (the window manager keeps a corner of one moved away in sight)."""
    if bounds.get("windowState") == "minimized":
        return False
    left, top, w, h = (bounds.get(k, 0) for k in ("left", "top", "width", "height"))
    shown = max(0, min(left + w, width) - max(left, 0)) * max(0, min(top + h, height) - max(top, 0))
    return w > 0 and h > 0 and 2 * shown >= w * h


@getter("page_info", url=(check_string, True))
def page_info(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> dict:
    """The page at `url`, loaded in a new tab of the user's browser (their cookies), then closed."""
    try:
        devtools = browser(desktop, budget, wait_s=5.0)
        tab = devtools.open(spec["url"])
    except DevToolsError:
        return {"title": "Connection failed", "url": spec["url"], "content": ""}
    try:
        _wait_loaded(devtools, tab, budget)
        return {"title": devtools.evaluate(tab, "document.title"), "url": devtools.evaluate(tab, "location.href"),
                "content": devtools.evaluate(tab, "document.documentElement.outerHTML")}
    except DevToolsError:
        return {"title": "Error encountered", "url": spec["url"], "content": ""}
    finally:
        devtools.close(tab["id"])


@getter("pdf_from_url", path=(check_string, True), dest=(check_any, False))
def pdf_from_url(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str | None:
    """The page at `path`, loaded in a new tab and printed to PDF by the browser; None when it cannot be.
    Departures: the user's own browser prints it (OSWorld's opens a fresh context), and a page that
    fails gives None where OSWorld's writes a 15-byte stand-in PDF."""
    try:
        devtools = browser(desktop, budget, wait_s=5.0)
        tab = devtools.open(spec["path"])
    except DevToolsError:
        return None
    try:
        _wait_loaded(devtools, tab, budget)
        data = base64.b64decode(devtools.call(tab, "Page.printToPDF")["data"])
    except (DevToolsError, KeyError, ValueError):
        return None
    finally:
        devtools.close(tab["id"])
    target = Path(tempfile.mkdtemp(dir=out)) / Path(spec.get("dest") or "page.pdf").name
    target.write_bytes(data)
    return str(target)


# ---- the profile's files ----------------------------------------------------------------------
PROFILE_FILE_LIMIT = 16 << 20  # bytes of a profile file parsed here (Chrome's own are far smaller)
QUERY_S, QUERY_ROWS = 5.0, 100_000  # a query on the agent's database: its time and rows, at most


def _json_file(desktop: "Desktop", path: str) -> Any:
    data = desktop.sandbox.read(path, limit=PROFILE_FILE_LIMIT + 1)
    if data is None or len(data) > PROFILE_FILE_LIMIT:
        return None
    return json.loads(data)


def _preference(name: str, path: str, pick, fallback) -> None:
    """A getter reading one value of a profile JSON file; `fallback` on any failure, as OSWorld's."""
    @getter(name)
    def read(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> Any:
        try:
            return pick(_json_file(desktop, path))
        except (TypeError, KeyError, AttributeError, ValueError, RecursionError):
            return fallback


def check_flag(value) -> str:
    return "true" if value else "false"


PREFERENCES, LOCAL_STATE = f"{DEFAULT}/Preferences", f"{PROFILE}/Local State"
_preference("default_search_engine", PREFERENCES,
            lambda p: p.get("default_search_provider_data", {}).get("template_url_data", {}).get("short_name", "Google"),
            "Google")
_preference("profile_name", PREFERENCES, lambda p: p.get("profile", {}).get("name"), None)
_preference("enabled_experiments", LOCAL_STATE, lambda s: s.get("browser", {}).get("enabled_labs_experiments", []), [])
_preference("chrome_language", LOCAL_STATE, lambda s: s.get("intl", {}).get("app_locale", "en-US"), "en-US")
_preference("chrome_font_size", PREFERENCES, lambda p: p.get("webkit", {}).get("webprefs", {
    "default_fixed_font_size": 13, "default_font_size": 16, "minimum_font_size": 13}),
    {"default_fixed_font_size": 13, "default_font_size": 16})
_preference("enable_do_not_track", PREFERENCES, lambda p: check_flag(p.get("enable_do_not_track")), "false")
_preference("enable_enhanced_safety_browsing", PREFERENCES,
            lambda p: check_flag(p.get("safebrowsing", {}).get("enhanced")), "Google")  # sic: OSWorld's fallback
_preference("enable_safe_browsing", PREFERENCES, lambda p: check_flag(
    p.get("safebrowsing", {}).get("enhanced") or p.get("safebrowsing", {}).get("enabled")), "false")
_preference("new_startup_page", PREFERENCES, lambda p: check_flag(
    "session" not in p or p["session"].get("restore_on_startup") == 5), "Google")
# "Delete cookies and site data when Chrome closes": the cookies content setting at 4 (SESSION_ONLY). OSWorld's
# getter takes any content setting at all, which the fresh profile of this desktop's Chromium already holds: its
# task would start solved (`tasks check --run`).
_preference("data_delete_automacally", PREFERENCES,  # sic: OSWorld's name and fallback
            lambda p: check_flag(p["profile"].get("default_content_setting_values", {}).get("cookies") == 4), "Google")
_preference("find_unpacked_extension_path", PREFERENCES,
            lambda p: [e["path"] for e in p["extensions"]["settings"].values()], "Google")
_preference("find_installed_extension_name", PREFERENCES,
            lambda p: [e["manifest"]["name"] for e in p["extensions"]["settings"].values()], "Google")


@getter("shortcuts_on_desktop")
def shortcuts_on_desktop(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> dict[str, str]:
    """Every launcher on the desktop (~/Desktop/*.desktop): file name -> its text."""
    from computerrl.tasks.setup import execute

    listing = execute(desktop, budget, ["find", "/home/user/Desktop", "-maxdepth", "1", "-name", "*.desktop",
                                        "-xtype", "f", "-printf", "%f\\n"])  # links to launchers count too
    files = {name: desktop.sandbox.read(f"/home/user/Desktop/{name}", limit=1 << 20) for name in listing.splitlines()}
    return {name: data.decode(errors="replace") for name, data in files.items() if data is not None}


@getter("bookmarks")
def bookmarks(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> Any:
    data = _json_file(desktop, f"{DEFAULT}/Bookmarks")
    return data["roots"] if data else []


def _query(desktop: "Desktop", paths: list[str], table: str, sql: str, out: Path) -> list | None:
    """The rows of a query on a copy of the first of the profile's SQLite files that exists; None if none does
    or it cannot be read. The file is the agent's: `table` must be a plain table (a view could compute
    forever), and the query gets QUERY_S seconds and QUERY_ROWS rows."""
    from computerrl.envs.desktop.sandbox import SandboxError

    for path in paths:
        copy = Path(tempfile.mkdtemp(dir=out)) / Path(path).name
        try:  # in pieces: the agent's database never sits whole in the server's memory
            if desktop.sandbox.copy_out(path, copy, 256 << 20) is None:
                continue
        except SandboxError:
            return None
        deadline = time.monotonic() + QUERY_S
        try:
            with contextlib.closing(sqlite3.connect(f"file:{copy}?mode=ro", uri=True)) as conn:
                conn.set_progress_handler(lambda: time.monotonic() > deadline, 10_000)  # nonzero: interrupt
                kind = conn.execute("SELECT type FROM sqlite_master WHERE name = ?", (table,)).fetchone()
                if kind != ("table",):
                    return None
                return [list(row) for row in conn.execute(sql).fetchmany(QUERY_ROWS)]
        except sqlite3.Error:
            return None
    return None


@getter("history", dest=(check_any, False))
def history(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> list | None:
    return _query(desktop, [f"{DEFAULT}/History"], "urls", "SELECT url, title, last_visit_time FROM urls", out)


@getter("cookie_data", dest=(check_any, False))
def cookie_data(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> list | None:
    return _query(desktop, [f"{DEFAULT}/Cookies", f"{DEFAULT}/Network/Cookies"], "cookies", "SELECT * FROM cookies", out)


