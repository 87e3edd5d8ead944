"""VS Code in a real desktop: code-server (VS Code's own code) in a Chromium window, started as OSWorld's
tasks start it, real OSWorld VS Code tasks scored, its command line as CodeTools uses it."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from conftest import act, play
from computerrl.envs.desktop.actions import installed
from computerrl.play.scripted import response

pytestmark = [pytest.mark.desktop,
              pytest.mark.skipif(not installed("code"), reason="VS Code (envs/desktop/install_code_server.sh) not installed")]

OPEN = [{"type": "launch", "parameters": {"command": ["code"]}},
        {"type": "activate_window", "parameters": {"window_name": "Visual Studio Code"}}]
# OSWorld's vs_code/276cc624-87ea-4f08-ab93-f770e3790175.json, as it is
LINE_LENGTH = {
    "id": "276cc624-87ea-4f08-ab93-f770e3790175", "snapshot": "vscode",
    "instruction": "Please help me set the current user's line length to 50 characters in VS Code.",
    "source": "https://www.quora.com/unanswered/How-do-you-set-the-line-length-in-Visual-Studio-Code",
    "config": OPEN, "trajectory": "trajectories/", "related_apps": ["vscode"],
    "evaluator": {"func": "check_json_settings",
                  "expected": {"type": "rule", "rules": {"expected": {"editor.wordWrapColumn": 50}}},
                  "result": {"type": "vm_file", "path": "/home/user/.config/Code/User/settings.json",
                             "dest": "settings.json"}}}
# OSWorld's vs_code/4e60007a-f5be-4bfc-9723-c39affa0a6d3.json, as it is
AUTODOCSTRING = {
    "id": "4e60007a-f5be-4bfc-9723-c39affa0a6d3", "snapshot": "vscode",
    "instruction": "Please help me install the autoDocstring extension in VS Code.",
    "source": "https://campbell-muscle-lab.github.io/howtos_Python/pages/documentation/best_practices/vscode_docstring_extension/vscode_docstring_extension.html#:~:text=Type%2C%20Ctrl%20%2B%20Shift%20%2B%20P,select%20the%20NumPy%20docstring%20format.",
    "config": OPEN, "trajectory": "trajectories/", "related_apps": ["vscode"],
    "evaluator": {"func": "is_extension_installed",
                  "result": {"type": "vm_command_line",
                             "command": ["code", "--list-extensions", "|", "grep", "njpwerner.autodocstring"]},
                  "expected": {"type": "rule", "rules": {"type": "contain", "expected": "njpwerner.autodocstring"}}}}


DRIVE = "https://drive.usercontent.google.com/download?id={}&export=download&authuser=0&confirm=t"
TETRIS_FILES = {"block.py": "1txPwaWML0e8cjpDW-nw5N6HOC6fYwfI1", "main.py": "1vJ2FEw7RNfRr0KBynHM36_nNAc4jTArl",
                "settings.py": "1tYI8QZz-T-sNFRAMaYnzFv80upIveUT-", "tetris.py": "1UOJp5Y6JLmaXmZXHc_GkM3nMfKbS6Dyu",
                "test_suite.py": "1eDEWLCswia1ihoh5kx5GGGDmFLt6GH_A"}
TETRIS_DIR = "/home/user/Desktop/tetris"
# OSWorld's multi_apps/9219480b-3aed-47fc-8bac-d2cffc5849f7.json, its URLs shortened; the files are ours
TETRIS = {
    "id": "9219480b-3aed-47fc-8bac-d2cffc5849f7", "snapshot": "vscode", "related_apps": ["vscode"],
    "instruction": "Hi, I recently playing with developing a small python-based tetris game. While I have finished "
                   "most of the part, something is wrong under some cases when I press up to rotate, the whole "
                   "program will crash, please run the code for me and fix the bugs of code.",
    "config": [{"type": "command", "parameters": {"command": ["mkdir", "-p", TETRIS_DIR]}},
               {"type": "download", "parameters": {"files": [
                   {"path": f"{TETRIS_DIR}/{name}", "url": DRIVE.format(TETRIS_FILES[name])}
                   for name in ("block.py", "main.py", "settings.py", "tetris.py")]}},
               {"type": "launch", "parameters": {"command": ["code", TETRIS_DIR]}}],
    "evaluator": {"postconfig": [], "func": "check_python_file_by_test_suite",
                  "result": {"type": "vm_file", "path": [f"{TETRIS_DIR}/{n}" for n in ("block.py", "main.py",
                                                                                     "settings.py", "tetris.py")],
                             "dest": ["block.py", "main.py", "settings.py", "tetris.py"], "multi": True},
                  "expected": {"type": "cloud_file", "path": DRIVE.format(TETRIS_FILES["test_suite.py"]),
                               "dest": "test_suite.py"}}}
TETRIS_SOURCES = {
    "settings.py": "COLUMNS, ROWS = 10, 20\n",
    "block.py": "SHAPES = {'I': [(0, 0), (1, 0), (2, 0), (3, 0)], 'O': [(0, 0), (1, 0), (0, 1), (1, 1)]}\n",
    "tetris.py": "import pygame\nfrom block import SHAPES\nfrom settings import COLUMNS\n\n\n"
                 "def rotate(cells, column):\n"
                 "    turned = [(-y, x) for x, y in cells]\n"
                 "    left = min(x for x, _ in turned)\n"
                 "    board = [None] * COLUMNS\n"
                 "    for x, _ in turned:\n"
                 "        board[column + x - left] = 'filled'  # crashes at the right wall\n"
                 "    return [(x - left, y) for x, y in turned]\n",
    "main.py": "import pygame\nimport tetris\n\npygame.init()\n",
    "test_suite.py": "import pygame\nimport tetris\nfrom block import SHAPES\n\n\n"
                     "def test():\n"
                     "    pygame.init()\n"
                     "    pygame.display.set_mode((100, 200))\n"
                     "    for column in range(10):\n"
                     "        tetris.rotate(SHAPES['I'], column)\n"
                     "    return sorted(tetris.rotate(SHAPES['O'], 9)) == [(0, 0), (0, 1), (1, 0), (1, 1)]\n"}


def vsix(publisher: str, name: str, main: str = "", **manifest) -> bytes:
    """A minimal extension package (VS Code installs one from a file as from its marketplace); `main`, the
    JavaScript of its extension.js, with `manifest`'s keys (contributes, activationEvents) in its package.json."""
    manifest = {"name": name, "publisher": publisher, "version": "1.0.0", "engines": {"vscode": "^1.80.0"},
                **({"main": "./extension.js"} if main else {}), **manifest}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("extension/package.json", json.dumps(manifest))
        if main:
            z.writestr("extension/extension.js", main)
        z.writestr("[Content_Types].xml", '<?xml version="1.0" encoding="utf-8"?><Types xmlns="http://schemas.'
                   'openxmlformats.org/package/2006/content-types"><Default Extension=".json" '
                   'ContentType="application/json"/></Types>')
        z.writestr("extension.vsixmanifest", f'<?xml version="1.0" encoding="utf-8"?><PackageManifest Version='
                   f'"2.0.0" xmlns="http://schemas.microsoft.com/developer/vsx-schema/2011"><Metadata><Identity '
                   f'Language="en-US" Id="{name}" Version="1.0.0" Publisher="{publisher}"/><DisplayName>{name}'
                   f'</DisplayName></Metadata><Installation><InstallationTarget Id="Microsoft.VisualStudio.Code"/>'
                   f'</Installation><Assets><Asset Type="Microsoft.VisualStudio.Code.Manifest" '
                   f'Path="extension/package.json" Addressable="true"/></Assets></PackageManifest>')
    return buf.getvalue()


