"""`CalcTools` on a live spreadsheet: each API through the model's path (a response parsed by the
env server and run in the desktop), checked by reading the document back over UNO."""

from __future__ import annotations

import inspect
import json

import pytest

from conftest import act, desktop_files, inside, fails, ok
from computerrl.apis import REGISTRY
from computerrl.apis.app_api import IMPLEMENTATIONS, ApiError, api_for_app
from computerrl.apis.calc import CalcApi, col_index, col_letter, parse_color, parse_range

desktop = pytest.mark.desktop  # the fast tests at the top need no desktop


# --- no desktop ---------------------------------------------------------------------------------

def test_stub_and_implementation_match_and_render_every_function():
    functions = REGISTRY.functions("CalcTools")
    assert len(functions) == 27
    assert IMPLEMENTATIONS["CalcTools"] is CalcApi and api_for_app("calc") == "CalcTools"
    for name, fn in functions.items():
        assert list(inspect.signature(getattr(CalcApi, name)).parameters)[1:] == list(fn.signature.parameters)
    prompt = REGISTRY.render(["CalcTools"])
    assert prompt.splitlines()[0] == "class CalcTools:"
    assert len(prompt.splitlines()) == 1 + 27
    for name in functions:
        assert f"    def {name}(" in prompt
    assert 'def sort_column(column_name: str, ascending: bool = True, start_index: int = 2) -> None:' in prompt


def test_addresses_and_colors():
    assert parse_range("b3") == (None, 1, 2, 1, 2)
    assert parse_range("C5:A1") == (None, 0, 0, 2, 4)
    assert parse_range("Sheet2.$A$1:B2") == ("Sheet2", 0, 0, 1, 1)
    assert parse_range("Data!A1") == ("Data", 0, 0, 0, 0)
    assert parse_range("'Q1 ''24'.A1") == ("Q1 '24", 0, 0, 0, 0)
    for bad in ("", "A", "1", "A0", "A1:", "AAAA1", "A1:B2:C3", "R1C1", "A1 B2"):
        with pytest.raises(ApiError, match="is not a cell or range|rows are numbered from 1"):
            parse_range(bad)
    assert [col_letter(i) for i in (0, 25, 26, 701, 702)] == ["A", "Z", "AA", "ZZ", "AAA"]
    assert all(col_index(col_letter(i)) == i for i in range(0, 20000, 7))
    assert parse_color("#00ff7F") == 0x00FF7F and parse_color("Red") == 0xFF0000 and parse_color("#abc") == 0xAABBCC
    with pytest.raises(ApiError, match="unknown color 'reddish'"):
        parse_color("reddish")


# --- a real desktop -----------------------------------------------------------------------------

def office(server):
    return server[0].slots[0].desktop.office


def doc(server):
    return office(server).desktop.getCurrentComponent()


def sheet(server, name: str | None = None):
    d = doc(server)
    return d.getSheets().getByName(name) if name else d.getCurrentController().getActiveSheet()


def cell(server, ref: str, name: str | None = None):
    return sheet(server, name).getCellRangeByName(ref)


def column(server, letter: str, rows: int) -> list:
    return [row[0] for row in sheet(server).getCellRangeByName(f"{letter}1:{letter}{rows}").getDataArray()]


def calc(env, server):
    """A fresh episode with an empty Calc document focused."""
    env.reset()
    obs, _ = act(env, "Agent.open_app('calc')")
    assert obs["focused_app"] == "calc"
    return obs


def table(env, rows: list[list]) -> None:
    """Type a table in with one call per column (set_column_values from row 1)."""
    for c, values in enumerate(zip(*rows)):
        ok(env, f"CalcTools.set_column_values({col_letter(c)!r}, {list(values)!r}, 1)")


