"""Getters that look into the desktop's folders and files (tasks/getters_files.py): OSWorld-format
tasks that use them set up, solved by scripted actions and scored in a real desktop; what a hostile
file could do to them, on files built here."""

from __future__ import annotations

import io
import json
import types
import wave
import zipfile
from pathlib import Path

import openpyxl
import pptx
import pytest
from lxml import etree
from PIL import Image

from conftest import play
from computerrl.envs.desktop.sandbox import Sandbox
from computerrl.tasks.getters import fetch
from computerrl.tasks.setup import Budget
from computerrl.tasks.task import parse_task

AUDIO_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/audio"
BACKGROUND = ('<p:bg xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" '
              'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
              'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><p:bgPr>'
              '<a:blipFill><a:blip r:embed="{}"/><a:stretch><a:fillRect/></a:stretch></a:blipFill>'
              '<a:effectLst/></p:bgPr></p:bg>')


def landscape_png() -> bytes:
    image = Image.new("RGB", (320, 180), (40, 90, 160))
    for x in range(320):  # some structure for SSIM: a sloped horizon and a sun
        for y in range(100 + x // 8, 180):
            image.putpixel((x, y), (60, 140, 50))
    for x in range(230, 270):
        for y in range(30, 70):
            if (x - 250) ** 2 + (y - 50) ** 2 < 400:
                image.putpixel((x, y), (250, 220, 60))
    buf = io.BytesIO()
    image.save(buf, "PNG")
    return buf.getvalue()


def tone_wav() -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(8000)
        w.writeframes(bytes(range(256)) * 64)
    return buf.getvalue()


def deck(background: bytes | None = None, audio: str | None = None, slides: int = 2) -> bytes:
    """A presentation; with `background`, slide 2 has it as its background image; with `audio`, slide 1 has
    an audio relationship to that target ("../media/x.wav" is embedded, as the WAV of tone_wav)."""
    prs = pptx.Presentation()
    for _ in range(slides):
        prs.slides.add_slide(prs.slide_layouts[6])
    if background is not None:
        slide = prs.slides[1]
        _, rid = slide.part.get_or_add_image_part(io.BytesIO(background))
        slide._element.cSld.insert(0, etree.fromstring(BACKGROUND.format(rid)))
    buf = io.BytesIO()
    prs.save(buf)
    if audio is None:
        return buf.getvalue()
    src, out = zipfile.ZipFile(buf), io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "ppt/slides/_rels/slide1.xml.rels":
                external = ' TargetMode="External"' if audio.startswith("file:") else ""
                data = data.replace(b"</Relationships>", f'<Relationship Id="rId99" Type="{AUDIO_REL}" '
                                    f'Target="{audio}"{external}/></Relationships>'.encode())
            dst.writestr(item, data)
        if audio.startswith("../media/"):
            dst.writestr("ppt/media/" + audio.rsplit("/", 1)[1], tone_wav())
    return out.getvalue()


class FakeSandbox(Sandbox):
    """A sandbox whose keeper hands over files from a dict: its own `read` and `copy_out` work on them."""

    def __init__(self, files: dict[str, bytes]):
        self.files = files

    def open(self, path: str):
        return io.BytesIO(self.files[path]) if path in self.files else None


class FakeDesktop:
    """A desktop's files as its keeper reads them, from a dict: the getters that only read files."""

    def __init__(self, files: dict[str, bytes]):
        self.files, self.setup_notes = files, []
        self.office = types.SimpleNamespace(profile="/var/lib/desktop/lo-profile")
        self.sandbox = FakeSandbox(files)


def get(files: dict[str, bytes], spec: dict, out: Path):
    return fetch(FakeDesktop(files), spec, out, Budget.of(trusted=True))


def slide_spec(kind: str, path: str, index: int, dest: str) -> dict:
    return {"type": kind, "ppt_file_path": path, "slide_index": index, "dest": dest}


def test_slide_media_embedded_linked_or_absent_as_osworld_finds_them(tmp_path):
    png = landscape_png()
    files = {"/home/user/Desktop/bg.pptx": deck(background=png),
             "/home/user/Desktop/plain.pptx": deck(),
             "/home/user/Desktop/embedded.pptx": deck(audio="../media/planet.wav"),
             "/home/user/Desktop/linked.pptx": deck(audio="file:///home/user/My%20Music/planet.wav"),
             "/home/user/My Music/planet.wav": b"RIFF linked"}
    image = get(files, slide_spec("background_image_in_slide", "~/Desktop/bg.pptx", 1, "landscape.png"), tmp_path)
    assert Path(image).read_bytes() == png
    assert get(files, slide_spec("background_image_in_slide", "/home/user/Desktop/bg.pptx", 0, "x.png"), tmp_path) \
        is None  # slide 1 has no background image
    assert get(files, slide_spec("background_image_in_slide", "/home/user/Desktop/bg.pptx", 5, "x.png"), tmp_path) \
        is None  # no such slide
    audio = get(files, slide_spec("audio_in_slide", "/home/user/Desktop/embedded.pptx", 0, "planet.wav"), tmp_path)
    assert Path(audio).read_bytes() == tone_wav() and Path(audio).name == "planet.wav"
    linked = get(files, slide_spec("audio_in_slide", "/home/user/Desktop/linked.pptx", 0, "mine.wav"), tmp_path)
    assert Path(linked).read_bytes() == b"RIFF linked" and Path(linked).name == "mine.wav"  # copied in as `dest`
    assert get(files, slide_spec("audio_in_slide", "/home/user/Desktop/plain.pptx", 0, "a.wav"), tmp_path) is None
    assert get(files, slide_spec("audio_in_slide", "/home/user/Desktop/gone.pptx", 0, "a.wav"), tmp_path) is None


def test_a_hostile_presentation_gives_none_and_writes_nothing_outside_its_folder(tmp_path):
    escaping = deck(audio="../../../../../../escaped.wav")
    with zipfile.ZipFile(io.BytesIO(escaping), "a") as zf:
        zf.writestr("../escaped.wav", b"x")
    laughs = b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;">]><r>&b;</r>'
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("ppt/slides/slide1.xml", laughs)
        zf.writestr("ppt/slides/_rels/slide1.xml.rels", laughs)
    out = tmp_path / "out"
    out.mkdir()
    files = {"/home/user/escape.pptx": escaping, "/home/user/laughs.pptx": buf.getvalue(),
             "/home/user/junk.pptx": b"not a zip"}
    for name in ("escape", "laughs", "junk"):
        for kind in ("audio_in_slide", "background_image_in_slide"):
            assert get(files, slide_spec(kind, f"/home/user/{name}.pptx", 0, "a.wav"), out) is None, (name, kind)
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file() and not p.name.endswith(".pptx")) == []


