"""VLC in a real desktop: started as OSWorld's tasks start it, real OSWorld VLC tasks scored, VLCTools
acting through VLC's HTTP interface and its settings file."""

from __future__ import annotations

import io
import json
import math
import os
import struct
import subprocess
import wave

import pytest

from conftest import play
from computerrl.envs.service.client import DesktopEnv
from computerrl.play.scripted import response

pytestmark = pytest.mark.desktop

CLICK = {"type": "execute", "parameters": {"command": ["python", "-c", "import pyautogui; import time; "
                                                                     "pyautogui.click(960, 540); time.sleep(0.5);"]}}
# OSWorld's vlc/8ba5ae7a-5ae5-4eab-9fcc-5dd4fe3abf89.json, as it is
RECORDINGS = {
    "id": "8ba5ae7a-5ae5-4eab-9fcc-5dd4fe3abf89", "snapshot": "base_setup",
    "instruction": "Help me modify the folder used to store my recordings to Desktop",
    "config": [{"type": "launch", "parameters": {"command": "vlc"}}, CLICK], "related_apps": ["vlc"],
    "evaluator": {"func": "is_vlc_recordings_folder",
                  "expected": {"type": "rule", "rules": {"recording_file_path": "/home/user/Desktop"}},
                  "result": {"type": "vlc_config", "dest": "vlcrc"}}}
SONG = "Rick Astley - Never Gonna Give You Up (Official Music Video).mp4"
URL = ("https://drive.usercontent.google.com/download?id=14-vhVMVw53e0l-MDVBFbngFAE1jMqvgm&export=download&authuser=0"
       "&confirm=t&uuid=d31607ed-0075-4fe5-b68c-b24b6eec356e&at=APZUnTV0Wy0672VFGrQChgHmd1Ba:1704337791613")
# OSWorld's vlc/59f21cfb-0120-4326-b255-a5b827b38967.json, as it is
PLAY = {
    "id": "59f21cfb-0120-4326-b255-a5b827b38967", "snapshot": "base_setup",
    "instruction": "Could you play the music video that's saved on my desktop for me via vlc?",
    "config": [{"type": "download", "parameters": {"files": [{"url": URL, "path": f"/home/user/Desktop/{SONG}"}]}},
               {"type": "launch", "parameters": {"command": "vlc"}}, CLICK],
    "related_apps": ["vlc"],
    "evaluator": {"func": "is_vlc_playing",
                  "expected": {"type": "rule", "rules": {"type": "file_name", "file_name": SONG}},
                  "result": {"type": "vlc_playing_info", "dest": "status.xml"}}}


