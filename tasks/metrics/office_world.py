"""OfficeWorld's metrics (thudm/ComputerRL `evaluators/metrics/office_world`): `compare_spreadsheet`
(SpreadsheetBench's cell comparison) and the XML-checkpoint comparisons `simple_docx_compare` and
`simple_pptx_compare` (two files pass when their extracted checkpoints are equal).

Departures: a missing or unreadable file scores 0 instead of raising; compare_spreadsheet checks
every range of `answer_position` (OfficeWorld's loop compares only the last one, an indentation
slip) and decides "also compare colours" from the result's file name, not its whole path (a
temporary folder named ...CF... would switch it on); option `check_format` overrides that.
"""

from __future__ import annotations

import logging
import os
import posixpath
import zipfile
from collections import Counter
from datetime import datetime, time

import openpyxl
from lxml import etree
from openpyxl.utils import get_column_letter, range_boundaries

from computerrl.tasks.metrics.docs import NS, TEXT
from computerrl.tasks.registry import metric

log = logging.getLogger(__name__)

# Body elements in document order -> checkpoint name (OfficeWorld's BODY_XMAP / LOCAL2ELEM).
DOCX_BODY = ("w:body/w:p/w:r[w:t]|w:body/w:p/w:hyperlink/w:r[w:t]|//w:tbl|//w:p/w:r/w:drawing"
             "|//v:textbox|//w:p/w:r/w:footnoteReference|//w:p/w:r/w:endnoteReference"
             "|//w:p/w:r/w:commentReference|//w:p/w:r/w:br[@w:type='page']")
DOCX_NAMES = {"r": "text", "tbl": "table", "br": "pagebreak", "drawing": "image", "textbox": "textbox",
              "footnoteReference": "footnote_ref", "endnoteReference": "endnote_ref",
              "commentReference": "comment_ref"}
PPTX_BODY = "//p:sp/p:txBody|//a:tbl|//p:pic|//p:sp//a:blip"
PPTX_NAMES = {"txBody": "textbox", "tbl": "table", "pic": "image", "blip": "image"}


def _xpath(tree, expr: str) -> list:
    return tree.xpath(expr, namespaces=NS)


def _table_text(tbl) -> str:
    """Rows on lines, cells joined by ", ", a cell's stripped non-empty texts concatenated."""
    rows = []
    for tr in _xpath(tbl, ".//w:tr|.//a:tr"):
        cells = ["".join(t.strip() for t in _xpath(tc, TEXT) if t.strip())
                 for tc in _xpath(tr, ".//w:tc|.//a:tc")]
        rows.append(", ".join(cells))
    return "\n".join(rows)


def _box_text(tree) -> str:
    return "".join(_xpath(tree, TEXT)).strip()


def _docx_checkpoint(path: str) -> dict:
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        parts = {k: etree.fromstring(z.read(f"word/{k}.xml")) if f"word/{k}.xml" in names else None
                 for k in ("document", "footnotes", "endnotes", "comments")}
    checkpoint: dict = {"table": [], "textbox": []}
    content = ""
    for el in _xpath(parts["document"], DOCX_BODY):
        kind = DOCX_NAMES[etree.QName(el).localname]
        if kind == "text":
            content += "".join(_xpath(el, TEXT))
            continue
        if kind in ("table", "textbox"):
            checkpoint[kind].append(_table_text(el) if kind == "table" else _box_text(el))
        content += f"</{kind}>"
    checkpoint["docx_content"] = content
    for key in ("footnotes", "endnotes", "comments"):  # notes' texts, the separator notes left out
        tree, notes = parts[key], []
        for note in _xpath(tree, f"w:{key[:-1]}[not(@w:type)]") if tree is not None else []:
            text = "".join(t.strip() for t in _xpath(note, TEXT))
            if text:
                notes.append(text)
        checkpoint[key] = notes
    return checkpoint


