"""What application API code needs, the built-in APIs' and the generated ones' alike: cell
addresses, colours, the user's paths and the documents they name.

This module imports nothing but the standard library (and `uno` inside functions): the env server
imports it for the built-in APIs, and the generated APIs' worker (`apis/worker.py`) carries its
source into a desktop's sandbox, where Debian's `python3` runs it beside the office. Paths are
the desktop's, as tasks and the model write them on OSWorld's VM (/home/user/…): normalised as
text here, looked up only inside the sandbox.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import PurePosixPath

OSWORLD_HOME = "/home/user"  # the user folder OSWorld's tasks name


class ApiError(Exception):
    """A call the document cannot carry out (bad cell name, no such sheet…); its message is the result."""


class AppUnreachable(RuntimeError):
    """An app in the desktop that does not answer on its control port (Chrome's DevTools, VLC's web
    interface): not running, or another program in its place."""


# --- paths -----------------------------------------------------------------------------------

def desktop_path(path: str) -> str:
    """A path on the desktop: ~/… and relative paths are in /home/user; absolute ones as given (normalised)."""
    p = str(path)
    if p == "~" or p.startswith("~/"):
        p = OSWORLD_HOME + p[1:]
    elif not p.startswith("/"):
        p = f"{OSWORLD_HOME}/{p}"
    return posixpath.normpath(p)


def in_home(path: str) -> PurePosixPath:
    """`desktop_path(path)` when it lies in /home/user; ValueError for anything outside it (`..` included)."""
    p = desktop_path(path)
    if p != OSWORLD_HOME and not p.startswith(OSWORLD_HOME + "/"):
        raise ValueError(f"path {path!r} is outside the home folder ({OSWORLD_HOME})")
    return PurePosixPath(p)


def file_url(path: str) -> str:
    """The file URL LibreOffice knows a home path by (ApiError for a path outside the home folder)."""
    import uno

    try:
        return uno.systemPathToFileUrl(str(in_home(path)))
    except ValueError as e:
        raise ApiError(str(e)) from None


# --- cells, ranges, colours ------------------------------------------------------------------

_RANGE = re.compile(
    r"^(?:(?P<sheet>'(?:[^']|'')+'|[^.!'$:]+?)[.!])?"
    r"\$?(?P<c1>[A-Za-z]{1,3})\$?(?P<r1>[0-9]{1,7})"
    r"(?::\$?(?P<c2>[A-Za-z]{1,3})\$?(?P<r2>[0-9]{1,7}))?$"
)

COLORS = {  # names a model is likely to use; LibreOffice's own palette values where it has one
    "black": 0x000000, "white": 0xFFFFFF, "red": 0xFF0000, "green": 0x00A933, "blue": 0x2A6099,
    "yellow": 0xFFFF00, "orange": 0xFF8000, "purple": 0x800080, "pink": 0xFFC0CB, "gray": 0x808080,
    "grey": 0x808080, "cyan": 0x00FFFF, "magenta": 0xFF00FF, "brown": 0x8B4513, "lime": 0x00FF00,
    "navy": 0x000080, "teal": 0x008080, "gold": 0xFFD700, "silver": 0xC0C0C0, "maroon": 0x800000,
    "olive": 0x808000, "light gray": 0xDDDDDD, "light grey": 0xDDDDDD, "dark gray": 0x555555,
    "dark grey": 0x555555, "light blue": 0xADD8E6, "light green": 0x90EE90, "light yellow": 0xFFFFE0,
    "dark blue": 0x00008B, "dark green": 0x006400, "dark red": 0x8B0000,
}


def col_letter(index: int) -> str:
    """0-based column index -> letters (0 -> "A", 26 -> "AA")."""
    s = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        s = chr(65 + rem) + s
    return s


def col_index(letters: str) -> int:
    """Letters -> 0-based column index ("A" -> 0, "AA" -> 26)."""
    n = 0
    for ch in letters.upper():
        n = n * 26 + ord(ch) - 64
    return n - 1


def parse_range(text: str) -> tuple[str | None, int, int, int, int]:
    """"Sheet2.B3:A1" -> ("Sheet2", 0, 0, 1, 2): sheet (None = active), start col/row, end col/row, 0-based."""
    m = _RANGE.match(text.strip())
    if not m:
        raise ApiError(f"{text!r} is not a cell or range; write it like \"B2\", \"A1:C5\" or \"Sheet2.A1:C5\"")
    sheet = m["sheet"]
    if sheet is not None and sheet.startswith("'"):
        sheet = sheet[1:-1].replace("''", "'")
    c1, r1 = col_index(m["c1"]), int(m["r1"]) - 1
    c2, r2 = (col_index(m["c2"]), int(m["r2"]) - 1) if m["c2"] else (c1, r1)
    if min(r1, r2) < 0:
        raise ApiError(f"{text!r}: rows are numbered from 1")
    return sheet, min(c1, c2), min(r1, r2), max(c1, c2), max(r1, r2)


def parse_color(color: str) -> int:
    """"#RRGGBB", "#RGB", "0xRRGGBB" or a name of COLORS -> the 24-bit colour UNO takes."""
    s = color.strip().lower()
    if s in COLORS:
        return COLORS[s]
    if re.fullmatch(r"#?[0-9a-f]{6}", s) or re.fullmatch(r"0x[0-9a-f]{6}", s):
        return int(s[-6:], 16)
    if re.fullmatch(r"#[0-9a-f]{3}", s):
        return int("".join(ch * 2 for ch in s[1:]), 16)
    raise ApiError(f"unknown color {color!r}; use \"#RRGGBB\" or a name like {', '.join(list(COLORS)[:8])}")


# --- a spreadsheet document --------------------------------------------------------------------

def sheet_of(doc, name: str | None = None):
    """The sheet called `name` (None: the active one)."""
    if name is None:
        return doc.getCurrentController().getActiveSheet()
    sheets = doc.getSheets()
    if not sheets.hasByName(name):
        raise ApiError(f"no sheet named {name!r} (sheets: {', '.join(sheets.getElementNames())})")
    return sheets.getByName(name)


def range_of(doc, text: str):
    """The UNO cell range for "A1" / "A1:C5" / "Sheet.A1:C5", bounds-checked."""
    sheet_name, c1, r1, c2, r2 = parse_range(text)
    sheet = sheet_of(doc, sheet_name)
    cols, rows = sheet.getColumns().getCount(), sheet.getRows().getCount()
    if c2 >= cols or r2 >= rows:
        raise ApiError(f"{text!r} lies outside the sheet (last cell is {col_letter(cols - 1)}{rows})")
    return sheet.getCellRangeByPosition(c1, r1, c2, r2)


def cell_of(doc, text: str):
    """The UNO cell for "B2" (a range is an error)."""
    rng = range_of(doc, text)
    if rng.getRows().getCount() != 1 or rng.getColumns().getCount() != 1:
        raise ApiError(f"{text!r} is a range; give a single cell like \"B2\"")
    return rng.getCellByPosition(0, 0)


def used_area(sheet) -> tuple[int, int]:
    """(last used row, last used column) of a sheet, 0-based; (0, 0) for an empty sheet."""
    cursor = sheet.createCursor()
    cursor.gotoEndOfUsedArea(False)
    end = cursor.getRangeAddress()
    return end.EndRow, end.EndColumn