def tone(seconds: int = 30) -> bytes:
    """A WAV of a quiet tone (the cached stand-in for the task's video: VLC goes by what the file holds)."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(8000)
        w.writeframes(b"".join(struct.pack("<h", int(2000 * math.sin(i / 10))) for i in range(8000 * seconds)))
    return buf.getvalue()


@pytest.fixture
def env(server, tmp_path):
    (tmp_path / "song.wav").write_bytes(tone())
    (tmp_path / "index.json").write_text(json.dumps({URL: "song.wav"}))
    server[0].slots[0].desktop.file_cache = tmp_path  # white box: the server's --cache
    return DesktopEnv(server[1], 0, max_steps=30)


def test_vlc_starts_as_tasks_start_it_and_is_gone_after_reset(env, server):
    obs, _ = env.reset(options={"task": RECORDINGS})
    assert obs["focused_app"] == "vlc" and any(w["title"] == "VLC media player" for w in obs["windows"])
    assert json.loads(obs["app_info"])["state"] == "stopped"
    obs, _ = env.reset()
    assert not [w for w in obs["windows"] if "VLC" in w["title"]]
    assert "vlc" not in server[0].slots[0].desktop.sandbox.run(["ps", "-eo", "comm"], env={}).stdout


def test_the_recordings_folder_task_scores_one_when_set_and_zero_when_not(env):
    reward, info = play(env, RECORDINGS, ["VLCTools.set_settings('input-record-path', '/home/user/Desktop')",
                                          "Agent.exit(True)"])
    assert reward == 1.0, info
    reward, info = play(env, RECORDINGS, ["VLCTools.set_settings('input-record-path', '/home/user/Videos')",
                                          "Agent.exit(True)"])
    assert reward == 0.0, info
    reward, info = play(env, RECORDINGS, ["Agent.exit(True)"])
    assert reward == 0.0, info


def test_the_play_task_scores_one_while_the_song_plays(env):
    obs, _ = env.reset(options={"task": PLAY})
    for code in (f"VLCTools.add_to_playlist('/home/user/Desktop/{SONG}')", "Agent.wait()"):
        obs, _, _, _, info = env.step(response(code))
        assert info["action_valid"] and not info["aborted"], info
    assert json.loads(obs["app_info"])["state"] == "playing", obs["app_info"]
    _, reward, _, _, info = env.step(response("Agent.exit(True)"))
    assert reward == 1.0, info
    reward, info = play(env, PLAY, [f"VLCTools.add_to_playlist('/home/user/Desktop/{SONG}')", "Agent.wait()",
                                    "VLCTools.pause()", "Agent.wait()", "Agent.exit(True)"])
    assert reward == 0.0, info
    reward, info = play(env, PLAY, ["Agent.exit(True)"])
    assert reward == 0.0, info


def test_vlc_tools_read_and_change_what_vlc_holds(env, server):
    env.reset(options={"task": PLAY})
    for code, result in ((f"VLCTools.add_to_playlist('/home/user/Desktop/{SONG}')", "playing"),
                         ("VLCTools.get_playlist()", SONG), ("VLCTools.get_media_duration()", "30 seconds"),
                         ("VLCTools.get_media_files('/home/user/Desktop')", f"/home/user/Desktop/{SONG}"),
                         ("VLCTools.set_settings('qt-bgcone', '0')", "Set qt-bgcone to 0"),
                         ("VLCTools.get_settings()", '"qt-bgcone": "0"')):
        obs, _, _, _, info = env.step(response(code))
        assert result in info["exec_result"], (code, info["exec_result"])
    obs, _, _, _, info = env.step(response("VLCTools.add_to_playlist('/etc/passwd')"))
    assert "home folder" in info["exec_result"]
    obs, _, _, _, info = env.step(response("VLCTools.set_settings('qt-bgcone=1\\nextraintf', 'x')"))
    assert "not a VLC option" in info["exec_result"]


@pytest.mark.parametrize("own", [
    "/usr/bin/vlc --no-qt-privacy-ask --extraintf http --http-host 127.0.0.1 --http-port 8080 "
    "--http-password password &",
    # Issue 43 row 2: the desktop's own launcher, run by the agent: started as genuinely as can be, and still
    # within the agent's reach (it started VLC with pages of its own, then rewrote its command line in its
    # memory), so no longer believed
    "/run/desktop/compat/apps/vlc &",
], ids=["otherwise", "launcher-script"])
def test_a_vlc_the_agent_starts_itself_is_not_believed(env, server, own):
    """A VLC the desktop's session did not launch could run Lua scripts of the agent's (from its user data)
    and serve a status of its own making, or have its memory rewritten: its answers are refused."""
    from computerrl.envs.desktop.vlc import http_get

    desktop = server[0].slots[0].desktop
    env.reset(options={"task": {**PLAY, "config": PLAY["config"][:1]}})
    for code in ("Agent.open_app('terminal')", f"Agent.type(text={own!r}, enter=True)", "Agent.wait()", "Agent.wait()"):
        env.step(response(code))
    with desktop.sandbox.connect(8080, timeout_s=5.0) as s:  # it does answer: the check is what refuses it
        s.sendall(b"GET /requests/status.xml HTTP/1.0\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/")
    assert http_get(desktop, "/requests/status.xml") is None
    env.reset(options={"task": PLAY})
    assert http_get(desktop, "/requests/status.xml") is not None  # the desktop's own VLC is


# The agent's own status page: VLC "playing" the song the task asks for (OSWorld's metric reads nothing else)
FORGED = ("<root><state>playing</state><information><category name='meta'>"
          f"<info name='filename'>{SONG}</info></category></information></root>")


def forged_play(then: str) -> list[str]:
    """The agent's actions: its status page in ~/fake/requests, then `then` typed in its terminal."""
    make = f'mkdir -p ~/fake/requests && echo "{FORGED}" > ~/fake/requests/status.xml'
    return ["Agent.open_app('terminal')", f"Agent.type(text={make!r}, enter=True)",
            f"Agent.type(text={then!r}, enter=True)", "Agent.wait()", "Agent.wait()", "Agent.wait()",
            "Agent.exit(True)"]


