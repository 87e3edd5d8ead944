"""`CalcTools`: the Calc half of the API-GUI action space (ComputerRL's 27 spreadsheet APIs).

Names, parameters and defaults follow ComputerRL's public `CalcTools` (the paper's appendix and
the tool class its agent runs inside the VM). Where that class is vague we pin the meaning down
and say so in the one-line doc the model sees:

- cells and ranges are "A1" or "A1:C5", optionally prefixed by a sheet ("Sheet2.A1", "Sheet2!A1",
  "'My sheet'.A1"); anything else is a clear error, never a guess;
- a `column_name` is a column letter ("B") or, when that letter lies outside the used area, the
  header text in row 1 ("Price");
- `sort_column` sorts the values of one column only (numbers, then text, blanks last), as the
  original does; other columns do not move;
- colors are "#RRGGBB" or a common name ("red", "light blue", …);
- row numbers (`start_index`) are 1-based like the row headers on screen; sheet positions are 0-based.

`uno` is imported inside methods only: the parser and the trainer import this module without
LibreOffice. Every method runs on LibreOffice's main thread (see `Desktop.run_api`).
"""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from computerrl.apis.app_api import ApiError, AppApi, implements
from computerrl.apis.kit import (cell_of, col_index, col_letter, parse_color,  # noqa: F401 (re-exported)
                                 parse_range, range_of, sheet_of, used_area)
from computerrl.apis.registry import Len, Range, register_api

Cell = Annotated[str, Len(1, 200)]
Value = str | int | float | None
Color = Annotated[str, Len(1, 40)]
ChartType = Literal["bar", "column", "line", "pie", "scatter", "area"]
NumberFormat = Literal["general", "number", "currency", "accounting", "date", "time", "percentage",
                       "fraction", "scientific", "text"]


