"""`ImpressTools` on a live presentation: each API through the model's path (a response parsed by
the env server and run in the desktop), checked by reading the document back over UNO."""

from __future__ import annotations

import inspect
import struct
import zlib

import pytest

import computerrl.apis.impress  # noqa: F401  (registers ImpressTools)
from conftest import act, desktop_files, inside, put, fails, ok
from computerrl.apis import REGISTRY
from computerrl.apis.app_api import IMPLEMENTATIONS, api_for_app
from computerrl.apis.impress import ImpressApi

desktop = pytest.mark.desktop  # the fast test at the top needs no desktop


# --- no desktop ---------------------------------------------------------------------------------

def test_stub_and_implementation_match_and_render_every_function():
    functions = REGISTRY.functions("ImpressTools")
    assert len(functions) == 22
    assert IMPLEMENTATIONS["ImpressTools"] is ImpressApi and api_for_app("impress") == "ImpressTools"
    for name, fn in functions.items():
        assert list(inspect.signature(getattr(ImpressApi, name)).parameters)[1:] == list(fn.signature.parameters)
    prompt = REGISTRY.render(["ImpressTools"])
    assert prompt.splitlines()[0] == "class ImpressTools:"
    assert len(prompt.splitlines()) == 1 + 22
    for name in functions:
        assert f"    def {name}(" in prompt
    assert ("def write_text(content: str, page_index: int, box_index: int, bold: bool = False, italic: bool = False, "
            "size: float | None = None, append: bool = False) -> None:") in prompt
    with pytest.raises(ValueError, match="slide_index must be >= 1"):
        REGISTRY.validate("ImpressTools", "go_to_slide", (0,))


# --- a real desktop -----------------------------------------------------------------------------

def office(server):
    return server[0].slots[0].desktop.office


def doc(server):
    return office(server).desktop.getCurrentComponent()


def slide(server, n: int):
    return doc(server).getDrawPages().getByIndex(n - 1)


def box(server, n: int, b: int):
    return slide(server, n).getByIndex(b)


def text_of(server, n: int, b: int) -> str:
    return box(server, n, b).getText().getString()


def whole(shape):
    cursor = shape.getText().createTextCursor()
    cursor.gotoStart(False)
    cursor.gotoEnd(True)
    return cursor


def impress(env, server):
    """A fresh episode with a new presentation focused (one title slide: title box 0, subtitle box 1)."""
    env.reset()
    obs, _ = act(env, "Agent.open_app('impress')")
    assert obs["focused_app"] == "impress", obs["focused_app"]
    assert doc(server).supportsService("com.sun.star.presentation.PresentationDocument")
    return obs