def test_content_from_vm_file_gives_the_last_row_as_pandas_prints_it(tmp_path):
    def book(rows) -> bytes:
        wb = openpyxl.Workbook()
        for row in rows:
            wb.active.append(row)
        buf = io.BytesIO()
        wb.save(buf)
        return buf.getvalue()

    spec = {"type": "content_from_vm_file", "path": "/home/user/r.xlsx", "file_type": "xlsx",
            "file_content": "last_row"}
    rows = [["Name", "Citations", "Note"], ["Ada", 12, "x"], ["Yann LeCun", 345074, None]]
    assert get({"/home/user/r.xlsx": book(rows)}, spec, tmp_path) == ["Yann LeCun", "345074", "nan"]
    assert get({"/home/user/r.xlsx": book(rows[:1])}, spec, tmp_path) is None  # a header, no row
    assert get({"/home/user/r.xlsx": b"PK\x03\x04 corrupt"}, spec, tmp_path) is None
    assert get({}, spec, tmp_path) is None


def test_the_osworld_tasks_load_and_bad_parameters_are_named():
    osworld = Path(__file__).resolve().parents[2] / "shared" / "osworld"
    for name in ("multi_apps/47f7c0ce-a5fb-4100-a5e6-65cd0e7429e5", "multi_apps/69acbb55-d945-4927-a87b-8480e1a5bb7e"):
        path = osworld / f"{name}.json"
        if path.exists():
            task = parse_task(json.loads(path.read_text()))
            assert not [m for m in task.unsupported() if "getter" in m], (name, task.unsupported())
    task = parse_task({"id": "t", "instruction": "x", "evaluator": {
        "func": "literal_match", "result": {"type": "content_from_vm_file", "path": "/home/user/a.csv",
                                            "file_type": "csv", "file_content": "last_row"},
        "expected": {"type": "audio_in_slide", "ppt_file_path": "/home/user/a.pptx", "slide_index": "one"}}})
    assert task.unsupported() == [
        "getter 'content_from_vm_file' with file_type expected \"xlsx\" (the only file type OSWorld's getter reads)",
        "getter 'audio_in_slide' with slide_index expected a slide index (0 = the first slide)",
        "getter 'audio_in_slide' with dest missing"]


# ---- in a real desktop --------------------------------------------------------------------
@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("cache")
    (root / "deck.pptx").write_bytes(deck())
    (root / "landscape.png").write_bytes(landscape_png())
    wb = openpyxl.Workbook()
    wb.active.append(["Name", "Citations", "Deep learning"])
    wb.active.append(["Geoffrey Hinton", 900000, "Learning representations"])
    wb.save(root / "researchers.xlsx")
    (root / "index.json").write_text(json.dumps({
        "https://example.org/deck.pptx": "deck.pptx", "https://example.org/landscape.png": "landscape.png",
        "https://example.org/researchers.xlsx": "researchers.xlsx"}))
    return root


