"""compare_table rules on a sheet's objects and printout, with the semantics of OSWorld's
(`metrics/table.py`, `load_charts`, `load_pivot_tables`, `load_filters` in `metrics/utils.py`):
`chart`, `pivot_table`, `filter`, `data_validation`, `sheet_print`.

Each side is read into a plain dict with openpyxl, as OSWorld reads it, and the two dicts compared:
- chart: {series refs: {prop: value}} per chart (its data ranges are its identity);
- pivot_table: {source range: {prop: value}} per pivot table;
- filter: the sheet's autoFilter (range, column filters, sort state);
- data_validation (the result alone): every validation matches one of the rule's patterns, and there
  are at least as many validations as patterns;
- sheet_print: the CSV LibreOffice printed for the sheet (`<book>-<sheet>.csv` beside the book, made by
  the task's postconfig), line by line, stripped, trailing blank lines dropped.
Quirks kept because scores depend on them: a chart's `anchor` repeats the end row where the start
row belongs, its `width`/`height` are openpyxl's defaults (the file's size is never read), and a
pivot's `show_total` is its visualTotals flag.
"""

from __future__ import annotations

import os

from openpyxl.utils.cell import coordinate_to_tuple

from computerrl.tasks.metrics.table import sheet_at, sheets_at, match_value_to_rule, same_on_both_sides, table_rule

CSV_ENCODINGS = ("utf-8", "utf-8-sig", "latin-1")  # latin-1 reads any bytes: OSWorld's later ones never run


def _first_run_text(title) -> str | None:
    try:
        return title.tx.rich.p[0].r[0].t
    except (AttributeError, IndexError, TypeError):
        return None


def _ref(source) -> str:
    for kind in ("numRef", "strRef"):
        ref = getattr(source, kind, None)
        if ref is not None and ref.f is not None:
            return ref.f
    return ""


CHART_PROPS = {
    "type": lambda c: c.tagname,
    "title": lambda c: _first_run_text(c.title),
    "legend": lambda c: (c.legend.position or "r") if c.legend is not None else None,
    "anchor": lambda c: [c.anchor.editAs, c.anchor._from.col, c.anchor.to.row, c.anchor.to.col, c.anchor.to.row],
    "width": lambda c: c.width,
    "height": lambda c: c.height,
    "direction": lambda c: c.barDir,  # a chart without bars has none: OSWorld's metric raises too
    "xtitle": lambda c: _first_run_text(getattr(c.x_axis, "title", None)),
    "ytitle": lambda c: _first_run_text(getattr(c.y_axis, "title", None)),
    "ztitle": lambda c: _first_run_text(getattr(getattr(c, "z_axis", None), "title", None)),
}


def load_charts(book, name, props: list[str]) -> dict:
    ws = book.sheet(name) if book else None
    if ws is None:
        return {}
    charts = {}
    for chart in ws._charts:
        key = ";".join(f"{_ref(s.val)},{_ref(s.cat)}" for s in chart.series)
        charts[key] = {p: CHART_PROPS[p](chart) for p in props if p in CHART_PROPS}
    return charts


table_rule("chart")(same_on_both_sides(load_charts, "chart_props"))