def _pptx_checkpoint(path: str) -> list:
    """Per slide, in deck order: the sorted texts of its boxes/tables/images and their counts."""
    with zipfile.ZipFile(path) as z:
        rels = etree.fromstring(z.read("ppt/_rels/presentation.xml.rels"))
        targets = {r.get("Id"): r.get("Target") for r in _xpath(rels, ".//rel:Relationship")}
        deck = etree.fromstring(z.read("ppt/presentation.xml"))
        slides = []
        for rid in _xpath(deck, ".//p:sldIdLst/p:sldId/@r:id"):
            name = posixpath.basename(targets[rid])
            slides.append(etree.fromstring(z.read(f"ppt/slides/{name}")))
    out = []
    for slide in slides:
        content, counts = [], Counter()
        for el in _xpath(slide, PPTX_BODY):
            kind = PPTX_NAMES[etree.QName(el).localname]
            text = _box_text(el) if kind == "textbox" else _table_text(el) if kind == "table" else "</image>"
            if kind == "textbox" and not text:
                continue  # empty placeholders do not count
            content.append(text)
            counts[kind] += 1
        out.append((sorted(content), counts))
    return out


def _same(extract, result, expected) -> float:
    try:
        return float(extract(result) == extract(expected))
    except Exception as e:  # missing file, not a zip, a part missing
        log.info("cannot compare %s with %s: %s", result, expected, e)
        return 0.0


@metric("simple_docx_compare")
def simple_docx_compare(result, expected, **options) -> float:
    """1 if body text (with table/image/note/page-break markers in place), tables, text boxes,
    footnotes, endnotes and comments are all equal."""
    return _same(_docx_checkpoint, result, expected) if result and expected else 0.0


@metric("simple_pptx_compare")
def simple_pptx_compare(result, expected, **options) -> float:
    """1 if every slide has the same text boxes, tables and images (order within a slide ignored)."""
    return _same(_pptx_checkpoint, result, expected) if result and expected else 0.0


def _cell_value(v):
    """SpreadsheetBench's normalisation: numbers to 2 decimals, dates to whole serial days."""
    if isinstance(v, (int, float)):
        return round(float(v), 2)
    if isinstance(v, datetime):
        delta = v - datetime(1899, 12, 30)
        return round(delta.days + delta.seconds / 86400.0, 0)
    if isinstance(v, time):
        return str(v)[:-3]
    if isinstance(v, str):
        try:
            return round(float(v), 2)
        except ValueError:
            return v
    return v


def _same_cell(v1, v2) -> bool:
    v1, v2 = _cell_value(v1), _cell_value(v2)
    if v1 in ("", None) and v2 in ("", None):  # an empty string and an empty cell are equal
        return True
    return type(v1) is type(v2) and v1 == v2


def _same_colours(c_gt, c_res) -> bool:
    fills = [(c.fill.fgColor.rgb if c.fill.fgColor else None, c.fill.bgColor.rgb if c.fill.bgColor else None)
             for c in (c_gt, c_res)]
    fonts = [c.font.color.rgb if c.font.color is not None else None for c in (c_gt, c_res)]
    return fills[0] == fills[1] and fonts[0] == fonts[1]


@metric("compare_spreadsheet")
def compare_spreadsheet(result, expected, **options) -> float:
    """1 if the cells of `answer_position` ("A1:B5", "'Sheet 2'!C3", comma-separated) agree in
    value, and, for colour tasks (a result named *CF*), in fill and font colour."""
    if not result or not os.path.exists(result) or not expected:
        return 0.0
    check_format = options.get("check_format", "CF" in os.path.basename(result))
    try:
        wb_gt = openpyxl.load_workbook(expected, data_only=True)
        wb_res = openpyxl.load_workbook(result, data_only=True)
        for part in str(options["answer_position"]).split(","):
            sheet, _, rng = part.strip().rpartition("!")
            sheet = sheet.strip("'") or wb_gt.sheetnames[0]
            if sheet not in wb_res.sheetnames:
                return 0.0
            ws_gt, ws_res = wb_gt[sheet], wb_res[sheet]
            min_col, min_row, max_col, max_row = range_boundaries(rng)
            for col in range(min_col, max_col + 1):
                for row in range(min_row, max_row + 1):
                    coord = f"{get_column_letter(col)}{row}"
                    c_gt, c_res = ws_gt[coord], ws_res[coord]
                    if not _same_cell(c_gt.value, c_res.value):
                        return 0.0
                    if check_format and not _same_colours(c_gt, c_res):
                        return 0.0
    except (KeyError, ValueError, OSError, zipfile.BadZipFile) as e:
        log.info("compare_spreadsheet %s vs %s: %s", result, expected, e)
        return 0.0
    return 1.0
