"""The fleet's web console over a real two-server fleet (`spawn-envs --detach --console`), looked at in
headless Chromium: the desktops with live thumbnails, a restart from the page, the work in flight, the
token, /metrics, and drain / scale / remove carried out by the supervisor and followed by a pool."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest

from conftest import wait_until
from computerrl.apis.parser import format_answer
from computerrl.data.schemas import Decision
from computerrl.envs.desktop.devtools import WebSocket
from computerrl.envs.fleet.console import console_token
from computerrl.envs.fleet.manifest import read_manifest
from computerrl.envs.service.client import EnvClient

pytestmark = pytest.mark.desktop
OUTPUT = Path(__file__).parent / "output"  # the page as Chromium drew it, kept with the test's output


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    from computerrl.stages.spawn_envs import SpawnEnvsConfig, run

    envs, port = tmp_path_factory.mktemp("console") / "envs", free_port()
    assert run(SpawnEnvsConfig(out=envs, count=2, detach=True, console=port, poll_s=0.5)) == 0
    url = f"http://127.0.0.1:{port}"
    assert wait_until(lambda: get(url + "/")[0] == 200, 30)
    yield envs, url
    run(SpawnEnvsConfig(out=envs, stop=True))


def get(url: str, headers: dict | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def post(url: str, fields: dict, headers: dict | None = None) -> tuple[int, str]:
    """A form post that does not follow the redirect: (status, where it leads or what it says)."""
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        request = urllib.request.Request(url, data=urlencode(fields).encode(), headers=headers or {})
        with opener.open(request, timeout=180) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("location") or e.read().decode()


class Chromium:
    """Headless Chromium driven over its DevTools protocol, one page."""

    def __init__(self, profile: Path):
        args = ["chromium", "--headless=new", "--remote-debugging-port=0", f"--user-data-dir={profile}",
                "--window-size=1500,1000", "--no-first-run", "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium's own sandbox refuses root; this browser only loads our page
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        active = profile / "DevToolsActivePort"
        assert wait_until(active.exists, 30), "Chromium did not start"
        self.port = int(active.read_text().split()[0])
        targets = json.loads(get(f"http://127.0.0.1:{self.port}/json/list")[1])
        self.ws_path = urlsplit(next(t for t in targets if t["type"] == "page")["webSocketDebuggerUrl"]).path

    def call(self, method: str, **params) -> dict:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        with WebSocket(sock, self.ws_path, self.port, time.monotonic() + 30) as ws:
            ws.send(json.dumps({"id": 1, "method": method, "params": params}))
            while True:
                message = json.loads(ws.receive())
                if message.get("id") == 1:
                    assert "error" not in message, message
                    return message["result"]

    def js(self, expression: str):
        """The expression's value in the page; None while a navigation replaces the page."""
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        with WebSocket(sock, self.ws_path, self.port, time.monotonic() + 30) as ws:
            ws.send(json.dumps({"id": 1, "method": "Runtime.evaluate",
                                "params": {"expression": expression, "returnByValue": True, "awaitPromise": True}}))
            while True:
                message = json.loads(ws.receive())
                if message.get("id") == 1:
                    result = message.get("result", {})
                    return None if "error" in message or "exceptionDetails" in result else \
                        result["result"].get("value")

    def go(self, url: str) -> None:
        """Load `url` as a new document (even the one shown), and wait until it is loaded."""
        before = self.js("performance.timeOrigin")
        self.call("Page.navigate", url=url)
        assert wait_until(lambda: self.js("performance.timeOrigin") != before and
                          self.js("document.readyState") == "complete" and self.js("location.href") == url, 30)

    def wait_for(self, expression: str, timeout_s: float = 30.0):
        value = wait_until(lambda: self.js(expression), timeout_s)
        assert value, f"never true in the page: {expression}"
        return value

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium = Chromium(tmp_path_factory.mktemp("chromium"))
    yield chromium
    chromium.close()


def test_the_page_lists_every_desktop_of_the_fleet_with_a_live_thumbnail(fleet, browser):
    envs, url = fleet
    browser.go(url + "/")
    assert browser.wait_for("document.querySelectorAll('tr.desktop').length") == 2
    rows = browser.js("[...document.querySelectorAll('tr.desktop')].map(r => r.innerText)")
    assert "env-000" in rows[0] and "env-001" in rows[1] and all("healthy" in r and "127.0.0.1" in r for r in rows)
    loaded = "[...document.querySelectorAll('tr.desktop img')].filter(i => i.complete && i.naturalWidth == 240)"
    assert browser.wait_for(f"{loaded}.length == 2")
    browser.screenshot(OUTPUT / "console.png")
    assert console_token(envs) not in browser.js("document.documentElement.outerHTML")


