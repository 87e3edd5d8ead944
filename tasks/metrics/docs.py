"""Document metrics: OSWorld's `compare_docx_files` and `compare_pptx_files`, and OfficeWorld's
`simple_docx_compare` / `simple_pptx_compare` (equal text "checkpoints" of the two files).

compare_pptx_files checks a documented subset of OSWorld's (a 1,000-line function): slide count,
solid background colours, notes, shape count and geometry (0.5 % tolerance), table cell text,
text / paragraph alignment / level / runs and their font name, size, bold, italic, colour,
underline and strike, and bullets; and the examine_* options written for single OSWorld tasks
(title/table/right/top positions, shift size, image size, modify height), off unless asked.
Departure from both: a missing or unreadable file scores 0 instead of raising.
"""

from __future__ import annotations

import logging
import re
import zipfile

from lxml import etree

from computerrl.tasks.metrics.basic import fuzz_ratio
from computerrl.tasks.registry import metric

log = logging.getLogger(__name__)

NS = {
    "w": "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
    "p": "http://schemas.openxmlformats.org/presentationml/2006/main",
    "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
    "rel": "http://schemas.openxmlformats.org/package/2006/relationships",
    "v": "urn:schemas-microsoft-com:vml",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
}
TEXT = ".//w:t/text()|.//a:t/text()"


def _paragraphs(path: str) -> list[str] | None:
    """Paragraph texts of a .docx (python-docx's body paragraphs) or an .odt (every text:p)."""
    try:
        if path.endswith(".docx"):
            import docx

            return [p.text for p in docx.Document(path).paragraphs]
        if path.endswith(".odt"):
            with zipfile.ZipFile(path) as z:
                root = etree.fromstring(z.read("content.xml"))
            span = f"{{{NS['text']}}}span"
            out = []
            for p in root.iter(f"{{{NS['text']}}}p"):  # direct text and direct span text, as OSWorld
                parts = [p.text or ""]
                for child in p:
                    if child.tag == span:
                        parts += [child.text or ""] + [g.tail or "" for g in child]
                    parts.append(child.tail or "")
                out.append("".join(parts))
            return out
    except Exception as e:
        log.info("cannot read %s: %s", path, e)
    return None


@metric("compare_docx_files")
def compare_docx_files(result, expected, **options) -> float:
    """Paragraph text equality (or similarity) of two .docx / .odt files, OSWorld's options:
    ignore_blanks (default True: whole text, whitespace runs as one space), ignore_case,
    ignore_order, content_only and fuzzy_match (similarity in [0, 1]), fuzzy_match_threshold,
    delete_empty_lines."""
    kinds = {str(f).rsplit(".", 1)[-1].lower() for f in (result, expected) if f}
    if not result or not expected or len(kinds) != 1 or kinds.pop() not in ("docx", "odt"):
        return 0.0  # OSWorld compares only two .docx or two .odt files
    p1, p2 = _paragraphs(str(result)), _paragraphs(str(expected))
    if p1 is None or p2 is None:
        return 0.0
    if options.get("ignore_order", False):
        p1, p2 = sorted(p1), sorted(p2)
    if options.get("delete_empty_lines", False):
        p1, p2 = [p for p in p1 if p.strip()], [p for p in p2 if p.strip()]
    case = (lambda s: s.lower()) if options.get("ignore_case", False) else (lambda s: s)
    threshold = options.get("fuzzy_match_threshold")

    def similarity(a: str, b: str) -> float:
        s = fuzz_ratio(case(a), case(b)) / 100.0
        return float(s >= threshold) if threshold is not None else s

    whole1, whole2 = (re.sub(r"\s+", " ", "\n".join(p)).strip() for p in (p1, p2))
    if options.get("content_only", False):
        return fuzz_ratio(case(whole1), case(whole2)) / 100.0
    if options.get("ignore_blanks", True):
        if options.get("fuzzy_match", False):
            return similarity(whole1, whole2)
        return float(case(whole1) == case(whole2))
    if len(p1) != len(p2):
        return 0.0
    if options.get("fuzzy_match", False):
        return sum(similarity(a, b) for a, b in zip(p1, p2)) / len(p1) if p1 else 1.0
    return float(all(case(a) == case(b) for a, b in zip(p1, p2)))