@desktop
def test_set_cell_value_formulas_getters_and_app_info(env, server):
    calc(env, server)
    obs, result = ok(env, "CalcTools.set_cell_value('A1', 'Item')")
    assert result == "Done" and cell(server, "A1").getString() == "Item"
    ok(env, "CalcTools.set_cell_value('B1', 'Price')")
    ok(env, "CalcTools.set_cell_value('A2', 'pen')")
    ok(env, "CalcTools.set_cell_value('B2', 2.5)")
    ok(env, "CalcTools.set_cell_value('B3', '40')")  # numeric text becomes a number
    assert cell(server, "B3").getValue() == 40 and cell(server, "B3").getType().value == "VALUE"
    obs, result = ok(env, "CalcTools.set_cell_value('B4', '=SUM(B2:B3,1)')")
    assert cell(server, "B4").getValue() == 43.5 and result == "B4 = =SUM(B2:B3,1) -> 43.5"
    assert obs["app_info"].splitlines()[0] == "Sheet 'Sheet1' (sheets: Sheet1); used range A1:B4"
    assert obs["app_info"].splitlines()[1:] == ["\tA\tB", "1\tItem\tPrice", "2\tpen\t2.5", "3\t\t40",
                                               "4\t\t43.5 (=SUM(B2:B3;1))"]
    short = office(server).on_main_thread(lambda: CalcApi.app_info(doc(server), 100))
    assert len(short) <= 100 and short.splitlines()[-1].startswith("… (") and "more rows)" in short, short
    ok(env, "CalcTools.set_cell_value('Sheet1.A3', 'ink')")
    assert cell(server, "A3").getString() == "ink"

    _, result = ok(env, "CalcTools.get_column_data('Price')")
    assert json.loads(result) == ["Price", 2.5, 40, 43.5]
    _, result = ok(env, "CalcTools.get_column_data('A')")
    assert json.loads(result) == ["Item", "pen", "ink", ""]

    # Wrong arguments: a sentence the model can act on, and the sheet untouched.
    fails(env, "CalcTools.set_cell_value('B0', 1)", "rows are numbered from 1")
    fails(env, "CalcTools.set_cell_value('A1:B2', 1)", "is a range; give a single cell")
    fails(env, "CalcTools.set_cell_value('Nope.A1', 1)", "no sheet named 'Nope' (sheets: Sheet1)")
    fails(env, "CalcTools.set_cell_value('ZZZZ9', 1)", "is not a cell or range")
    fails(env, "CalcTools.set_cell_value('A1048577', 1)", "lies outside the sheet")
    fails(env, "CalcTools.get_column_data('Weight')", "no column 'Weight'", "'Price'")
    _, info = act(env, "CalcTools.set_cell_value(cell='A1')")
    assert info["exec_result"].startswith("Invalid action") and "value" in info["exec_result"]
    assert [cell(server, r).getString() for r in ("A1", "B1", "B2")] == ["Item", "Price", "2.5"]

    ok(env, "CalcTools.set_cell_value('A3', None)")
    assert cell(server, "A3").getType().value == "EMPTY"


@desktop
def test_column_apis(env, server):
    calc(env, server)
    table(env, [["Name", "Score", "City"], ["ann", 30, "Oslo"], ["bob", 10, "N/A"], ["cy", 20, "Rome"]])
    assert column(server, "B", 4) == ["Score", 30, 10, 20]

    ok(env, "CalcTools.sort_column('Score')")  # by header; row 1 stays
    assert column(server, "B", 4) == ["Score", 10, 20, 30]
    ok(env, "CalcTools.sort_column('B', False)")
    assert column(server, "B", 4) == ["Score", 30, 20, 10]
    assert column(server, "A", 4) == ["Name", "ann", "bob", "cy"]  # only the one column moves
    ok(env, "CalcTools.sort_column('A', False, 2)")
    assert column(server, "A", 4) == ["Name", "cy", "bob", "ann"]

    ok(env, "CalcTools.set_column_values('D', [1, '2', '=D3*10'])")  # default start_index=2
    assert column(server, "D", 4) == ["", 1, 2, 20]
    fails(env, "CalcTools.set_column_values('D', [1, 2], 1048576)", "past the last row")

    ok(env, "CalcTools.reorder_columns(['C', 'A', 'B'])")
    assert [sheet(server).getCellRangeByName(f"{c}1").getString() for c in "ABC"] == ["City", "Name", "Score"]
    assert column(server, "A", 4) == ["City", "Oslo", "N/A", "Rome"]
    fails(env, "CalcTools.reorder_columns(['A', 'A'])", "names a column twice")

    ok(env, "CalcTools.transpose_range('A1:B2', 'F1')")
    assert sheet(server).getCellRangeByName("F1:G2").getDataArray() == (("City", "Oslo"), ("Name", "cy"))

    _, result = ok(env, "CalcTools.hide_row_data()")
    rows = sheet(server).getRows()
    assert [rows.getByIndex(i).IsVisible for i in range(4)] == [True, True, False, True] and "Hid 1 rows" in result

    ok(env, "CalcTools.set_validation_list('Name', ['ann', 'bob', 'cy'])")
    validation = cell(server, "B3").Validation
    assert validation.Type.value == "LIST" and validation.getFormula1() == '"ann";"bob";"cy"'