PHOTOS_TASK = {  # as OSWorld's os/23393935 (copy the .jpg files of photos/ into cpjpg/), scored on the tree
    "id": "os-cpjpg", "snapshot": "os",
    "instruction": "Copy every .jpg file found under ~/Desktop/photos into ~/Desktop/cpjpg.",
    "config": [{"type": "execute", "parameters": {"shell": True, "command": (
        "mkdir -p ~/Desktop/photos/vacation/hk ~/Desktop/cpjpg && echo x > ~/Desktop/photos/vacation/hk/hk.jpg"
        " && echo y > ~/Desktop/photos/notes.txt")}}],
    "evaluator": {"func": "exact_match", "result": {"type": "list_directory", "path": "/home/user/Desktop/cpjpg"},
                  "expected": {"type": "rule", "rules": {"expected": {
                      "type": "directory", "name": "cpjpg", "children": [{"type": "file", "name": "hk.jpg"}]}}}},
}


@pytest.mark.desktop
def test_list_directory_gives_the_folder_tree_and_none_for_what_is_no_folder_or_too_large(task_env, server, tmp_path):
    from conftest import desktop_of

    copy = "find ~/Desktop/photos -name '*.jpg' -exec cp {} ~/Desktop/cpjpg \\;"
    solution = ["Agent.open_app('terminal')", f"Agent.type(text={copy!r}, enter=True)",
                "Agent.wait()", "Agent.exit(True)"]
    reward, info = play(task_env, PHOTOS_TASK, solution)
    assert reward == 1.0, info
    reward, info = play(task_env, PHOTOS_TASK, ["Agent.exit(True)"])
    assert reward == 0.0, info
    with desktop_of(server[0]) as desktop:
        desktop.sandbox.run(["bash", "-c", "mkdir -p ~/t/a/b ~/loops && touch ~/t/a/b/f ~/t/g && ln -s a ~/t/link"
                             " && ln -s . ~/loops/x && ln -s . ~/loops/y"], env=desktop.env, trusted=True)

        def tree(path):
            return fetch(desktop, {"type": "list_directory", "path": path}, tmp_path, Budget.of(trusted=True))

        def ordered(node):
            return {**node, "children": sorted(map(ordered, node["children"]), key=lambda n: n["name"])} \
                if "children" in node else node

        b = {"type": "directory", "name": "b", "children": [{"type": "file", "name": "f"}]}
        assert ordered(tree("~/t")) == {"type": "directory", "name": "t", "children": [
            {"type": "directory", "name": "a", "children": [b]}, {"type": "file", "name": "g"},
            {"type": "directory", "name": "link", "children": [b]}]}  # a link to a folder is walked, as OSWorld's
        assert tree("/home/user/t/g") is None and tree("/home/user/nowhere") is None  # not a folder
        assert tree("/home/user/loops") is None  # two links to "." make 2^40 entries: too large, not a hang


COMMAND_TASK = {  # as OSWorld's multi_apps/69acbb55 (a module the command imports must be installed)
    "id": "os-module", "snapshot": "os", "instruction": "Make `from mymod import VALUE` work in your home folder.",
    "config": [],
    "evaluator": {"func": "check_include_exclude",
                  "result": {"type": "vm_command_error", "command": ["python", "-c", "from mymod import VALUE;"]},
                  "expected": {"type": "rule", "rules": {"include": [], "exclude": ["Error:"]}}},
}


@pytest.mark.desktop
def test_vm_command_error_gives_what_the_command_wrote_to_stderr(task_env):
    solution = ["Agent.open_app('terminal')", "Agent.type(text=\"echo 'VALUE = 1' > ~/mymod.py\", enter=True)",
                "Agent.wait()", "Agent.exit(True)"]
    reward, info = play(task_env, COMMAND_TASK, solution)
    assert reward == 1.0, info
    reward, info = play(task_env, COMMAND_TASK, ["Agent.exit(True)"])  # ModuleNotFoundError: No module named 'mymod'
    assert reward == 0.0, info


ROW_TASK = {  # as OSWorld's multi_apps/5990457f, with the row it expects written in the task
    "id": "calc-append-row", "snapshot": "libreoffice_calc", "related_apps": ["libreoffice_calc"],
    "instruction": "Append Yann LeCun (345074 citations, Deep learning) to researchers.xlsx and save.",
    "config": [{"type": "download", "parameters": {"files": [{"url": "https://example.org/researchers.xlsx",
                                                              "path": "/home/user/Desktop/researchers.xlsx"}]}},
               {"type": "open", "parameters": {"path": "/home/user/Desktop/researchers.xlsx"}}],
    "evaluator": {"func": "literal_match",
                  "result": {"type": "content_from_vm_file", "path": "/home/user/Desktop/researchers.xlsx",
                             "file_type": "xlsx", "file_content": "last_row"},
                  "expected": {"type": "rule", "rules": ["Yann LeCun", "345074", "deep learning"]},
                  "options": {"type": "list", "ignore_case": True}},
}


