"""A real desktop behind the env service: GUI actions, observation, reset, crashes."""

from __future__ import annotations

import io
import os
import signal
from pathlib import Path

import pytest
from PIL import Image

from conftest import act, home_of, descendants, node_center, wait_until
from computerrl.envs.fleet.pool import wait_healthy
from computerrl.play.scripted import response

pytestmark = pytest.mark.desktop


def office(server):
    return server[0].slots[0].desktop.office.desktop


def current_doc(server):
    return office(server).getCurrentComponent()


def dark_pixels(png: bytes, x: int, y: int, half_w: int = 30, half_h: int = 7) -> int:
    img = Image.open(io.BytesIO(png)).convert("L").crop((x - half_w, y - half_h, x + half_w, y + half_h))
    return sum(1 for p in img.tobytes() if p < 100)


def test_typing_into_a_calc_cell_shows_in_screenshot_and_tree(env, server):
    env.screenshot = True
    try:
        env.reset()
        obs, _ = act(env, "Agent.open_app('calc')")
        assert obs["focused_app"] == "calc"
        before = obs["screenshot"]
        obs, info = act(env, "Agent.type(text='Hello42', enter=True)")
    finally:
        env.screenshot = False
    assert info["exec_result"].startswith("Typed 7 characters")
    assert "Hello42" in obs["a11y_tree"]
    x, y = node_center(obs["a11y_tree"], "Hello42")
    after = obs["screenshot"]
    assert Image.open(io.BytesIO(after)).size == (1920, 1080)
    assert dark_pixels(before, x, y) == 0 and dark_pixels(after, x, y) > 15, "the text is not drawn in the cell"
    assert current_doc(server).Sheets.getByIndex(0).getCellRangeByName("A1").String == "Hello42"


def test_click_drag_and_scroll_in_calc(env, server):
    env.reset()
    act(env, "Agent.open_app('calc')")
    sheet = current_doc(server).Sheets.getByIndex(0)
    sheet.getCellRangeByName("C5").String = "start"
    sheet.getCellRangeByName("E9").String = "end"
    obs, _ = act(env, "Agent.wait()")
    start, end = node_center(obs["a11y_tree"], "start"), node_center(obs["a11y_tree"], "end")

    act(env, f"Agent.click({list(end)})")
    assert current_doc(server).CurrentSelection.AbsoluteName.endswith("$E$9")

    act(env, f"Agent.drag_and_drop({list(start)}, {list(end)})")
    assert current_doc(server).CurrentSelection.AbsoluteName.endswith("$C$5:$E$9")

    controller = current_doc(server).CurrentController
    assert controller.getFirstVisibleRow() == 0
    act(env, "Agent.scroll([900, 500], 'down')")
    assert wait_until(lambda: controller.getFirstVisibleRow() > 0)


def test_a_vision_models_click_on_a_0_1000_grid_lands_where_it_says(env, server):
    """A vision model answers in its own frame (a 0-1000 grid over the screenshot): the env maps the
    parsed point onto the screen, and the click selects the cell the model pointed at."""
    env.reset()
    act(env, "Agent.open_app('calc')")
    current_doc(server).Sheets.getByIndex(0).getCellRangeByName("F12").String = "target"
    obs, _ = act(env, "Agent.wait()")
    x, y = node_center(obs["a11y_tree"], "target")
    grid = [round(x * 1000 / 1920), round(y * 1000 / 1080)]
    _, _, _, _, info = env.step(response(f"Agent.click({grid})"), frame=(1000, 1000))
    assert current_doc(server).CurrentSelection.AbsoluteName.endswith("$F$12")
    clicked = info["action"]["args"]["coordinates"]  # the row's action: where it clicked on the screen
    assert abs(clicked[0] - x) <= 1 and abs(clicked[1] - y) <= 1


def test_type_overwrite_and_hotkey_in_writer(env, server):
    env.reset()
    act(env, "Agent.open_app('writer')")
    act(env, "Agent.type(text='Draft 7')")
    text = lambda: current_doc(server).Text.String  # noqa: E731
    assert wait_until(lambda: text() == "Draft 7")
    act(env, "Agent.type(text='Final', overwrite=True)")
    assert wait_until(lambda: text() == "Final")
    act(env, "Agent.hotkey(['ctrl', 'a'])")
    act(env, "Agent.hotkey(['ctrl', 'b'])")
    para = current_doc(server).Text.createEnumeration().nextElement()
    assert para.CharWeight == 150.0  # com.sun.star.awt.FontWeight.BOLD