@register_api
class CalcTools:
    @staticmethod
    def get_workbook_info() -> str:
        """File, sheets (name, index, used size) and the active sheet of the workbook, as JSON."""

    @staticmethod
    def get_column_data(column_name: str) -> str:
        """Values of a column (letter or row-1 header) from row 1 to the last used row, as a JSON list."""

    @staticmethod
    def switch_active_sheet(sheet_name: Annotated[str, Len(1, 100)]) -> None:
        """Make a sheet the active one, creating it (at the end) if it does not exist."""

    @staticmethod
    def set_column_values(column_name: str, data: Annotated[list[Value], Len(1, 10000)],
                          start_index: Annotated[int, Range(1, None)] = 2) -> None:
        """Write values down a column from row start_index (default 2, below the header); "=..." are formulas."""

    @staticmethod
    def highlight_range(range_str: Cell, color: Color = "#FF0000") -> None:
        """Fill the background of a range (e.g. "A1:B10") with a color ("#RRGGBB" or a name)."""

    @staticmethod
    def transpose_range(source_range: Cell, target_cell: Cell) -> None:
        """Copy the values of source_range transposed (rows become columns) with target_cell as top-left."""

    @staticmethod
    def export_to_csv() -> None:
        """Export the active sheet as CSV next to the saved document (same name, .csv)."""

    @staticmethod
    def sort_column(column_name: str, ascending: bool = True,
                    start_index: Annotated[int, Range(1, None)] = 2) -> None:
        """Sort the values of one column from row start_index (default 2) down; other columns do not move."""

    @staticmethod
    def set_validation_list(column_name: str, values: Annotated[list[str], Len(1, 1000)]) -> None:
        """Restrict the cells of a column (row 2 to the last used row) to a dropdown of values."""

    @staticmethod
    def hide_row_data(value: str = "N/A") -> None:
        """Hide every row below the header that has a cell showing exactly this value."""

    @staticmethod
    def reorder_columns(column_order: Annotated[list[str], Len(1, 1000)]) -> None:
        """Rearrange columns: the listed columns, left to right, receive the contents in the listed order."""

    @staticmethod
    def create_pivot_table(
        source_sheet: str,
        table_name: Annotated[str, Len(1, 100)],
        row_fields: list[str] | None = None,
        col_fields: list[str] | None = None,
        value_fields: list[str] | None = None,
        aggregation_function: Literal["sum", "count", "average", "min", "max"] = "sum",
        target_cell: Cell = "A1",
    ) -> None:
        """Pivot source_sheet's used area into the active sheet at target_cell; fields: column letters or headers."""

    @staticmethod
    def merge_cells(range_str: Cell) -> None:
        """Merge the cells of a range (e.g. "A1:C1") into one."""

    @staticmethod
    def set_cell_value(cell: Cell, value: Value) -> None:
        """Set one cell: a number, text, a formula starting with "=", or None to clear it."""

    @staticmethod
    def format_range(
        range_str: Cell,
        background_color: Color | None = None,
        font_color: Color | None = None,
        bold: bool | None = None,
        alignment: Literal["left", "center", "right"] | None = None,
    ) -> None:
        """Format a range: background and font color ("#RRGGBB" or a name), bold, horizontal alignment."""

    @staticmethod
    def create_chart(
        chart_type: ChartType,
        data_range: Cell,
        title: str | None = None,
        x_axis_title: str | None = None,
        y_axis_title: str | None = None,
    ) -> None:
        """Insert a chart of data_range (first row = series names, first column = categories) on the active sheet."""

    @staticmethod
    def freeze_panes(rows: Annotated[int, Range(0, 1000)] = 0, columns: Annotated[int, Range(0, 1000)] = 0) -> None:
        """Freeze the top rows and left columns of the active sheet (0, 0 unfreezes)."""

    @staticmethod
    def rename_sheet(old_name: str, new_name: Annotated[str, Len(1, 100)]) -> None:
        """Rename a sheet."""

    @staticmethod
    def copy_sheet(source_sheet: str, new_sheet_name: Annotated[str, Len(1, 100)] | None = None) -> str:
        """Copy a sheet right after itself (default name "<source> (2)"); returns the new sheet's name."""

    @staticmethod
    def reorder_sheets(sheet_name: str, position: Annotated[int, Range(0, None)]) -> None:
        """Move a sheet to a 0-based position among the sheets."""

    @staticmethod
    def set_chart_legend_position(position: Literal["top", "bottom", "left", "right", "none"]) -> None:
        """Place (or with "none" hide) the legend of the first chart on the active sheet."""

    @staticmethod
    def set_number_format(range_str: Cell, format_type: NumberFormat,
                          decimal_places: Annotated[int, Range(0, 15)] | None = None) -> None:
        """Apply a number format (e.g. "percentage", "currency", "date") to a range, with optional decimals."""

    @staticmethod
    def adjust_column_width(columns: str, width: Annotated[float, Range(0.1, 255)] | None = None,
                            autofit: bool = False) -> None:
        """Set the width of columns ("B" or "A:C") in characters, or fit them to their content."""

    @staticmethod
    def adjust_row_height(rows: str, height: Annotated[float, Range(0.1, 1000)] | None = None,
                          autofit: bool = False) -> None:
        """Set the height of rows ("3" or "1:10") in points, or fit them to their content."""

    @staticmethod
    def export_to_pdf(file_path: str | None = None, sheets: list[str] | None = None,
                      open_after_export: bool = False) -> None:
        """Export the workbook (or only some sheets) to PDF; default path: the document's, with .pdf."""

    @staticmethod
    def set_zoom_level(zoom_percentage: Annotated[int, Range(10, 400)]) -> None:
        """Zoom the sheet view to a percentage (100 = normal)."""

    @staticmethod
    def save() -> None:
        """Save the workbook to its file, in its current format."""


# --- addresses -------------------------------------------------------------------------------

_LETTERS = re.compile(r"^[A-Za-z]{1,3}$")
_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d{1,3})?\s*", re.I)
_BAD_SHEET_CHARS = set("[]*?:/\\")


