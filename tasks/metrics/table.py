"""Spreadsheet metrics with OSWorld's semantics: `compare_table` (a list of rules, all must hold)
and `compare_csv`.

compare_table rules supported: `sheet_name`, `sheet_data`, `check_cell`, `sheet_fuzzy`, `freeze`,
`zoom`, `row_props`, `col_props`, in table_objects `chart`, `pivot_table`, `filter`,
`data_validation`, `sheet_print`, and in table_styles `style`. Not supported (ValueError
naming the rule, raised before any file is read, so task loading can report it): `sparkline`.
Sheet indices as in OSWorld: an int (result sheet by position), "RI0"/"RNname" (result by
index/name), "EI0"/"ENname" (expected by index/name).
Departures: a missing/unreadable result (or expected) book scores 0; cell values are read with
openpyxl (data_only) and mapped to what OSWorld's raw-XML reader returns (numbers and dates as
float, strings as str, booleans as None).
"""

from __future__ import annotations

import builtins
import logging
import operator
import os
import re
from datetime import date, datetime, time

import openpyxl
import pandas as pd
from openpyxl.cell.cell import MergedCell
from openpyxl.utils.datetime import to_excel
from openpyxl.worksheet.cell_range import MultiCellRange

from computerrl.data.registry import Registry
from computerrl.tasks.metrics.basic import fuzz_ratio, read_text
from computerrl.tasks.registry import metric

log = logging.getLogger(__name__)

TABLE_RULES = Registry("compare_table rule")  # rule type -> holds(rule, result book, expected book)
table_rule = TABLE_RULES.register
CELL_STYLES = {  # check_cell and style props: (cell, its active conditional format's dxf or None) -> value;
    # None when the cell is empty, as in OSWorld's _read_cell_style; a dxf replaces font, fill, number format
    "number_format": lambda c, d: ((c.number_format if d is None else d.numFmt.formatCode)
                                   if c.value is not None and c.data_type == "n" else None),
    "font_name": lambda c, d: (d or c).font.name if c.value is not None else None,
    "font_family": lambda c, d: (d or c).font.family if c.value is not None else None,
    "font_color": lambda c, d: (d or c).font.color.rgb if c.value is not None else None,
    "font_bold": lambda c, d: (d or c).font.bold if c.value is not None else None,
    "font_italic": lambda c, d: (d or c).font.italic if c.value is not None else None,
    "font_underline": lambda c, d: (d or c).font.underline if c.value is not None else None,
    "font_size": lambda c, d: (d or c).font.size if c.value is not None else None,
    "fill_type": lambda c, d: (d or c).fill.tagname,
    "bgcolor": lambda c, d: c.fill.fgColor.rgb if d is None else d.fill.bgColor.rgb,  # fgColor, as OSWorld
    "fgcolor": lambda c, d: c.fill.fgColor.rgb if d is None else d.fill.bgColor.rgb,
    "hyperlink": lambda c, d: (c.hyperlink or "") if c.value is not None else None,
    "merge": lambda c, d: isinstance(c, MergedCell),
}


def cell_style(prop: str, cell, dxf=None):
    """One CELL_STYLES prop; a part the cell lacks (a font without a colour) reads None."""
    try:
        return CELL_STYLES[prop](cell, dxf)
    except AttributeError:
        return None


METHODS = ("re", "eq", "ne", "le", "lt", "ge", "gt", "approx:", "spreadsheet_range", "range.", "str_list_eq",
           "str_set_eq")


def check_table_rules(rules) -> None:
    """Raise ValueError naming the first rule (or check_cell prop) compare_table cannot evaluate."""
    for r in rules:
        kind = r.get("type")
        if kind not in TABLE_RULES:
            raise ValueError(f"compare_table rule {kind!r} is not supported; "
                             f"supported: {', '.join(sorted(TABLE_RULES))}")
        for prop, rule in (r.get("props", {}) if kind == "check_cell" else {}).items():
            if prop != "value" and prop not in CELL_STYLES:
                raise ValueError(f"compare_table check_cell prop {prop!r} is not supported")
            if not str(rule.get("method", "")).startswith(METHODS):
                raise ValueError(f"compare_table check_cell method {rule.get('method')!r} is not supported")
        for prop in r.get("props", []) if kind == "style" else []:
            if prop not in CELL_STYLES:
                raise ValueError(f"compare_table style prop {prop!r} is not supported")


