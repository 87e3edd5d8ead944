"""Writer's and Impress's formatting and settings metrics, on documents made here that agree and disagree."""

from __future__ import annotations

import docx
import pytest
from docx.enum.text import WD_BREAK, WD_PARAGRAPH_ALIGNMENT, WD_TAB_ALIGNMENT
from docx.shared import Pt, RGBColor
from pptx import Presentation
from pptx.util import Inches

import computerrl.tasks.metrics  # noqa: F401 - registers every metric
from computerrl.tasks.registry import METRICS

TEXT = ["Alpha line", "Beta line"]


def m(name, *args, **options):
    return METRICS[name](*args, **options)


def writer(path, texts=TEXT, spacing=None, center=False, **extra):
    doc = docx.Document()
    for i, t in enumerate(texts):
        p = doc.add_paragraph(t)
        if spacing:
            p.paragraph_format.line_spacing = spacing
        if center and i == 0:
            p.paragraph_format.alignment = WD_PARAGRAPH_ALIGNMENT.CENTER
    for make in extra.values():
        make(doc)
    doc.save(path)
    return str(path)


def test_line_spacing_and_centering(tmp_path):
    double, single = writer(tmp_path / "a.docx", spacing=2.0), writer(tmp_path / "b.docx", spacing=1.0)
    assert m("compare_line_spacing", double, writer(tmp_path / "c.docx", spacing=2.0)) == 1.0
    assert m("compare_line_spacing", single, double) == 0.0
    assert m("compare_line_spacing", writer(tmp_path / "d.docx", ["Other"], spacing=2.0), double) == 0.0  # the gate
    assert m("is_first_line_centered", writer(tmp_path / "e.docx", center=True)) == 1.0
    assert m("is_first_line_centered", single) == 0.0


def test_tables_page_breaks_and_footers(tmp_path):
    def table(cells):
        def make(doc):
            t = doc.add_table(rows=2, cols=2)
            for (i, j), v in cells.items():
                t.cell(i, j).text = v
        return make

    a = writer(tmp_path / "a.docx", t=table({(0, 0): "x", (1, 1): "y"}))
    assert m("compare_docx_tables", a, writer(tmp_path / "b.docx", t=table({(0, 0): "x ", (1, 1): "y"}))) == 1.0
    assert m("compare_docx_tables", a, writer(tmp_path / "c.docx", t=table({(0, 0): "x"}))) == 0.0
    assert m("compare_docx_tables", a, writer(tmp_path / "d.docx")) == 0.0

    def breaks(n):
        def make(doc):
            for _ in range(n):
                doc.paragraphs[0].add_run().add_break(WD_BREAK.PAGE)
        return make

    two = writer(tmp_path / "e.docx", b=breaks(2))
    assert m("contains_page_break", two, {"page_break_count": 2}) == 1.0
    assert m("contains_page_break", two, {"page_break_count": 1}) == 0.0
    assert m("contains_page_break", writer(tmp_path / "f.docx"), {}) == 0.0

    def footer(text):
        def make(doc):
            doc.sections[0].footer.paragraphs[0].text = text
        return make

    assert m("has_page_numbers_in_footers", writer(tmp_path / "g.docx", f=footer("Page 1"))) == 1.0
    assert m("has_page_numbers_in_footers", writer(tmp_path / "h.docx", f=footer("Page"))) == 0.0