def _plain(v: Any) -> Any:
    """A cell value as JSON/TSV shows it: integral floats as ints."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return int(v)
    return v


def _text(v: Any) -> str:
    v = _plain(v)
    return "" if v is None else str(v)


def _formula_api(formula: str) -> str:
    """Formulas as models write them ("=SUM(A1,B1)") -> UNO's API grammar (";" separates arguments)."""
    out, quoted = [], False
    for ch in formula:
        if ch == '"':
            quoted = not quoted
        out.append(";" if ch == "," and not quoted else ch)
    return "".join(out)


# --- implementation --------------------------------------------------------------------------

@implements("CalcTools")
class CalcApi(AppApi):
    app = "calc"
    service = "com.sun.star.sheet.SpreadsheetDocument"
    noun = "workbook"

    # helpers

    @property
    def _controller(self):
        return self.doc.getCurrentController()

    @property
    def _active(self):
        return self._controller.getActiveSheet()

    def _sheet(self, name: str | None):
        return sheet_of(self.doc, name)

    def _range(self, text: str):
        return range_of(self.doc, text)

    def _cell(self, text: str):
        return cell_of(self.doc, text)

    _used = staticmethod(used_area)

    def _column(self, column_name: str, sheet=None) -> int:
        """A column letter, or (when that letter is outside the used area) a row-1 header."""
        sheet = sheet or self._active
        name = column_name.strip()
        last_row, last_col = self._used(sheet)
        letter = col_index(name) if _LETTERS.match(name) else None
        if letter is not None and letter <= last_col:
            return letter
        headers = [_text(v) for v in sheet.getCellRangeByPosition(0, 0, last_col, 0).getDataArray()[0]]
        for i, h in enumerate(headers):
            if h.strip().lower() == name.lower() and name:
                return i
        if letter is not None and letter < sheet.getColumns().getCount():
            return letter
        shown = ", ".join(repr(h) for h in headers if h)[:200]
        raise ApiError(f"no column {column_name!r}: give a column letter like \"B\" or a header in row 1 "
                       f"({shown or 'row 1 is empty'})")

    @staticmethod
    def _write(cell, value: Value) -> None:
        if value is None:
            cell.setString("")
        elif isinstance(value, (int, float)):
            cell.setValue(value)
        elif value.startswith("="):
            cell.setFormula(_formula_api(value))
        elif _NUMBER.fullmatch(value):  # "40" is the number 40, as if typed into the cell
            cell.setValue(float(value))
        else:
            cell.setString(value)

    def _chart(self):
        charts = self._active.getCharts()
        if charts.getCount() == 0:
            raise ApiError(f"sheet {self._active.getName()!r} has no chart; create one with create_chart first")
        return charts.getByIndex(0).getEmbeddedObject()

    def _doc_path(self, suffix: str) -> PurePosixPath:
        if not self.doc.hasLocation():
            raise ApiError("the workbook has never been saved; save it first (ctrl+shift+s)")
        return self.local(self.doc.getLocation()).with_suffix(suffix)

    # the API

    def get_workbook_info(self) -> str:
        sheets = self.doc.getSheets()
        info = {"file_path": self.doc.getLocation(), "file_title": self.doc.getTitle(),
                "active_sheet": self._active.getName(), "sheet_count": sheets.getCount(), "sheets": []}
        for i in range(sheets.getCount()):
            sheet = sheets.getByIndex(i)
            last_row, last_col = self._used(sheet)
            info["sheets"].append({"name": sheet.getName(), "index": i, "visible": bool(sheet.IsVisible),
                                   "row_count": last_row + 1, "column_count": last_col + 1})
        return json.dumps(info, ensure_ascii=False)

    def get_column_data(self, column_name: str) -> str:
        sheet = self._active
        col = self._column(column_name, sheet)
        last_row, _ = self._used(sheet)
        data = sheet.getCellRangeByPosition(col, 0, col, last_row).getDataArray()
        return json.dumps([_plain(row[0]) for row in data], ensure_ascii=False)

    def switch_active_sheet(self, sheet_name: str) -> str:
        sheets = self.doc.getSheets()
        created = not sheets.hasByName(sheet_name)
        if created:
            self._check_sheet_name(sheet_name)
            sheets.insertNewByName(sheet_name, sheets.getCount())
        self._controller.setActiveSheet(sheets.getByName(sheet_name))
        return f"Created and switched to sheet {sheet_name!r}" if created else f"Switched to sheet {sheet_name!r}"

    def set_column_values(self, column_name: str, data: list, start_index: int = 2) -> str:
        sheet = self._active
        col = self._column(column_name, sheet)
        if start_index - 1 + len(data) > sheet.getRows().getCount():
            raise ApiError(f"{len(data)} values from row {start_index} run past the last row of the sheet")
        for i, value in enumerate(data):
            self._write(sheet.getCellByPosition(col, start_index - 1 + i), value)
        letter = col_letter(col)
        return f"Wrote {len(data)} values to {letter}{start_index}:{letter}{start_index + len(data) - 1}"

    def highlight_range(self, range_str: str, color: str = "#FF0000") -> None:
        rgb = parse_color(color)
        self._range(range_str).CellBackColor = rgb

    def transpose_range(self, source_range: str, target_cell: str) -> str:
        data = self._range(source_range).getDataArray()
        start = self._range(target_cell).getRangeAddress()
        sheet = self._sheet(parse_range(target_cell)[0])
        rows, cols = len(data[0]), len(data)
        if (start.StartColumn + cols > sheet.getColumns().getCount()
                or start.StartRow + rows > sheet.getRows().getCount()):
            raise ApiError(f"the transposed {rows}x{cols} block does not fit at {target_cell!r}")
        target = sheet.getCellRangeByPosition(start.StartColumn, start.StartRow,
                                              start.StartColumn + cols - 1, start.StartRow + rows - 1)
        target.setDataArray(tuple(zip(*data)))
        end = f"{col_letter(start.StartColumn + cols - 1)}{start.StartRow + rows}"
        return f"Wrote the transposed values to {col_letter(start.StartColumn)}{start.StartRow + 1}:{end}"

    def export_to_csv(self) -> str:
        path = self._doc_path(".csv")
        # As Calc's own File > Save As CSV writes it: comma-separated, '"' quotes only where a field needs
        # them (not every text cell: the 7th token), UTF-8 (76), from line 1, cells as shown (the 9th).
        # Fewer tokens make LibreOffice 7.4 quote all text, which OSWorld's CSV checks count as wrong.
        self.store(path, "Text - txt - csv (StarCalc)", FilterOptions="44,34,76,1,,0,false,true,true,false,false")
        return f"Exported sheet {self._active.getName()!r} to {path}"

    def sort_column(self, column_name: str, ascending: bool = True, start_index: int = 2) -> str:
        sheet = self._active
        col = self._column(column_name, sheet)
        last_row, _ = self._used(sheet)
        if start_index - 1 > last_row:
            raise ApiError(f"row {start_index} is below the last used row ({last_row + 1}); nothing to sort")
        rng = sheet.getCellRangeByPosition(col, start_index - 1, col, last_row)
        values = [row[0] for row in rng.getDataArray()]
        numbers = sorted((v for v in values if isinstance(v, float)), reverse=not ascending)
        texts = sorted((v for v in values if isinstance(v, str) and v != ""), key=str.lower, reverse=not ascending)
        blanks = [""] * (len(values) - len(numbers) - len(texts))
        rng.setDataArray(tuple((v,) for v in numbers + texts + blanks))
        letter = col_letter(col)
        return f"Sorted {letter}{start_index}:{letter}{last_row + 1} {'ascending' if ascending else 'descending'}"

    def set_validation_list(self, column_name: str, values: list) -> str:
        import uno

        sheet = self._active
        col = self._column(column_name, sheet)
        last_row = max(self._used(sheet)[0], 1)
        rng = sheet.getCellRangeByPosition(col, 1, col, last_row)
        validation = rng.Validation
        validation.Type = uno.Enum("com.sun.star.sheet.ValidationType", "LIST")
        validation.ShowList = 1  # com.sun.star.sheet.TableValidationVisibility.UNSORTED
        validation.setFormula1(";".join('"' + v.replace('"', '""') + '"' for v in values))
        rng.Validation = validation
        letter = col_letter(col)
        return f"{letter}2:{letter}{last_row + 1} now accept only: {', '.join(values)}"

    def hide_row_data(self, value: str = "N/A") -> str:
        sheet = self._active
        last_row, last_col = self._used(sheet)
        if last_row < 1:
            return "No rows below the header; nothing hidden"
        data = sheet.getCellRangeByPosition(0, 1, last_col, last_row).getDataArray()
        hidden = [i + 2 for i, row in enumerate(data) if any(_text(v) == value for v in row)]
        rows = sheet.getRows()
        for number in hidden:
            rows.getByIndex(number - 1).IsVisible = False
        return f"Hid {len(hidden)} rows containing {value!r}" + (f": {hidden[:50]}" if hidden else "")

    def reorder_columns(self, column_order: list) -> str:
        sheet = self._active
        cols = [self._column(c, sheet) for c in column_order]
        if len(set(cols)) != len(cols):
            raise ApiError(f"column_order names a column twice: {column_order}")
        last_row, _ = self._used(sheet)
        contents = [sheet.getCellRangeByPosition(c, 0, c, last_row).getFormulaArray() for c in cols]
        for target, content in zip(sorted(cols), contents):
            sheet.getCellRangeByPosition(target, 0, target, last_row).setFormulaArray(content)
        moves = ", ".join(f"{col_letter(src)}->{col_letter(dst)}" for src, dst in zip(cols, sorted(cols)) if src != dst)
        return f"Reordered columns ({moves or 'no change'})"

    def create_pivot_table(self, source_sheet: str, table_name: str, row_fields: list | None = None,
                           col_fields: list | None = None, value_fields: list | None = None,
                           aggregation_function: str = "sum", target_cell: str = "A1") -> str:
        import uno

        if not value_fields:
            raise ApiError("value_fields must name at least one column to aggregate")
        if not (row_fields or col_fields):
            raise ApiError("give row_fields or col_fields (columns to group by)")
        source = self._sheet(source_sheet)
        last_row, last_col = self._used(source)
        if last_row < 1:
            raise ApiError(f"sheet {source_sheet!r} has no data rows below its header")
        target = self._range(target_cell).getCellByPosition(0, 0).getCellAddress()
        tables = self._active.getDataPilotTables()
        if tables.hasByName(table_name):
            raise ApiError(f"the active sheet already has a pivot table named {table_name!r}")
        descriptor = tables.createDataPilotDescriptor()
        descriptor.setSourceRange(source.getCellRangeByPosition(0, 0, last_col, last_row).getRangeAddress())
        fields = descriptor.getDataPilotFields()
        for names, orientation in ((row_fields, "ROW"), (col_fields, "COLUMN"), (value_fields, "DATA")):
            for name in names or []:
                index = self._column(name, source)
                if index > last_col:
                    raise ApiError(f"column {name!r} is outside the data of sheet {source_sheet!r}")
                field = fields.getByIndex(index)
                field.Orientation = uno.Enum("com.sun.star.sheet.DataPilotFieldOrientation", orientation)
                if orientation == "DATA":
                    field.Function = uno.Enum("com.sun.star.sheet.GeneralFunction", aggregation_function.upper())
        tables.insertNewByName(table_name, target, descriptor)
        return f"Created pivot table {table_name!r} at {col_letter(target.Column)}{target.Row + 1}"

    def merge_cells(self, range_str: str) -> None:
        rng = self._range(range_str)
        if rng.getRows().getCount() * rng.getColumns().getCount() < 2:
            raise ApiError(f"{range_str!r} is a single cell; merge needs a range like \"A1:C1\"")
        rng.merge(True)

    def set_cell_value(self, cell: str, value: Value) -> str:
        target = self._cell(cell)
        self._write(target, value)
        if isinstance(value, str) and value.startswith("="):
            error = target.getError()
            shown = target.getString()
            return f"{cell} = {value} -> {'Err:' + str(error) if error else shown}"
        return None

    def format_range(self, range_str: str, background_color: str | None = None, font_color: str | None = None,
                     bold: bool | None = None, alignment: str | None = None) -> None:
        import uno

        rng = self._range(range_str)
        back = None if background_color is None else parse_color(background_color)
        fore = None if font_color is None else parse_color(font_color)
        if back is None and fore is None and bold is None and alignment is None:
            raise ApiError("give at least one of background_color, font_color, bold, alignment")
        if back is not None:
            rng.CellBackColor = back
        if fore is not None:
            rng.CharColor = fore
        if bold is not None:
            rng.CharWeight = 150.0 if bold else 100.0  # com.sun.star.awt.FontWeight BOLD / NORMAL
        if alignment is not None:
            rng.HoriJustify = uno.Enum("com.sun.star.table.CellHoriJustify", alignment.upper())

    def create_chart(self, chart_type: str, data_range: str, title: str | None = None,
                     x_axis_title: str | None = None, y_axis_title: str | None = None) -> str:
        import uno

        rng = self._range(data_range)
        address = rng.getRangeAddress()
        sheet = self._active
        charts = sheet.getCharts()
        name = next(f"Chart {i}" for i in range(1, 10000) if not charts.hasByName(f"Chart {i}"))
        # Placed to the right of the used area, so it covers no data.
        _, last_col = self._used(sheet)
        right = sheet.getCellByPosition(min(last_col + 1, sheet.getColumns().getCount() - 1), 0).Position.X
        rect = uno.createUnoStruct("com.sun.star.awt.Rectangle")
        rect.X, rect.Y, rect.Width, rect.Height = right + 500, 500, 16000, 9000  # 1/100 mm
        charts.addNewByName(name, rect, (address,), True, True)
        chart = charts.getByName(name).getEmbeddedObject()
        service = {"bar": "Bar", "column": "Bar", "line": "Line", "pie": "Pie", "scatter": "XY",
                   "area": "Area"}[chart_type]
        diagram = chart.createInstance(f"com.sun.star.chart.{service}Diagram")
        chart.setDiagram(diagram)
        if chart_type in ("bar", "column"):
            diagram.Vertical = chart_type == "bar"  # Vertical = bars grow sideways
        if title is not None:
            chart.HasMainTitle = True
            chart.getTitle().String = title
        for axis, text in (("X", x_axis_title), ("Y", y_axis_title)):
            if text is not None and chart_type != "pie":
                setattr(diagram, f"Has{axis}AxisTitle", True)
                getattr(diagram, f"get{axis}AxisTitle")().String = text
        return f"Created {chart_type} chart {name!r} of {data_range}"

    def freeze_panes(self, rows: int = 0, columns: int = 0) -> str:
        self._controller.freezeAtPosition(columns, rows)
        return "Unfroze the panes" if rows == columns == 0 else f"Froze {rows} rows and {columns} columns"

    @staticmethod
    def _check_sheet_name(name: str) -> None:
        bad = sorted(set(name) & _BAD_SHEET_CHARS)
        if bad or not name.strip() or name.startswith("'") or name.endswith("'"):
            raise ApiError(f"{name!r} is not a valid sheet name (no {' '.join(sorted(_BAD_SHEET_CHARS))}, "
                           "no leading or trailing quote, not blank)")

    def rename_sheet(self, old_name: str, new_name: str) -> None:
        sheet = self._sheet(old_name)
        if old_name == new_name:
            return
        if self.doc.getSheets().hasByName(new_name):
            raise ApiError(f"a sheet named {new_name!r} already exists")
        self._check_sheet_name(new_name)
        sheet.setName(new_name)

    def copy_sheet(self, source_sheet: str, new_sheet_name: str | None = None) -> str:
        sheets = self.doc.getSheets()
        self._sheet(source_sheet)
        if new_sheet_name is None:
            new_sheet_name = next(f"{source_sheet} ({i})" for i in range(2, 10000)
                                  if not sheets.hasByName(f"{source_sheet} ({i})"))
        elif sheets.hasByName(new_sheet_name):
            raise ApiError(f"a sheet named {new_sheet_name!r} already exists")
        self._check_sheet_name(new_sheet_name)
        index = list(sheets.getElementNames()).index(source_sheet)
        sheets.copyByName(source_sheet, new_sheet_name, index + 1)
        return new_sheet_name

    def reorder_sheets(self, sheet_name: str, position: int) -> None:
        sheets = self.doc.getSheets()
        self._sheet(sheet_name)
        count = sheets.getCount()
        if position >= count:
            raise ApiError(f"position {position} is out of range: there are {count} sheets (positions 0-{count - 1})")
        current = list(sheets.getElementNames()).index(sheet_name)
        # moveByName inserts before the given index of the list as it is before the move.
        sheets.moveByName(sheet_name, position + 1 if position > current else position)

    def set_chart_legend_position(self, position: str) -> None:
        import uno

        chart = self._chart()
        chart.HasLegend = position != "none"
        if position != "none":
            chart.getLegend().Alignment = uno.Enum("com.sun.star.chart.ChartLegendPosition", position.upper())

    def set_number_format(self, range_str: str, format_type: str, decimal_places: int | None = None) -> None:
        import uno

        rng = self._range(range_str)

        def d(default: int) -> str:  # the decimals part of a format code
            places = default if decimal_places is None else decimal_places
            return "." + "0" * places if places else ""

        code = {
            "general": "General",
            "number": "0" + d(0),
            "currency": "[$$-409]#,##0" + d(2) + ";-[$$-409]#,##0" + d(2),
            "accounting": '_([$$-409]* #,##0' + d(2) + '_);_([$$-409]* (#,##0' + d(2) + ');_([$$-409]* "-"??_);_(@_)',
            "date": "YYYY-MM-DD",
            "time": "HH:MM:SS",
            "percentage": "0" + d(2) + "%",
            "fraction": "# ?/?",
            "scientific": "0" + d(2) + "E+00",
            "text": "@",
        }[format_type]
        locale = uno.createUnoStruct("com.sun.star.lang.Locale")
        locale.Language, locale.Country = "en", "US"
        formats = self.doc.getNumberFormats()
        key = formats.queryKey(code, locale, False)
        if key == -1:
            key = formats.addNew(code, locale)
        rng.NumberFormat = key

    @staticmethod
    def _span(text: str, pattern: str, what: str, example: str) -> tuple[str, str]:
        parts = text.replace(" ", "").split(":")
        if len(parts) > 2 or not all(re.fullmatch(pattern, p) for p in parts):
            raise ApiError(f"{text!r} is not a {what}; write it like {example}")
        return parts[0], parts[-1]

    def adjust_column_width(self, columns: str, width: float | None = None, autofit: bool = False) -> str:
        if width is None and not autofit:
            raise ApiError("give a width (in characters) or autofit=True")
        first, last = (col_index(x) for x in self._span(columns, r"[A-Za-z]{1,3}", "column span", '"B" or "A:C"'))
        cols = self._active.getColumns()
        if max(first, last) >= cols.getCount():
            raise ApiError(f"{columns!r} lies outside the sheet")
        for i in range(min(first, last), max(first, last) + 1):
            column = cols.getByIndex(i)
            if autofit:
                column.OptimalWidth = True
            else:
                column.Width = round(width * 256)  # 1/100 mm; one character ~ 2.56 mm
        return f"Adjusted {max(first, last) - min(first, last) + 1} columns"

    def adjust_row_height(self, rows: str, height: float | None = None, autofit: bool = False) -> str:
        if height is None and not autofit:
            raise ApiError("give a height (in points) or autofit=True")
        first, last = (int(x) for x in self._span(rows, r"[0-9]{1,7}", "row span", '"3" or "1:10"'))
        all_rows = self._active.getRows()
        if min(first, last) < 1 or max(first, last) > all_rows.getCount():
            raise ApiError(f"{rows!r} lies outside the sheet (rows 1-{all_rows.getCount()})")
        for i in range(min(first, last) - 1, max(first, last)):
            row = all_rows.getByIndex(i)
            if autofit:
                row.OptimalHeight = True
            else:
                row.OptimalHeight = False
                row.Height = round(height * 35.28)  # points -> 1/100 mm
        return f"Adjusted {max(first, last) - min(first, last) + 1} rows"

    def export_to_pdf(self, file_path: str | None = None, sheets: list | None = None,
                      open_after_export: bool = False) -> str:
        import uno
        from com.sun.star.beans import PropertyValue

        if file_path is None:
            path = self._doc_path(".pdf")
        else:
            path = self.path(file_path)
        url = self.url(path)
        if sheets:  # the PDF filter exports only its "Selection": here the used areas of these sheets
            selection = self.doc.createInstance("com.sun.star.sheet.SheetCellRanges")
            for name in sheets:
                sheet = self._sheet(name)
                last_row, last_col = self._used(sheet)
                area = sheet.getCellRangeByPosition(0, 0, last_col, last_row)
                selection.addRangeAddress(area.getRangeAddress(), False)
            selected = (PropertyValue(Name="Selection", Value=selection),)
            filter_data = uno.Any("[]com.sun.star.beans.PropertyValue", selected)
            self.store(path, "calc_pdf_Export", FilterData=filter_data)
        else:
            self.store(path, "calc_pdf_Export")
        if open_after_export:
            desktop = self._controller.getFrame().getCreator()
            desktop.loadComponentFromURL(url, "_blank", 0, ())
        return f"Exported to {path}"

    def set_zoom_level(self, zoom_percentage: int) -> None:
        self._controller.ZoomType = 3  # com.sun.star.view.DocumentZoomType.BY_VALUE
        self._controller.ZoomValue = zoom_percentage

    # --- observation ---

    @classmethod
    def app_info(cls, doc: Any, max_chars: int) -> str:
        """Active sheet, used range and its content as a table (row numbers, column letters), trimmed."""
        sheet = doc.getCurrentController().getActiveSheet()
        names = doc.getSheets().getElementNames()
        last_row, last_col = cls._used(sheet)
        used_range = f"A1:{col_letter(last_col)}{last_row + 1}"
        head = f"Sheet {sheet.getName()!r} (sheets: {', '.join(names)}); used range {used_range}"
        # Read no more than the budget could show: each row costs at least a few characters.
        rows = min(last_row + 1, max_chars // 4 + 1)
        cols = min(last_col + 1, 200)
        rng = sheet.getCellRangeByPosition(0, 0, cols - 1, rows - 1)
        values, formulas = rng.getDataArray(), rng.getFormulaArray()
        lines = [head, "\t" + "\t".join(col_letter(c) for c in range(cols))]
        used = len(head) + len(lines[1]) + 2
        shown = 0
        for r in range(rows):
            cells = []
            for c in range(cols):
                text = _text(values[r][c])
                if formulas[r][c].startswith("=") and not text.startswith("="):
                    text = f"{text} ({formulas[r][c]})"
                cells.append(text.replace("\t", " ").replace("\n", " "))
            line = f"{r + 1}\t" + "\t".join(cells).rstrip("\t")
            if used + len(line) + 1 > max_chars - 40:
                break
            lines.append(line)
            used += len(line) + 1
            shown += 1
        left = ((last_row + 1 - shown, "rows"), (last_col + 1 - cols, "columns"))
        more = [f"{n} more {what}" for n, what in left if n]
        if more:
            lines.append(f"… ({', '.join(more)})")
        return "\n".join(lines)
