"""`WriterTools` on a live text document: each API through the model's path (a response parsed by
the env server and run in the desktop), checked by reading the document back over UNO."""

from __future__ import annotations

import io
import inspect
import json

import pytest

import computerrl.apis.writer  # noqa: F401  (registers WriterTools)
from conftest import act, desktop_files, inside, put, fails, ok
from computerrl.apis import REGISTRY
from computerrl.apis.app_api import IMPLEMENTATIONS, ApiError, api_for_app
from computerrl.apis.writer import _WORD_START, WriterApi, _regex, _u16

desktop = pytest.mark.desktop  # the fast tests at the top need no desktop

NAMES = ["save", "write_text", "get_paragraphs", "set_color", "find_and_replace", "set_font", "set_line_spacing",
         "remove_highlighting", "find_highlighted_text", "insert_formula_at_cursor", "insert_image_at_cursor",
         "set_strikethrough", "set_font_size", "export_to_pdf", "set_paragraph_alignment", "capitalize_words",
         "set_default_font", "add_page_numbers", "insert_page_break"]


# --- no desktop ---------------------------------------------------------------------------------

def test_stub_and_implementation_match_and_render_every_function():
    functions = REGISTRY.functions("WriterTools")
    assert list(functions) == NAMES and len(functions) == 19
    assert IMPLEMENTATIONS["WriterTools"] is WriterApi and api_for_app("writer") == "WriterTools"
    for name, fn in functions.items():
        assert list(inspect.signature(getattr(WriterApi, name)).parameters)[1:] == list(fn.signature.parameters)
    prompt = REGISTRY.render(["WriterTools"])
    assert prompt.splitlines()[0] == "class WriterTools:"
    assert len(prompt.splitlines()) == 1 + 19
    for name in functions:
        assert f"    def {name}(" in prompt
    assert ("def find_and_replace(pattern: str, replacement: str, paragraph_indices: list[int] | None = None) -> str:"
            in prompt)


def test_arguments_are_checked_before_anything_runs():
    with pytest.raises(ValueError, match="paragraph_indices must not be empty"):
        REGISTRY.validate("WriterTools", "set_font", ("Arial", []))
    with pytest.raises(ValueError, match="must be one of"):
        REGISTRY.validate("WriterTools", "set_paragraph_alignment", ("middle",))
    with pytest.raises(ValueError, match="between 0.25 and 10"):
        REGISTRY.validate("WriterTools", "set_line_spacing", (0,))
    assert REGISTRY.validate("WriterTools", "set_color", ("x", 0xFF0000))["color"] == 0xFF0000


def test_helpers():
    assert _u16("a😀b", 2) == 3 and _u16("abc", 3) == 3  # a cursor counts UTF-16 units
    with pytest.raises(ApiError, match="not a valid regular expression"):
        _regex("(unclosed")
    starts = [m.group() for m in _WORD_START.finditer("don't stop e-mail iPhone 3d (quoted) élan")]
    assert starts == ["d", "s", "e", "m", "i", "q", "é"]


# --- a real desktop -----------------------------------------------------------------------------

def office(server):
    return server[0].slots[0].desktop.office


def doc(server):
    return office(server).desktop.getCurrentComponent()


def paragraphs(server) -> list:
    enum = doc(server).getText().createEnumeration()
    out = []
    while enum.hasMoreElements():
        element = enum.nextElement()
        if element.supportsService("com.sun.star.text.Paragraph"):
            out.append(element)
    return out


def texts(server) -> list[str]:
    return [p.getString() for p in paragraphs(server)]


def portions(paragraph) -> list:
    enum = paragraph.createEnumeration()
    out = []
    while enum.hasMoreElements():
        out.append(enum.nextElement())
    return out


def portion_with(server, index: int, text: str):
    return next(p for p in portions(paragraphs(server)[index]) if p.getString() == text)


def strikeout_by_char(paragraph) -> list[int]:
    cursor = paragraph.getText().createTextCursorByRange(paragraph.getStart())
    out = []
    for _ in paragraph.getString():
        cursor.collapseToEnd()
        cursor.goRight(1, True)
        out.append(cursor.CharStrikeout)
    return out


def writer(env, server, lines: list[str] | None = None):
    """A fresh episode with an empty Writer document focused, holding these paragraphs."""
    env.reset()
    obs, _ = act(env, "Agent.open_app('writer')")
    assert obs["focused_app"] == "writer"
    if lines:
        obs, _ = ok(env, f"WriterTools.write_text({chr(10).join(lines)!r})")
        assert texts(server) == lines
    return obs


