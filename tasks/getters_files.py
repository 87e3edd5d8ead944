"""Getters that look into the desktop's folders and files, with the semantics of OSWorld's
(`list_directory`, `vm_command_error`, `content_from_vm_file`, `audio_in_slide`, `vm_wallpaper`, `vscode_config`,
`background_image_in_slide`).

What they read was made by the agent, so it is read defensively. A folder is walked inside the
desktop's sandbox (beside the keeper), so a link leads nowhere but the desktop, and a tree too large
to send back (a link loop, a million files) is None. A workbook or a presentation is parsed in a
child process with caps on its memory and CPU time, so a zip bomb or a sheet claiming a billion
cells costs the env server nothing; a file that cannot be parsed is None, which every metric scores 0.

Departures from OSWorld's: where its getter raises (a missing or corrupt file, an empty sheet, a
slide's media that is neither in the file nor a `file://` link) the evaluation there crashes, and
here the getter gives None; a media link's `file://` URL is percent-decoded (LibreOffice encodes a
space as %20, which OSWorld's getter reads literally and then cannot find).
"""

from __future__ import annotations

import json
import os
import posixpath
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from computerrl.tasks.getters import FILE_LIMIT, getter, vm_file
from computerrl.tasks.setup import (COMMAND_TIMEOUT_S, Budget, SetupError, check_command, check_flag,
                                    check_string, desktop_path, flag, shell_argv)

if TYPE_CHECKING:
    from computerrl.envs.desktop.desktop import Desktop

TREE_ENTRIES = 20_000  # entries of a folder tree, in all; a larger tree is None
TREE_DEPTH = 200  # folders deep (OSWorld's recursion fails near 1000)
TREE_BYTES = 900_000  # about how much JSON the tree may take (the keeper sends back 1 MiB of output)
PARSE_S = 30.0  # wall seconds of the child that parses one file
PARSE_MEMORY = 3 << 30  # bytes of address space of that child (pandas and any honest workbook fit)
XML_LIMIT = 16 << 20  # bytes of a slide's XML or relationships read from a presentation
CHILD = "from computerrl.tasks.getters_files import _child; _child()"

# Run by the desktop's own python3 beside the keeper: OSWorld's server's folder tree (os.listdir,
# os.path.isdir following links; an unreadable folder becomes {"error": ...}), with caps.
TREE_SCRIPT = """
import json, os, sys
left = [int(sys.argv[2]), int(sys.argv[4])]
def walk(folder, depth):
    tree = {"type": "directory", "name": os.path.basename(folder), "children": []}
    try:
        for entry in os.listdir(folder):
            left[0] -= 1
            left[1] -= len(entry.encode("utf-8", "surrogateescape")) + 40
            if min(left) < 0 or depth >= int(sys.argv[3]):
                raise OverflowError
            full = os.path.join(folder, entry)
            tree["children"].append(walk(full, depth + 1) if os.path.isdir(full) else {"type": "file", "name": entry})
    except OSError as e:
        tree = {"error": str(e)}
    return tree
try:
    reply = {"tree": walk(sys.argv[1], 0) if os.path.isdir(sys.argv[1]) else None}
except (OverflowError, RecursionError):
    reply = {"too_large": True}
print(json.dumps(reply))
"""


