"""compare_table's `style` rule, with the semantics of OSWorld's `load_xlsx_styles`: every cell of
the sheet mapped to its `props` (CELL_STYLES), then each conditional format's rule evaluated on the
cells it covers and, where it holds, its differential style (dxf) read instead. Both sides' maps must
be equal.

Conditions are Excel formulas, compiled with the `formulas` package as OSWorld compiles them, and
called as OSWorld calls them:
- `expression` and the text/error types: the formula gets the cell's value as its first input and
  the values of its absolute ranges (`$A$1`, `$A$1:$B$9`) as the rest;
- `cellIs`: each formula is computed with no inputs (a formula that references a cell cannot be, and
  the rule is skipped) and the cell's value compared by the operator;
- any other type (top10, aboveAverage, …) has no condition of its own: it tests the previous rule's
  condition, or holds for no cell when it comes first; where a rule without a formula holds, OSWorld
  fails, and so does this (the evaluation then asks whether the gold file alone makes it fail).
  OSWorld's quirks, kept because scores follow them.
A rule stops testing a range once more than 50 empty cells have been met, counted over the rule.
Departure: a part a cell lacks (a font without a colour) reads None, where OSWorld raises.
"""

from __future__ import annotations

import logging
import operator
import re

from openpyxl.utils import get_column_letter
from openpyxl.worksheet.cell_range import CellRange

from computerrl.tasks.metrics.table import cell_style, same_on_both_sides, table_rule

log = logging.getLogger(__name__)

ABSOLUTE_RANGE = re.compile(r"\$([A-Z]{1,3})\$(\d+)(?::\$([A-Z]{1,3})\$(\d+))?")
CELL_IS = {"lessThanOrEqual": operator.le, "lessThan": operator.lt, "equal": operator.eq,
           "greaterThanOrEqual": operator.ge, "notEqual": operator.ne, "greaterThan": operator.gt,
           "between": lambda v, lo, hi: lo <= v <= hi, "notBetween": lambda v, lo, hi: v < lo or v > hi}
FORMULA_TYPES = {"expression", "containsText", "notContainsText", "endsWith", "beginsWith",
                 "containsErrors", "notContainsErrors"}
EMPTY_RUN = 50  # empty cells a rule tolerates before it stops testing each range


def _cell_is(op: str, value, refs: list) -> bool:
    try:
        if op in ("between", "notBetween"):
            return CELL_IS[op](value, min(refs), max(refs))
        return CELL_IS[op](value, refs[0]) if op in CELL_IS else False
    except (TypeError, ValueError, IndexError):
        return False


def _compile(parser, formula: str, book, name):
    """(function, the values of its absolute ranges), or None when `formulas` cannot parse it."""
    try:
        func = parser.ast("=" + formula)[1].compile()
    except Exception:
        log.info("conditional format formula %r does not parse; rule skipped", formula)
        return None
    args = []
    for col1, row1, col2, row2 in ABSOLUTE_RANGE.findall(formula):
        if not col2:
            args.append(book.value(name, f"{col1}{row1}"))
        else:
            args.append([book.value(name, f"{get_column_letter(c)}{r}")
                         for r, c in CellRange(f"{col1}{row1}:{col2}{row2}").cells])
    return func, args


def _condition(rule, compiled, previous):
    """The test a conditional-format rule applies to a cell's value, as OSWorld builds it."""
    if rule.type in FORMULA_TYPES:
        if not compiled:
            raise ValueError(f"conditional format rule {rule.type!r} has no formula (OSWorld's load_xlsx_styles fails)")
        func, args = compiled[0]
        return lambda v: func(v, *args)
    if rule.type == "cellIs":
        try:
            refs = [func() for func, _ in compiled]
        except Exception:  # a formula with inputs: OSWorld skips the rule
            return None
        return lambda v: _cell_is(rule.operator, v, refs)
    return previous or (lambda v: False)


def load_styles(book, name: str, props: list[str]) -> dict[str, list]:
    """{coordinate: [prop values]} for every cell of the sheet, conditional formats applied."""
    ws = book.sheet(name) if book else None
    if ws is None:
        return {}
    styles = {c.coordinate: [cell_style(p, c) for p in props] for col in ws.iter_cols() for c in col}
    if not ws.conditional_formatting:
        return styles
    import formulas  # about a second to import: only for sheets with conditional formats

    parser, condition = formulas.Parser(), None
    for fmt in ws.conditional_formatting:
        for rule in fmt.rules:
            compiled = [_compile(parser, f, book, name) for f in rule.formula]
            if None in compiled:
                continue
            built = _condition(rule, compiled, condition)
            if built is None:
                continue
            condition = built
            empties = 0
            for rng in fmt.cells:
                for row, col in rng.cells:
                    value = book.value(name, f"{get_column_letter(col)}{row}")
                    if value is None:
                        empties += 1
                        if empties > EMPTY_RUN:
                            break
                        continue
                    try:
                        active = bool(condition(value))
                    except Exception:
                        active = False
                    if active:
                        if not rule.formula:  # OSWorld logs the rule's first formula here and fails
                            raise ValueError(f"conditional format rule {rule.type!r} without a formula holds "
                                             f"(OSWorld's load_xlsx_styles fails)")
                        cell = ws.cell(row=row, column=col)
                        styles[cell.coordinate] = [cell_style(p, cell, rule.dxf) for p in props]
    return styles


table_rule("style")(same_on_both_sides(load_styles, "props"))