def test_open_app_switch_window_quote_wait_exit(env):
    env.reset()
    obs, _ = act(env, "Agent.open_app('calc')")
    calc_id = next(w["id"] for w in obs["windows"] if w["focused"])
    obs, _ = act(env, "Agent.open_app('terminal')")
    assert obs["focused_app"] == "terminal"
    assert {w["app"] for w in obs["windows"]} >= {"calc", "terminal"}
    obs, info = act(env, f"Agent.switch_window('{calc_id}')")
    assert obs["focused_app"] == "calc", info
    _, info = act(env, "Agent.quote('the total is 42')")
    assert "the total is 42" in info["exec_result"]
    _, info = act(env, "Agent.wait()")
    assert info["elapsed_s"] >= 1.0
    obs, reward, terminated, truncated, info = env.step(response("Agent.exit(True)"))
    assert terminated and not truncated and info["exit_success"]


def test_unknown_app_and_window_are_reported_not_crashed(env):
    env.reset()
    _, info = act(env, "Agent.open_app('photoshop')")
    assert "unknown app 'photoshop'" in info["exec_result"] and "calc" in info["exec_result"]
    _, info = act(env, "Agent.switch_window('0x7777777')")
    assert info["exec_result"].startswith("Action failed: no window")


def test_invalid_action_is_reported_and_never_executed(env, tmp_path):
    env.reset()
    marker = tmp_path / "pwned"
    for bad in (f"__import__('os').system('touch {marker}')", "Agent.click()", "Agent.open_app('calc'); x = 1",
                f"Agent.type(text=open('{marker}', 'w').write('x'))", f"Agent.type(text='{'x' * 2001}')"):
        obs, reward, terminated, truncated, info = env.step(response(bad))
        assert not info["action_valid"] and info["exec_result"].startswith("Invalid action:"), bad
        assert obs["last_result"] == info["exec_result"] and reward == 0.0
    assert not marker.exists()


def test_reset_leaves_no_trace(env, server):
    desktop = server[0].slots[0].desktop
    env.reset()
    act(env, "Agent.open_app('terminal')")
    act(env, "Agent.type(text='echo trace > ~/Documents/trace.txt', enter=True)")
    assert wait_until(lambda: (home_of(desktop) / "Documents" / "trace.txt").exists())
    act(env, "Agent.open_app('writer')")
    act(env, "Agent.type(text='left over')")
    obs, _ = env.reset()
    assert obs["windows"] == [] and obs["focused_app"] == ""
    assert sorted(p.name for p in home_of(desktop).iterdir()) == sorted(
        ["Desktop", "Documents", "Downloads", "Music", "Pictures", "Videos"])
    assert not any(home_of(desktop).rglob("*.*"))
    running = desktop.sandbox.run(["ps", "-eo", "comm="], env=desktop.env).stdout.split()
    assert not {"xterm", "bash", "soffice.bin"} & set(running), running  # the terminal, its shell, the office
    assert list(_iterate(office(server).Components)) == []  # the office, started again, holds no document


def test_reset_closes_documents_behind_a_modal_dialog(env, server):
    env.reset()
    act(env, "Agent.open_app('calc')")
    act(env, "Agent.hotkey(['ctrl', '1'])")  # Format Cells: modal, it vetoes closing the document
    assert wait_until(lambda: any(w.title == "Format Cells" for w in server[0].slots[0].desktop.screen.windows()))
    obs, _ = env.reset()
    assert obs["windows"] == []
    obs, _ = act(env, "Agent.open_app('writer')")  # the office still works
    assert obs["focused_app"] == "writer"


def _processes_running(argv: list[str]) -> list[int]:
    wanted = ("\0".join(argv) + "\0").encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read() == wanted:
                    found.append(int(pid))
        except OSError:
            pass
    return found


def test_reset_kills_what_escaped_the_process_tree(env):
    env.reset()
    act(env, "Agent.open_app('terminal')")
    act(env, "Agent.type(text='setsid sleep 4242 & disown; exit', enter=True)")  # orphaned, new session
    assert wait_until(lambda: _processes_running(["sleep", "4242"]))
    env.reset()
    assert wait_until(lambda: not _processes_running(["sleep", "4242"]))


def test_a_second_reset_takes_the_desktop_and_aborts_the_first_episode(server):
    from computerrl.envs.service.client import DesktopEnv, EnvError

    first, second = DesktopEnv(server[1], 0), DesktopEnv(server[1], 0)
    first.reset()
    second.reset()
    _, reward, terminated, truncated, info = first.step(response("Agent.wait()"))
    assert "a later Reset started another" in info["aborted"] and truncated and reward == 0.0
    _, _, terminated, _, info = second.step(response("Agent.exit(False)"))
    assert terminated and not info["aborted"]
    with pytest.raises(EnvError, match="the episode is over"):
        second.step(response("Agent.wait()"))


def _iterate(enumeration_access):
    e = enumeration_access.createEnumeration()
    while e.hasMoreElements():
        yield e.nextElement()