def match_value_to_rule(value, rule: dict) -> bool:
    """OSWorld's `{"method": ..., "ref": ...}` comparison; a type error counts as a mismatch."""
    method, ref = rule["method"], rule.get("ref")
    try:
        if method.startswith("re"):  # "re", "re.I.M": re.search with those flags
            flags = 0
            for name in method.split(".")[1:]:
                flags |= getattr(re, name)
            return re.search(ref, value, flags) is not None
        if method in ("eq", "ne", "le", "lt", "ge", "gt"):
            return getattr(operator, method)(value, ref)
        if method.startswith("approx"):  # "approx:0.01"
            return abs(float(value) - ref) <= float(method.split(":")[1])
        if method == "spreadsheet_range":  # ref[0] <= value <= ref[1] as cell ranges
            inner, outer, val = MultiCellRange(ref[0]), MultiCellRange(ref[1]), MultiCellRange(value)
            return all(r in val for r in inner) and all(r in outer for r in val)
        if method.startswith("range."):  # "range.te": ref[0] < value <= ref[1]
            return (getattr(operator, "l" + method[6])(ref[0], value)
                    and getattr(operator, "l" + method[7])(value, ref[1]))
        if method in ("str_list_eq", "str_set_eq"):  # "a,b,c" against a list
            kind = getattr(builtins, method[4:-3])
            return kind(value.strip("\"'").split(",")) == kind(ref)
    except (TypeError, ValueError, AttributeError, IndexError):
        return False
    raise ValueError(f"unsupported comparison method {method!r}")