def png(width: int = 40, height: int = 20) -> bytes:
    """A small solid-red PNG (no imaging library needed)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


@desktop
def test_text_apis_boxes_and_app_info(env, server):
    obs = impress(env, server)
    assert obs["app_info"].splitlines()[:2] == ["Presentation with 1 slides; slides are numbered from 1, boxes from 0",
                                                "Slide 1 (current):"]
    obs, result = ok(env, "ImpressTools.write_text('Quarterly report', 1, 0)")
    assert text_of(server, 1, 0) == "Quarterly report" and result.startswith("Wrote 16 characters")
    assert "  Box 0 [TitleText]: Quarterly report" in obs["app_info"].splitlines()
    ok(env, "ImpressTools.write_text('first\\nsecond', 1, 1, bold=True, size=30)")
    sub = box(server, 1, 1)
    assert text_of(server, 1, 1).splitlines() == ["first", "second"]
    assert whole(sub).CharWeight == 150.0 and whole(sub).CharHeight == 30.0
    ok(env, "ImpressTools.write_text('\\nthird', 1, 1, italic=True, append=True)")
    paragraphs = list(_enum(sub.getText()))
    assert [p.getString() for p in paragraphs] == ["first", "second", "third"]
    # Read per text portion: only the new text changes.
    portions = [[(q.getString(), q.CharPosture.value, q.CharWeight) for q in _enum(p)] for p in paragraphs]
    assert portions == [[("first", "NONE", 150.0)], [("second", "NONE", 150.0)], [("third", "ITALIC", 100.0)]]

    ok(env, "ImpressTools.set_style(1, 0, bold=True, underline=True)")
    title = whole(box(server, 1, 0))
    assert title.CharWeight == 150.0 and title.CharUnderline == 1 and title.CharPosture.value == "NONE"
    ok(env, "ImpressTools.set_text_color(1, 0, '#00ff00')")
    assert whole(box(server, 1, 0)).CharColor == 0x00FF00
    ok(env, "ImpressTools.set_background_color(1, 1, 'yellow')")
    assert box(server, 1, 1).FillStyle.value == "SOLID" and box(server, 1, 1).FillColor == 0xFFFF00
    ok(env, "ImpressTools.set_textbox_alignment(1, 1, 'right')")
    assert {p.ParaAdjust for p in _enum(box(server, 1, 1).getText())} == {1}  # style.ParagraphAdjust.RIGHT
    ok(env, "ImpressTools.set_text_strikethrough(1, 1, [1, 3], True)")
    assert [[q.CharStrikeout for q in _enum(p)] for p in _enum(box(server, 1, 1).getText())] == [[1], [0], [1]]
    ok(env, "ImpressTools.set_slide_font(1, 'DejaVu Serif')")
    assert whole(box(server, 1, 0)).CharFontName == whole(box(server, 1, 1)).CharFontName == "DejaVu Serif"

    ok(env, "ImpressTools.position_box(1, 0, 'top-left')")
    assert (box(server, 1, 0).Position.X, box(server, 1, 0).Position.Y) == (500, 500)
    ok(env, "ImpressTools.position_box(1, 0, 'bottom-right')")
    s, page = box(server, 1, 0), slide(server, 1)
    assert s.Position.X + s.Size.Width == page.Width - 500 and s.Position.Y + s.Size.Height == page.Height - 500

    _, result = ok(env, "ImpressTools.get_slide_count()")
    assert result == "1"
    short = office(server).on_main_thread(lambda: ImpressApi.app_info(doc(server), 120))
    assert len(short) <= 120 and short.splitlines()[-1] == "… (1 more slides)", short

    # Wrong arguments: a sentence the model can act on, and the slide untouched.
    fails(env, "ImpressTools.write_text('x', 2, 0)", "slide 2 does not exist", "1 slides (1-1)")
    fails(env, "ImpressTools.write_text('x', 1, 5)", "slide 1 has no box 5 (it has boxes 0-1)")
    fails(env, "ImpressTools.set_text_color(1, 0, 'reddish')", "unknown color 'reddish'")
    fails(env, "ImpressTools.set_style(1, 0)", "give at least one of")
    fails(env, "ImpressTools.set_text_strikethrough(1, 1, [4], True)", "has 3 lines; no line 4")
    _, info = act(env, "ImpressTools.write_text('x', 0, 0)")
    assert info["exec_result"].startswith("Invalid action") and "page_index must be >= 1" in info["exec_result"]
    _, info = act(env, "ImpressTools.position_box(1, 0, 'middle')")
    assert info["exec_result"].startswith("Invalid action") and "position must be one of" in info["exec_result"]
    assert text_of(server, 1, 0) == "Quarterly report"

    obs, result = ok(env, "ImpressTools.delete_content(1, 0)")
    assert slide(server, 1).getCount() == 1 and text_of(server, 1, 0).startswith("first")
    assert result == "Deleted box 0 (TitleText) from slide 1"
    assert obs["app_info"].splitlines()[2] == "  Box 0 [Subtitle]: first | second | third"


def _enum(text):
    enum = text.createEnumeration()
    while enum.hasMoreElements():
        yield enum.nextElement()


@desktop
def test_slide_apis(env, server):
    impress(env, server)
    tmp_path = desktop_files(server)  # the API only reaches the desktop's home folder
    ok(env, "ImpressTools.write_text('one', 1, 0)")
    ok(env, "ImpressTools.duplicate_slide(1, 1)")
    ok(env, "ImpressTools.write_text('two', 2, 0)")
    ok(env, "ImpressTools.duplicate_slide(2, 2)")
    ok(env, "ImpressTools.write_text('three', 3, 0)")
    assert [text_of(server, n, 0) for n in (1, 2, 3)] == ["one", "two", "three"]
    obs, result = ok(env, "ImpressTools.duplicate_slide(3, 1)")  # a copy of "three" right after slide 1
    assert [text_of(server, n, 0) for n in (1, 2, 3, 4)] == ["one", "three", "two", "three"], result
    assert "Slide 4:" in obs["app_info"] and "Presentation with 4 slides" in obs["app_info"]
    fails(env, "ImpressTools.duplicate_slide(1, 9)", "target_position 9 does not exist")

    ok(env, "ImpressTools.go_to_slide(3)")
    assert doc(server).getCurrentController().getCurrentPage() == slide(server, 3)
    fails(env, "ImpressTools.go_to_slide(5)", "slide 5 does not exist")

    width, height = slide(server, 1).Width, slide(server, 1).Height
    assert width > height
    ok(env, "ImpressTools.set_slide_orientation('portrait')")
    assert (slide(server, 4).Width, slide(server, 4).Height) == (height, width)
    _, result = ok(env, "ImpressTools.set_slide_orientation('portrait')")
    assert result == "The slides are already portrait"
    ok(env, "ImpressTools.set_slide_orientation('landscape')")
    assert slide(server, 1).Width == width

    ok(env, "ImpressTools.set_slide_background(2, 'blue')")
    assert slide(server, 2).Background.FillColor == 0x2A6099 and slide(server, 2).Background.FillStyle.value == "SOLID"
    ok(env, "ImpressTools.set_slide_background(color='#112233')")
    assert all(slide(server, n).Background.FillColor == 0x112233 for n in (1, 2, 3, 4))
    image = tmp_path / "red.png"
    put(server, image, png())
    ok(env, f"ImpressTools.set_slide_background(1, image_path={inside(image)!r})")
    assert slide(server, 1).Background.FillStyle.value == "BITMAP"
    fails(env, "ImpressTools.set_slide_background(1)", "give a color or an image_path")
    fails(env, "ImpressTools.set_slide_background(1, image_path='/home/user/no/such.png')", "no file at '/home/user/no/such.png'")

    count = slide(server, 2).getCount()
    _, result = ok(env, f"ImpressTools.insert_image(2, {inside(image)!r}, width=4, position={{'x': 50, 'y': 25}})")
    picture = box(server, 2, count)
    assert picture.getShapeType() == "com.sun.star.drawing.GraphicObjectShape"
    assert (picture.Size.Width, picture.Size.Height) == (4000, 2000)  # 2:1 like the image
    assert abs(picture.Position.X - width // 2) <= 1 and abs(picture.Position.Y - height // 4) <= 1
    fails(env, "ImpressTools.insert_image(2, 'red.png')", "must be in the home folder")
    fails(env, f"ImpressTools.insert_image(2, {inside(image)!r}, position={{'left': 5}})", "unknown keys ['left']")

    # Media insertion is refused (LibreOffice's player hung soffice here); the episode survives it.
    fails(env, "ImpressTools.insert_file('/home/user/no/such.mp4')", "no file at")
    fails(env, f"ImpressTools.insert_file({inside(image)!r})", "audio or video is not supported")

    ok(env, "ImpressTools.set_slide_number_color('red')")
    masters = doc(server).getMasterPages()
    numbers = [s for i in range(masters.getCount()) for s in _shapes(masters.getByIndex(i))
               if s.getShapeType().endswith("SlideNumberShape")]
    assert numbers and all(whole(s).CharColor == 0xFF0000 for s in numbers)


def _shapes(page):
    return [page.getByIndex(i) for i in range(page.getCount())]


@desktop
def test_file_and_settings_apis(env, server):
    impress(env, server)
    tmp_path = desktop_files(server)  # the API only reaches the desktop's home folder
    ok(env, "ImpressTools.write_text('Saved deck', 1, 0)")
    fails(env, "ImpressTools.save()", "has no file yet")
    fails(env, "ImpressTools.save_as('deck.odp')", "must be in the home folder")
    fails(env, f"ImpressTools.save_as({inside(tmp_path / 'deck.key')!r})", "unknown extension '.key'")
    fails(env, f"ImpressTools.save_as({inside(tmp_path / 'nope' / 'deck.odp')!r})", "does not exist")

    path = tmp_path / "deck.pptx"
    ok(env, f"ImpressTools.save_as({inside(path)!r})")
    assert path.read_bytes()[:2] == b"PK" and doc(server).getLocation().endswith("deck.pptx")
    fails(env, f"ImpressTools.save_as({inside(path)!r})", "already exists; pass overwrite=True")
    ok(env, "ImpressTools.write_text('Changed', 1, 0)")
    assert doc(server).isModified()
    _, result = ok(env, "ImpressTools.save()")
    assert not doc(server).isModified() and result.startswith("Saved file://")
    ok(env, f"ImpressTools.save_as({inside(tmp_path / 'deck.pdf')!r})")
    assert (tmp_path / "deck.pdf").read_bytes().startswith(b"%PDF") and doc(server).getLocation().endswith("deck.pptx")

    ok(env, "ImpressTools.duplicate_slide(1, 1)")
    ok(env, f"ImpressTools.export_to_image({inside(tmp_path / 'one.png')!r}, 'png', 2)")
    assert (tmp_path / "one.png").read_bytes().startswith(b"\x89PNG")
    _, result = ok(env, f"ImpressTools.export_to_image({inside(tmp_path / 'all.jpg')!r}, 'jpg')")
    assert all((tmp_path / f"all_{n}.jpg").read_bytes().startswith(b"\xff\xd8") for n in (1, 2)), result
    fails(env, f"ImpressTools.export_to_image({inside(tmp_path / 'x.png')!r}, 'png', 3)", "slide 3 does not exist")

    ok(env, "ImpressTools.configure_auto_save(True, 7)")
    recovery = office(server).on_main_thread(lambda: _config(server, "/org.openoffice.Office.Recovery/AutoSave"))
    assert recovery.Enabled is True and recovery.TimeIntervall == 7
    ok(env, "ImpressTools.configure_auto_save(False, 10)")
    assert office(server).on_main_thread(lambda: _config(server, "/org.openoffice.Office.Recovery/AutoSave")).Enabled is False

    ok(env, "ImpressTools.configure_display_settings(use_presenter_view=False, monitor_for_presentation=2)")
    start = office(server).on_main_thread(lambda: _config(server, "/org.openoffice.Office.Impress/Misc/Start"))
    assert start.EnablePresenterScreen is False and doc(server).getPresentation().Display == 2
    ok(env, "ImpressTools.configure_display_settings(primary_monitor_only=True)")
    assert doc(server).getPresentation().Display == 1
    fails(env, "ImpressTools.configure_display_settings()", "give at least one of")


def _config(server, node: str):
    from computerrl.apis.impress import _office_context
    from com.sun.star.beans import PropertyValue

    ctx = _office_context(doc(server))
    provider = ctx.ServiceManager.createInstanceWithContext("com.sun.star.configuration.ConfigurationProvider", ctx)
    return provider.createInstanceWithArguments("com.sun.star.configuration.ConfigurationAccess",
                                                (PropertyValue(Name="nodepath", Value=node),))


@desktop
def test_impress_tools_need_a_focused_presentation(env, server):
    env.reset()
    obs, _ = act(env, "Agent.open_app('calc')")
    assert obs["focused_app"] == "calc"
    result = fails(env, "ImpressTools.get_slide_count()")
    assert result == "Action failed: ImpressTools needs a focused impress document; open or switch to one first"
