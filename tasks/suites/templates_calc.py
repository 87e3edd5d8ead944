"""Calc templates: a workbook is opened, the solution edits it (CalcTools API) and saves it;
`compare_table` checks the saved file against a gold workbook made with openpyxl."""

from __future__ import annotations

import re

from computerrl.tasks.suites import (GUI_SAVE_EXIT, PEOPLE, SAVE_EXIT, SHEET_DATA, WORDS, calc_task, goto_cell,
                                     template, xlsx)

STATS = {"SUM": sum, "AVERAGE": lambda v: sum(v) / len(v), "MAX": max, "MIN": min, "COUNT": len}
STAT_WORDS = {"SUM": "total", "AVERAGE": "average", "MAX": "largest value", "MIN": "smallest value",
              "COUNT": "number of values"}


def _items(rng, n: int, lo: int = 1, hi: int = 500) -> list[list]:
    return [[w, rng.randint(lo, hi)] for w in rng.sample(WORDS, n)]


@template("calc_column_stat", "calc")
def column_stat(rng, index):
    n, func = rng.randint(3, 8), rng.choice(sorted(STATS))
    rows = [["Item", "Amount"], *_items(rng, n)]
    label = func.title()
    target = f"B{n + 2}"
    formula = f"={func}(B2:B{n + 1})"
    start = rows + [[label]]
    gold = rows + [[label, STATS[func]([r[1] for r in rows[1:]])]]
    return calc_task(f"In cell {target} of the sheet, compute the {STAT_WORDS[func]} of the amounts in "
                     f"B2:B{n + 1} with a formula, then save the file.", start, xlsx(gold), SHEET_DATA,
                     [f"CalcTools.set_cell_value({target!r}, {formula!r})", *SAVE_EXIT],
                     {"rows": rows, "func": func},
                     gui_solution=[*goto_cell(2, n + 2), f"Agent.type(text={formula!r}, enter=True)", *GUI_SAVE_EXIT])


OPS = {"product": ("*", lambda a, b: a * b), "sum": ("+", lambda a, b: a + b), "difference": ("-", lambda a, b: a - b)}


@template("calc_row_formula", "calc")
def row_formula(rng, index):
    n, op = rng.randint(3, 7), rng.choice(sorted(OPS))
    sign, fn = OPS[op]
    header = rng.choice([["Qty", "Price"], ["Left", "Right"], ["Base", "Extra"]])
    body = [[rng.randint(1, 60), rng.randint(1, 60)] for _ in range(n)]
    result = rng.choice(["Result", "Total", "Value"])
    formulas = [f"=A{r}{sign}B{r}" for r in range(2, n + 2)]
    gold = [[*header, result], *[[a, b, fn(a, b)] for a, b in body]]
    return calc_task(f"Add a column C headed '{result}' whose rows hold the {op} of columns A and B "
                     f"({'A' + sign + 'B'}) for every data row, as formulas; save the file.",
                     [header, *body], xlsx(gold), SHEET_DATA,
                     [f"CalcTools.set_cell_value('C1', {result!r})",
                      f"CalcTools.set_column_values('C', {formulas!r}, 2)", *SAVE_EXIT],
                     {"header": header, "body": body, "op": op, "result": result})


@template("calc_sort_column", "calc")
def sort_column(rng, index):
    n, ascending = rng.randint(4, 9), rng.random() < 0.5
    header = rng.choice(["Score", "Points", "Sales", "Count"])
    values = rng.sample(range(1, 1000), n)
    gold = [[header], *[[v] for v in sorted(values, reverse=not ascending)]]
    order = "ascending (smallest first)" if ascending else "descending (largest first)"
    return calc_task(f"Sort the values of column A below its header '{header}' in {order} order and save.",
                     [[header], *[[v] for v in values]], xlsx(gold), SHEET_DATA,
                     [f"CalcTools.sort_column('A', {ascending}, 2)", *SAVE_EXIT],
                     {"header": header, "values": values, "ascending": ascending})


def _header_table(rng) -> tuple[int, list[list]]:
    """k columns under a header row of k names, 2-5 rows of a name then numbers."""
    k, n = rng.randint(2, 4), rng.randint(2, 5)
    header = rng.sample(["Name", "City", "Age", "Team", "Role", "Score"], k)
    rows = [header, *[[rng.choice(PEOPLE)] + [rng.randint(1, 99) for _ in range(k - 1)] for _ in range(n)]]
    return k, rows