def _close(a, b, tol: float) -> bool:
    if a == b:
        return True
    if not a or not b:  # one is 0 or None
        return False
    return abs(a - b) / max(abs(a), abs(b)) <= tol


def slide_background_rgb(slide):
    """The slide's solid background colour (its master's when it inherits one), None when it has no RGB
    of its own (a theme colour, a gradient, a picture)."""
    fill = slide.background.fill
    if fill.type == 5:  # inherited from the master
        fill = slide.slide_layout.slide_master.background.fill
    try:
        return fill.fore_color.rgb if fill.type == 1 else None
    except AttributeError:  # a theme colour has no RGB of its own
        return None


def _notes(slide) -> str:
    return slide.notes_slide.notes_text_frame.text.strip() if slide.has_notes_slide else ""


def _bullets(slide) -> list:
    """(level, bullet char, text) of each non-empty paragraph; level None counts as "0"."""
    out = []
    for p in slide._element.iter(f"{{{NS['a']}}}p"):
        ppr = p.find("a:pPr", NS)
        char = ppr.find("a:buChar", NS) if ppr is not None else None
        lvl = (ppr.get("lvl") or "0") if ppr is not None else "No Level"
        text = "".join(t.text or "" for t in p.iter(f"{{{NS['a']}}}t"))
        if text.strip():
            out.append((lvl, char.get("char") if char is not None else "No Bullet", text))
    return out


def _rgb(font):
    try:
        return font.color.rgb
    except AttributeError:  # no colour, or a theme colour: OSWorld skips the comparison
        return None


def _runs_differ(runs1, runs2, ex) -> bool:
    if len(runs1) != len(runs2):
        return True
    for r1, r2 in zip(runs1, runs2):
        f1, f2 = r1.font, r2.font
        if ex("font_name") and f1.name != f2.name or ex("font_size") and f1.size != f2.size:
            return True
        if ex("font_bold") and bool(f1.bold) != bool(f2.bold):  # None and False both mean "not"
            return True
        if ex("font_italic") and bool(f1.italic) != bool(f2.italic):
            return True
        c1, c2 = (_rgb(f) for f in (f1, f2))
        if ex("color_rgb") and None not in (c1, c2) and c1 != c2:  # compared only when both set
            return True
        u1, u2 = f1.underline, f2.underline
        if ex("font_underline") and u1 != u2 and (None not in (u1, u2) or True in (u1, u2)):
            return True
        if ex("strike_through") and f1._rPr is not None and f2._rPr is not None:
            if f1._rPr.get("strike", "noStrike") != f2._rPr.get("strike", "noStrike"):
                return True
    return False


GEOMETRY = ("left", "top", "width", "height")
PICTURE, TABLE, FREEFORM = 13, 19, 5  # python-pptx's MSO_SHAPE_TYPE values
EMU_CM = 360000


def _kind(shape):
    try:
        return shape.shape_type
    except NotImplementedError:  # a shape python-pptx cannot classify
        return None


def _text(shape):
    return shape.text if shape.has_text_frame else None