@desktop
def test_formatting_apis(env, server):
    calc(env, server)
    table(env, [["a", "b", "c"], [0.5, 1234.5, 3]])
    ok(env, "CalcTools.format_range('A1:C1', background_color='#FFFF00', font_color='blue', bold=True, alignment='center')")
    rng = sheet(server).getCellRangeByName("A1:C1")
    assert (rng.CellBackColor, rng.CharColor, rng.CharWeight, rng.HoriJustify.value) == (0xFFFF00, 0x2A6099, 150.0, "CENTER")
    fails(env, "CalcTools.format_range('A2', background_color='blurple', bold=True)", "unknown color 'blurple'")
    assert cell(server, "A2").CharWeight == 100.0  # nothing applied
    fails(env, "CalcTools.format_range('A2')", "give at least one of")

    ok(env, "CalcTools.highlight_range('A2:B2')")
    assert cell(server, "B2").CellBackColor == 0xFF0000 and cell(server, "C2").CellBackColor == -1

    ok(env, "CalcTools.merge_cells('A4:C4')")
    assert cell(server, "A4:C4").getIsMerged()
    fails(env, "CalcTools.merge_cells('A5')", "single cell")

    ok(env, "CalcTools.set_number_format('A2', 'percentage', 1)")
    ok(env, "CalcTools.set_number_format('B2', 'currency')")
    ok(env, "CalcTools.set_number_format('C2', 'number', 2)")
    assert [cell(server, r).getString() for r in ("A2", "B2", "C2")] == ["50.0%", "$1,234.50", "3.00"]

    ok(env, "CalcTools.adjust_column_width('A:B', 20)")
    cols = sheet(server).getColumns()
    assert all(abs(cols.getByIndex(i).Width - 5120) <= 2 for i in (0, 1))  # 20 characters, in 1/100 mm
    ok(env, "CalcTools.adjust_row_height('2', 30)")
    assert abs(sheet(server).getRows().getByIndex(1).Height - 1058) <= 2
    fails(env, "CalcTools.adjust_column_width('A:B')", "give a width")
    fails(env, "CalcTools.adjust_row_height('x:3', 10)", "is not a row span")

    ok(env, "CalcTools.freeze_panes(1, 2)")
    controller = doc(server).getCurrentController()
    assert controller.hasFrozenPanes() and (controller.getSplitRow(), controller.getSplitColumn()) == (1, 2)
    ok(env, "CalcTools.set_zoom_level(150)")
    assert controller.ZoomValue == 150
    _, info = act(env, "CalcTools.set_zoom_level(5)")
    assert info["exec_result"].startswith("Invalid action") and "between 10 and 400" in info["exec_result"]


@desktop
def test_sheet_apis(env, server):
    calc(env, server)
    names = lambda: list(doc(server).getSheets().getElementNames())  # noqa: E731
    ok(env, "CalcTools.set_cell_value('A1', 'first')")
    obs, result = ok(env, "CalcTools.switch_active_sheet('Data')")
    assert "Created" in result and names() == ["Sheet1", "Data"] and sheet(server).getName() == "Data"
    assert obs["app_info"].startswith("Sheet 'Data' (sheets: Sheet1, Data)")
    ok(env, "CalcTools.switch_active_sheet('Sheet1')")
    assert sheet(server).getName() == "Sheet1"

    ok(env, "CalcTools.rename_sheet('Sheet1', 'Main')")
    assert names() == ["Main", "Data"]
    fails(env, "CalcTools.rename_sheet('Main', 'Data')", "already exists")
    fails(env, "CalcTools.rename_sheet('Main', 'a/b')", "not a valid sheet name")
    fails(env, "CalcTools.rename_sheet('Nope', 'X')", "no sheet named 'Nope'")

    _, result = ok(env, "CalcTools.copy_sheet('Main')")
    assert result == "Main (2)" and names() == ["Main", "Main (2)", "Data"]
    assert cell(server, "A1", "Main (2)").getString() == "first"
    ok(env, "CalcTools.copy_sheet('Data', 'Backup')")
    assert names() == ["Main", "Main (2)", "Data", "Backup"]

    ok(env, "CalcTools.reorder_sheets('Main', 2)")
    assert names() == ["Main (2)", "Data", "Main", "Backup"]
    ok(env, "CalcTools.reorder_sheets('Backup', 0)")
    assert names() == ["Backup", "Main (2)", "Data", "Main"]
    fails(env, "CalcTools.reorder_sheets('Data', 4)", "out of range")

    _, result = ok(env, "CalcTools.get_workbook_info()")
    info = json.loads(result)
    assert info["active_sheet"] == "Main" and info["sheet_count"] == 4
    assert [s["name"] for s in info["sheets"]] == ["Backup", "Main (2)", "Data", "Main"]