@desktop
def test_write_text_get_paragraphs_and_app_info(env, server):
    writer(env, server)
    ok(env, "WriterTools.write_text('Report', bold=True, size=20)")
    obs, result = ok(env, "WriterTools.write_text('\\nThe cat sat.\\nA dog ran.')")
    assert result == "Wrote 24 characters"
    assert texts(server) == ["Report", "The cat sat.", "A dog ran."]
    title = portion_with(server, 0, "Report")
    assert (title.CharWeight, title.CharHeight) == (150.0, 20.0)
    assert portion_with(server, 1, "The cat sat.").CharWeight == 100.0  # bold=False is not inherited
    ok(env, "WriterTools.write_text(' Fast.', italic=True)")  # the cursor stayed after what was written
    assert texts(server)[2] == "A dog ran. Fast." and portion_with(server, 2, " Fast.").CharPosture.value == "ITALIC"

    obs, _ = ok(env, "WriterTools.get_paragraphs()")
    lines = obs["app_info"].splitlines()
    assert lines[0].startswith("Document 'Untitled") and lines[0].endswith(": 3 paragraphs")
    assert lines[1] == "Paragraph 0 (Standard): Report" and lines[3] == "Paragraph 2 (Standard): A dog ran. Fast."
    _, result = ok(env, "WriterTools.get_paragraphs()")
    assert json.loads(result) == ["Report", "The cat sat.", "A dog ran. Fast."]
    _, result = ok(env, "WriterTools.get_paragraphs(1, 1)")
    assert json.loads(result) == ["The cat sat."]
    fails(env, "WriterTools.get_paragraphs(3)", "start_index 3 is past the last paragraph", "has 3, 0-2")
    _, info = act(env, "WriterTools.write_text('')")
    assert info["exec_result"].startswith("Invalid action") and "text must have 1 to 100000 characters" in info["exec_result"]

    many = "".join(f"\nline {i} " + "y" * 60 for i in range(60))
    ok(env, f"WriterTools.write_text({many!r})")
    short = office(server).on_main_thread(lambda: WriterApi.app_info(doc(server), 600))
    assert len(short) <= 600 and short.splitlines()[0].endswith(": 63 paragraphs")
    assert short.splitlines()[-1].startswith("… (") and short.splitlines()[-1].endswith(" more paragraphs)"), short


@desktop
def test_pattern_apis(env, server):
    writer(env, server, ["The cat sat on the mat.", "Cats: cat, CAT and cat.", "No felines here."])
    p = lambda: paragraphs(server)  # noqa: E731
    cursor = doc(server).getText().createTextCursorByRange(p()[0].getStart())
    cursor.goRight(3, True)
    cursor.CharWeight = 150.0  # "The" is bold and must stay bold through a replacement after it

    _, result = ok(env, r"WriterTools.find_and_replace('c(a)t', r'd\1wg', [0, 1])")
    assert result == "Made 3 replacements in 2 paragraphs"
    assert texts(server)[:2] == ["The dawg sat on the mat.", "Cats: dawg, CAT and dawg."]
    assert portion_with(server, 0, "The").CharWeight == 150.0
    cursor = doc(server).getText().createTextCursorByRange(p()[0].getStart())
    cursor.goRight(4, False)
    cursor.goRight(4, True)
    assert cursor.getString() == "dawg" and cursor.CharWeight == 100.0  # from the replaced "cat", not "The "
    _, result = ok(env, "WriterTools.find_and_replace('(?i)cat', 'dog')")
    assert texts(server)[1] == "dogs: dawg, dog and dawg." and result == "Made 2 replacements in 1 paragraphs"
    _, result = ok(env, "WriterTools.find_and_replace('zebra', 'x')")
    assert "nothing replaced" in result

    # Wrong arguments: a sentence the model can act on, and the document untouched.
    before = texts(server)
    fails(env, "WriterTools.find_and_replace('dawg', 'x', [0, 3])", "paragraph index 3 is out of range", "(0-2)")
    fails(env, "WriterTools.find_and_replace('(dawg', 'x')", "not a valid regular expression")
    fails(env, r"WriterTools.find_and_replace('dawg', r'\2')", "replacement", "not valid")
    fails(env, "WriterTools.set_color('dawg', 'reddish')", "unknown color 'reddish'")
    assert texts(server) == before

    _, result = ok(env, "WriterTools.set_color('dawg', '#00FF00', [1])")
    assert result == "Colored 2 matches of 'dawg'"
    assert portion_with(server, 1, "dawg").CharColor == 0x00FF00
    assert {q.CharColor for q in portions(paragraphs(server)[0])} == {-1}
    ok(env, "WriterTools.set_strikethrough('mat')")
    assert portion_with(server, 0, "mat").CharStrikeout == 1 and portion_with(server, 0, " dawg sat on the ").CharStrikeout == 0
    ok(env, "WriterTools.set_font_size(18, 'felines')")
    assert portion_with(server, 2, "felines").CharHeight == 18.0 and portion_with(server, 2, "No ").CharHeight == 12.0

    # Highlighting: found by color, then removed.
    for index, word in ((0, "sat"), (2, "here")):
        s = texts(server)[index]
        c = doc(server).getText().createTextCursorByRange(p()[index].getStart())
        c.goRight(s.index(word), False)
        c.goRight(len(word), True)
        c.CharBackColor = 0xFFFF00
    _, result = ok(env, "WriterTools.find_highlighted_text('yellow')")
    assert json.loads(result) == ["sat", "here"]
    _, result = ok(env, "WriterTools.find_highlighted_text('#00FF00')")
    assert json.loads(result) == []
    ok(env, "WriterTools.remove_highlighting([0])")
    _, result = ok(env, "WriterTools.find_highlighted_text('#FFFF00')")
    assert json.loads(result) == ["here"]
    ok(env, "WriterTools.remove_highlighting()")
    assert json.loads(ok(env, "WriterTools.find_highlighted_text('yellow')")[1]) == []

    _, result = ok(env, "WriterTools.capitalize_words([0, 2])")
    assert texts(server) == ["The Dawg Sat On The Mat.", "dogs: dawg, dog and dawg.", "No Felines Here."]
    assert result == "Capitalized 7 words"
    assert strikeout_by_char(paragraphs(server)[0]) == [0] * 20 + [1, 1, 1, 0]  # "Mat" is still struck through