def _moved_wrongly(s1, s2, slide_no: int, options: dict, tol: float) -> bool:
    """OSWorld's position and size options, each written for one task (its slide, its title, its limits
    in cm): True when the result's shape (s1) is not where the task wants it relative to the original's."""
    def same() -> bool:
        return all(_close(getattr(s1, g), getattr(s2, g), tol) for g in GEOMETRY)

    def on(name: str) -> bool:
        return options.get(f"examine_{name}", False)

    texts, kinds = (_text(s1), _text(s2)), (_kind(s1), _kind(s2))
    if on("title_bottom_position"):
        if None not in texts and texts[0] == texts[1]:
            if texts[0] == "Product Comparison" and (s1.top <= s2.top or s1.top < 10 * EMU_CM):
                return True
        elif not same():
            return True
    if on("table_bottom_position"):
        if slide_no == 3 and kinds == (TABLE, TABLE):
            if s1.top <= s2.top or s1.top < 10 * EMU_CM:
                return True
        elif not same():
            return True
    if on("right_position") and slide_no == 2 and texts == (None, None):
        if s1.left <= s2.left or s1.left < 12 * EMU_CM:
            return True
    if on("top_position") and slide_no == 2 and kinds == (PICTURE, PICTURE):
        if s1.top >= s2.top or s1.top > 5.5 * EMU_CM:
            return True
    if on("shape_for_shift_size") and not same() \
            and not texts[0] == texts[1] == "Elaborate on what you want to discuss.":
        return True
    if on("image_size"):
        if kinds == (PICTURE, PICTURE):
            if not (_close(s1.width, s2.width, tol) and _close(s1.height, s2.height, tol)):
                return True
        elif not same():
            return True
    if on("modify_height"):
        if texts == (None, None) or kinds == (FREEFORM, FREEFORM):
            if not _close(s1.height, s2.height, tol):
                return True
        elif not same():
            return True
    return False


def _shapes_differ(s1, s2, ex, tol, slide_no: int = 0, options: dict | None = None) -> bool:
    if _moved_wrongly(s1, s2, slide_no, options or {}, tol):
        return True
    if ex("shape") and not all(_close(getattr(s1, g), getattr(s2, g), tol) for g in GEOMETRY):
        return True
    if s1.has_table or s2.has_table:  # as OSWorld: each cell's text, then its paragraphs' runs
        if not (s1.has_table and s2.has_table):
            return True
        cells = [[c for row in s.table.rows for c in row.cells] for s in (s1, s2)]
        if len(cells[0]) != len(cells[1]):
            return True
        for c1, c2 in zip(*cells):
            if c1.text != c2.text:
                return True
            paras1, paras2 = c1.text_frame.paragraphs, c2.text_frame.paragraphs
            if len(paras1) != len(paras2) or any(_runs_differ(p1.runs, p2.runs, ex) for p1, p2 in zip(paras1, paras2)):
                return True
    if not (s1.has_text_frame and s2.has_text_frame):
        return False
    if ex("text") and s1.text_frame.text.strip() != s2.text_frame.text.strip():
        return True
    paras1, paras2 = s1.text_frame.paragraphs, s2.text_frame.paragraphs
    if len(paras1) != len(paras2):
        return True
    for p1, p2 in zip(paras1, paras2):
        if ex("alignment") and (p1.alignment or 1) != (p2.alignment or 1):  # None means LEFT (1)
            return True
        if ex("text") and p1.text != p2.text or ex("indent") and p1.level != p2.level:
            return True
        if _runs_differ(p1.runs, p2.runs, ex):
            return True
    return False


@metric("compare_pptx_files")
def compare_pptx_files(result, expected, **options) -> float:
    """1 if two decks agree on what the `examine_*` options (all True by default) select."""
    from pptx import Presentation

    if not result or not expected:  # Presentation(None) would open python-pptx's default deck
        return 0.0
    try:
        prs1, prs2 = Presentation(result), Presentation(expected)
    except Exception as e:
        log.info("compare_pptx_files cannot open %s / %s: %s", result, expected, e)
        return 0.0
    ex = lambda name: options.get(f"examine_{name}", True)  # noqa: E731
    tol = options.get("approximately_tolerance", 0.005)
    if ex("number_of_slides") and len(prs1.slides) != len(prs2.slides):
        return 0.0
    for slide_no, (sl1, sl2) in enumerate(zip(prs1.slides, prs2.slides), start=1):
        if ex("background_color") and slide_background_rgb(sl1) != slide_background_rgb(sl2):
            return 0.0
        if ex("note") and _notes(sl1) != _notes(sl2):
            return 0.0
        if len(sl1.shapes) != len(sl2.shapes):
            return 0.0
        if any(_shapes_differ(a, b, ex, tol, slide_no, options) for a, b in zip(sl1.shapes, sl2.shapes)):
            return 0.0
        if ex("bullets") and _bullets(sl1) != _bullets(sl2):
            return 0.0
    return 1.0