@desktop
def test_chart_and_pivot(env, server):
    calc(env, server)
    table(env, [["Region", "Kind", "Sales"], ["N", "a", 10], ["S", "a", 5], ["N", "b", 7], ["S", "b", 1]])
    ok(env, "CalcTools.create_chart('column', 'A1:C5', title='Sales', x_axis_title='Region', y_axis_title='EUR')")
    charts = sheet(server).getCharts()
    assert charts.getCount() == 1
    chart = charts.getByIndex(0).getEmbeddedObject()
    assert chart.getTitle().String == "Sales" and chart.getDiagram().getDiagramType() == "com.sun.star.chart.BarDiagram"
    assert chart.getDiagram().Vertical is False and chart.getDiagram().getYAxisTitle().String == "EUR"
    ok(env, "CalcTools.set_chart_legend_position('bottom')")
    assert chart.HasLegend and chart.getLegend().Alignment.value == "BOTTOM"
    ok(env, "CalcTools.set_chart_legend_position('none')")
    assert not chart.HasLegend
    fails(env, "CalcTools.create_chart('pie', 'A1:C')", "is not a cell or range")

    ok(env, "CalcTools.switch_active_sheet('Pivot')")
    fails(env, "CalcTools.set_chart_legend_position('top')", "has no chart")
    fails(env, "CalcTools.create_pivot_table('Sheet1', 'p', ['Region'])", "value_fields")
    ok(env, "CalcTools.create_pivot_table('Sheet1', 'bysales', ['Region'], None, ['Sales'], 'sum', 'A1')")
    tables = sheet(server, "Pivot").getDataPilotTables()
    assert tables.hasByName("bysales")
    values = [[str(v) for v in row] for row in sheet(server, "Pivot").getCellRangeByName("A1:B6").getDataArray()]
    flat = [v for row in values for v in row]
    assert "17.0" in flat and "6.0" in flat and "23.0" in flat, values  # N, S, total


@desktop
def test_file_apis(env, server):
    calc(env, server)
    tmp_path = desktop_files(server)  # the API only reaches the desktop's home folder
    fails(env, "CalcTools.export_to_pdf('/etc/computerrl.pdf')", "must be in the home folder")
    fails(env, "CalcTools.export_to_pdf('~/../escape.pdf')", "must be in the home folder")
    ok(env, "CalcTools.set_cell_value('A1', 'x,y')")
    ok(env, "CalcTools.set_cell_value('B1', 3)")
    fails(env, "CalcTools.save()", "has no file yet")
    fails(env, "CalcTools.export_to_csv()", "never been saved")
    fails(env, "CalcTools.export_to_pdf('out.pdf')", "must be in the home folder")

    import uno

    path = tmp_path / "book.ods"
    d = doc(server)
    office(server).on_main_thread(lambda: d.storeAsURL(uno.systemPathToFileUrl(inside(path)), ()))
    ok(env, "CalcTools.set_cell_value('B1', 4)")
    assert d.isModified()
    _, result = ok(env, "CalcTools.save()")
    assert not d.isModified() and result.startswith("Saved file://")

    ok(env, "CalcTools.set_cell_value('A2', 'plain text')")
    ok(env, "CalcTools.export_to_csv()")  # quoted only where needed, as Calc's own CSV export writes it
    assert (tmp_path / "book.csv").read_text() == '"x,y",4\nplain text,\n'

    ok(env, "CalcTools.switch_active_sheet('Second')")
    ok(env, "CalcTools.set_cell_value('A1', 'second sheet')")
    ok(env, "CalcTools.export_to_pdf()")
    assert (tmp_path / "book.pdf").read_bytes().startswith(b"%PDF")
    one = tmp_path / "one.pdf"
    ok(env, f"CalcTools.export_to_pdf({inside(one)!r}, ['Second'])")
    assert one.read_bytes().startswith(b"%PDF")
    fails(env, f"CalcTools.export_to_pdf({inside(tmp_path / 'book.csv' / 'x.pdf')!r})", "could not write")


@desktop
def test_calc_tools_need_a_focused_spreadsheet(env, server):
    env.reset()
    obs, _ = act(env, "Agent.open_app('writer')")
    assert obs["focused_app"] == "writer" and "CalcTools" not in obs["app_info"]
    result = fails(env, "CalcTools.set_cell_value('A1', 1)", "CalcTools needs a focused calc document")
    assert result == "Action failed: CalcTools needs a focused calc document; open or switch to one first"
    assert not doc(server).supportsService("com.sun.star.sheet.SpreadsheetDocument")
