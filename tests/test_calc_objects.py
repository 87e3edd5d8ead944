"""compare_table's chart, pivot_table and sheet_print rules on workbooks LibreOffice itself wrote: a task
solved in a real desktop scores 1.0 against a gold made the same way, another answer 0."""

from __future__ import annotations

import json

import openpyxl
import pytest

from conftest import play
from computerrl.envs.service.client import DesktopEnv

pytestmark = pytest.mark.desktop

ROWS = [["Region", "Kind", "Sales"], ["N", "a", 10], ["S", "a", 5], ["N", "b", 7], ["S", "b", 1]]
BOOK = "/home/user/sales.xlsx"
CSV_EXPORT = ["libreoffice", "--convert-to", "csv:Text - txt - csv (StarCalc):44,34,UTF-8,,,,false,true,true,false,false,1",
              "--outdir", "/home/user", BOOK]  # OSWorld's postconfig for sheet_print, as its tasks write it


def task(rules: list[dict], multi: bool = False) -> dict:
    result = ({"type": "vm_file", "multi": True, "path": [BOOK, "/home/user/sales-Sheet1.csv"],
               "dest": ["sales.xlsx", "sales-Sheet1.csv"]} if multi else
              {"type": "vm_file", "path": BOOK, "dest": "sales.xlsx"})
    expected = ({"type": "cloud_file", "multi": True, "path": ["https://example.org/gold.xlsx",
                                                               "https://example.org/gold-Sheet1.csv"],
                 "dest": ["gold.xlsx", "gold-Sheet1.csv"]} if multi else
                {"type": "cloud_file", "path": "https://example.org/gold.xlsx", "dest": "gold.xlsx"})
    return {"id": "calc-objects", "instruction": "Chart and pivot the sales.", "snapshot": "libreoffice_calc",
            "config": [{"type": "download", "parameters": {"files": [{"url": "https://example.org/sales.xlsx",
                                                                       "path": BOOK}]}},
                       {"type": "open", "parameters": {"path": BOOK}}],
            "evaluator": {"func": "compare_table", "result": result, "expected": expected,
                          "postconfig": [{"type": "execute", "parameters": {"command": CSV_EXPORT}}] if multi else [],
                          "options": {"rules": rules}}}


CHART = {"type": "chart", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1", "chart_props": ["type", "title"]}
PIVOT = {"type": "pivot_table", "sheet_idx0": "RNPivot", "sheet_idx1": "ENPivot",
         "pivot_props": ["col_fields", "filter", "row_fields", "data_fields"]}
SOLUTION = ["CalcTools.create_chart('column', 'A1:C5', title='Sales')", "CalcTools.switch_active_sheet('Pivot')",
            "CalcTools.create_pivot_table('Sheet1', 'bysales', ['Region'], None, ['Sales'], 'sum', 'A1')",
            "CalcTools.save()", "Agent.exit(True)"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("cache")
    wb = openpyxl.Workbook()
    wb.active.title = "Sheet1"
    for row in ROWS:
        wb.active.append(row)
    wb.save(root / "sales.xlsx")
    wb.save(root / "gold.xlsx")  # replaced by make_gold
    (root / "gold-Sheet1.csv").write_text("")
    (root / "index.json").write_text(json.dumps({f"https://example.org/{n}": n for n in
                                                 ("sales.xlsx", "gold.xlsx", "gold-Sheet1.csv")}))
    return root


@pytest.fixture
def env(server, cache):
    server[0].slots[0].desktop.file_cache = cache  # white box: the server's --cache
    return DesktopEnv(server[1], 0, max_steps=30)


def make_gold(env, server, cache, codes, multi=False):
    """The gold workbook (and its printed CSV): what the desktop's LibreOffice saves for `codes`."""
    play(env, task([], multi), codes)
    desktop = server[0].slots[0].desktop
    (cache / "gold.xlsx").write_bytes(desktop.sandbox.read(BOOK))
    if multi:
        (cache / "gold-Sheet1.csv").write_bytes(desktop.sandbox.read("/home/user/sales-Sheet1.csv"))


def test_a_chart_and_a_pivot_table_like_the_golds_score_one_and_others_zero(env, server, cache):
    make_gold(env, server, cache, SOLUTION)
    gold = openpyxl.load_workbook(cache / "gold.xlsx")
    assert len(gold["Sheet1"]._charts) == 1 and len(gold["Pivot"]._pivots) == 1  # LibreOffice wrote both
    reward, info = play(env, task([CHART, PIVOT]), SOLUTION)
    assert reward == 1.0, info
    other_chart = [SOLUTION[0].replace("'column'", "'line'")] + SOLUTION[1:]
    reward, info = play(env, task([CHART]), other_chart)
    assert reward == 0.0, info
    other_pivot = SOLUTION[:2] + [SOLUTION[2].replace("['Region']", "['Kind']")] + SOLUTION[3:]
    reward, info = play(env, task([PIVOT]), other_pivot)
    assert reward == 0.0, info
    reward, info = play(env, task([CHART, PIVOT]), ["Agent.exit(True)"])
    assert reward == 0.0, info


def test_a_sheet_printed_as_shown_is_compared_line_by_line(env, server, cache):
    shown = ["CalcTools.set_number_format('C2:C5', 'currency', 2)", "CalcTools.save()", "Agent.exit(True)"]
    make_gold(env, server, cache, shown, multi=True)
    assert "$10.00" in (cache / "gold-Sheet1.csv").read_text() or "10.00" in (cache / "gold-Sheet1.csv").read_text()
    rule = {"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"}
    reward, info = play(env, task([rule], multi=True), shown)
    assert reward == 1.0, info
    reward, info = play(env, task([rule], multi=True), ["CalcTools.save()", "Agent.exit(True)"])
    assert reward == 0.0, info  # the same values, printed without the format