@pytest.mark.desktop
def test_content_from_vm_file_reads_the_row_the_agent_appended(task_env):
    solution = ["CalcTools.set_cell_value('A3', 'Yann LeCun')", "CalcTools.set_cell_value('B3', 345074)",
                "CalcTools.set_cell_value('C3', 'Deep learning')", "CalcTools.save()", "Agent.exit(True)"]
    reward, info = play(task_env, ROW_TASK, solution)
    assert reward == 1.0, info
    reward, info = play(task_env, ROW_TASK, ["Agent.exit(True)"])  # the last row is still Hinton's
    assert reward == 0.0, info


SAVE = [{"type": "activate_window", "parameters": {"window_name": "deck.pptx - LibreOffice Impress", "strict": True}},
        {"type": "execute", "parameters": {"command": ["python", "-c",
                                                       "import pyautogui; pyautogui.hotkey('ctrl', 's')"]}},
        {"type": "sleep", "parameters": {"seconds": 1.0}}]
BACKGROUND_TASK = {  # as OSWorld's multi_apps/47f7c0ce, with the frame given rather than cut from a video
    "id": "impress-background", "snapshot": "libreoffice_impress", "related_apps": ["libreoffice_impress"],
    "instruction": "Set ~/Desktop/landscape.png as the background of the second slide.",
    "config": [{"type": "download", "parameters": {"files": [
        {"url": "https://example.org/deck.pptx", "path": "/home/user/Desktop/deck.pptx"},
        {"url": "https://example.org/landscape.png", "path": "/home/user/Desktop/landscape.png"}]}},
        {"type": "open", "parameters": {"path": "/home/user/Desktop/deck.pptx"}}],
    "evaluator": {"postconfig": SAVE, "func": "compare_images",
                  "result": {"type": "background_image_in_slide", "ppt_file_path": "/home/user/Desktop/deck.pptx",
                             "slide_index": 1, "dest": "landscape.png"},
                  "expected": {"type": "cloud_file", "path": "https://example.org/landscape.png",
                               "dest": "gold_landscape.png"}},
}


@pytest.mark.desktop
def test_background_image_in_slide_finds_the_image_libreoffice_saved(task_env):
    solution = ["ImpressTools.set_slide_background(slide_index=2, image_path='/home/user/Desktop/landscape.png')",
                "ImpressTools.save()", "Agent.exit(True)"]
    reward, info = play(task_env, BACKGROUND_TASK, solution)
    assert reward == 1.0, info
    wrong = ["ImpressTools.set_slide_background(slide_index=1, image_path='/home/user/Desktop/landscape.png')",
             "ImpressTools.save()", "Agent.exit(True)"]  # the first slide's: the second has none
    reward, info = play(task_env, BACKGROUND_TASK, wrong)
    assert reward == 0.0, info


WALLPAPER_TASK = {  # OSWorld's multi_apps/c2751594's evaluator, with the image given rather than in an email
    "id": "os-wallpaper", "snapshot": "os",
    "instruction": "Set ~/Pictures/landscape.png as the desktop background.",
    "config": [{"type": "download", "parameters": {"files": [
        {"url": "https://example.org/landscape.png", "path": "/home/user/Pictures/landscape.png"},
        {"url": "https://example.org/deck.pptx", "path": "/home/user/Pictures/not-an-image.png"}]}}],
    "evaluator": {"func": "compare_images", "result": {"type": "vm_wallpaper", "dest": "background.png"},
                  "expected": {"type": "cloud_file", "path": "https://example.org/landscape.png",
                               "dest": "gold_background.png"}},
}


@pytest.mark.desktop
def test_vm_wallpaper_gives_the_picture_gnomes_setting_names(task_env):
    def set_wallpaper(name):
        command = f"gsettings set org.gnome.desktop.background picture-uri file:///home/user/Pictures/{name}"
        return ["Agent.open_app('terminal')", f"Agent.type(text={command!r}, enter=True)", "Agent.wait()",
                "Agent.exit(True)"]

    reward, info = play(task_env, WALLPAPER_TASK, set_wallpaper("landscape.png"))
    assert reward == 1.0, info
    reward, info = play(task_env, WALLPAPER_TASK, ["Agent.exit(True)"])  # GNOME's own wallpaper, or none
    assert reward < 0.5, info
    reward, info = play(task_env, WALLPAPER_TASK, set_wallpaper("not-an-image.png"))
    assert reward == 0.0, info