@getter("list_directory", path=(check_string, True))
def list_directory(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> dict | None:
    """The folder's tree: {"type": "directory", "name", "children": [...]}, a file {"type": "file", "name"};
    None when the path is no folder, or the tree is larger than anything a task makes."""
    from computerrl.envs.desktop.sandbox import SandboxError

    argv = ["/usr/bin/python3", "-I", "-c", TREE_SCRIPT, desktop_path(spec["path"]), str(TREE_ENTRIES),
            str(TREE_DEPTH), str(TREE_BYTES)]  # -I: nothing the agent put in its site-packages runs
    try:
        r = desktop.sandbox.run(argv, env=budget.env(desktop), timeout_s=budget.left(COMMAND_TIMEOUT_S), trusted=budget.trusted)
    except SandboxError as e:
        raise SetupError(f"list_directory {spec['path']}: {e}") from None
    try:
        reply = json.loads(r.stdout)
    except ValueError:
        raise SetupError(f"list_directory {spec['path']}: no tree ({r.stderr.strip()[-300:]})") from None
    return reply.get("tree")


@getter("vm_command_error", command=(check_command, True), shell=(check_flag, False))
def vm_command_error(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str | None:
    """What the command wrote to stderr (OSWorld's /execute "error"), run as vm_command_line runs it;
    None when it did not finish, as OSWorld's server answers a command past its timeout."""
    from computerrl.envs.desktop.sandbox import SandboxError

    command, shell = spec["command"], spec.get("shell", False)
    if isinstance(command, list) and not flag(shell):  # OSWorld's server expands ~/ in a command's words
        command = [desktop_path(c) if isinstance(c, str) and c.startswith("~/") else c for c in command]
    argv = shell_argv(command, shell)
    try:
        r = desktop.sandbox.run(argv, env=budget.env(desktop, argv), timeout_s=budget.left(COMMAND_TIMEOUT_S), trusted=budget.trusted)
    except SandboxError:
        budget.left(1.0)  # a spent budget is the evaluation's failure, not the command's
        desktop.setup_notes.append(f"vm_command_error: {shlex.join(argv)[:200]} did not finish")
        return None
    return r.stderr


def _file_type(v) -> str:
    return "" if v == "xlsx" else 'expected "xlsx" (the only file type OSWorld\'s getter reads)'


def _file_content(v) -> str:
    return "" if v == "last_row" else 'expected "last_row" (the only content OSWorld\'s getter reads)'


@getter("content_from_vm_file", path=(check_string, True), file_type=(_file_type, True),
        file_content=(_file_content, True))
def content_from_vm_file(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> list[str] | None:
    """The first sheet's last row, as pandas reads it (the first row is the header), each cell as
    `str` makes it ("nan" for an empty one); None when there is no such file or row."""
    local = vm_file(desktop, {"path": spec["path"], "dest": posixpath.basename(desktop_path(spec["path"]))}, out,
                    budget)
    return None if local is None else _in_child("last_row", budget, path=local)


def _slide_index(v) -> str:
    ok = isinstance(v, int) and not isinstance(v, bool) or isinstance(v, str) and v.strip().isdigit()
    return "" if ok else "expected a slide index (0 = the first slide)"


def _slide_media(kind: str):
    def get(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str | None:
        path = desktop_path(spec["ppt_file_path"])
        local = vm_file(desktop, {"path": path, "dest": posixpath.basename(path)}, out, budget)
        if local is None:
            return None
        found = _in_child("slide_media", budget, path=local, slide=int(spec["slide_index"]), kind=kind,
                          folder=tempfile.mkdtemp(dir=out))
        if found is None or "extracted" in found:  # none, or taken out of the presentation
            return found and found["extracted"]
        return vm_file(desktop, {"path": found["linked"], "dest": spec["dest"]}, out, budget)  # a linked file

    get.__doc__ = f"""The {kind} of the slide (its file's name slide<index + 1>.xml) as a local file: taken out of
        the presentation when it is embedded, copied from the desktop (as `dest`) when it is linked."""
    return get


SLIDE = dict(ppt_file_path=(check_string, True), slide_index=(_slide_index, True), dest=(check_string, True))
audio_in_slide = getter("audio_in_slide", **SLIDE)(_slide_media("audio"))
background_image_in_slide = getter("background_image_in_slide", **SLIDE)(_slide_media("background image"))


# ---- the parsing, in a capped child --------------------------------------------------------
def _in_child(op: str, budget: Budget, **args) -> Any:
    """PARSERS[op](**args) computed in a child with caps on memory and time; None when it fails."""
    request = json.dumps({"op": op, "args": args}).encode()
    try:
        done = subprocess.run([sys.executable, "-c", CHILD], input=request, capture_output=True,
                              timeout=budget.left(PARSE_S),
                              env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
        return json.loads(done.stdout).get("value")
    except (subprocess.TimeoutExpired, ValueError):  # overran, killed, or its output is no reply
        return None


def _child() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (PARSE_MEMORY, PARSE_MEMORY))
    resource.setrlimit(resource.RLIMIT_CPU, (int(PARSE_S), int(PARSE_S)))
    req = json.load(sys.stdin)
    try:
        reply = {"value": PARSERS[req["op"]](**req["args"])}
    except Exception as e:  # noqa: BLE001 - MemoryError, a corrupt file…: the file cannot be read, None
        reply = {"error": f"{type(e).__name__}: {e}"}
    json.dump(reply, sys.stdout)


def _last_row(path: str) -> list[str] | None:
    import pandas as pd

    frame = pd.read_excel(path)  # each cell as str() makes it, as pandas 2's astype(str) did (pandas 3 keeps NaN)
    return [str(v) for v in frame.iloc[-1].tolist()] if len(frame) else None


PKG_RELS = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"
BACKGROUND = "{http://schemas.openxmlformats.org/presentationml/2006/main}bgPr"
BLIP = "{http://schemas.openxmlformats.org/drawingml/2006/main}blip"
EMBED = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}embed"


def _xml(zf, name: str):
    """A part of the presentation, parsed; None when it is absent. No DTD: a part declaring entities is
    refused (a presentation never does), so no entity expansion can blow up."""
    from xml.etree import ElementTree

    if name not in zf.namelist():
        return None
    with zf.open(name) as f:
        data = f.read(XML_LIMIT + 1)
    if len(data) > XML_LIMIT or b"<!ENTITY" in data:
        raise ValueError(f"{name}: larger than {XML_LIMIT >> 20} MB, or declares entities")
    return ElementTree.fromstring(data)


def _slide_media_of(path: str, slide: int, kind: str, folder: str) -> dict | None:
    """{"extracted": local file} for media embedded in the presentation, {"linked": desktop path} for a
    file:// link, None when the slide has none. As OSWorld's: the audio is the first relationship of the
    slide whose type names audio; the background image is the first <a:blip> of the first <p:bgPr> that
    has one with r:embed, found among the slide's image relationships."""
    import zipfile

    with zipfile.ZipFile(path) as zf:
        wanted = None
        if kind == "background image":
            root = _xml(zf, f"ppt/slides/slide{slide + 1}.xml")
            for background in [] if root is None else root.iter(BACKGROUND):
                blip = next(background.iter(BLIP), None)
                if blip is not None and EMBED in blip.attrib:
                    wanted = blip.attrib[EMBED]
                    break
            else:
                return None
        rels = _xml(zf, f"ppt/slides/_rels/slide{slide + 1}.xml.rels")
        for rel in [] if rels is None else rels.iter(PKG_RELS):
            kind_ok = "audio" in rel.get("Type", "") if kind == "audio" else "image" in rel.get("Type", "")
            if kind_ok and (wanted is None or rel.get("Id") == wanted):
                return _media(zf, rel.get("Target", ""), folder)
    return None


def _media(zf, target: str, folder: str) -> dict | None:
    if target.startswith("file://"):
        return {"linked": unquote(target[len("file://"):])}
    if not target.startswith(".."):
        return None  # OSWorld's getter takes only ../ targets and file:// links
    member = posixpath.normpath(posixpath.join("ppt/slides", target))
    name = posixpath.basename(member)
    if member.startswith("../") or name in ("", ".", "..") or member not in zf.namelist():
        return None
    local = Path(folder) / name  # its file name, in a folder of its own: never a path the file chose
    with zf.open(member) as src, open(local, "wb") as dst:
        while chunk := src.read(1 << 20):
            if dst.tell() + len(chunk) > FILE_LIMIT:
                raise ValueError(f"{member} is larger than {FILE_LIMIT >> 20} MB")
            dst.write(chunk)
    return {"extracted": str(local)}


PARSERS = {"last_row": _last_row, "slide_media": _slide_media_of}


WALLPAPER_KEY = ["org.gnome.desktop.background", "picture-uri"]


@getter("vm_wallpaper", dest=(check_string, True))
def vm_wallpaper(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str:
    """The desktop's wallpaper as OSWorld's server finds it: the file GNOME's setting
    org.gnome.desktop.background picture-uri names (`gsettings set …` in the agent's terminal, or any
    program that sets GNOME's wallpaper, writes it to the desktop's dconf), its URI read as OSWorld reads
    it (file:// and quotes dropped, nothing decoded), copied to `dest`; an empty file when there is none,
    as OSWorld's getter leaves one."""
    from computerrl.envs.desktop.sandbox import SandboxError

    env = {k: v for k, v in budget.env(desktop).items() if k != "DBUS_SESSION_BUS_ADDRESS"}  # dconf's file, not the agent's bus
    try:
        r = desktop.sandbox.run(["gsettings", "get", *WALLPAPER_KEY], env=env,
                                timeout_s=budget.left(COMMAND_TIMEOUT_S), trusted=budget.trusted)
        path = r.stdout.strip().replace("file://", "").replace("'", "") if r.returncode == 0 else ""
    except SandboxError:
        path = ""
    data = desktop.sandbox.read(path, limit=FILE_LIMIT + 1) if path.startswith("/") else None
    target = Path(tempfile.mkdtemp(dir=out)) / Path(spec["dest"]).name
    target.write_bytes(data if data is not None and len(data) <= FILE_LIMIT else b"")
    return str(target)


PALETTE_S = 0.5  # for VS Code's command palette to open, and for a command to start, before the next key
# for the window the postconfig just activated to pass the keyboard into its page: sooner, Chromium takes
# ctrl+shift+p as its own (its print dialog) and the command never runs (OSWorld's VM had its HTTP hops)
FOCUS_S = 1.0
PALETTE_TRIES = 3  # a busy desktop opens the palette late and the name goes elsewhere: Escape, slower again
COMMAND_S = 3.0  # for the command's file to appear


@getter("vscode_config", vscode_extension_command=(check_string, True), path=(check_string, True),
        dest=(check_string, True))
def vscode_config(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str | None:
    """OSWorld's: run a VS Code command from the command palette (ctrl+shift+p, its name, Enter) in the
    focused window, then read the file it writes. The tasks install an evaluation extension whose
    command writes what it finds (the open folder's name); the keys are the evaluator's, typed on the
    desktop's screen as OSWorld's replay types them. The file is removed first, so what the agent left
    there is never the answer; VS Code runs the agent's extensions too, so the task is marked
    (agent_code.py)."""
    import time

    from computerrl.tasks.setup import run_xdotool

    path = desktop_path(spec["path"])
    argv = ["rm", "-f", "--", path]
    desktop.sandbox.run(argv, env=budget.env(desktop, argv), timeout_s=budget.left(5.0), trusted=budget.trusted)
    time.sleep(FOCUS_S)
    for attempt in range(1, PALETTE_TRIES + 1):
        run_xdotool(desktop, "key", "--clearmodifiers", "ctrl+shift+p")
        time.sleep(PALETTE_S * attempt)
        run_xdotool(desktop, "type", "--clearmodifiers", "--delay", "10", "--", spec["vscode_extension_command"])
        time.sleep(PALETTE_S * attempt)
        run_xdotool(desktop, "key", "--clearmodifiers", "Return")
        deadline = time.monotonic() + budget.left(COMMAND_S)
        while time.monotonic() < deadline:
            time.sleep(0.25)
            if desktop.sandbox.read(path, limit=0) is not None:  # written
                return vm_file(desktop, {"path": spec["path"], "dest": spec["dest"]}, out, budget)
        run_xdotool(desktop, "key", "--clearmodifiers", "Escape")
    return vm_file(desktop, {"path": spec["path"], "dest": spec["dest"]}, out, budget)