@pytest.mark.parametrize("victim", ["soffice", "xvfb"])
def test_a_desktop_that_breaks_is_replaced_and_its_episode_fails(env, server, victim):
    """Everything of a desktop is within the agent's reach (its office, its X clients, its memory), so
    a breakdown ends the episode as a failure: were it lost (left out of training and of the rates),
    an agent about to fail could break its desktop to hide it."""
    srv, client = server
    env.reset(options={"task": {"id": "give-up", "instruction": "x", "evaluator": {"func": "infeasible"}}})
    act(env, "Agent.open_app('calc')")
    desktop = srv.slots[0].desktop
    replacements = client.health().desktops[0].replacements
    if victim == "soffice":  # its pid is the sandbox's own: the sandbox kills it, as the agent could
        desktop.office.proc.kill()
    else:
        os.kill(desktop._xvfb.pid, signal.SIGKILL)
    obs, reward, terminated, truncated, info = env.step(response("Agent.type(text='lost')"))
    assert terminated and not info["aborted"] and reward == 0.0 and not env.aborted
    assert "exited" in info["exec_result"] and "as a failure" in info["exec_result"]
    assert info["score"] == 0.0 and "the desktop broke during the episode" in info["score_detail"]
    assert wait_healthy(client, 120) == ""
    assert client.health().desktops[0].replacements == replacements + 1
    env.reset()
    obs, _ = act(env, "Agent.open_app('calc')")
    assert obs["focused_app"] == "calc"


def test_gymnasium_contract(server):
    """What an env checker asks: tuple shapes, types, truncation at the step cap, close twice."""
    from computerrl.envs.service.client import DesktopEnv

    env = DesktopEnv(server[1], 0, max_steps=2)
    obs, info = env.reset(seed=3, options={})
    assert isinstance(obs, dict) and isinstance(info, dict)
    assert set(obs) == {"screenshot", "a11y_tree", "windows", "focused_app", "app_info", "last_result"}
    first = env.step(response("Agent.wait()"))
    assert len(first) == 5 and isinstance(first[1], float) and first[2:4] == (False, False)
    _, _, terminated, truncated, _ = env.step(response("Agent.wait()"))
    assert (terminated, truncated) == (False, True)  # the step cap truncates, it does not terminate
    env.close()
    env.close()


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # gone meanwhile
        return b""


def test_closing_a_desktop_leaves_none_of_its_processes(tmp_path, monkeypatch):
    from computerrl.envs.desktop.desktop import Desktop

    monkeypatch.chdir(tmp_path)
    desktop = Desktop(Path("d")).start()  # a relative folder works too
    roots = [desktop.sandbox.proc.pid, desktop._xvfb.pid]
    # A process that hid in a new session with a cleared environment is still the desktop's.
    desktop.sandbox.run(["bash", "-c", "setsid env -i sleep 300 >/dev/null 2>&1 < /dev/null &"], env=desktop.env)
    def sleeping() -> bool:  # setsid and env exec into sleep a moment after bash returned
        return any(b"sleep" in _cmdline(p) for p in descendants(roots))

    assert wait_until(sleeping, timeout_s=5)
    running = descendants(roots)
    assert len(running) >= 8  # Xvfb, the sandbox, D-Bus, the AT-SPI bus and registry, openbox, soffice, sleep
    desktop.close()
    desktop.close()
    assert wait_until(lambda: not any(Path(f"/proc/{p}").exists() for p in running), timeout_s=5)
    assert not list(Path("/tmp").glob("OSL_PIPE_*computerrl*"))  # the UNO pipe lived in the desktop's /tmp


def test_health_tells_the_fleet_what_each_desktop_does_and_a_screenshot_changes_nothing(server):
    """What the console shows per desktop comes from Health; its thumbnails from Screenshot, which
    leaves the episode as it was."""
    from computerrl.envs.service.client import DesktopEnv

    client = server[1]
    env = DesktopEnv(client, 0)
    steps = client.health().desktops[0].steps
    env.reset(options={"task": {"id": "watched", "instruction": "x", "evaluator": {"func": "infeasible"}}})
    env.step(response("Agent.type(text='hi')"))
    health = client.health()
    d = health.desktops[0]
    assert (d.task_id, d.step, d.in_episode, d.steps) == ("watched", 1, True, steps + 1)
    assert 0 < d.reset_s < 60 and 0 < d.step_s < 30 and health.uptime_s > 0
    thumb = Image.open(io.BytesIO(client.screenshot(0, max_width=240)))
    full = Image.open(io.BytesIO(client.screenshot(0)))
    assert thumb.size == (240, 135) and full.size == (1920, 1080)
    _, _, terminated, _, info = env.step(response("Agent.exit(False)"))
    assert terminated and not info["aborted"]  # the same episode, untouched by the screenshots
    d = client.health().desktops[0]
    assert (d.task_id, d.step, d.in_episode) == ("watched", 2, False)