def test_a_status_page_named_in_vlcrc_does_not_score(env):
    """The agent points VLC's web interface at pages of its own in its settings file and restarts
    VLC through the desktop's own launcher: nothing plays, so the play task scores 0."""
    restart = ("pkill vlc; sleep 2; mkdir -p ~/.config/vlc && echo http-src=/home/user/fake >> ~/.config/vlc/vlcrc "
               "&& vlc &")
    reward, info = play(env, PLAY, forged_play(restart))
    assert reward == 0.0, info
    song = f"VLCTools.add_to_playlist('/home/user/Desktop/{SONG}')"  # the VLC started so is still read, truly
    reward, info = play(env, PLAY, [*forged_play(restart)[:-1], song, "Agent.wait()", "Agent.exit(True)"])
    assert reward == 1.0, info


@pytest.mark.parametrize("start", [
    "vlc --http-src /home/user/fake &",  # the launcher's own options come first
    "vlc --http-src /home/user/fake -- &",  # and after "--" the launcher's last ones are file names
    # VLC's own folder of pages, with the agent's laid over it, in a mount namespace of the agent's
    "unshare -Urm sh -c 'mount --bind /home/user/fake /usr/share/vlc/lua/http && "
    "exec unshare -U --map-user=1000 --map-group=1000 vlc' &"])
def test_a_vlc_the_agent_points_at_pages_of_its_own_does_not_score(env, start):
    """The agent starts VLC from its terminal with its own pages behind the web interface: nothing
    plays, so the play task scores 0 (a VLC that serves VLC's own pages is read truly, the others are
    not believed)."""
    reward, info = play(env, PLAY, forged_play(f"pkill vlc; sleep 2; {start}"))
    assert reward == 0.0, info


def test_the_launcher_starts_vlc_as_the_keeper_believes_it(tmp_path):
    """What the keeper asks of a VLC before believing it (envs/desktop/vlc.py LAUNCHED) is what the desktop's
    own launcher does, whatever environment and options it is given."""
    from computerrl.envs.desktop.sandbox import COMPAT
    from computerrl.envs.desktop.vlc import LAUNCHED

    shown = "python3 -c 'import json, os, sys; print(json.dumps([dict(os.environ), sys.argv[1:]]))'"
    (tmp_path / "vlc").write_text((COMPAT / "apps" / "vlc").read_text().replace("exec /usr/bin/vlc", f"exec {shown}"))
    given = {**dict.fromkeys(LAUNCHED["environ"], ""), "PATH": os.environ["PATH"]}
    environ, argv = json.loads(subprocess.run(["sh", tmp_path / "vlc", "--http-src", "/home/user/fake"], env=given,
                                              capture_output=True, text=True, check=True).stdout)
    assert {name: environ.get(name) for name in LAUNCHED["environ"]} == LAUNCHED["environ"]
    assert argv[-len(LAUNCHED["argv_ends"]):] == LAUNCHED["argv_ends"]