HF = "https://hf-mirror.com/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/vs_code/"
OPEN_PROJECT = {  # OSWorld's vs_code/53ad5833-3455-407b-bbc6-45b4c79ab8fb.json (of its current set), as it is
    "id": "53ad5833-3455-407b-bbc6-45b4c79ab8fb", "snapshot": "vscode", "related_apps": ["vscode"],
    "instruction": "Please help me use VS Code to open the \"project\" in the \"user\" folder under \"home\".",
    "config": [
        {"type": "download", "parameters": {"files": [{
            "url": HF + "53ad5833-3455-407b-bbc6-45b4c79ab8fb/vscodeEvalExtension.zip",
            "path": "/home/user/Downloads/vscodeEvalExtension.zip"}]}},
        {"type": "execute", "parameters": {"command": [
            "/bin/bash", "-c", "cd /home/user/Downloads && unzip -q vscodeEvalExtension.zip && code --install-extension "
            "vscodeEvalExtension/eval-0.0.1.vsix && rm -rf vscodeEvalExtension vscodeEvalExtension.zip"]}},
        {"type": "launch", "parameters": {"command": ["code"]}},
        {"type": "command", "parameters": {"command": ["mkdir", "-p", "/home/user/project/.vscode"]}},
        {"type": "download", "parameters": {"files": [
            {"url": HF + "5e2d93d8-8ad0-4435-b150-1692aacaa994/main.py", "path": "/home/user/project/main.py"},
            {"url": HF + "53ad5833-3455-407b-bbc6-45b4c79ab8fb/README.md", "path": "/home/user/project/README.md"},
            {"url": HF + "53ad5833-3455-407b-bbc6-45b4c79ab8fb/settings.json",
             "path": "/home/user/project/.vscode/settings.json"}]}},
        {"type": "activate_window", "parameters": {"window_name": "Visual Studio Code"}}],
    "evaluator": {"postconfig": [{"type": "activate_window", "parameters": {"window_name": "Visual Studio Code"}}],
                  "func": "compare_config", "expected": {"type": "rule", "rules": {"expected": "project"}},
                  "result": {"type": "vscode_config", "vscode_extension_command": "OpenProject",
                             "path": "/home/user/OpenProject.txt", "dest": "OpenProject.txt"}}}
