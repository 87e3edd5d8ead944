"""Each evaluator metric on agreeing and disagreeing file pairs generated here (no desktop)."""

from __future__ import annotations

import datetime

import docx
import openpyxl
import pytest
from openpyxl.styles import Font, PatternFill
from pptx import Presentation
from pptx.util import Inches, Pt

import computerrl.tasks.metrics  # noqa: F401  (registers every metric)
from computerrl.tasks.metrics.basic import fuzz_ratio
from computerrl.tasks.registry import METRICS


def m(name, *args, **options):
    return METRICS[name](*args, **options)


# --- files -----------------------------------------------------------------------------------

def xlsx(path, rows, title="Sheet1", bold=None, fill=None, extra_sheet=None):
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = title
    for row in rows:
        ws.append(row)
    if bold:
        ws[bold].font = Font(bold=True, color="FFFF0000")
    if fill:
        ws[fill].fill = PatternFill("solid", fgColor="FFFFFF00")
    if extra_sheet:
        wb.create_sheet(extra_sheet)
    wb.save(path)
    return str(path)


def docx_file(path, paragraphs, table=None):
    d = docx.Document()
    for p in paragraphs:
        d.add_paragraph(p)
    if table:
        t = d.add_table(rows=len(table), cols=len(table[0]))
        for i, row in enumerate(table):
            for j, v in enumerate(row):
                t.cell(i, j).text = v
    d.save(path)
    return str(path)


def pptx_file(path, texts, bold=False, left=1.0, notes=""):
    prs = Presentation()
    for text in texts:
        slide = prs.slides.add_slide(prs.slide_layouts[6])  # blank
        box = slide.shapes.add_textbox(Inches(left), Inches(1), Inches(4), Inches(1))
        run = box.text_frame.paragraphs[0].add_run()
        run.text, run.font.bold, run.font.size = text, bold, Pt(18)
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    prs.save(path)
    return str(path)


ROWS = [["name", "qty", "price"], ["apple", 3, 1.25], ["pear", 5, 0.5]]


# --- basic -----------------------------------------------------------------------------------

def test_fuzz_ratio_matches_rapidfuzz_values():
    assert fuzz_ratio("abc", "abd") == pytest.approx(200 / 3)
    assert fuzz_ratio("", "") == 100.0 and fuzz_ratio("abc", "") == 0.0
    assert fuzz_ratio("this is a test", "this is a test!") == pytest.approx(96.551724, abs=1e-5)


def test_compare_text_file(tmp_path):
    a, b, c = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt"
    a.write_text("Hello  World\n")
    b.write_text("Hello  World\n")
    c.write_text("hello world")
    assert m("compare_text_file", str(a), str(b)) == 1.0
    assert m("compare_text_file", str(a), str(c)) == 0.0
    assert m("compare_text_file", str(a), str(c), ignore_blanks=True, ignore_case=True) == 1.0
    assert m("compare_text_file", str(tmp_path / "missing.txt"), str(b)) == 0.0
    assert m("compare_text_file", None, str(b)) == 0.0


def test_check_include_exclude_and_exact_match():
    rules = {"include": ["ok", "done"], "exclude": ["error"]}
    assert m("check_include_exclude", "all ok, done", rules) == 1.0
    assert m("check_include_exclude", "ok, done with error", rules) == 0.0
    assert m("check_include_exclude", "ok", rules) == 0.0
    assert m("check_include_exclude", None, rules) == 0.0
    assert m("exact_match", "42", {"expected": "42"}) == 1.0
    assert m("exact_match", "42\n", {"expected": "42"}) == 0.0


def test_infeasible_scores_giving_up_only():
    assert m("infeasible", "FAIL", None) == 1.0
    assert m("infeasible", {"action_type": "FAIL"}, None) == 1.0
    assert m("infeasible", "DONE", None) == 0.0 and m("infeasible") == 0.0


# --- tables ----------------------------------------------------------------------------------

def test_compare_csv(tmp_path):
    r, e, other = tmp_path / "r.csv", tmp_path / "e.csv", tmp_path / "o.csv"
    r.write_text("a,b\n1,2 \n")
    e.write_text("A,B\n1,2\n")
    other.write_text("x\n")
    assert m("compare_csv", str(r), str(e)) == 0.0  # strict by default
    assert m("compare_csv", str(r), str(e), strict=False, ignore_case=True) == 1.0
    assert m("compare_csv", str(r), [str(other), str(e)], strict=False, ignore_case=True) == 1.0
    assert m("compare_csv", str(tmp_path / "missing.csv"), str(e)) == 0.0