def load_pivots(book, name, props: list[str]) -> dict:
    ws = book.sheet(name) if book else None
    if ws is None:
        return {}
    pivots = {}
    for pvt in ws._pivots:
        fields = [[(item.h, item.x) for item in (f.items or []) if item.x is not None] for f in pvt.pivotFields]
        left = next((i for i, f in enumerate(fields) if f), len(fields))
        right = next((i for i, f in enumerate(reversed(fields)) if f), len(fields))
        selection = fields[left:len(fields) - right]
        source = pvt.cache.cacheSource
        start, end = source.worksheetSource.ref.split(":")
        (r1, c1), (r2, c2) = coordinate_to_tuple(start), coordinate_to_tuple(end)
        info = {}
        for prop, attr in (("name", "name"), ("show_total", "visualTotals"), ("show_empty_row", "showEmptyRow"),
                           ("show_empty_col", "showEmptyCol"), ("show_headers", "showHeaders"),
                           ("location", "location")):
            if prop in props:
                info[prop] = getattr(pvt, attr)
        if "selection" in props or "filter" in props:
            info["selection"] = selection if "ordered" in props else [set(f) for f in selection]
        if "filter" in props:
            info["filter_fields"] = {f.fld for f in pvt.pageFields}
        if "col_fields" in props:
            info["col_fields"] = [f.x - left for f in pvt.colFields]
        if "row_fields" in props:
            info["row_fields"] = [f.x - left for f in pvt.rowFields]
        if "data_fields" in props:
            named = "data_fields_name" in props
            info["data_fields"] = [f"{f.fld - left:d};{f.name if named else ''};{f.subtotal};{f.showDataAs}"
                                   for f in pvt.dataFields]
        pivots[f"{source.type};{(r1, c1 + left)}:{(r2, c2 - right)};{source.worksheetSource.sheet}"] = info
    return pivots


table_rule("pivot_table")(same_on_both_sides(load_pivots, "pivot_props"))


def load_filters(book, name) -> dict:
    ws = book.sheet(name) if book else None
    if ws is None:
        return {}
    af = ws.auto_filter
    columns = []
    for fc in af.filterColumn:
        column = {"col_id": fc.colId, "hidden_button": fc.hiddenButton, "show_button": fc.showButton}
        if fc.filters is not None:
            column["filters_blank"] = fc.filters.blank
            column["filters"] = set(fc.filters.filter)
        if fc.customFilters is not None:
            column["custom_filters_op"] = fc.customFilters._and
            column["custom_filters"] = {(f.operator or "equal", f.val) for f in fc.customFilters.customFilter}
        columns.append(column)
    out = {"ref": af.ref, "filter_column": sorted(columns, key=lambda c: c["col_id"])}
    if af.sortState is not None:
        s = af.sortState
        out["sort_state"] = {"sort": s.columnSort, "case": s.caseSensitive, "method": s.sortMethod, "ref": s.ref,
                             "condition": [{"descending": c.descending, "key": c.sortBy, "ref": c.ref,
                                            "custom_list": c.customList, "dxf_id": c.dxfId, "icon": c.iconSet,
                                            "iconid": c.iconId} for c in s.sortCondition]}
    return out


table_rule("filter")(same_on_both_sides(load_filters))


@table_rule("data_validation")
def _data_validation(r, result, expected) -> bool:
    book, name = sheet_at(r["sheet_idx"], result, expected)
    ws = book.sheet(name) if book else None
    if ws is None:
        return False
    validations, patterns = ws.data_validations.dataValidation, r["dv_props"]
    return len(validations) >= len(patterns) and all(
        any(all(match_value_to_rule(getattr(dv, attr), rule) for attr, rule in pattern.items())
            for pattern in patterns)
        for dv in validations)


def printed_lines(book, name) -> list[str] | None:
    """The sheet as LibreOffice printed it to `<book>-<sheet>.csv`: stripped lines, no trailing blank ones."""
    if book is None or not name:
        return None
    try:
        with open(f"{os.path.splitext(book.path)[0]}-{name}.csv", "rb") as f:
            data = f.read()
    except OSError:
        return None
    for encoding in CSV_ENCODINGS:
        try:
            lines = [line.strip() for line in data.decode(encoding).splitlines()]
            break
        except UnicodeDecodeError:
            continue
    while lines and not lines[-1]:
        lines.pop()
    return lines


@table_rule("sheet_print")
def _sheet_print(r, result, expected) -> bool:
    (b1, n1), (b2, n2) = sheets_at(r, result, expected)
    lines1, lines2 = printed_lines(b1, n1), printed_lines(b2, n2)
    if lines1 is None or lines2 is None:
        return False
    if r.get("ignore_case", False):
        lines1, lines2 = [s.lower() for s in lines1], [s.lower() for s in lines2]
    return lines1 == lines2