def test_no_action_without_the_token_and_no_page_on_a_wider_bind(fleet):
    envs, url = fleet
    token = console_token(envs)
    for fields in ({"action": "restart", "env_id": "env-000", "desktop": 0},
                   {"action": "remove", "env_id": "env-001", "token": "guess"}):
        status, said = post(url + "/action", fields)
        assert status == 403 and "token" in said
    # The signed-in cookie, sent by a page of another origin (another port of this machine, say): refused.
    cross = {"Cookie": f"computerrl_console={token}", "Origin": "http://127.0.0.1:1"}
    assert post(url + "/action", {"action": "remove", "env_id": "env-001"}, cross)[0] == 403
    assert {h.env_id for h in read_manifest(envs)[0]} == {"env-000", "env-001"}
    assert all(token not in get(url + path)[1] for path in ("/", "/fleet", "/login", "/metrics"))

    port = free_port()  # `computerrl console` in a process of its own, as people run it
    command = [Path(sys.executable).parent / "computerrl", "console", "--envs", envs, "--host", "0.0.0.0", "--port", port]
    wide = subprocess.Popen(list(map(str, command)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lan = f"http://127.0.0.1:{port}"
        assert wait_until(lambda: get(lan + "/login")[0] == 200, 30)
        assert get(lan + "/metrics")[0] == 401 and get(lan + "/fleet")[0] == 401
        status, page = get(lan + "/")
        assert status == 200 and "sign in" in page and "env-000" not in page  # sent to the sign-in form
        status, metrics = get(lan + "/metrics", {"Authorization": f"Bearer {token}"})
        assert status == 200 and "computerrl_desktop_healthy" in metrics and "env-001" in metrics
    finally:
        wide.terminate()
        try:
            said = wide.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            wide.kill()
            said = wide.communicate()[0]
    assert "no certificate" in said  # a plain-HTTP wide bind is warned of


def test_metrics_give_the_fleet_in_prometheus_format(fleet):
    from prometheus_client.parser import text_string_to_metric_families

    status, text = get(fleet[1] + "/metrics")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert status == 200
    up = {(s.labels["env_id"], s.labels["host"], s.labels["backend"]): s.value
          for s in families["computerrl_server_up"].samples}
    assert up == {("env-000", "127.0.0.1", "local"): 1.0, ("env-001", "127.0.0.1", "local"): 1.0}
    assert [s.value for s in families["computerrl_desktop_healthy"].samples] == [1.0, 1.0]
    assert all(s.value > 0 for s in families["computerrl_server_uptime_seconds"].samples)
    resets = {(s.labels["env_id"], s.labels["how"]) for s in families["computerrl_desktop_resets"].samples}
    assert resets == {(e, how) for e in ("env-000", "env-001") for how in ("spare", "in_place")}


def test_the_supervisor_says_how_its_desktops_reset_and_why_none_is_restored(fleet):
    said = " ".join((fleet[0] / "supervisor.log").read_text().split())  # as wrapped for a terminal
    assert "each reset kills the desktop's processes and empties its folders (--reset in-place)" in said
    assert "no reset restores a checkpoint: CRIU cannot dump" in said


def test_a_restart_from_the_page_replaces_the_desktop_and_the_page_shows_it(fleet, browser):
    envs, url = fleet
    handle = next(h for h in read_manifest(envs)[0] if h.env_id == "env-000")
    client = EnvClient(handle.address, handle.token)
    before = client.health().desktops[0].replacements
    browser.go(url + "/")
    assert browser.js("document.querySelectorAll('tr.desktop form').length") == 0  # not signed in: no actions
    status, said = post(url + "/action", {"action": "restart", "env_id": "env-000", "desktop": 0})
    assert status == 403 and client.health().desktops[0].replacements == before
    browser.go(url + "/login")
    browser.js(f"document.querySelector('input[name=token]').value = {json.dumps(console_token(envs))}; "
               "document.querySelector('form').submit()")
    browser.wait_for("location.pathname == '/' && document.querySelectorAll('tr.desktop form').length > 0")
    browser.js("document.querySelector('tr.desktop[data-env=\"env-000\"] form.restart button').click()")
    said = browser.wait_for("location.search.includes('said') && document.querySelector('.said').innerText", 180)
    assert said == "env-000 desktop 0: restarted"
    assert client.health().desktops[0].replacements == before + 1
    assert browser.wait_for("document.querySelector('tr.desktop[data-env=\"env-000\"]').innerText"
                            ".includes('rebuilt: a fresh desktop was asked for (restarted from the console)')")
    client.close()


class WaitingPolicy:
    """Exits at once, but only after the test has looked at the page: the eval stays in flight until then."""

    version = engine_name = "waiting"

    def __init__(self):
        self.go = threading.Event()

    def act(self, instruction, observation, history) -> Decision:
        self.go.wait(120)
        return Decision([], format_answer("Agent.exit(False)"))

    def episode(self):
        return contextlib.nullcontext()

    def close(self):
        pass


def test_the_page_shows_which_eval_uses_the_fleet_and_how_far_it_is(fleet, tmp_path):
    from computerrl.data.journal import Journal
    from computerrl.play.trajectories import play_on_envs
    from computerrl.tasks.task_set import TaskItem

    envs, url = fleet
    task = {"id": "look", "instruction": "Give up.", "evaluator": {"func": "infeasible"}}
    jobs = [(TaskItem(f"look-{i}", "calc", {**task, "id": f"look-{i}"}), 0) for i in range(3)]
    policy, out = WaitingPolicy(), tmp_path / "eval-out"
    play = threading.Thread(target=play_on_envs, args=(envs, policy, jobs, Journal(tmp_path / "journal", {})),
                            kwargs=dict(stage="eval", out=out, max_steps=2))
    play.start()
    try:
        row = wait_until(lambda: [line for line in get(url + "/fleet")[1].splitlines() if str(out) in line], 30)
        assert row and "<td>eval</td>" in row[0] and "<td>0</td><td>3</td>" in row[0]  # none done, 3 left
        shown = wait_until(lambda: "look-0 · 0" in (page := get(url + "/fleet")[1]) and page, 120)
        assert shown  # a desktop shows the task it plays, at step 0
    finally:
        policy.go.set()
        play.join(120)
    assert not play.is_alive()
    assert wait_until(lambda: str(out) not in get(url + "/fleet")[1], 10)  # done: it leaves the page


def test_drain_scale_and_remove_from_the_console_reach_the_supervisor_and_the_pool(fleet):
    from computerrl.envs.fleet.pool import EnvPool

    envs, url = fleet
    token = console_token(envs)

    def statuses() -> dict[str, str]:
        with contextlib.suppress(OSError, ValueError):
            return read_manifest(envs)[1]
        return {}

    pool = EnvPool.from_manifest(envs)
    try:
        assert post(url + "/action", {"action": "drain", "env_id": "env-001", "token": token})[0] == 303
        assert wait_until(lambda: statuses().get("env-001") == "drained", 30), statuses()
        leased = set()
        for _ in range(4):
            with pool.lease(timeout_s=30) as env:
                leased.add(env.env_id)
        assert leased == {"env-000"}  # a pool made before the drain follows it
        fresh = EnvPool.from_manifest(envs)
        assert list(fresh.handles) == ["env-000"]  # a new pool leaves it out
        fresh.close()

        assert post(url + "/action", {"action": "undrain", "env_id": "env-001", "token": token})[0] == 303
        assert wait_until(lambda: statuses().get("env-001") == "healthy", 30)
        assert _lease_all(pool) == {"env-000", "env-001"}  # and the undrain
    finally:
        pool.close()

    assert post(url + "/action", {"action": "scale", "count": 3, "token": token})[0] == 303
    assert wait_until(lambda: statuses() == {f"env-00{i}": "healthy" for i in range(3)}, 180), statuses()
    assert post(url + "/action", {"action": "remove", "env_id": "env-002", "token": token})[0] == 303
    assert wait_until(lambda: statuses() == {"env-000": "healthy", "env-001": "healthy", "env-002": "removed"},
                      60), statuses()  # listed as removed: a pool that had it retires it at once
    assert wait_until(lambda: "env-002" not in (page := get(url + "/")[1]) and page.count("class=desktop") == 2, 10)


def _lease_all(pool) -> set[str]:
    leased = set()
    for _ in range(6):
        with pool.lease(timeout_s=30) as env:
            leased.add(env.env_id)
    return leased