def test_compare_table_sheet_data_and_name(tmp_path):
    gold = xlsx(tmp_path / "gold.xlsx", ROWS)
    same = xlsx(tmp_path / "same.xlsx", [["name", "qty", "price"], ["apple", 3, 1.250001], ["pear", 5, 0.5]])
    wrong = xlsx(tmp_path / "wrong.xlsx", [["name", "qty", "price"], ["apple", 4, 1.25], ["pear", 5, 0.5]])
    renamed = xlsx(tmp_path / "renamed.xlsx", ROWS, title="Data")
    data = {"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]}
    names = {"rules": [{"type": "sheet_name"}]}
    assert m("compare_table", same, gold, **data) == 1.0  # equal after rounding to 4 digits
    assert m("compare_table", wrong, gold, **data) == 0.0
    assert m("compare_table", same, gold, **names) == 1.0
    assert m("compare_table", renamed, gold, **names) == 0.0
    assert m("compare_table", renamed, gold, rules=[{"type": "sheet_data", "sheet_idx0": "RNData",
                                                     "sheet_idx1": "ENSheet1"}]) == 1.0
    assert m("compare_table", renamed, gold, rules=[{"type": "sheet_data", "sheet_idx0": "RNNope",
                                                     "sheet_idx1": "ENSheet1"}]) == 0.0


def test_compare_table_check_cell(tmp_path):
    styled = xlsx(tmp_path / "styled.xlsx", ROWS, bold="A1", fill="B2")
    plain = xlsx(tmp_path / "plain.xlsx", ROWS)
    rule = {"type": "check_cell", "sheet_idx": 0, "coordinate": "A1",
            "props": {"font_bold": {"method": "eq", "ref": True},
                      "font_color": {"method": "eq", "ref": "FFFF0000"},
                      "value": {"method": "re.I", "ref": "^NAME$"}}}
    assert m("compare_table", styled, None, rules=[rule]) == 1.0
    assert m("compare_table", plain, None, rules=[rule]) == 0.0
    fill = {"type": "check_cell", "sheet_idx": "RI0", "coordinate": "B2",
            "props": {"bgcolor": {"method": "eq", "ref": "FFFFFF00"},
                      "value": {"method": "approx:0.01", "ref": 3.001}}}
    assert m("compare_table", styled, None, rules=[fill]) == 1.0
    assert m("compare_table", plain, None, rules=[fill]) == 0.0
    num = {"type": "check_cell", "sheet_idx": 0, "coordinate": "C2",
           "props": {"value": {"method": "range.te", "ref": [1, 1.25]}}}
    assert m("compare_table", plain, None, rules=[num]) == 1.0  # 1 < 1.25 <= 1.25


def test_compare_table_missing_result_and_unsupported_rule(tmp_path):
    gold = xlsx(tmp_path / "gold.xlsx", ROWS)
    rules = [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]
    assert m("compare_table", str(tmp_path / "missing.xlsx"), gold, rules=rules) == 0.0
    assert m("compare_table", None, gold, rules=rules) == 0.0
    (tmp_path / "junk.xlsx").write_text("not a workbook")
    assert m("compare_table", str(tmp_path / "junk.xlsx"), gold, rules=rules) == 0.0
    with pytest.raises(ValueError, match="'sparkline'"):
        m("compare_table", gold, gold, rules=[{"type": "sparkline", "sheet_idx0": 0, "sheet_idx1": "EI0"}])
    with pytest.raises(ValueError, match="'font_strike'"):
        m("compare_table", gold, gold, rules=[{"type": "check_cell", "sheet_idx": 0, "coordinate": "A1",
                                               "props": {"font_strike": {"method": "eq", "ref": True}}}])
    with pytest.raises(ValueError, match="'fuzzy'"):
        m("compare_table", gold, gold, rules=[{"type": "check_cell", "sheet_idx": 0, "coordinate": "A1",
                                               "props": {"value": {"method": "fuzzy", "ref": "x"}}}])


def test_compare_table_sheet_fuzzy_and_freeze(tmp_path):
    gold = xlsx(tmp_path / "gold.xlsx", [["Main Rd"], ["(x) 12"]])
    close = xlsx(tmp_path / "close.xlsx", [["main road"], ["x 12"]])
    fuzzy = {"type": "sheet_fuzzy", "sheet_idx0": 0, "sheet_idx1": "EI0",
             "rules": [{"range": ["A1:A2"], "type": "exact_match", "ignore_case": True, "ignore_chars": "()",
                        "normalization": [["Rd", "Road"]]}]}
    assert m("compare_table", close, gold, rules=[fuzzy]) == 1.0
    fuzzy["rules"][0]["normalization"] = []
    assert m("compare_table", close, gold, rules=[fuzzy]) == 0.0
    fuzzy["rules"][0]["type"], fuzzy["rules"][0]["threshold"] = "fuzzy_match", 70
    assert m("compare_table", close, gold, rules=[fuzzy]) == 1.0
    wb = openpyxl.load_workbook(gold)
    wb.active.freeze_panes = "B2"
    wb.save(tmp_path / "frozen.xlsx")
    freeze = [{"type": "freeze", "sheet_idx0": 0, "sheet_idx1": "EI0"}]
    frozen = str(tmp_path / "frozen.xlsx")
    assert m("compare_table", frozen, frozen, rules=freeze) == 1.0
    assert m("compare_table", gold, frozen, rules=freeze) == 0.0
    zoom = [{"type": "zoom", "sheet_idx": 0, "method": "eq", "ref": 100.0}]
    assert m("compare_table", gold, None, rules=zoom) == 1.0
    rows = [{"type": "row_props", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": ["height"]}]
    assert m("compare_table", gold, gold, rules=rows) == 1.0
    wb.active.row_dimensions[1].height = 30
    wb.save(tmp_path / "tall.xlsx")
    assert m("compare_table", str(tmp_path / "tall.xlsx"), gold, rules=rows) == 0.0


def test_compare_spreadsheet(tmp_path):
    gold = xlsx(tmp_path / "gold.xlsx", ROWS)
    same = xlsx(tmp_path / "out.xlsx", [["name", "qty", "price"], ["apple", "3", 1.251], ["pear", 5, 0.5]])
    wrong = xlsx(tmp_path / "bad.xlsx", [["name", "qty", "price"], ["apple", 3, 1.3], ["pear", 5, 0.5]])
    opts = {"instruction_type": "Cell-Level Manipulation", "answer_position": "Sheet1!B2:C3"}
    assert m("compare_spreadsheet", same, gold, **opts) == 1.0  # "3" == 3 and 1.251 ~ 1.25 (2 decimals)
    assert m("compare_spreadsheet", wrong, gold, **opts) == 0.0
    assert m("compare_spreadsheet", same, gold, **{**opts, "answer_position": "'Other'!A1"}) == 0.0
    assert m("compare_spreadsheet", str(tmp_path / "missing.xlsx"), gold, **opts) == 0.0
    # colour tasks (result named *CF*) also compare fills
    cf_gold = xlsx(tmp_path / "cf_gold.xlsx", ROWS, fill="B2")
    cf_plain = xlsx(tmp_path / "1_CF_out.xlsx", ROWS)
    assert m("compare_spreadsheet", cf_plain, cf_gold, **opts) == 0.0
    assert m("compare_spreadsheet", cf_plain, cf_gold, **opts, check_format=False) == 1.0
    dated = xlsx(tmp_path / "d1.xlsx", [[datetime.datetime(2024, 5, 1, 9)]])
    dated2 = xlsx(tmp_path / "d2.xlsx", [[datetime.datetime(2024, 5, 1, 10)]])  # same day
    assert m("compare_spreadsheet", dated, dated2, answer_position="A1") == 1.0


# --- documents -------------------------------------------------------------------------------

def test_compare_docx_files(tmp_path):
    gold = docx_file(tmp_path / "gold.docx", ["First line", "Second  line"])
    same = docx_file(tmp_path / "same.docx", ["First line", "Second line"])
    wrong = docx_file(tmp_path / "wrong.docx", ["First line", "Another line"])
    assert m("compare_docx_files", same, gold) == 1.0  # blanks ignored by default
    assert m("compare_docx_files", same, gold, ignore_blanks=False) == 0.0
    assert m("compare_docx_files", wrong, gold) == 0.0
    score = m("compare_docx_files", wrong, gold, fuzzy_match=True)
    assert 0.5 < score < 1.0
    swapped = docx_file(tmp_path / "swapped.docx", ["Second  line", "First line"])
    assert m("compare_docx_files", swapped, gold) == 0.0
    assert m("compare_docx_files", swapped, gold, ignore_order=True) == 1.0
    assert m("compare_docx_files", str(tmp_path / "missing.docx"), gold) == 0.0
    assert m("compare_docx_files", str(tmp_path / "x.odt"), gold) == 0.0  # mixed kinds


def test_compare_pptx_files(tmp_path):
    gold = pptx_file(tmp_path / "gold.pptx", ["Hello", "World"], notes="n")
    same = pptx_file(tmp_path / "same.pptx", ["Hello", "World"], notes="n")
    assert m("compare_pptx_files", same, gold) == 1.0
    assert m("compare_pptx_files", pptx_file(tmp_path / "t.pptx", ["Hello", "Earth"], notes="n"), gold) == 0.0
    bold = pptx_file(tmp_path / "b.pptx", ["Hello", "World"], bold=True, notes="n")
    assert m("compare_pptx_files", bold, gold) == 0.0
    moved = pptx_file(tmp_path / "m.pptx", ["Hello", "World"], left=2.0, notes="n")
    assert m("compare_pptx_files", moved, gold) == 0.0
    assert m("compare_pptx_files", moved, gold, examine_shape=False) == 1.0
    assert m("compare_pptx_files", pptx_file(tmp_path / "s.pptx", ["Hello"], notes="n"), gold) == 0.0
    assert m("compare_pptx_files", pptx_file(tmp_path / "n.pptx", ["Hello", "World"], notes="x"), gold) == 0.0
    assert m("compare_pptx_files", str(tmp_path / "missing.pptx"), gold) == 0.0


def test_simple_docx_compare(tmp_path):
    gold = docx_file(tmp_path / "gold.docx", ["Intro", "Body"], table=[["a", "b"], ["1", "2"]])
    same = docx_file(tmp_path / "same.docx", ["Intro", "Body"], table=[["a", "b"], ["1", "2"]])
    cell = docx_file(tmp_path / "cell.docx", ["Intro", "Body"], table=[["a", "b"], ["1", "3"]])
    text = docx_file(tmp_path / "text.docx", ["Intro", "Bodies"], table=[["a", "b"], ["1", "2"]])
    assert m("simple_docx_compare", same, gold) == 1.0
    assert m("simple_docx_compare", cell, gold) == 0.0
    assert m("simple_docx_compare", text, gold) == 0.0
    assert m("simple_docx_compare", str(tmp_path / "missing.docx"), gold) == 0.0


def test_simple_pptx_compare(tmp_path):
    gold = pptx_file(tmp_path / "gold.pptx", ["Hello", "World"])
    moved_bold = pptx_file(tmp_path / "mb.pptx", ["Hello", "World"], bold=True, left=3.0)
    assert m("simple_pptx_compare", moved_bold, gold) == 1.0  # text content only, not format
    assert m("simple_pptx_compare", pptx_file(tmp_path / "t.pptx", ["Hello", "Word"]), gold) == 0.0
    assert m("simple_pptx_compare", pptx_file(tmp_path / "o.pptx", ["World", "Hello"]), gold) == 0.0
    assert m("simple_pptx_compare", str(tmp_path / "missing.pptx"), gold) == 0.0


def test_compare_pptx_files_without_a_result_scores_zero(tmp_path):
    from pptx import Presentation

    from computerrl.tasks.registry import METRICS

    Presentation().save(tmp_path / "empty.pptx")  # python-pptx's default deck, as Presentation(None) opens
    assert METRICS["compare_pptx_files"](None, str(tmp_path / "empty.pptx")) == 0.0


def test_a_metric_on_a_file_too_big_for_it_scores_nothing_and_spares_the_server(tmp_path):
    """Metrics run in a child capped in memory and time: a hostile output fails its own score only."""
    from computerrl.tasks import metric_worker

    big, gold = tmp_path / "big.txt", tmp_path / "gold.txt"
    with open(big, "wb") as f:
        f.truncate(metric_worker.MEMORY_BYTES + (1 << 30))  # sparse: nothing written, more than the cap read
    gold.write_text("x")
    with pytest.raises(ValueError, match="needed more than|died"):
        metric_worker.score("compare_text_file", str(big), str(gold), {}, timeout_s=120)
    gold.write_text("same")
    (tmp_path / "same.txt").write_text("same")
    assert metric_worker.score("compare_text_file", str(tmp_path / "same.txt"), str(gold), {}, timeout_s=60) == 1.0


def test_compare_pptx_files_compares_table_cells_fonts_not_only_their_text(tmp_path):
    """Found in review: two decks whose table cells differ only in bold scored 1.0."""
    import pptx
    from pptx.util import Inches

    def deck(path, bold: bool) -> str:
        prs = pptx.Presentation()
        slide = prs.slides.add_slide(prs.slide_layouts[6])
        table = slide.shapes.add_table(2, 2, Inches(1), Inches(1), Inches(4), Inches(2)).table
        for i, cell in enumerate(c for row in table.rows for c in row.cells):
            cell.text = f"v{i}"
            cell.text_frame.paragraphs[0].runs[0].font.bold = bold and i == 3
        prs.save(path)
        return str(path)

    gold = deck(tmp_path / "gold.pptx", bold=False)
    assert m("compare_pptx_files", deck(tmp_path / "same.pptx", bold=False), gold) == 1.0
    assert m("compare_pptx_files", deck(tmp_path / "bold.pptx", bold=True), gold) == 0.0
    assert m("compare_pptx_files", deck(tmp_path / "bold2.pptx", bold=True), gold, examine_font_bold=False) == 1.0


def _validated_book(path, formula: str, sqref: str = "D2:D29"):
    from openpyxl.worksheet.datavalidation import DataValidation

    wb = openpyxl.Workbook()
    dv = DataValidation(type="list", formula1=formula)
    dv.add(sqref)
    wb.active.add_data_validation(dv)
    wb.save(path)
    return str(path)


def test_data_validation_rule_checks_the_results_validations(tmp_path):
    rule = {"type": "data_validation", "sheet_idx": 0, "dv_props": [{
        "ranges": {"method": "spreadsheet_range", "ref": ["D2:D29", "D1:D1048576"]},
        "type": {"method": "eq", "ref": "list"},
        "formula1": {"method": "str_set_eq", "ref": ["Pass", "Fail", "Held"]}}]}  # OSWorld's ecb0df7a
    score = METRICS["compare_table"]
    assert score(_validated_book(tmp_path / "a.xlsx", '"Held,Pass,Fail"'), None, rules=[rule]) == 1.0
    assert score(_validated_book(tmp_path / "b.xlsx", '"Pass,Fail"'), None, rules=[rule]) == 0.0
    assert score(_validated_book(tmp_path / "c.xlsx", '"Pass,Fail,Held"', "D2:D10"), None, rules=[rule]) == 0.0
    assert score(str(tmp_path / "c.xlsx"), None, rules=[{**rule, "dv_props": []}]) == 0.0  # a validation no pattern names


def test_filter_rule_compares_the_autofilters(tmp_path):
    def book(name, values):
        wb = openpyxl.Workbook()
        for row in [["k", "v"], ["a", 1], ["b", 2]]:
            wb.active.append(row)
        wb.active.auto_filter.ref = "A1:B3"
        if values:
            wb.active.auto_filter.add_filter_column(0, values)
        wb.save(tmp_path / name)
        return str(tmp_path / name)

    rule = {"type": "filter", "sheet_idx0": 0, "sheet_idx1": "EI0"}
    score = METRICS["compare_table"]
    assert score(book("r.xlsx", ["b", "a"]), book("e.xlsx", ["a", "b"]), rules=[rule]) == 1.0  # a set of values
    assert score(book("r2.xlsx", ["a"]), str(tmp_path / "e.xlsx"), rules=[rule]) == 0.0
    assert score(book("r3.xlsx", []), str(tmp_path / "e.xlsx"), rules=[rule]) == 0.0


def test_compare_images_is_structural_similarity_with_partial_credit(tmp_path):
    from PIL import Image, ImageDraw

    def picture(name, box, size=(64, 48)):
        img = Image.new("RGB", size, "white")
        ImageDraw.Draw(img).rectangle(box, fill="black")
        img.save(tmp_path / name)
        return str(tmp_path / name)

    a = picture("a.png", (10, 10, 30, 30))
    same_scaled = picture("b.png", (20, 20, 60, 60), size=(128, 96))  # the same picture, twice as large
    other = picture("c.png", (40, 5, 60, 40))
    assert m("compare_images", a, a) == pytest.approx(1.0)
    assert m("compare_images", same_scaled, a) > 0.9
    low = m("compare_images", other, a)
    assert 0 < low < 0.9
    assert m("compare_images", other, a, reference_base_result=0.99) == 0.0  # not past the base
    assert m("compare_images", a, a, reference_base_result=0.11) == pytest.approx(1.0)
    assert m("compare_images", None, a) == 0.0