@template("calc_bold_header", "calc")
def bold_header(rng, index):
    k, rows = _header_table(rng)
    last = "ABCD"[k - 1]
    rules = SHEET_DATA + _cell_rules([f"{c}1" for c in "ABCD"[:k]], "font_bold", True)
    gui = ["Agent.hotkey(['ctrl', 'Home'])"] + ["Agent.hotkey(['shift', 'right'])"] * (k - 1) + [
        "Agent.hotkey(['ctrl', 'b'])", *GUI_SAVE_EXIT]
    return calc_task(f"Make the header row (A1:{last}1) bold and save the file.", rows,
                     xlsx(rows, bold_header=True), rules,
                     [f"CalcTools.format_range('A1:{last}1', bold=True)", *SAVE_EXIT],
                     {"rows": rows}, gui_solution=gui)


@template("calc_bold_column", "calc", near="calc_bold_header")
def bold_column(rng, index):
    """bold_header's call (format_range with bold=True) on a new target: the names of column A below the
    header, where bold_header's range is always row 1."""
    _, rows = _header_table(rng)
    cells = [f"A{r}" for r in range(2, len(rows) + 1)]
    span = f"A2:A{len(rows)}"
    # the header and the numbers stay as they were: bolding the whole table (bold_header's habit, stretched) fails
    rules = SHEET_DATA + _cell_rules(cells, "font_bold", True) + _cell_rules(["A1", "B2"], "font_bold", True, "ne")
    return calc_task(f"Make the names in column A ({span}) bold and save the file.", rows,
                     _styled(rows, cells, bold=True), rules,
                     [f"CalcTools.format_range({span!r}, bold=True)", *SAVE_EXIT], {"rows": rows})