class _Book:
    """One workbook opened the three ways the rules need, each loaded on first use."""

    def __init__(self, path: str):
        self.path, self._cache = path, {"pd": pd.ExcelFile(path)}  # raises if unreadable: scored 0
        self.names = self._cache["pd"].sheet_names

    def _get(self, key, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def frame(self, name):  # pandas view, for sheet_data
        try:
            return pd.read_excel(self._cache["pd"], name)
        except Exception:
            return None

    def sheet(self, name):  # styled openpyxl view, for check_cell props and sheet views
        wb = self._get("xl", lambda: openpyxl.load_workbook(self.path))
        return wb[name] if name in wb.sheetnames else None

    def value(self, name, coord):
        """What OSWorld's read_cell_value returns: cached values, numbers/dates as float."""
        wb = self._get("data", lambda: openpyxl.load_workbook(self.path, data_only=True))
        if name not in wb.sheetnames:
            return None
        v = wb[name][coord].value
        if isinstance(v, bool):  # t="b" cells fall through OSWorld's reader
            return None
        if isinstance(v, (datetime, date, time)):
            return float(to_excel(v))
        return float(v) if isinstance(v, (int, float)) else v


def sheet_at(idx, result: _Book, expected: _Book | None):
    """Resolve an OSWorld sheet index to (book, sheet name); an unknown name gives ""."""
    if isinstance(idx, int):
        return result, result.names[idx] if -len(result.names) <= idx < len(result.names) else ""
    prefix, rest = idx[:2], idx[2:]
    book = {"RI": result, "RN": result, "EI": expected, "EN": expected}.get(prefix)
    if prefix not in ("RI", "RN", "EI", "EN"):
        raise ValueError(f"unrecognized sheet index {idx!r}")
    if book is None:
        return None, ""
    if prefix[1] == "I":
        i = int(rest)
        return book, book.names[i] if -len(book.names) <= i < len(book.names) else ""
    return book, rest


def _freeze_key(ws):
    """The freeze boundary (xSplit/ySplit), not topLeftCell, which moves when the user scrolls."""
    pane = ws.sheet_view.pane
    if pane is None:
        return ("none",)
    xs, ys = int(pane.xSplit or 0), int(pane.ySplit or 0)
    if (pane.state or "").lower() in ("frozen", "frozensplit"):
        return ("frozen", xs, ys)
    return ("other", xs, ys, pane.topLeftCell)


def _fuzzy_cells(r, result, expected) -> bool:
    (b1, n1), (b2, n2) = (sheet_at(r[k], result, expected) for k in ("sheet_idx0", "sheet_idx1"))
    for rl in r["rules"]:
        ranges = rl["range"] if isinstance(rl["range"], str) else " ".join(rl["range"])
        for rng in MultiCellRange(ranges):
            for row, col in rng.cells:
                coord = f"{openpyxl.utils.get_column_letter(col)}{row}"
                v1 = str(b1.value(n1, coord) if b1 else None)
                v2 = str(b2.value(n2, coord) if b2 else None)
                for old, new in rl.get("normalization", []):
                    v1, v2 = v1.replace(old, new), v2.replace(old, new)
                if "trim_leadings" in rl:
                    v1, v2 = v1.lstrip(rl["trim_leadings"]), v2.lstrip(rl["trim_leadings"])
                if "trim_trailings" in rl:
                    v1, v2 = v1.rstrip(rl["trim_trailings"]), v2.rstrip(rl["trim_trailings"])
                if "ignore_chars" in rl:
                    drop = set(rl["ignore_chars"])
                    v1, v2 = "".join(c for c in v1 if c not in drop), "".join(c for c in v2 if c not in drop)
                if rl.get("ignore_case", False):
                    v1, v2 = v1.lower(), v2.lower()
                ok = {"includes": lambda: v2 in v1, "included_by": lambda: v1 in v2,
                      "fuzzy_match": lambda: fuzz_ratio(v1, v2) >= rl.get("threshold", 85.0),
                      "exact_match": lambda: v1 == v2}[rl["type"]]()
                if not ok:
                    return False
    return True


def _dims(book, name, obj, props):
    ws = book.sheet(name) if book else None
    if ws is None:
        return {}
    dims = ws.row_dimensions if obj == "row" else ws.column_dimensions
    return {k: {p: getattr(d, p) for p in props} for k, d in dims.items()}


def sheets_at(r, result, expected, keys=("sheet_idx0", "sheet_idx1")):
    return [sheet_at(r[k], result, expected) for k in keys]


@table_rule("sheet_name")
def _sheet_name(r, result: _Book, expected: _Book | None) -> bool:
    return expected is not None and result.names == expected.names


@table_rule("sheet_data")
def _sheet_data(r, result, expected) -> bool:
    """Cell values as pandas reads them, rounded to `precision` digits."""
    (b1, n1), (b2, n2) = sheets_at(r, result, expected)
    f1, f2 = (b1.frame(n1) if b1 else None), (b2.frame(n2) if b2 else None)
    if f1 is None or f2 is None:
        return False
    digits = r.get("precision", 4)
    return f1.round(digits).equals(f2.round(digits))


@table_rule("check_cell")
def _check_cell(r, result, expected) -> bool:
    """props: {name: {"method", "ref"}}; "value" reads the cached value."""
    book, name = sheet_at(r["sheet_idx"], result, expected)
    ws = book.sheet(name) if book else None
    if ws is None:
        return False
    cell = ws[r["coordinate"]]
    for prop, rule in r["props"].items():
        val = book.value(name, r["coordinate"]) if prop == "value" else cell_style(prop, cell)
        if not match_value_to_rule(val, rule):
            return False
    return True


table_rule("sheet_fuzzy")(_fuzzy_cells)


@table_rule("zoom")
def _zoom(r, result, expected) -> bool:
    """The rule itself holds method and ref."""
    book, name = sheet_at(r["sheet_idx"], result, expected)
    ws = book.sheet(name) if book else None
    return ws is not None and match_value_to_rule(ws.sheet_view.zoomScale or 100.0, r)


@table_rule("freeze")
def _freeze(r, result, expected) -> bool:
    sheets = [b.sheet(n) if b else None for b, n in sheets_at(r, result, expected)]
    return None not in sheets and _freeze_key(sheets[0]) == _freeze_key(sheets[1])


def same_on_both_sides(load, props_key: str | None = None):
    """A rule that holds when `load(book, sheet[, the rule's props_key list])` reads the same from the
    two sheets it names (sheet_idx0, sheet_idx1)."""
    def rule(r, result, expected) -> bool:
        props = [r.get(props_key, [])] if props_key else []
        (b1, n1), (b2, n2) = sheets_at(r, result, expected)
        return load(b1, n1, *props) == load(b2, n2, *props)

    return rule


table_rule("row_props")(same_on_both_sides(lambda book, name, props: _dims(book, name, "row", props), "props"))
table_rule("col_props")(same_on_both_sides(lambda book, name, props: _dims(book, name, "column", props), "props"))


@metric("compare_table")
def compare_table(result, expected=None, **options) -> float:
    """1 if every rule in `options["rules"]` holds between the result and expected workbooks."""
    rules = options.get("rules", [])
    check_table_rules(rules)
    if not result or not os.path.exists(result):
        return 0.0
    try:
        rbook = _Book(result)
        ebook = _Book(expected) if expected else None
    except Exception as e:  # a corrupt or non-spreadsheet file
        log.info("compare_table cannot open %s / %s: %s", result, expected, e)
        return 0.0
    for r in rules:
        try:
            if not TABLE_RULES[r["type"]](r, rbook, ebook):
                return 0.0
        except (KeyError, IndexError, OSError) as e:  # a sheet or cell that is not there
            log.info("compare_table rule %s failed: %s", r.get("type"), e)
            return 0.0
    return 1.0


@metric("compare_csv")
def compare_csv(result, expected, **options) -> float:
    """1 if the result's lines equal those of the expected file (or of any file in a list);
    options `strict` (default True; False strips each line) and `ignore_case`."""
    text = read_text(result)
    if text is None:
        return 0.0

    def lines(t: str) -> list[str]:
        out = t.splitlines()
        if not options.get("strict", True):
            out = [s.strip() for s in out]
        return [s.lower() for s in out] if options.get("ignore_case", False) else out

    for gold in [expected] if isinstance(expected, str) else expected or []:
        gold_text = read_text(gold)
        if gold_text is not None and lines(gold_text) == lines(text):
            return 1.0
    return 0.0