@desktop
def test_paragraph_formatting_apis(env, server):
    writer(env, server, ["one", "two", "three"])
    ok(env, "WriterTools.set_font('Noto Serif', [1])")
    assert [q.CharFontName for q in paragraphs(server)][1] == "Noto Serif"
    assert paragraphs(server)[0].CharFontName != "Noto Serif"
    ok(env, "WriterTools.set_line_spacing(1.5)")
    assert all((q.ParaLineSpacing.Mode, q.ParaLineSpacing.Height) == (0, 150) for q in paragraphs(server))
    ok(env, "WriterTools.set_paragraph_alignment('center', [0])")
    ok(env, "WriterTools.set_paragraph_alignment('justify', [2])")
    assert [q.ParaAdjust for q in paragraphs(server)] == [3, 0, 2]  # CENTER, LEFT, BLOCK
    fails(env, "WriterTools.set_paragraph_alignment('right', [-1])", "paragraph index -1 is out of range")
    _, info = act(env, "WriterTools.set_paragraph_alignment('middle')")
    assert info["exec_result"].startswith("Invalid action") and "must be one of" in info["exec_result"]

    ok(env, "WriterTools.set_default_font('DejaVu Sans Mono', 14)")
    style = doc(server).getStyleFamilies().getByName("ParagraphStyles").getByName("Standard")
    assert (style.CharFontName, style.CharHeight) == ("DejaVu Sans Mono", 14.0)
    assert paragraphs(server)[2].CharHeight == 14.0 and paragraphs(server)[1].CharFontName == "Noto Serif"