@template("calc_rename_sheet", "calc")
def rename_sheet(rng, index):
    old, new = rng.sample(["Data", "Sheet1", "Raw", "Input", "Numbers", "Draft"], 1)[0], rng.choice(WORDS)
    rows = [["Item", "Amount"], *_items(rng, rng.randint(2, 4))]
    rules = [{"type": "sheet_name"}, {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]
    return calc_task(f"Rename the sheet '{old}' to '{new}' and save the file.", rows, xlsx(rows, sheet=new), rules,
                     [f"CalcTools.rename_sheet({old!r}, {new!r})", *SAVE_EXIT],
                     {"old": old, "new": new, "rows": rows}, start=xlsx(rows, sheet=old))


@template("calc_freeze_header", "calc")
def freeze_header(rng, index):
    rows_frozen = rng.choice([1, 1, 2])
    rows = [["Name", "Score"], *[[p, rng.randint(0, 100)] for p in rng.sample(PEOPLE, rng.randint(3, 6))]]
    cell = f"A{rows_frozen + 1}"
    rules = [{"type": "freeze", "sheet_idx0": 0, "sheet_idx1": "EI0"}] + SHEET_DATA
    what = "the header row" if rows_frozen == 1 else "the first two rows"
    return calc_task(f"Freeze {what} of the sheet so it stays visible when scrolling, and save.", rows,
                     xlsx(rows, freeze=cell), rules,
                     [f"CalcTools.freeze_panes({rows_frozen}, 0)", *SAVE_EXIT],
                     {"rows": rows, "frozen": rows_frozen})


@template("calc_add_sheet", "calc")
def add_sheet(rng, index):
    name = rng.choice(WORDS) + rng.choice(["", " 2024", " Notes", " Summary"])
    rows = [["Item", "Amount"], *_items(rng, rng.randint(2, 4))]
    rules = [{"type": "sheet_name"}] + SHEET_DATA
    return calc_task(f"Add a new empty sheet named '{name}' after the existing one and save the file.", rows,
                     xlsx(rows, extra_sheets=(name,)), rules,
                     [f"CalcTools.switch_active_sheet({name!r})", *SAVE_EXIT], {"name": name, "rows": rows})


@template("calc_clear_cell", "calc")
def clear_cell(rng, index):
    n = rng.randint(3, 6)
    rows = [["Item", "Amount"], *_items(rng, n)]
    r = rng.randint(2, n + 1)
    gold = [row[:] for row in rows]
    gold[r - 1][1] = None
    return calc_task(f"The amount of {rows[r - 1][0]} (cell B{r}) is wrong: clear that cell and save.", rows,
                     xlsx(gold), SHEET_DATA, [f"CalcTools.set_cell_value('B{r}', None)", *SAVE_EXIT],
                     {"rows": rows, "r": r},
                     gui_solution=[*goto_cell(2, r), "Agent.hotkey(['Delete'])", *GUI_SAVE_EXIT])


@template("calc_upper_column", "calc")
def upper_column(rng, index):
    n = rng.randint(3, 6)
    names = rng.sample(PEOPLE, n)
    cities = rng.sample(["Oslo", "Lima", "Accra", "Kyoto", "Quito", "Perth", "Tunis", "Riga"], n)
    rows = [["Name", "City", "Code"], *[[p, c] for p, c in zip(names, cities)]]
    gold = [rows[0], *[[p, c, c.upper()] for p, c in zip(names, cities)]]
    formulas = [f"=UPPER(B{r})" for r in range(2, n + 2)]
    return calc_task("Fill column C ('Code') with each row's city in capital letters, using a formula, and save.",
                     rows, xlsx(gold), SHEET_DATA,
                     [f"CalcTools.set_column_values('C', {formulas!r}, 2)", *SAVE_EXIT],
                     {"rows": rows})


@template("calc_transpose", "calc")
def transpose(rng, index):
    k = rng.randint(2, 4)
    header = rng.sample(["Q1", "Q2", "Q3", "Q4", "Jan", "Feb", "Mar"], k)
    values = [rng.randint(1, 90) for _ in range(k)]
    col = "ABCDEFGH"[k + 1]  # the transposed block starts one empty column right of the data
    gold = [[*header, None, "Label", "Value"], [*values, None, header[0], values[0]]]
    gold += [[None] * (k + 1) + [h, v] for h, v in zip(header[1:], values[1:])]
    start = [[*header, None, "Label", "Value"], values]
    return calc_task(f"Copy the block A1:{'ABCD'[k - 1]}2 transposed (rows become columns) so that it starts at "
                     f"{col}2, under the 'Label' and 'Value' headers, and save.", start, xlsx(gold), SHEET_DATA,
                     [f"CalcTools.transpose_range('A1:{'ABCD'[k - 1]}2', '{col}2')", *SAVE_EXIT],
                     {"header": header, "values": values})


@template("calc_row_total", "calc")
def row_total(rng, index):
    k, n = rng.randint(2, 4), rng.randint(2, 5)
    months = ["Jan", "Feb", "Mar", "Apr"][:k]
    body = [[p, *[rng.randint(0, 200) for _ in range(k)]] for p in rng.sample(PEOPLE, n)]
    col, last = "ABCDEF"[k + 1], "ABCDEF"[k]
    start = [["Name", *months, "Total"], *body]
    gold = [start[0], *[[*r, sum(r[1:])] for r in body]]
    formulas = [f"=SUM(B{r}:{last}{r})" for r in range(2, n + 2)]
    return calc_task(f"Fill column {col} ('Total') with each person's total over {months[0]}-{months[-1]} "
                     f"(columns B to {last}), using formulas, and save.", start, xlsx(gold), SHEET_DATA,
                     [f"CalcTools.set_column_values({col!r}, {formulas!r}, 2)", *SAVE_EXIT], {"body": body})


# --- formatting: compare_table's check_cell reads these props back from the saved .xlsx --------

FILLS = {"yellow": "FFFF00", "light green": "CCFFCC", "light blue": "CCE5FF", "orange": "FFA500", "gray": "C0C0C0"}
INKS = {"red": "FF0000", "blue": "0000FF", "green": "008000", "purple": "800080"}


def _styled(rows: list[list], cells: list[str], **style) -> bytes:
    """xlsx(rows) with openpyxl styles set on `cells`: number_format=, fill= (RRGGBB), ink= (RRGGBB), bold=, merge=."""
    import io

    import openpyxl
    from openpyxl.styles import Font, PatternFill

    from computerrl.tasks.suites import stable_zip

    wb = openpyxl.load_workbook(io.BytesIO(xlsx(rows)))
    ws = wb.active
    for ref in cells:
        cell = ws[ref]
        if "number_format" in style:
            cell.number_format = style["number_format"]
        if "fill" in style:
            cell.fill = PatternFill("solid", fgColor="FF" + style["fill"])
        if "ink" in style:
            cell.font = Font(color="FF" + style["ink"])
        if "bold" in style:
            cell.font = Font(bold=style["bold"])
    if "merge" in style:
        ws.merge_cells(style["merge"])
    buf = io.BytesIO()
    wb.save(buf)
    return stable_zip(buf.getvalue())


def _cell_rules(cells: list[str], prop: str, ref, method: str = "eq") -> list[dict]:
    return [{"type": "check_cell", "sheet_idx": 0, "coordinate": c, "props": {prop: {"method": method, "ref": ref}}}
            for c in cells]


@template("calc_number_format", "calc")
def number_format(rng, index):
    n, kind, places = rng.randint(3, 6), rng.choice(["percentage", "number"]), rng.randint(0, 2)
    if kind == "percentage":
        rows = [["Item", "Share"], *[[w, rng.randint(1, 99) / 100] for w in rng.sample(WORDS, n)]]
        code = "0" + ("." + "0" * places if places else "") + "%"
        what = f"percentages with {places} decimal places"
    else:
        rows = [["Item", "Weight"], *[[w, rng.randint(100, 9999) / 100] for w in rng.sample(WORDS, n)]]
        code = "0" + ("." + "0" * places if places else "")
        what = f"plain numbers with {places} decimal places" if places else "whole numbers (no decimals)"
    cells = [f"B{r}" for r in range(2, n + 2)]
    return calc_task(f"Format the values in B2:B{n + 1} as {what} and save the file.", rows,
                     _styled(rows, cells, number_format=code),
                     # LibreOffice writes the API's en-US locale into the code ("[$-409]0.00%")
                     SHEET_DATA + _cell_rules(cells, "number_format", r"^(\[\$-409\])?" + re.escape(code) + "$", "re"),
                     [f"CalcTools.set_number_format('B2:B{n + 1}', {kind!r}, {places})", *SAVE_EXIT],
                     {"rows": rows, "kind": kind, "places": places})


@template("calc_fill_header", "calc")
def fill_header(rng, index):
    k, rows = _header_table(rng)
    name = rng.choice(sorted(FILLS))
    cells = [f"{c}1" for c in "ABCD"[:k]]
    return calc_task(f"Give the header cells A1:{'ABCD'[k - 1]}1 a solid {name} background (#{FILLS[name]}) and "
                     "save the file.", rows, _styled(rows, cells, fill=FILLS[name]),
                     SHEET_DATA + _cell_rules(cells, "bgcolor", "FF" + FILLS[name]),
                     [f"CalcTools.format_range('A1:{'ABCD'[k - 1]}1', background_color='#{FILLS[name]}')", *SAVE_EXIT],
                     {"rows": rows, "color": name})


@template("calc_font_color", "calc")
def font_color(rng, index):
    n = rng.randint(3, 6)
    rows = [["Item", "Amount"], *_items(rng, n)]
    r = rng.randint(2, n + 1)
    name = rng.choice(sorted(INKS))
    return calc_task(f"Make the text of cell A{r} ({rows[r - 1][0]}) {name} (#{INKS[name]}) and save the file.",
                     rows, _styled(rows, [f"A{r}"], ink=INKS[name]),
                     SHEET_DATA + _cell_rules([f"A{r}"], "font_color", "FF" + INKS[name]),
                     [f"CalcTools.format_range('A{r}', font_color='#{INKS[name]}')", *SAVE_EXIT],
                     {"rows": rows, "r": r, "color": name})


@template("calc_merge_title", "calc")
def merge_title(rng, index):
    k, n = rng.randint(2, 4), rng.randint(2, 4)
    title = f"{rng.choice(WORDS)} {rng.choice(['Sales', 'Scores', 'Budget', 'Stock'])}"
    header = rng.sample(["Name", "Q1", "Q2", "Q3", "Total", "Team"], k)
    rows = [[title], header, *[[rng.choice(PEOPLE)] + [rng.randint(1, 99) for _ in range(k - 1)] for _ in range(n)]]
    span = f"A1:{'ABCD'[k - 1]}1"
    cells = [f"{c}1" for c in "BCD"[:k - 1]]
    return calc_task(f"Merge the cells {span} so the title '{title}' spans the table, and save the file.", rows,
                     _styled(rows, [], merge=span), SHEET_DATA + _cell_rules(cells, "merge", True),
                     [f"CalcTools.merge_cells({span!r})", *SAVE_EXIT], {"rows": rows, "title": title})
