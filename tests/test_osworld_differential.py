"""Our metrics against OSWorld's own, on the same generated file pairs: the same verdicts, or a listed
difference with its reason.

OSWorld's metric functions come from the `desktop-env` package on PyPI, installed by `install.sh --all` without
its dependencies in a test-only place (.venv/osworld). Its modules are loaded one by one, without the
package's __init__ (which imports everything); what they import and no metric compared here uses (OCR by
easyocr, audio fingerprints, two PDF libraries) is an empty stand-in. Audio and video metrics run on the real
librosa, FastDTW, OpenCV and imagehash, which the project itself depends on.
"""

from __future__ import annotations

import importlib
import json
import logging
import sqlite3
import sys
import types
from pathlib import Path

import docx
import openpyxl
import pytest
from openpyxl.formatting.rule import CellIsRule, FormulaRule, Rule
from openpyxl.styles import Font, PatternFill
from openpyxl.styles.differential import DifferentialStyle
from PIL import Image, ImageDraw, ImageEnhance
from pptx import Presentation
from pptx.util import Inches

import computerrl.tasks.metrics  # noqa: F401 - registers every metric
from computerrl.tasks.registry import METRICS
from osworld_cases_more import audio_cases, impress_cases, os_cases, video_cases, writer_cases

OSWORLD = Path(__file__).resolve().parents[1] / ".venv" / "osworld" / "desktop_env"
ABSENT = ("pdfplumber", "borb", "borb.pdf", "easyocr", "acoustid")
MODULES = ("utils", "chrome", "general", "table", "docs", "slides", "vlc", "gimp", "thunderbird", "basic_os")
# case -> why OSWorld's verdict and ours differ there (each is asserted to still differ)
DIFFERENT = {
    "is_shortcut_on_desktop/name": "desktop-env 1.0.2 (October 2025) takes only the exact line 'Name=<name>'; OSWorld's "
                                   "current code also takes a part of the name in any case, and we follow it",
    "compare_conference_city_in_order/accents": "desktop-env 1.0.2 matches city names as written (case, accents); "
                                                "OSWorld's current code matches them folded, and we follow it",
    **{f"check_page_number_colors/{case}": "OSWorld's reads a colour's hex digits one place off (blue from the "
                                           "last digit alone): pure blue 0000FF and navy 2A6099 fail its blue check"
       for case in ("blue", "navy blue")},
}


@pytest.fixture(scope="module")
def osworld():
    assert OSWORLD.exists(), "run `bash install.sh --all`: it installs OSWorld's desktop-env in .venv/osworld"
    saved = {name: sys.modules.get(name) for name in (*ABSENT, "desktop_env", "desktop_env.evaluators",
                                                      "desktop_env.evaluators.metrics")}
    for name in ABSENT:
        stub = types.ModuleType(name)
        stub.__getattr__ = lambda attr: None
        sys.modules[name] = stub
    # Some of OSWorld's log calls have format strings that do not fit their arguments. Its runs print the
    # error and go on; pytest's capture handler re-raises it unless told not to, turning a verdict into a raise.
    raise_exceptions, logging.raiseExceptions = logging.raiseExceptions, False
    for package, path in (("desktop_env", OSWORLD), ("desktop_env.evaluators", OSWORLD / "evaluators"),
                          ("desktop_env.evaluators.metrics", OSWORLD / "evaluators" / "metrics")):
        module = types.ModuleType(package)
        module.__path__ = [str(path)]
        sys.modules[package] = module
    funcs = {}
    for name in MODULES:
        module = importlib.import_module(f"desktop_env.evaluators.metrics.{name}")
        funcs.update({k: v for k, v in vars(module).items() if callable(v) and not k.startswith("_")})
    yield funcs
    logging.raiseExceptions = raise_exceptions
    for name, module in saved.items():
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module


def verdict(fn, args, options):
    try:
        return round(float(fn(*args, **options)), 4)
    except Exception:  # noqa: BLE001 - a metric that raises gives no verdict, whatever it raises
        return "raised"