@desktop
def test_insert_apis(env, server):
    from PIL import Image

    writer(env, server, ["Intro"])
    tmp_path = desktop_files(server)  # the API only reaches the desktop's home folder
    d = doc(server)
    _, info = act(env, "WriterTools.insert_formula_at_cursor('a^2 + b^2 = c^2')")
    objects = d.getEmbeddedObjects()  # install.sh installs libreoffice-math for this
    assert not info["exec_result"].startswith("Action failed"), info["exec_result"]
    assert objects.getCount() == 1
    assert objects.getByIndex(0).getEmbeddedObject().Formula == "a^2 + b^2 = c^2"

    image = tmp_path / "dot.png"
    picture = io.BytesIO()
    Image.new("RGB", (200, 100), "red").save(picture, format="PNG")
    put(server, image, picture.getvalue())
    fails(env, "WriterTools.insert_image_at_cursor('dot.png')", "must be in the home folder")
    fails(env, f"WriterTools.insert_image_at_cursor({inside(tmp_path / 'none.png')!r})", "no image file")
    text_file = tmp_path / "notes.txt"
    put(server, text_file, b"hello")
    fails(env, f"WriterTools.insert_image_at_cursor({inside(text_file)!r})", "not an image")
    _, result = ok(env, f"WriterTools.insert_image_at_cursor({inside(image)!r}, width=100)")
    graphics = d.getGraphicObjects()
    assert graphics.getCount() == 1 and "(100x50 px)" in result
    size = graphics.getByIndex(0).Size
    assert abs(size.Width - 2646) <= 2 and abs(size.Height - 1323) <= 2  # 100x50 px at 96 dpi, in 1/100 mm

    ok(env, "WriterTools.insert_page_break()")
    ok(env, "WriterTools.write_text('Page two')")
    ok(env, "WriterTools.insert_page_break('end_of_document')")
    ok(env, "WriterTools.write_text('Page three')")
    ps = paragraphs(server)
    assert [q.getString() for q in ps][1:] == ["Page two", "Page three"]
    assert [q.BreakType.value for q in ps] == ["NONE", "PAGE_BEFORE", "PAGE_BEFORE"]
    assert d.getCurrentController().PageCount == 3

    _, result = ok(env, "WriterTools.add_page_numbers('bottom_right', 5, 'Page 1 of N')")
    style = d.getStyleFamilies().getByName("PageStyles").getByName(ps[0].PageStyleName)
    assert style.FooterIsOn and style.FooterText.getString().startswith("Page ") and " of " in style.FooterText.getString()
    fields = style.FooterText.createEnumeration().nextElement()
    kinds = [q.TextPortionType for q in portions(fields)]
    assert kinds.count("TextField") == 2 and ps[0].PageNumberOffset == 5
    footer = style.FooterText.createEnumeration().nextElement()
    assert footer.ParaAdjust == 1  # RIGHT
    ok(env, "WriterTools.add_page_numbers('top_center')")
    assert style.HeaderIsOn and style.HeaderText.createEnumeration().nextElement().ParaAdjust == 3
    assert ps[0].PageNumberOffset == 1
    _, info = act(env, "WriterTools.add_page_numbers('middle')")
    assert info["exec_result"].startswith("Invalid action")


@desktop
def test_file_apis(env, server):
    import uno

    writer(env, server, ["Saved text"])
    tmp_path = desktop_files(server)  # the API only reaches the desktop's home folder
    fails(env, "WriterTools.save()", "has no file yet")
    fails(env, "WriterTools.export_to_pdf()", "never been saved")
    fails(env, "WriterTools.export_to_pdf('out.pdf')", "must be in the home folder")
    fails(env, f"WriterTools.export_to_pdf({inside(tmp_path)!r}, 'a/b.pdf')", "without folders")

    path = tmp_path / "letter.odt"
    d = doc(server)  # LibreOffice runs in the desktop's sandbox: it knows the file as /home/user/…
    office(server).on_main_thread(lambda: d.storeAsURL(uno.systemPathToFileUrl("/home/user/files/letter.odt"), ()))
    ok(env, "WriterTools.write_text(' more')")
    assert d.isModified()
    _, result = ok(env, "WriterTools.save()")
    assert not d.isModified() and result.startswith("Saved file://")

    _, result = ok(env, "WriterTools.export_to_pdf()")
    assert result == "/home/user/files/letter.pdf" and (tmp_path / "letter.pdf").read_bytes().startswith(b"%PDF")
    _, result = ok(env, f"WriterTools.export_to_pdf({inside(tmp_path / 'x.pdf')!r}, quality='high')")
    assert (tmp_path / "x.pdf").read_bytes().startswith(b"%PDF")
    _, result = ok(env, f"WriterTools.export_to_pdf({inside(tmp_path)!r}, 'named')")
    assert result == "/home/user/files/named.pdf" and (tmp_path / "named.pdf").exists()
    fails(env, f"WriterTools.export_to_pdf({inside(path / 'y.pdf')!r})", "could not write")


@desktop
def test_writer_tools_need_a_focused_text_document(env, server):
    env.reset()
    obs, _ = act(env, "Agent.open_app('calc')")
    assert obs["focused_app"] == "calc"
    result = fails(env, "WriterTools.write_text('x')")
    assert result == "Action failed: WriterTools needs a focused writer document; open or switch to one first"