# Our stand-in for the task's evaluation extension: its command OpenProject writes the open folder's name
EVAL_EXTENSION = """
const vscode = require("vscode"), fs = require("fs"), os = require("os"), path = require("path");
exports.activate = (context) => context.subscriptions.push(vscode.commands.registerCommand("eval.openProject", () => {
  const folders = vscode.workspace.workspaceFolders || [];
  fs.writeFileSync(path.join(os.homedir(), "OpenProject.txt"), folders.length ? path.basename(folders[0].uri.fsPath) : "");
}));
"""


def test_vscode_opens_as_tasks_open_it_shows_its_tree_and_is_gone_after_reset(env, server):
    obs, _ = env.reset(options={"task": LINE_LENGTH})
    assert obs["focused_app"] == "code", obs["windows"]
    assert any(w["title"].endswith("Visual Studio Code") for w in obs["windows"])
    assert "Explorer" in obs["a11y_tree"] or "Welcome" in obs["a11y_tree"], obs["a11y_tree"][:2000]
    obs, _ = env.reset()
    assert not [w for w in obs["windows"] if "Visual Studio Code" in w["title"]]
    assert "node" not in server[0].slots[0].desktop.sandbox.run(["ps", "-eo", "comm"], env={}).stdout


def test_the_line_length_task_scores_one_when_set_in_the_settings_editor_and_zero_when_not(env):
    solve = ["Agent.hotkey(['ctrl', 'shift', 'p'])", "Agent.wait()",
             "Agent.type(text='Preferences: Open User Settings (JSON)')", "Agent.wait()",
             "Agent.hotkey(['enter'])", "Agent.wait()", "Agent.wait()",
             "Agent.hotkey(['ctrl', 'a'])", "Agent.type(text='{\"editor.wordWrapColumn\": 50')",
             # what the editor closed for us as we typed ("}) goes, and the brace is typed
             "Agent.hotkey(['shift', 'end'])", "Agent.hotkey(['delete'])", "Agent.type(text='}')",
             "Agent.hotkey(['ctrl', 's'])", "Agent.wait()", "Agent.exit(True)"]
    reward, info = play(env, LINE_LENGTH, solve)
    assert reward == 1.0, info
    reward, info = play(env, LINE_LENGTH, ["Agent.exit(True)"])
    assert reward == 0.0, info