def cases(tmp: Path) -> list[tuple[str, str, tuple, dict]]:
    """(metric, case name, arguments, options): agreeing and disagreeing inputs for each metric."""
    out = []

    def add(metric, name, *args, **options):
        out.append((metric, name, args, options))

    # Chrome and rules
    tabs = [{"title": "", "url": "https://www.airbnb.com/"}, {"title": "", "url": "https://www.lonelyplanet.com"}]
    for name, urls in (("same", ["https://www.airbnb.com", "https://lonelyplanet.com/"]),
                       ("other", ["https://www.airbnb.com", "https://www.tripadvisor.com"]),
                       ("fewer", ["https://www.airbnb.com"])):
        add("is_expected_tabs", name, tabs, {"type": "url", "urls": urls})
    for name, url in (("same", "https://www.amazon.co.uk/"), ("http", "http://amazon.com"),
                      ("path", "https://amazon.com/x")):
        add("is_expected_active_tab", name, {"url": "https://www.amazon.com"}, {"type": "url", "url": url})
    add("is_expected_url_pattern_match", "match", "https://www.dmv.virginia.gov/licenses", {"expected": [r"dmv\.virginia"]})
    add("is_expected_url_pattern_match", "no match", "https://www.dmv.gov/", {"expected": [r"virginia", "gov"]})
    roots = {"bookmark_bar": {"children": [{"type": "folder", "name": "Favorites", "children": []},
                                           {"type": "url", "name": "a", "url": "https://a.org/"}]}}
    add("is_expected_bookmarks", "folders", roots, {"type": "bookmark_bar_folders_names", "names": ["Favorites"]})
    add("is_expected_bookmarks", "urls", roots, {"type": "bookmark_bar_websites_urls", "urls": ["https://a.org"]})
    add("check_history_deleted", "kept", [["https://youtube.com/x", "", 1]], {"type": "keywords", "keywords": ["youtube"]})
    add("check_history_deleted", "deleted", [["https://a.org", "", 1]], {"type": "keywords", "keywords": ["youtube"]})
    add("is_cookie_deleted", "kept", [[0, ".amazon.com"]], {"type": "domains", "domains": [".amazon.com"]})
    add("is_cookie_deleted", "deleted", [[0, "smile.amazon.com"]], {"type": "domains", "domains": [".amazon.com"]})
    add("check_enabled_experiments", "order", ["b@1", "a@2"], {"type": "names", "names": ["a", "b"]})
    add("check_font_size", "range", {"default_font_size": 20}, {"type": "range", "min": 16, "max": 99999})
    add("check_font_size", "edge", {"default_font_size": 16}, {"type": "range", "min": 16, "max": 99999})
    add("is_shortcut_on_desktop", "name", {"a.desktop": "Name=Play 2048\n"}, {"type": "name", "name": "play 2048"})
    add("is_shortcut_on_desktop", "exec", {"a.desktop": "Exec=chromium\n"}, {"type": "exec", "exec": "Chromium"})
    for name, result, rules in (
            ("equal", {"a": "1", "b": ["x"]}, {"expected": {"a": "1", "b": ["x"]}}),
            ("text", "{'a': '1'}", {"expected": {"a": "1"}}),
            ("contained", {"a": "New York City"}, {"expected": {"a": "York"}, "expect_in_result": True}),
            ("failed", {"a": "1"}, {"expected": {"a": "__EVALUATION_FAILED__"}})):
        add("check_direct_json_object", name, result, rules)
    add("is_in_list", "in", ["/a", "/b"], {"expected": "/b"})
    add("literal_match", "list", ["A", "b"], ["a", "B"], type="list", ignore_case=True)
    add("exact_match", "text", "uint32 0\n", {"expected": "uint32 0\n"})
    add("check_include_exclude", "both", "Done: filters-vignette", {"include": ["vignette"], "exclude": ["error"]})

    # The accessibility tree (OSWorld's XML, as the accessibility_tree getter gives it)
    ns = 'xmlns:st="https://accessibility.ubuntu.example.org/ns/state" ' \
         'xmlns:attr="https://accessibility.ubuntu.example.org/ns/attributes"'
    tree = (f'<desktop-frame {ns}><application name="Thunderbird"><frame name="Home">'
            '<page-tab-list name="" attr:id="tabmail-tabs"><page-tab name="About Profiles" st:selected="true"/>'
            '</page-tab-list><label name="l">Welcome back</label></frame></application>'
            '<application name="soffice"><document-frame name="Slides View"/></application></desktop-frame>')
    profiles = 'application[name=Thunderbird] page-tab-list[attr|id="tabmail-tabs"]>page-tab[name="About Profiles"]'
    for name, rules in (("selector", [{"selectors": [profiles]}]),
                        ("selector missing", [{"selectors": [profiles.replace("Profiles", "Config")]}]),
                        ("xpath state", [{"xpath": "//page-tab[@st:selected='true']"}]),
                        ("exact text", [{"xpath": "//label", "text": "Welcome back", "exact": True}]),
                        ("fuzzy text", [{"xpath": "//label", "text": "Welcome", "exact": False}]),
                        ("no text", [{"xpath": "//page-tab", "text": "About", "exact": False}])):
        add("check_accessibility_tree", name, tree, rules)
    add("check_left_panel", "open", tree)
    add("check_left_panel", "closed", tree.replace("Slides View", "Outline View"))

    # General files
    (tmp / "x.json").write_text(json.dumps({"a": {"b": ["smart", 1]}, "c": "folderTree smart"}))
    add("check_json", "expect", str(tmp / "x.json"), {"expect": [{"key": ["c"], "method": "re", "ref": r"\bsmart\b"}]})
    add("check_json", "missing key", str(tmp / "x.json"), {"expect": [{"key": ["z"], "method": "eq", "ref": 1}]})
    (tmp / "a.csv").write_text("url,user\nimap://x,anna\n")
    add("check_csv", "expect", str(tmp / "a.csv"), {"expect": [{"user": "anna"}]})
    add("check_csv", "unexpect", str(tmp / "a.csv"), {"unexpect": [{"url": "imap://x", "user": "anna"}]})
    (tmp / "1.txt").write_text("a\nb\nc\nd\n")
    (tmp / "2.txt").write_text("a\nb\nx\nd\n")
    add("diff_text_file", "partial", str(tmp / "2.txt"), str(tmp / "1.txt"))
    add("check_list", "regex", str(tmp / "1.txt"), {"expect": ["^b$"], "unexpect": ["^x$"]})
    with sqlite3.connect(tmp / "g.sqlite") as conn:
        conn.execute("create table t (starred int)")
        conn.execute("insert into t values (1)")
    add("run_sqlite3", "any", str(tmp / "g.sqlite"), {"sql": "select sum(starred) > 0 from t"})

    # Spreadsheets
    def book(name, rows, chart=None, validation=None, autofilter=None):
        wb = openpyxl.Workbook()
        wb.active.title = "Sheet1"
        for row in rows:
            wb.active.append(row)
        if chart:
            c = chart()
            c.add_data(openpyxl.chart.Reference(wb.active, min_col=2, min_row=1, max_row=len(rows)), titles_from_data=True)
            wb.active.add_chart(c, "E2")
        if validation:
            from openpyxl.worksheet.datavalidation import DataValidation

            dv = DataValidation(type="list", formula1=validation)
            dv.add("D2:D29")
            wb.active.add_data_validation(dv)
        if autofilter:
            wb.active.auto_filter.ref = "A1:B3"
            wb.active.auto_filter.add_filter_column(0, autofilter)
        wb.save(tmp / name)
        return str(tmp / name)

    rows = [["k", "v"], ["a", 1], ["b", 2]]
    gold = book("gold.xlsx", rows, chart=openpyxl.chart.BarChart)
    same, line = book("same.xlsx", rows, chart=openpyxl.chart.BarChart), book("line.xlsx", rows, chart=openpyxl.chart.LineChart)
    other = book("other.xlsx", [["k", "v"], ["a", 1], ["b", 3]], chart=openpyxl.chart.BarChart)
    for name, result in (("same", same), ("other data", other), ("other chart", line)):
        add("compare_table", name, result, gold, rules=[{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"},
                                                        {"type": "chart", "sheet_idx0": 0, "sheet_idx1": "EI0",
                                                         "chart_props": ["type"]}])
    add("compare_table", "check_cell", same, None, rules=[{"type": "check_cell", "sheet_idx": 0, "coordinate": "B3",
                                                           "props": {"value": {"method": "eq", "ref": 2}}}])
    dv = {"type": "data_validation", "sheet_idx": 0, "dv_props": [{
        "ranges": {"method": "spreadsheet_range", "ref": ["D2:D29", "D1:D1048576"]}, "type": {"method": "eq", "ref": "list"},
        "formula1": {"method": "str_set_eq", "ref": ["Pass", "Fail", "Held"]}}]}
    add("compare_table", "validation", book("dv1.xlsx", rows, validation='"Held,Pass,Fail"'), None, rules=[dv])
    add("compare_table", "validation wrong", book("dv2.xlsx", rows, validation='"Pass,Fail"'), None, rules=[dv])
    f_gold = book("fg.xlsx", rows, autofilter=["a", "b"])
    add("compare_table", "filter", book("f1.xlsx", rows, autofilter=["b", "a"]), f_gold,
        rules=[{"type": "filter", "sheet_idx0": 0, "sheet_idx1": "EI0"}])
    add("compare_table", "filter wrong", book("f2.xlsx", rows, autofilter=["a"]), f_gold,
        rules=[{"type": "filter", "sheet_idx0": 0, "sheet_idx1": "EI0"}])
    (tmp / "same-Sheet1.csv").write_text("k,v\na,$1.00\n\n")
    (tmp / "gold-Sheet1.csv").write_text("k,v\na,$1.00\n")
    (tmp / "other-Sheet1.csv").write_text("k,v\na,1\n")
    add("compare_table", "printed", same, gold, rules=[{"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"}])
    add("compare_table", "printed wrong", other, gold, rules=[{"type": "sheet_print", "sheet_idx0": "RNSheet1",
                                                               "sheet_idx1": "ENSheet1"}])

    # compare_table's style rule: direct formats against conditional ones, whose formulas `formulas` computes
    green, red = Font(color="FF00FF00"), PatternFill("solid", fgColor="FFFF0000")
    sales = [["rep", "total"], ["ann", 5], ["bob", 9], ["cy", 2], ["dee", 7]]

    def styled(name, direct=(), rules=()):
        wb = openpyxl.Workbook()
        for row in sales:
            wb.active.append(row)
        for coord in direct:
            wb.active[coord].font, wb.active[coord].fill = green, red
        for rng, rule in rules:
            wb.active.conditional_formatting.add(rng, rule)
        wb.save(tmp / name)
        return str(tmp / name)

    def dxf():
        return {"font": Font(color="FF00FF00"), "fill": PatternFill(bgColor="FFFF0000")}

    style_gold = styled("style-gold.xlsx", direct=["B3"])
    expression = lambda f: ("B2:B5", FormulaRule(formula=[f], **dxf()))  # noqa: E731
    cell_is = lambda op, f: ("B2:B5", CellIsRule(operator=op, formula=f, **dxf()))  # noqa: E731
    for case, result in (
            ("direct", styled("s1.xlsx", direct=["B3"])),
            ("direct wrong", styled("s2.xlsx", direct=["B4"])),
            ("expression", styled("s3.xlsx", rules=[expression("$B2=MAX($B$2:$B$5)")])),
            ("expression wrong", styled("s4.xlsx", rules=[expression("$B2=MIN($B$2:$B$5)")])),
            ("cellIs constant", styled("s5.xlsx", rules=[cell_is("greaterThan", ["8"])])),
            ("cellIs between", styled("s6.xlsx", rules=[cell_is("between", ["8", "10"])])),
            ("cellIs reference", styled("s7.xlsx", rules=[cell_is("equal", ["MAX($B$2:$B$5)"])])),
            ("unparsable", styled("s8.xlsx", rules=[expression("$B2=MAX($B$2:$B$5")])),
            ("top10 first", styled("s9.xlsx", rules=[("B2:B5", Rule(type="top10", rank=1, dxf=DifferentialStyle(
                font=Font(color="FF00FF00"))))])),
            ("top10 after expression", styled("s10.xlsx", rules=[
                expression("$B2=MAX($B$2:$B$5)"), ("B2:B5", Rule(type="top10", rank=1, dxf=DifferentialStyle(
                    font=Font(color="FF0000FF"))))]))):
        for props in (["font_color"], ["bgcolor", "font_bold"]):
            add("compare_table", f"style {case} {props}", result, style_gold,
                rules=[{"type": "style", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": props}])

    # Writer
    def writer(name, texts, spacing=None, center=False, subscript=False, italic_size=None, footer=None, breaks=0,
               font=None, strike=()):
        d = docx.Document()
        for i, t in enumerate(texts):
            p = d.add_paragraph()
            run = p.add_run(t)
            run.font.subscript = subscript or None
            run.font.name, run.font.strike = font, i in strike or None
            if italic_size:
                run.italic, run.font.size = True, docx.shared.Pt(italic_size)
            if spacing:
                p.paragraph_format.line_spacing = spacing
            if center and i == 0:
                p.paragraph_format.alignment = 1
        for _ in range(breaks):
            d.paragraphs[0].add_run().add_break(docx.enum.text.WD_BREAK.PAGE)
        if footer is not None:
            d.sections[0].footer.paragraphs[0].text = footer
        d.save(tmp / name)
        return str(tmp / name)

    text = ["Alpha line", "Beta line"]
    gold_doc = writer("g.docx", text, spacing=2.0)
    for name, result in (("same", writer("s.docx", text, spacing=2.0)), ("spacing", writer("sp.docx", text, spacing=1.0)),
                         ("text", writer("t.docx", ["Other"], spacing=2.0))):
        add("compare_line_spacing", name, result, gold_doc)
        add("compare_docx_files", name, result, gold_doc)
        add("compare_docx_lines", name, result, gold_doc)
    add("compare_docx_files", "fuzzy", writer("f.docx", ["Alpha lines", "Beta line"]), gold_doc, fuzzy_match=True)
    for name, result in (("all", writer("fn1.docx", text, font="Liberation Serif")),
                         ("other", writer("fn2.docx", text, font="DejaVu Sans")), ("inherited", writer("fn3.docx", text))):
        add("compare_font_names", name, result, {"font_name": "Liberation Serif"})
    for name, result in (("struck", writer("st1.docx", text, strike=(1,))), ("first", writer("st2.docx", text, strike=(0,))),
                         ("text", writer("st3.docx", ["Alpha", "Beta line"], strike=(1,)))):
        add("evaluate_strike_through_last_paragraph", name, result, writer("st0.docx", text))
    add("compare_subscript_contains", "sub", writer("sub1.docx", text, subscript=True), writer("sub2.docx", text, subscript=True))
    add("compare_subscript_contains", "none", writer("sub3.docx", text), writer("sub4.docx", text, subscript=True))
    add("is_first_line_centered", "centered", writer("c1.docx", text, center=True))
    add("is_first_line_centered", "left", writer("c2.docx", text))
    add("has_page_numbers_in_footers", "number", writer("pn1.docx", text, footer="Page 3"))
    add("has_page_numbers_in_footers", "none", writer("pn2.docx", text, footer="Page"))
    italic = writer("i1.docx", text, italic_size=14)
    add("check_italic_font_size_14", "14", italic, italic)
    add("check_italic_font_size_14", "12", writer("i2.docx", text, italic_size=12), italic)
    add("contains_page_break", "two", writer("b1.docx", text, breaks=2), {"page_break_count": 2})
    add("contains_page_break", "count", writer("b2.docx", text, breaks=1), {"page_break_count": 2})
    refs = writer("r1.docx", ["Essay", "References", "Smith, J. (2020). A title. Journal, 1(2), 3-4."])
    add("compare_references", "close", writer("r2.docx", ["Essay", "References", "Smith, J. (2020). A title. Journal, 1, 3-4."]),
        refs, reference_base_result=0.6)
    xcu = ('<?xml version="1.0"?><oor:items xmlns:oor="http://openoffice.org/2001/registry">'
           '<item oor:path="/org.openoffice.Office.Writer/DefaultFont"><prop oor:name="Standard"><value>{}</value></prop></item>'
           '<item oor:path="/org.openoffice.Office.Impress/Misc/Start"><prop oor:name="EnablePresenterScreen">'
           '<value>{}</value></prop></item></oor:items>')
    (tmp / "on.xcu").write_text(xcu.format("Times New Roman", "false"))
    (tmp / "off.xcu").write_text(xcu.format("Liberation Serif", "true"))
    for name in ("on", "off"):
        add("find_default_font", name, str(tmp / f"{name}.xcu"), {"font_name": "Times New Roman"})
        add("check_presenter_console_disable", name, str(tmp / f"{name}.xcu"))

    from odf.opendocument import OpenDocumentText
    from odf.style import Style, TextProperties
    from odf.text import P, Span

    def odt(name, colour):
        doc = OpenDocumentText()
        style = Style(name="hl", family="text")
        style.addElement(TextProperties(backgroundcolor=colour))
        doc.automaticstyles.addElement(style)
        paragraph = P(text="Call ")
        paragraph.addElement(Span(stylename=style, text="now"))
        doc.text.addElement(paragraph)
        doc.save(str(tmp / name))
        return str(tmp / name)

    plain = odt("plain.odt", "transparent")
    add("check_highlighted_words", "removed", odt("p2.odt", "transparent"), plain)
    add("check_highlighted_words", "kept", odt("hl.odt", "#ffff00"), plain)
    cities = ["Scottsdale", "Atlanta", "Lake Tahoe"] + ["X"] * 18
    expected = {"expected": ["Scottsdale", "Atlanta", ["Lake Tahoe", "Stateline"]] + ["X"] * 18}
    for name, column in (("same", cities), ("accents", ["Scottsdale, AZ", "ATLANTA", "Stateline"] + ["X"] * 18),
                         ("swapped", ["Atlanta", "Scottsdale", "Lake Tahoe"] + ["X"] * 18)):
        wb = openpyxl.Workbook()
        for row, city in enumerate(column, start=2):
            wb.active[f"C{row}"] = city
        wb.save(tmp / f"cities-{name}.xlsx")
        add("compare_conference_city_in_order", name, str(tmp / f"cities-{name}.xlsx"), expected)

    # Impress
    def deck(name, title, portrait=False):
        prs = Presentation()
        if portrait:
            prs.slide_width, prs.slide_height = Inches(7.5), Inches(10)
        slide = prs.slides.add_slide(prs.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = "Agenda"
        prs.save(tmp / name)
        return str(tmp / name)

    gold_deck = deck("gd.pptx", "Quarterly Review")
    add("compare_pptx_files", "same", deck("d1.pptx", "Quarterly Review"), gold_deck)
    add("compare_pptx_files", "title", deck("d2.pptx", "Quarterly"), gold_deck)
    add("check_slide_orientation_Portrait", "portrait", deck("p1.pptx", "x", portrait=True))
    add("check_slide_orientation_Portrait", "landscape", deck("p2.pptx", "x"))

    # compare_pptx_files' position options: a title on slide 2, a picture on slide 2, a table on slide 3
    Image.new("RGB", (40, 30), "red").save(tmp / "pic.png")

    def moved(name, title_top=1.0, pic=(1.0, 4.0, 2.0), table_top=1.0):
        prs = Presentation()
        prs.slides.add_slide(prs.slide_layouts[6])
        slide = prs.slides.add_slide(prs.slide_layouts[5])
        slide.shapes.title.text = "Product Comparison"
        slide.shapes.title.top = Inches(title_top)
        left, top, width = pic
        slide.shapes.add_picture(str(tmp / "pic.png"), Inches(left), Inches(top), Inches(width))
        prs.slides.add_slide(prs.slide_layouts[6]).shapes.add_table(2, 2, Inches(1), Inches(table_top), Inches(4),
                                                                    Inches(1))
        prs.save(tmp / name)
        return str(tmp / name)

    original = moved("orig.pptx")
    for option, good, bad in (("title_bottom_position", moved("t1.pptx", title_top=5.0), moved("t2.pptx", title_top=2.0)),
                              ("table_bottom_position", moved("b1.pptx", table_top=5.0), moved("b2.pptx", table_top=0.5)),
                              ("right_position", moved("r1.pptx", pic=(6.0, 4.0, 2.0)), moved("r2.pptx", pic=(0.5, 4.0, 2.0))),
                              ("top_position", moved("u1.pptx", pic=(1.0, 0.5, 2.0)), moved("u2.pptx", pic=(1.0, 5.0, 2.0))),
                              ("image_size", moved("s1.pptx", pic=(3.0, 3.0, 2.0)), moved("s2.pptx", pic=(1.0, 4.0, 3.0)))):
        for name, result in (("moved", good), ("not moved", bad), ("unchanged", original)):
            add("compare_pptx_files", f"{option} {name}", result, original, examine_shape=False, **{f"examine_{option}": True})

    # VLC
    (tmp / "vlcrc").write_text("#qt-bgcone=1\nqt-bgcone=0\n#qt-max-volume=125\ninput-record-path=/home/user/Desktop\n")
    add("check_qt_bgcone", "off", str(tmp / "vlcrc"), {"expected_qt_bgcone": 0})
    add("check_qt_max_volume", "default", str(tmp / "vlcrc"), {"expected_qt_max_volume": 200})
    add("is_vlc_recordings_folder", "desktop", str(tmp / "vlcrc"), {"recording_file_path": "/home/user/Desktop"})
    add("check_qt_slider_colours", "default", str(tmp / "vlcrc"), {"type": "blackish"})
    add("check_global_key_play_pause", "none", str(tmp / "vlcrc"), {"expected_global_key_play_pause": 1})
    (tmp / "vlcrc-keys").write_text("#global-key-play-pause=\nglobal-key-play-pause=Ctrl+Space\n")
    add("check_global_key_play_pause", "bound", str(tmp / "vlcrc-keys"), {"expected_global_key_play_pause": 1})
    (tmp / "status.xml").write_text('<root><state>playing</state><information><category name="meta">'
                                    '<info name="filename">song.mp4</info></category></information></root>')
    add("is_vlc_playing", "file", str(tmp / "status.xml"), {"type": "file_name", "file_name": "song.mp4"})
    add("is_vlc_playing", "other", str(tmp / "status.xml"), {"type": "file_name", "file_name": "other.mp4"})

    # Images (GIMP, compare_images)
    img = Image.new("RGB", (96, 64), (40, 120, 200))
    draw = ImageDraw.Draw(img)
    for x in range(0, 96, 12):
        draw.rectangle((x, 0, x + 5, 63), fill=(200, 180, 60))
    draw.ellipse((30, 15, 70, 55), fill=(180, 40, 40))
    img.save(tmp / "orig.png")
    orig = str(tmp / "orig.png")
    variants = {"same": img, "darker": ImageEnhance.Brightness(img).enhance(0.6),
                "contrast": ImageEnhance.Contrast(img).enhance(1.5),
                "mirror": img.transpose(Image.Transpose.FLIP_LEFT_RIGHT), "rotated": img.rotate(180)}
    for name, variant in variants.items():
        variant.save(tmp / f"{name}.png")
        path = str(tmp / f"{name}.png")
        for metric in ("check_structure_sim", "check_brightness_decrease_and_structure_sim",
                       "check_contrast_increase_and_structure_sim", "check_image_mirror", "compare_images"):
            add(metric, name, path, orig)
    add("check_image_size", "size", orig, {"width": 96, "height": 64})
    add("check_image_size", "height", orig, {"height": 65})
    (tmp / "sessionrc").write_text('(session-info "toolbox")\n(hide-docks yes)\n')
    add("check_config_status", "set", str(tmp / "sessionrc"), {"key": "hide-docks", "value": "yes"})
    add("check_config_status", "unset", str(tmp / "sessionrc"), {"key": "hide-docks", "value": "no"})

    # Thunderbird
    (tmp / "prefs.js").write_text('user_pref("mail.identity.id1.auto_quote", false);\n'
                                  'user_pref("extensions.activeThemeID", "dark@mozilla.org");\n')
    add("check_thunderbird_prefs", "expect", str(tmp / "prefs.js"),
        {"expect": {"mail.identity.id1.auto_quote": {"method": "eq", "ref": False}}})
    add("check_thunderbird_prefs", "theme", str(tmp / "prefs.js"),
        {"expect": {"extensions.activeThemeID": {"method": "re", "ref": "light"}}})
    add("check_thunderbird_prefs", "missing file", None, {"expect": {}})
    (tmp / "msgFilterRules.dat").write_text('version="9"\nname="P"\nenabled="yes"\ntype="17"\naction="Forward"\n'
                                            'actionValue="a@b.c"\ncondition="ALL"\n')
    add("check_thunderbird_filter", "all", str(tmp / "msgFilterRules.dat"),
        {"expect": [{"enabled": "yes", "action": "Forward", "actionValue": "a@b.c", "condition": ["ALL"]}]})
    add("check_thunderbird_filter", "other", str(tmp / "msgFilterRules.dat"),
        {"expect": [{"enabled": "yes", "action": "Delete"}]})
    for more in (writer_cases, impress_cases, os_cases, audio_cases, video_cases):
        more(tmp, add)
    return out


def test_our_metrics_give_osworlds_verdicts(osworld, tmp_path):
    (tmp_path / "again").mkdir()
    agree, differ = 0, []
    for metric, name, args, options in cases(tmp_path):
        ours, theirs = verdict(METRICS[metric], args, options), verdict(osworld[metric], args, options)
        key = f"{metric}/{name}"
        if key in DIFFERENT:
            assert ours != theirs, f"{key} now agrees ({ours}): remove it from DIFFERENT"
        elif ours == theirs:
            agree += 1
        else:
            differ.append(f"{key}: ours {ours}, OSWorld's {theirs}")
    assert not differ, "\n".join(differ)
    assert agree + len(DIFFERENT) == len(cases(tmp_path / "again")) and agree >= 100, agree