def test_runs_subscript_italics_and_colours(tmp_path):
    def runs(subscript=False, italic_size=None, colours=None):
        def make(doc):
            p = doc.paragraphs[0]
            p.text = ""
            r = p.add_run("Alpha")
            r.font.subscript = subscript or None
            if italic_size:
                r.italic, r.font.size = True, Pt(italic_size)
            p.add_run(" line")
            if colours:
                cell = doc.add_table(rows=1, cols=1).cell(0, 0)
                for word, colour in colours:
                    cell.paragraphs[0].add_run(word).font.color.rgb = RGBColor(*colour)
        return make

    sub = writer(tmp_path / "a.docx", r=runs(subscript=True))
    assert m("compare_subscript_contains", sub, writer(tmp_path / "b.docx", r=runs(subscript=True))) == 1.0
    assert m("compare_subscript_contains", writer(tmp_path / "c.docx", r=runs()), sub) == 0.0
    gold = writer(tmp_path / "d.docx", r=runs(italic_size=14))
    assert m("check_italic_font_size_14", gold, gold) == 1.0
    assert m("check_italic_font_size_14", writer(tmp_path / "e.docx", r=runs(italic_size=12)), gold) == 0.0
    right = writer(tmp_path / "f.docx", r=runs(colours=[("apple", (255, 0, 0)), ("bee", (0, 0, 255))]))
    wrong = writer(tmp_path / "g.docx", r=runs(colours=[("apple", (0, 0, 255)), ("bee", (0, 0, 255))]))
    assert m("evaluate_colored_words_in_tables", right, right) == 1.0
    assert m("evaluate_colored_words_in_tables", wrong, right) == 0.0


def test_font_names_strike_through_and_pdf_pages(tmp_path):
    def runs(path, font=None, strike_last=False):
        doc = docx.Document()
        for i, t in enumerate(TEXT):
            run = doc.add_paragraph().add_run(t)
            run.font.name, run.font.strike = font, strike_last and i == len(TEXT) - 1
        doc.save(path)
        return str(path)

    rule = {"font_name": "Liberation Serif"}
    assert m("compare_font_names", runs(tmp_path / "a.docx", "Liberation Serif"), rule) == 1.0
    assert m("compare_font_names", runs(tmp_path / "b.docx", "DejaVu Sans"), rule) == 0.0
    assert m("compare_font_names", runs(tmp_path / "c.docx"), rule) == 0.0  # the style's font is no direct one
    gold = writer(tmp_path / "gold.docx")
    assert m("evaluate_strike_through_last_paragraph", runs(tmp_path / "d.docx", strike_last=True), gold) == 1.0
    assert m("evaluate_strike_through_last_paragraph", runs(tmp_path / "e.docx"), gold) == 0.0
    assert m("evaluate_strike_through_last_paragraph", writer(tmp_path / "f.docx", ["Other"]), gold) == 0.0
    import fitz

    pdf = fitz.open()
    for _ in range(3):
        pdf.new_page()
    pdf.save(tmp_path / "three.pdf")
    assert m("check_pdf_pages", str(tmp_path / "three.pdf"), {"relation": "eq", "ref_value": 3}) == 1.0
    assert m("check_pdf_pages", str(tmp_path / "three.pdf"), {"relation": "lt", "ref_value": 3}) == 0.0
    assert m("check_pdf_pages", gold, {"relation": "eq", "ref_value": 1}) == 0.0  # no PDF
    with pytest.raises(ValueError, match="not a comparison"):
        m("check_pdf_pages", str(tmp_path / "three.pdf"), {"relation": "__class__", "ref_value": 3})


def test_tab_stops_score_by_distance(tmp_path):
    def tabbed(position):
        def make(doc):
            for p in doc.paragraphs:
                p.text = p.text.replace(" ", "\t")
                p.paragraph_format.tab_stops.add_tab_stop(Inches(position), WD_TAB_ALIGNMENT.RIGHT)
        return make

    gold = writer(tmp_path / "gold.docx", t=tabbed(6))
    assert m("check_tabstops", writer(tmp_path / "a.docx", t=tabbed(6)), gold) == pytest.approx(1.0)
    near = m("check_tabstops", writer(tmp_path / "b.docx", t=tabbed(5)), gold)
    assert 0.5 < near < 1.0
    assert m("check_tabstops", writer(tmp_path / "c.docx"), gold) == 0.0  # no stop where the gold has one
    assert m("check_tabstops", gold, gold, word_number_split_by_tabstop=2) == 0.0  # one word before the tab
    assert m("check_tabstops", gold, gold, word_number_split_by_tabstop=1) == pytest.approx(1.0)


