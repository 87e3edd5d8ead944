"""Chrome in a real desktop: Chromium under Google Chrome's names, real OSWorld Chrome tasks set up,
solved by a scripted agent and scored, and the getters that read the browser and its profile."""

from __future__ import annotations

import json
import sqlite3

import pytest

from conftest import play
from computerrl.envs.service.client import DesktopEnv
from computerrl.play.scripted import response
from computerrl.tasks.chrome import HISTORY_TEMPLATE

pytestmark = pytest.mark.desktop

LAUNCH = [{"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}},
          {"type": "launch", "parameters": {"command": ["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]}}]
# OSWorld's chrome/06fe7178-4491-4589-810f-2e2bc9502122.json, as it is
BRING_BACK_TAB = {
    "id": "06fe7178-4491-4589-810f-2e2bc9502122", "snapshot": "chrome",
    "instruction": "Can you make my computer bring back the last tab I shut down?",
    "config": LAUNCH + [
        {"type": "chrome_open_tabs", "parameters": {"urls_to_open": [
            "https://www.lonelyplanet.com", "https://www.airbnb.com", "https://www.tripadvisor.com"]}},
        {"type": "chrome_close_tabs", "parameters": {"urls_to_close": ["https://www.tripadvisor.com"]}}],
    "related_apps": ["chrome"],
    "evaluator": {"func": "is_expected_tabs", "result": {"type": "open_tabs_info"},
                  "expected": {"type": "rule", "rules": {"type": "url", "urls": [
                      "https://www.lonelyplanet.com", "https://www.airbnb.com", "https://www.tripadvisor.com"]}}}}
# OSWorld's chrome/12086550-11c0-466b-b367-1d9e75b3910e.json, as it is
PASSWORDS_PAGE = {
    "id": "12086550-11c0-466b-b367-1d9e75b3910e", "snapshot": "chrome",
    "instruction": "Computer, please navigate to the area in my browser settings where my passwords are stored. "
                   "I want to check my login information for Etsy without revealing it just yet.",
    "config": LAUNCH, "related_apps": ["chrome"],
    "evaluator": {"func": "is_expected_active_tab", "result": {"type": "active_url_from_accessTree", "goto_prefix": ""},
                  "expected": {"type": "rule", "rules": {"type": "url", "url": "chrome://password-manager/passwords"}}}}


@pytest.fixture
def env(server, tmp_path):
    server[0].slots[0].desktop.file_cache = tmp_path  # white box: the server's --cache
    (tmp_path / "index.json").write_text("{}")
    return DesktopEnv(server[1], 0, max_steps=30)


def test_chrome_shows_in_the_accessibility_tree_and_is_gone_after_reset(env, server):
    activate = {"type": "activate_window", "parameters": {"window_name": "Google Chrome"}}  # as OSWorld's tasks name it
    obs, _ = env.reset(options={"task": {**PASSWORDS_PAGE, "config": LAUNCH + [activate]}})
    assert obs["focused_app"] == "chromium"
    assert "Address and search bar" in obs["a11y_tree"]
    assert any(w["title"].endswith("Chromium") for w in obs["windows"])
    obs, _ = env.reset()
    assert not [w for w in obs["windows"] if "Chromium" in w["title"]]
    assert "chromium" not in server[0].slots[0].desktop.sandbox.run(["ps", "-eo", "comm"], env={}).stdout


def test_bring_back_the_closed_tab_scores_one_when_done_and_zero_when_not(env):
    reward, info = play(env, BRING_BACK_TAB, ["Agent.hotkey(['ctrl', 'shift', 't'])", "Agent.wait()",
                                              "Agent.exit(True)"])
    assert reward == 1.0, info
    reward, info = play(env, BRING_BACK_TAB, ["Agent.exit(True)"])
    assert reward == 0.0, info


def test_the_active_url_is_what_the_address_bar_shows(env):
    reward, info = play(env, PASSWORDS_PAGE, ["Agent.hotkey(['ctrl', 'l'])",
                                              "Agent.type(text='chrome://password-manager/passwords', enter=True)",
                                              "Agent.wait()", "Agent.exit(True)"])
    assert reward == 1.0, info
    reward, info = play(env, PASSWORDS_PAGE, ["Agent.hotkey(['ctrl', 'l'])",
                                              "Agent.type(text='chrome://settings/', enter=True)",
                                              "Agent.wait()", "Agent.exit(True)"])
    assert reward == 0.0, info


def _empty_history(server, tmp_path) -> None:
    """A History database of the desktop's own Chromium, emptied: the stand-in for OSWorld's cached template."""
    desktop = server[0].slots[0].desktop
    env = DesktopEnv(server[1], 0, max_steps=5)
    env.reset(options={"task": {**PASSWORDS_PAGE, "evaluator": {"func": "infeasible"},
                                "config": LAUNCH + [{"type": "sleep", "parameters": {"seconds": 2}},
                                                    {"type": "execute", "parameters": {"command": "pkill chrome",
                                                                                       "shell": True}},
                                                    {"type": "sleep", "parameters": {"seconds": 2}}]}})
    data = desktop.sandbox.read("/home/user/.config/google-chrome/Default/History")
    assert data, "Chromium wrote no History"
    (tmp_path / "history_empty.sqlite").write_bytes(data)
    with sqlite3.connect(tmp_path / "history_empty.sqlite") as conn:
        conn.execute("DELETE FROM visits")
        conn.execute("DELETE FROM urls")
    (tmp_path / "index.json").write_text(json.dumps({HISTORY_TEMPLATE: "history_empty.sqlite"}))


DELETE_HISTORY = {  # in the manner of OSWorld's chrome/44ee5668-…: delete the history of one site
    "id": "delete-youtube-history", "snapshot": "chrome", "instruction": "Delete my YouTube browsing history.",
    "config": [{"type": "update_browse_history", "parameters": {"history": [
        {"url": "https://www.youtube.com/watch?v=1", "title": "A video", "visit_time_from_now_in_seconds": 3600},
        {"url": "https://www.wikipedia.org/", "title": "Wikipedia", "visit_time_from_now_in_seconds": 60}]}}],
    "evaluator": {"func": "check_history_deleted", "result": {"type": "history", "dest": "history.sqlite"},
                  "expected": {"type": "rule", "rules": {"type": "keywords", "keywords": ["youtube"]}}}}


def test_browse_history_is_set_up_read_and_scored(env, server, tmp_path):
    _empty_history(server, tmp_path)
    delete = ("python3 -c \"import sqlite3; c = sqlite3.connect('/home/user/.config/google-chrome/Default/History'); "
              "c.execute(\\\"DELETE FROM urls WHERE url LIKE '%youtube%'\\\"); c.commit()\"")
    reward, info = play(env, DELETE_HISTORY, ["Agent.open_app('terminal')", f"Agent.type(text={delete!r}, enter=True)",
                                              "Agent.wait()", "Agent.exit(True)"])
    assert reward == 1.0, info
    reward, info = play(env, DELETE_HISTORY, ["Agent.exit(True)"])
    assert reward == 0.0, info


# OSWorld's chrome/af630914-714e-4a24-a7bb-f9af687d3b91.json, as it is: its postconfig ends Chrome with
# `pkill chrome` (here Chromium: the desktop's pkill stand-in) so that it writes its Preferences
FONT_SIZE = {
    "id": "af630914-714e-4a24-a7bb-f9af687d3b91", "snapshot": "chrome",
    "instruction": "My grandmother has been using the Chrome lately and told me that the font size is way too small "
                   "for her poor eyesight. Could you set the default font size to the largest for her?",
    "config": LAUNCH, "related_apps": ["chrome"],
    "evaluator": {"postconfig": [{"type": "launch", "parameters": {"command": ["pkill", "chrome"]}},
                                 {"type": "launch", "parameters": {"command": ["google-chrome",
                                                                               "--remote-debugging-port=1337"]}}],
                  "func": "check_font_size", "result": {"type": "chrome_font_size"},
                  "expected": {"type": "rule", "rules": {"type": "range", "min": 16, "max": 99999}}}}


# OSWorld's chrome/99146c54-4f37-4ab8-9327-5f3291665e1e.json, as it is
DELETE_ON_CLOSE = {
    "id": "99146c54-4f37-4ab8-9327-5f3291665e1e", "snapshot": "chrome", "related_apps": ["chrome"],
    "instruction": "Please help me set Chrome to delete my browsing data automatically every time I close the browser.",
    "config": LAUNCH,
    "evaluator": {"postconfig": [{"type": "execute", "parameters": {"command": "pkill chrome", "shell": "true"}}],
                  "func": "exact_match", "result": {"type": "data_delete_automacally"},
                  "expected": {"type": "rule", "rules": {"expected": "true"}}}}


def edit_preferences(env, desktop, task: dict, change: str) -> tuple[float, dict]:
    """Play `task`: the agent ends Chrome from a terminal and edits its Preferences (`change`: Python on the
    loaded dict `d`), then says done."""
    edit = ("pkill chrome; sleep 2; python3 -c \"import json; p = '/home/user/.config/google-chrome/Default/Preferences'; "
            f"d = json.load(open(p)); {change}; json.dump(d, open(p, 'w'))\"; touch /tmp/through")
    return play(env, task, ["Agent.open_app('terminal')", f"Agent.type(text={edit!r}, enter=True)", "Agent.exit(True)"],
                wait_for=(desktop, "/tmp/through", 10))


def test_delete_data_on_close_is_the_cookies_setting_not_any_content_setting_a_fresh_profile_has(env, server):
    reward, info = play(env, DELETE_ON_CLOSE, ["Agent.exit(True)"])
    assert reward == 0.0, info  # OSWorld's getter scores this untouched start 1
    reward, info = edit_preferences(env, server[0].slots[0].desktop, DELETE_ON_CLOSE,
                                    "d['profile'].setdefault('default_content_setting_values', {})['cookies'] = 4")
    assert reward == 1.0, info


def test_a_preference_written_by_chrome_is_read_from_its_profile(env, server):
    reward, info = edit_preferences(env, server[0].slots[0].desktop, FONT_SIZE,
                                    "d.setdefault('webkit', {}).setdefault('webprefs', {})['default_font_size'] = 72")
    assert reward == 1.0, info
    reward, info = play(env, FONT_SIZE, ["Agent.exit(True)"])
    assert reward == 0.0, info


def test_browser_tools_open_pages_and_press_the_browsers_shortcuts(env, server):
    obs, _ = env.reset(options={"task": BRING_BACK_TAB})
    assert "lonelyplanet" in obs["app_info"], obs["app_info"]  # the open tabs
    for call, shown in (("BrowserTools.open_privacy_settings()", "chrome://settings/privacy"),
                        ("BrowserTools.open_bookmarks()", "chrome://bookmarks")):
        obs, _, _, _, info = env.step(response(call))
        assert info["action_valid"] and not info["aborted"], info
        assert shown in obs["app_info"], obs["app_info"]
    from computerrl.tasks.chrome import address_bar

    assert address_bar(server[0].slots[0].desktop) == "chrome://bookmarks"
    obs, reward, terminated, _, info = env.step(response("BrowserTools.bring_back_last_tab()"))
    assert "tripadvisor" in obs["app_info"], obs["app_info"]


def test_browser_tools_are_offered_when_the_browser_is_focused():
    from computerrl.policy.prompt import api_classes

    assert api_classes("chromium")[-1] == "BrowserTools"


def test_a_fake_devtools_of_the_agents_is_not_believed(env, server):
    """The agent ends Chrome and answers on its DevTools port with the tabs the task wants: the getter
    must not take its word (it would score 1.0 without doing the task)."""
    urls = BRING_BACK_TAB["evaluator"]["expected"]["rules"]["urls"]
    fake = ("pkill chrome; sleep 2; python3 -c \"import http.server as h, json; "
            f"b = json.dumps([{{'type': 'page', 'title': '', 'url': u}} for u in {urls!r}]).encode(); "
            "H = type('H', (h.BaseHTTPRequestHandler,), {'do_GET': lambda s: (s.send_response(200), s.end_headers(), "
            "s.wfile.write(b))}); h.HTTPServer(('127.0.0.1', 1337), H).serve_forever()\" &")
    env.reset(options={"task": BRING_BACK_TAB})
    for code in ("Agent.open_app('terminal')", f"Agent.type(text={fake!r}, enter=True)", "Agent.wait()",
                 "Agent.wait()", "Agent.wait()"):
        env.step(response(code))
    with server[0].slots[0].desktop.sandbox.connect(1337) as s:  # no check of who answers: the forgery is live
        s.sendall(b"GET /json/list HTTP/1.0\r\n\r\n")
        assert b"tripadvisor" in b"".join(iter(lambda: s.recv(65536), b""))
    _, reward, _, _, info = env.step(response("Agent.exit(True)"))
    assert reward == 0.0, info


PAGE = b"""<html><head><title>Flights</title></head><body>
<div class="city">Seattle</div><div class="city">New York</div><p class="date">Tue, Dec 1</p>
<form><input id="name" value=" Ada "></form><main><section><p>from SEA</p></section></main></body></html>"""
PARSE_TASK = {  # in the manner of OSWorld's flight-search tasks: values read off the page the address bar shows
    "id": "html-parse", "snapshot": "chrome", "instruction": "Search flights from Seattle to New York.",
    # the address bar shows a file's path: the prefix makes it a URL again
    "config": LAUNCH,
    "evaluator": {"func": "check_direct_json_object",
                  "result": {"type": "active_tab_html_parse", "goto_prefix": "file://", "category": "class",
                             "class_singleObject": {"date": "time"},
                             "class_multiObject": {"city": {"0": "start", "1": "end"}}},
                  "expected": {"type": "rule", "rules": {"expected": {"start": "Seattle", "end": "New York",
                                                                      "time": "Tue, Dec 1"}}}}}


def test_values_are_read_off_the_page_the_address_bar_shows(env, server):
    from computerrl.tasks.chrome import active_tab_html_parse
    from computerrl.tasks.setup import Budget

    desktop = server[0].slots[0].desktop

    def visit(page: bytes) -> None:
        env.reset(options={"task": PARSE_TASK})
        desktop.sandbox.write("/home/user/flights.html", page)  # the page the agent's search led to
        for code in ("Agent.hotkey(['ctrl', 'l'])", "Agent.type(text='file:///home/user/flights.html', enter=True)",
                     "Agent.wait()"):
            env.step(response(code))

    def parse(**spec):
        return active_tab_html_parse(desktop, {"goto_prefix": "file://", **spec}, None, Budget.of())

    visit(PAGE)
    assert parse(category="xpath", xpathObject={"/html/body/main/section/p": "from"}) == {"from": "from SEA"}
    assert parse(category="input", inputObject={"//input[@id='name']": "name"}) == {"name": "Ada"}
    assert parse(category="label", labelObject={"new york": "city"}) == {"city": "New York"}
    _, reward, _, _, info = env.step(response("Agent.exit(True)"))
    assert reward == 1.0, info
    visit(PAGE.replace(b"New York", b"Boston"))
    _, reward, _, _, info = env.step(response("Agent.exit(True)"))
    assert reward == 0.0, info


def test_the_launchers_on_the_desktop_are_read(env, server):
    from computerrl.tasks.chrome import shortcuts_on_desktop
    from computerrl.tasks.setup import Budget

    desktop = server[0].slots[0].desktop
    env.reset()
    desktop.sandbox.write("/home/user/Desktop/game.desktop", b"[Desktop Entry]\nName=2048\n")
    desktop.sandbox.write("/home/user/Desktop/notes.txt", b"not a launcher")
    got = shortcuts_on_desktop(desktop, {"type": "shortcuts_on_desktop"}, None, Budget.of(trusted=True))
    assert got == {"game.desktop": "[Desktop Entry]\nName=2048\n"}


def test_a_page_is_printed_to_pdf_by_the_browser(env, server, tmp_path):
    from computerrl.tasks.chrome import pdf_from_url
    from computerrl.tasks.metrics.media import compare_pdfs, pdf_text
    from computerrl.tasks.setup import Budget

    desktop = server[0].slots[0].desktop
    env.reset(options={"task": {**PASSWORDS_PAGE, "evaluator": {"func": "infeasible"}}})
    desktop.sandbox.write("/home/user/flights.html", PAGE)
    pdf = pdf_from_url(desktop, {"path": "file:///home/user/flights.html", "dest": "f.pdf"}, tmp_path,
                       Budget.of(trusted=True))
    assert "Seattle" in pdf_text(pdf) and "Tue, Dec 1" in pdf_text(pdf)
    assert compare_pdfs(pdf, pdf) == 1.0
    desktop.sandbox.write("/home/user/flights.html", PAGE.replace(b"Seattle", b"Boston and Chicago"))
    other = pdf_from_url(desktop, {"path": "file:///home/user/flights.html", "dest": "g.pdf"}, tmp_path,
                         Budget.of(trusted=True))
    assert 0.5 < compare_pdfs(other, pdf) < 1.0  # partial credit, as OSWorld's
    assert compare_pdfs(None, pdf) == 0.0


# `opened`: the browser started and the agent's tabs opened in it (False: the desktop's launcher refused to start it)
@pytest.mark.parametrize("browser,opened,counted,then", [
    ("chromium --headless=new", False, False, ""),  # as the issue found it; the launcher now refuses it
    ("chromium --ozone-platform=headless", False, False, ""),  # windows drawn nowhere: refused too
    ("Xvfb :99 & sleep 1; DISPLAY=:99 /usr/bin/chromium", True, False, ""),  # windows on a screen of the agent's own
    # the desktop's `chromium`: launched by the desktop's session, in the desktop's environment, so on its screen
    ("Xvfb :99 & sleep 1; DISPLAY=:99 chromium", True, True, ""),
    ("chromium", True, True, ""),  # a browser the task sees
    # Issue 43 row 3: started by the agent, however genuinely (the desktop's own launcher script, on the
    # desktop's screen), a browser whose memory the agent can write is not believed (it was before)
    ("/run/desktop/compat/apps/chromium", True, False, ""),
    # an option that makes the browser run a program of the agent's as its own child: the launcher refuses it
    ("chromium --renderer-cmd-prefix=/usr/bin/env", False, False, ""),
    # the desktop's, its window then moved all but a corner off the screen, or minimised
    ("chromium", True, False, "wmctrl -x -r chromium -b remove,maximized_vert,maximized_horz; sleep 1; "
                              "xdotool search --class chromium windowmove %@ -5000 -5000"),
    ("chromium", True, False, "xdotool search --class chromium windowminimize %@"),
])
def test_only_tabs_of_a_browser_on_the_screen_count(env, server, browser, opened, counted, then):
    """The agent ends Chrome and opens the tabs the task wants, through DevTools, in a Chromium of its
    own: they count only when the desktop launched that browser and it shows them on the desktop's screen
    (`then`: what the agent does to the browser's window afterwards). It waits for its command to end: the
    tabs opened (/tmp/opened), or the desktop's launcher refusing the browser (/tmp/refused), whichever the
    case expects, so that a tab not counted is not counted for the reason the case names."""
    urls = BRING_BACK_TAB["evaluator"]["expected"]["rules"]["urls"]
    devtools = "import urllib.request as r; u = 'http://127.0.0.1:1337/json/'"
    command = (f"pkill chrome; sleep 1; ({browser} --remote-debugging-port=1337 --user-data-dir=/tmp/cx {urls[0]} "
               f"|| touch /tmp/refused) & "
               f"for i in $(seq 40); do [ -e /tmp/refused ] && break; "
               f"python3 -c \"{devtools}; r.urlopen(u + 'list')\" 2>/dev/null && break; sleep 0.5; done; "
               f"python3 -c \"{devtools}; [r.urlopen(r.Request(u + 'new?' + t, method='PUT')) for t in {urls[1:]!r}]\" "
               f"&& touch /tmp/opened" + (f"; sleep 1; {then}" if then else "") + "; touch /tmp/through")
    desktop = server[0].slots[0].desktop
    reward, info = play(env, BRING_BACK_TAB, ["Agent.open_app('terminal')", f"Agent.type(text={command!r}, enter=True)",
                                              "Agent.exit(True)"], wait_for=(desktop, "/tmp/through", 20))
    assert [desktop.sandbox.read(f"/tmp/{marker}", limit=0) is not None for marker in ("opened", "refused")] == \
        [opened, not opened], desktop.terminal_output()
    assert reward == float(counted), info