def test_an_extension_installed_from_the_terminal_scores_the_extension_task(env, server):
    env.reset(options={"task": AUTODOCSTRING})
    server[0].slots[0].desktop.sandbox.write("/home/user/autodocstring.vsix", vsix("njpwerner", "autodocstring"))
    act(env, "Agent.open_app('terminal')")
    act(env, "Agent.type(text='code --install-extension autodocstring.vsix\\n')")
    for _ in range(30):  # the agent waits for the command to finish
        act(env, "Agent.wait()")
        if "njpwerner.autodocstring" in server[0].slots[0].desktop.sandbox.run(
                ["ls", "/home/user/.vscode/extensions"], env={}).stdout:
            break
    _, reward, terminated, _, info = env.step(response("Agent.exit(True)"))
    assert terminated and reward == 1.0, info
    reward, info = play(env, AUTODOCSTRING, ["Agent.exit(True)"])
    assert reward == 0.0, info


def test_the_tetris_task_runs_its_test_suite_on_the_agents_fix(env, server, tmp_path):
    for name, source in TETRIS_SOURCES.items():
        (tmp_path / name).write_text(source)
    (tmp_path / "index.json").write_text(json.dumps({DRIVE.format(key): name for name, key in TETRIS_FILES.items()}))
    server[0].slots[0].desktop.file_cache = tmp_path  # white box: the server's --cache
    fix = "sed -i 's/column + x - left/min(column, COLUMNS - 4) + x - left/' ~/Desktop/tetris/tetris.py"
    obs, _ = env.reset(options={"task": TETRIS})
    assert any(w["title"].startswith("tetris - Visual Studio Code") for w in obs["windows"]), obs["windows"]
    for code in ("Agent.open_app('terminal')", f"Agent.type(text={fix!r}, enter=True)", "Agent.wait()"):
        act(env, code)
    _, reward, terminated, _, info = env.step(response("Agent.exit(True)"))
    assert terminated and reward == 1.0, info["score_detail"]
    reward, info = play(env, TETRIS, ["Agent.exit(True)"])
    assert reward == 0.0, info  # the rotation at the right wall still crashes