def test_lines_references_and_new_lines(tmp_path):
    a = writer(tmp_path / "a.docx", ["x", "y", "x"])
    assert m("compare_docx_lines", a, writer(tmp_path / "b.docx", ["y", "x"])) == 1.0
    assert m("compare_docx_lines", a, writer(tmp_path / "c.docx", ["y"])) == 0.0
    assert m("compare_docx_files_and_ignore_new_lines", writer(tmp_path / "d.docx", ["x", "", "y"]),
             writer(tmp_path / "e.docx", ["x", "y"]), ignore_blanks=False) == 1.0
    gold = writer(tmp_path / "g.docx", ["Essay", "References", "Smith, J. (2020). A title. Journal, 1(2), 3-4."])
    close = writer(tmp_path / "h.docx", ["Essay", "References", "Smith, J. (2020). A title. Journal, 1, 3-4."])
    assert m("compare_references", gold, gold, reference_base_result=0.6) == pytest.approx(1.0)
    assert 0 < m("compare_references", close, gold, reference_base_result=0.6) < 1
    assert m("compare_references", writer(tmp_path / "i.docx", ["Essay"]), gold) == 0.0


XCU = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema">
<item oor:path="/org.openoffice.Office.Writer/DefaultFont"><prop oor:name="Standard" oor:op="fuse"><value>{font}</value></prop></item>
<item oor:path="/org.openoffice.Office.Impress/Misc/Start"><prop oor:name="EnablePresenterScreen" oor:op="fuse"><value>{screen}</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop oor:name="AutoSaveTimeIntervall" oor:op="fuse"><value>{minutes}</value></prop></item>
</oor:items>"""


def test_libreoffice_settings(tmp_path):
    on = tmp_path / "on.xcu"
    on.write_text(XCU.format(font="Times New Roman", screen="false", minutes=3))
    off = tmp_path / "off.xcu"
    off.write_text(XCU.format(font="Liberation Serif", screen="true", minutes=10))
    assert m("find_default_font", str(on), {"font_name": "Times New Roman"}) == 1.0
    assert m("find_default_font", str(off), {"font_name": "Times New Roman"}) == 0.0
    assert m("check_presenter_console_disable", str(on)) == 1.0
    assert m("check_presenter_console_disable", str(off)) == 0.0
    assert m("check_presenter_console_disable", None) == 0.0
    assert m("check_auto_saving_time", str(on), {"minutes": 3}) == 1.0
    assert m("check_auto_saving_time", str(off), {"minutes": 3}) == 0.0


def test_slides_orientation_and_picture_fill(tmp_path):
    from PIL import Image

    prs = Presentation()
    prs.slide_width, prs.slide_height = Inches(7.5), Inches(10)
    prs.save(tmp_path / "portrait.pptx")
    assert m("check_slide_orientation_Portrait", str(tmp_path / "portrait.pptx")) == 1.0
    Presentation().save(tmp_path / "landscape.pptx")
    assert m("check_slide_orientation_Portrait", str(tmp_path / "landscape.pptx")) == 0.0

    Image.new("RGB", (40, 30), "red").save(tmp_path / "pic.png")

    def deck(name, left, top, width, height):
        prs = Presentation()
        slide = prs.slides.add_slide(prs.slide_layouts[6])
        slide.shapes.add_picture(str(tmp_path / "pic.png"), left, top, width, height)
        prs.save(tmp_path / name)
        return str(tmp_path / name)

    original = deck("orig.pptx", Inches(1), Inches(1), Inches(2), Inches(1.5))
    filled = deck("filled.pptx", 0, 0, Inches(10), Inches(7.5))
    assert m("check_image_stretch_and_center", filled, original) == 1.0
    assert m("check_image_stretch_and_center", original, original) == 0.0