def test_the_open_project_task_asks_vscode_through_its_evaluation_extension(env, server, tmp_path):
    extension = vsix("eval", "eval", EVAL_EXTENSION, activationEvents=["onCommand:eval.openProject"],
                     contributes={"commands": [{"command": "eval.openProject", "title": "OpenProject"}]})
    with zipfile.ZipFile(tmp_path / "vscodeEvalExtension.zip", "w") as z:
        z.writestr("vscodeEvalExtension/eval-0.0.1.vsix", extension)
    for name, text in (("main.py", "print('hi')\n"), ("README.md", "# project\n"), ("settings.json", "{}\n")):
        (tmp_path / name).write_text(text)
    index = {HF + "53ad5833-3455-407b-bbc6-45b4c79ab8fb/vscodeEvalExtension.zip": "vscodeEvalExtension.zip",
             HF + "5e2d93d8-8ad0-4435-b150-1692aacaa994/main.py": "main.py",
             HF + "53ad5833-3455-407b-bbc6-45b4c79ab8fb/README.md": "README.md",
             HF + "53ad5833-3455-407b-bbc6-45b4c79ab8fb/settings.json": "settings.json"}
    (tmp_path / "index.json").write_text(json.dumps(index))
    server[0].slots[0].desktop.file_cache = tmp_path  # white box: the server's --cache
    env.reset(options={"task": OPEN_PROJECT})
    for code in ("Agent.open_app('terminal')", "Agent.type(text='code -r ~/project', enter=True)"):
        act(env, code)
    wait_for_window(env, "project - Visual Studio Code")  # code-server reloads its page on the folder
    _, reward, terminated, _, info = env.step(response("Agent.exit(True)"))
    assert terminated and reward == 1.0, info["score_detail"]
    assert "VS Code" in info["agent_code"]  # its extensions are the agent's to install: the score is marked
    # VS Code open on no folder, the answer written where the extension writes it: not believed
    reward, info = play(env, OPEN_PROJECT, ["Agent.open_app('terminal')",
                                            "Agent.type(text='echo -n project > ~/OpenProject.txt', enter=True)",
                                            "Agent.exit(True)"])
    assert reward == 0.0, info["score_detail"]
    # `code FOLDER` with a window open opens another window, as VS Code's command line does
    env.reset(options={"task": OPEN_PROJECT})
    for code in ("Agent.open_app('terminal')", "Agent.type(text='code ~/project', enter=True)"):
        act(env, code)
    titles = wait_for_window(env, "project - Visual Studio Code")
    assert "project - Visual Studio Code" in titles and "Visual Studio Code" in titles, titles


def test_code_tools_open_compare_and_manage_extensions_in_a_real_vscode(env, server):
    env.reset()
    desktop = server[0].slots[0].desktop
    desktop.sandbox.run(["mkdir", "-p", "/home/user/project"], env={})
    desktop.sandbox.write("/home/user/project/a.py", b"x = 1\n")
    desktop.sandbox.write("/home/user/project/b.py", b"x = 2\n")
    desktop.sandbox.write("/home/user/tool.vsix", vsix("acme", "tool"))

    def title_after(code: str) -> str:
        """The focused window's title once the call's window has drawn (the agent's next look)."""
        _, info = act(env, code)
        assert not info["exec_result"].startswith("Error"), info["exec_result"]
        obs, _ = act(env, "Agent.wait()")
        return next((w["title"] for w in obs["windows"] if w["focused"]), "")

    assert title_after("CodeTools.launch_vscode('/home/user/project')") .endswith("project - Visual Studio Code")
    title = title_after("CodeTools.goto_file('/home/user/project/a.py', line=1, character=3)")
    assert title.startswith("a.py - project"), title
    title = title_after("CodeTools.compare_files('/home/user/project/a.py', '/home/user/project/b.py')")
    assert "a.py ↔ b.py" in title, title
    obs, info = act(env, "CodeTools.install_extension('/home/user/tool.vsix')")
    obs, info = act(env, "CodeTools.list_extensions(show_versions=True)")
    assert "acme.tool@1.0.0" in info["exec_result"], info["exec_result"]
    act(env, "CodeTools.uninstall_extension('acme.tool')")
    obs, info = act(env, "CodeTools.list_extensions()")
    assert "acme.tool" not in info["exec_result"]
    obs, info = act(env, "CodeTools.toggle_sync('on')")  # no account to sync with: said, not pretended
    assert "Settings Sync" in info["exec_result"] and info["action_valid"]
    obs, info = act(env, "CodeTools.launch_vscode('/etc')")
    assert "outside the home folder" in info["exec_result"]


def wait_for_window(env, title: str, waits: int = 20) -> list[str]:
    """The agent waits, a step at a time, until a window has this title: the titles then."""
    for _ in range(waits):
        obs, _ = act(env, "Agent.wait()")
        titles = [w["title"] for w in obs["windows"]]
        if title in titles:
            break
    return titles
