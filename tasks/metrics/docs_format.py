"""Writer and Impress metrics on formatting and settings, with the semantics of OSWorld's (`metrics/docs.py`,
`metrics/slides.py`).

python-docx reads direct formatting only (nothing a style gives), as OSWorld's metrics do; several
Writer metrics first require the two documents' text to be the same (`compare_docx_files` with its
defaults: the gate). LibreOffice's own settings are read from its `registrymodifications.xcu`.
Where OSWorld's metric raises on an input (no colour on a run, a slide the deck lacks), ours raises
too: the evaluator then tells the agent's fault from the evaluator's.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
import zipfile

from computerrl.tasks.metrics.basic import fuzz_ratio
from computerrl.tasks.metrics.docs import NS, compare_docx_files
from computerrl.tasks.registry import metric

OOR = "{http://openoffice.org/2001/registry}"


def _doc(path):
    import docx

    try:
        return docx.Document(path) if path else None
    except Exception:  # noqa: BLE001 - not a document: 0, as OSWorld's
        return None


def _gated(path1, path2):
    """Both documents, when the text of the two is the same (OSWorld's gate); else None."""
    if not path1 or not path2 or not compare_docx_files(path1, path2):
        return None
    docs = _doc(path1), _doc(path2)
    return None if None in docs else docs


# ---- Writer ------------------------------------------------------------------------------------
@metric("compare_line_spacing")
def compare_line_spacing(docx_file1, docx_file2, **_) -> float:
    docs = _gated(docx_file1, docx_file2)
    if docs is None or len(docs[0].paragraphs) != len(docs[1].paragraphs):
        return 0.0
    return float(all(a.paragraph_format.line_spacing == b.paragraph_format.line_spacing
                     for a, b in zip(docs[0].paragraphs, docs[1].paragraphs)))


@metric("compare_docx_tables")
def compare_docx_tables(docx_file1, docx_file2, **_) -> float:
    doc1, doc2 = _doc(docx_file1), _doc(docx_file2)
    if doc1 is None or doc2 is None or len(doc1.tables) != len(doc2.tables):
        return 0.0
    for t1, t2 in zip(doc1.tables, doc2.tables):
        if len(t1.rows) != len(t2.rows) or len(t1.columns) != len(t2.columns):
            return 0.0
        for i in range(len(t1.rows)):
            for j in range(len(t1.columns)):
                if t1.cell(i, j).text.strip() != t2.cell(i, j).text.strip():
                    return 0.0
    return 1.0


@metric("check_tabstops")
def check_tabstops(docx_file1, docx_file2, **options) -> float:
    """1 minus the mean (over non-empty paragraphs) of the tab stops' distance from the gold's, as a share
    of the text width; the same stops (count, kind) are required; optionally the words before tab `index`."""
    from docx.enum.text import WD_TAB_ALIGNMENT

    doc1, doc2 = _doc(docx_file1), _doc(docx_file2)
    if doc1 is None or doc2 is None:
        return 0.0
    para1 = [p for p in doc1.paragraphs if p.text.strip()]
    para2 = [p for p in doc2.paragraphs if p.text.strip()]
    if len(para1) != len(para2):
        return 0.0
    if "word_number_split_by_tabstop" in options:
        index = options.get("index", 0)
        for p in para1:
            if len([w for w in re.split(r"\s", p.text.split("\t")[index]) if w]) != options["word_number_split_by_tabstop"]:
                return 0.0
    section = doc2.sections[0]
    width = section.page_width - section.left_margin - section.right_margin
    minus = 0.0
    for p1, p2 in zip(para1, para2):
        def stops(p):
            return [t for t in p.paragraph_format.tab_stops if t.alignment != WD_TAB_ALIGNMENT.CLEAR
                    and not (t.alignment == WD_TAB_ALIGNMENT.LEFT and t.position == 0)]
        s1, s2 = stops(p1), stops(p2)
        if len(s1) != len(s2) or any(a.alignment != b.alignment for a, b in zip(s1, s2)):
            return 0.0
        minus += sum(abs(a.position - b.position) for a, b in zip(s1, s2)) / width
    return 1 - minus / len(para1) if para1 else 1.0


@metric("compare_subscript_contains")
def compare_subscript_contains(docx_file1, docx_file2, **_) -> float:
    """1 when a run subscripted in the gold is subscripted at the same place (paragraph and run) in the result."""
    doc1, doc2 = _doc(docx_file1), _doc(docx_file2)
    if doc1 is None or doc2 is None:
        return 0.0
    return float(any(r1.font.subscript and r2.font.subscript for p1, p2 in zip(doc1.paragraphs, doc2.paragraphs)
                     for r1, r2 in zip(p1.runs, p2.runs)))


@metric("compare_font_names")
def compare_font_names(docx_file, rules, **_) -> float:
    """Every run of every body paragraph names `rules["font_name"]` directly (a run that inherits its
    font from a style names none, and fails, as in OSWorld)."""
    doc = _doc(docx_file)
    if doc is None:
        return 0.0
    return float(all(run.font.name == rules["font_name"] for p in doc.paragraphs for run in p.runs))


@metric("evaluate_strike_through_last_paragraph")
def evaluate_strike_through_last_paragraph(file_path1, file_path2, **_) -> float:
    """The text is the gold's (the gate), and every run of the last paragraph is struck through."""
    docs = _gated(file_path1, file_path2)
    if docs is None:
        return 0.0
    return float(all(run.font.strike for run in docs[0].paragraphs[-1].runs))


@metric("has_page_numbers_in_footers")
def has_page_numbers_in_footers(docx_file, *_, **__) -> float:
    """Every section's footer shows a digit in its first paragraph (a page number's shown value)."""
    doc = _doc(docx_file)
    if doc is None:
        return 0.0
    for section in doc.sections:
        paragraphs = section.footer.paragraphs
        if not any(ch.isdigit() for ch in (paragraphs[0].text if paragraphs else "")):
            return 0.0
    return 1.0


@metric("is_first_line_centered")
def is_first_line_centered(docx_file, *_, **__) -> float:
    from docx.enum.text import WD_PARAGRAPH_ALIGNMENT

    doc = _doc(docx_file)
    if doc is None:
        return 0.0
    return float(doc.paragraphs[0].paragraph_format.alignment == WD_PARAGRAPH_ALIGNMENT.CENTER)


@metric("compare_highlighted_text")
def compare_highlighted_text(file1, file2, **_) -> float:
    """The same set of highlighted words (each highlighted run's first text) in both documents."""
    if not file1 or not file2:
        return 0.0

    def highlighted(path) -> set[str]:
        with zipfile.ZipFile(path) as z:
            root = ET.fromstring(z.read("word/document.xml"))
        w = "{%s}" % NS["w"]
        out = set()
        for run in root.iter(f"{w}r"):
            mark = run.find(f".//{w}highlight")
            text = run.find(f".//{w}t")
            if mark is not None and mark.get(f"{w}val") != "none" and text is not None:
                out.add(text.text)
        return out

    return float(highlighted(file1) == highlighted(file2))


@metric("compare_insert_equation")
def compare_insert_equation(docx_file1, docx_file2, **_) -> float:
    """The same text, and an embedded object (a formula) in runs at the same place in both."""
    docs = _gated(docx_file1, docx_file2)
    if docs is None:
        return 0.0
    return float(any(r1.element.xpath(".//w:object") and r2.element.xpath(".//w:object")
                     for p1, p2 in zip(docs[0].paragraphs, docs[1].paragraphs) for r1, r2 in zip(p1.runs, p2.runs)))


@metric("check_highlighted_words")
def check_highlighted_words(file_path1, file_path2, **_) -> float:
    """An .odt whose text is the gold's and where no span is highlighted yellow (#ffff00): the highlights removed."""
    from odf.opendocument import load
    from odf.text import Span

    if not file_path1 or not file_path2 or not compare_docx_files(file_path1, file_path2):
        return 0.0
    doc = load(file_path1)
    styles = {s.getAttribute("name"): s for s in doc.automaticstyles.childNodes if s.qname[1] == "style"}
    for span in doc.getElementsByType(Span):
        style = styles.get(span.getAttribute("stylename"))
        for prop in style.childNodes if style is not None else []:
            try:
                if prop.getAttribute("backgroundcolor") == "#ffff00":
                    return 0.0
            except ValueError:  # an attribute this kind of element cannot have
                continue
    return 1.0


@metric("compare_docx_lines")
def compare_docx_lines(file1, file2, **_) -> float:
    doc1, doc2 = _doc(file1), _doc(file2)
    if doc1 is None or doc2 is None:
        return 0.0

    def lines(doc) -> set[str]:
        return {p.text.strip() for p in doc.paragraphs if p.text.strip()}

    return float(lines(doc1) == lines(doc2))


@metric("evaluate_colored_words_in_tables")
def evaluate_colored_words_in_tables(file_path1, file_path2, **options) -> float:
    """In the result's tables, words starting with a vowel red, the others blue (CIEDE2000 within `threshold`)."""
    import numpy as np
    from skimage.color import deltaE_ciede2000, rgb2lab

    docs = _gated(file_path1, file_path2)
    if docs is None:
        return 0.0
    threshold = options.get("threshold", 3.5)

    def lab(rgb):
        return rgb2lab(np.array([[rgb]], dtype=float) / 255.0)

    for table in docs[0].tables:
        for row in table.rows:
            for cell in row.cells:
                for paragraph in cell.paragraphs:
                    for run in paragraph.runs:
                        if not run.text:
                            continue
                        target = (255, 0, 0) if run.text[0].lower() in "aeiou" else (0, 0, 255)
                        color = run.font.color.rgb  # none on the run: OSWorld's raises too
                        if deltaE_ciede2000(lab(tuple(color)), lab(target))[0][0] > threshold:
                            return 0.0
    return 1.0


@metric("check_italic_font_size_14")
def check_italic_font_size_14(path1, path2, **_) -> float:
    docs = _gated(path1, path2)
    if docs is None:
        return 0.0
    for paragraph in docs[0].paragraphs:
        for run in paragraph.runs:
            if run.italic and (run.font.size is None or run.font.size.pt != 14):
                return 0.0
    return 1.0


@metric("contains_page_break")
def contains_page_break(docx_file, rules=None, **_) -> float:
    doc = _doc(docx_file)
    if doc is None:
        return 0.0
    expected = (rules or {}).get("page_break_count")
    kind = "{%s}type" % NS["w"]
    count = sum(1 for p in doc.paragraphs for run in p.runs for br in run.element.iter("{%s}br" % NS["w"])
                if br.get(kind) == "page")
    if expected is not None and count != expected:
        return 0.0
    return float(count > 0)


@metric("compare_contains_image")
def compare_contains_image(docx_file1, docx_file2, **_) -> float:
    doc1, doc2 = _doc(docx_file1), _doc(docx_file2)
    if doc1 is None or doc2 is None:
        return 0.0
    for p1, p2 in zip(doc1.paragraphs, doc2.paragraphs):
        for r1, r2 in zip(p1.runs, p2.runs):
            if ("graphicData" in r1._element.xml) != ("graphicData" in r2._element.xml):
                return 0.0
    return 1.0


@metric("compare_docx_files_and_ignore_new_lines")
def compare_docx_files_and_ignore_new_lines(file1, file2, **options) -> float:
    if not file1 or not file2 or not (str(file1).endswith(".docx") and str(file2).endswith(".docx")):
        return 0.0
    doc1, doc2 = _doc(file1), _doc(file2)
    if doc1 is None or doc2 is None:
        return 0.0
    para1 = [p.text for p in doc1.paragraphs if p.text != ""]
    para2 = [p.text for p in doc2.paragraphs if p.text != ""]
    if options.get("ignore_blanks", True):
        def norm(paras):
            return re.sub(r"\s+", " ", "\n".join(paras)).strip()
        return float(norm(para1) == norm(para2))
    return float(para1 == para2)


@metric("compare_references")
def compare_references(file1, file2, **options) -> float:
    """How close the result's references (the paragraphs after the first `reference_indicator`) are to the
    gold's, by mean fuzzy ratio, as a share of the way from `reference_base_result` to 1."""
    if not file1 or not file2 or not (str(file1).endswith(".docx") and str(file2).endswith(".docx")):
        return 0.0
    doc1, doc2 = _doc(file1), _doc(file2)
    if doc1 is None or doc2 is None:
        return 0.0
    indicator, base = options.get("reference_indicator", "References"), options.get("reference_base_result", 0.5)
    texts = [[p.text for p in d.paragraphs] for d in (doc1, doc2)]
    found = [t.index(indicator) if indicator in t else -1 for t in texts]
    if found == [-1, -1]:
        return 1.0
    if -1 in found:
        return 0.0
    refs = [[p for p in t[i + 1:] if p.strip()] for t, i in zip(texts, found)]
    if len(refs[0]) != len(refs[1]):
        return 0.0
    ratio = sum(fuzz_ratio(a, b) / 100 for a, b in zip(*refs)) / len(refs[0]) if refs[0] else 1.0
    return (ratio - base) / (1 - base) if ratio >= base + 0.01 else 0.0


# ---- LibreOffice's settings (registrymodifications.xcu) ----------------------------------------
def _settings(path, item: str, prop: str) -> list[str]:
    """Every value the settings file gives `prop` of the item at `item`, in file order."""
    root = ET.parse(path).getroot()
    return [v.text or "" for node in root.iter("item") if node.get(f"{OOR}path") == item
            for p in node.iter("prop") if p.get(f"{OOR}name") == prop for v in p.iter("value")]


@metric("find_default_font")
def find_default_font(config_file_path, rules, **_) -> float:
    expected = rules["font_name"]
    if not config_file_path:
        return 0.0
    try:
        fonts = _settings(config_file_path, "/org.openoffice.Office.Writer/DefaultFont", "Standard")
    except ET.ParseError:
        fonts = []
    return float(bool(fonts) and fonts[-1] == expected)


@metric("check_presenter_console_disable")
def check_presenter_console_disable(config_file_path, *_, **__) -> float:
    try:
        values = _settings(config_file_path, "/org.openoffice.Office.Impress/Misc/Start", "EnablePresenterScreen")
        return float(bool(values) and values[0].lower() == "false")
    except Exception:  # noqa: BLE001 - no file, not XML: 0, as OSWorld's
        return 0.0


@metric("check_auto_saving_time")
def check_auto_saving_time(config_file_path, rules, **_) -> float:
    values = _settings(config_file_path, "/org.openoffice.Office.Common/Save/Document", "AutoSaveTimeIntervall")
    return float(bool(values) and int(values[-1]) == rules["minutes"])


# ---- Impress -----------------------------------------------------------------------------------
@metric("check_slide_orientation_Portrait")
def check_slide_orientation_portrait(pptx_path, *_, **__) -> float:
    from pptx import Presentation

    prs = Presentation(pptx_path)
    return float(prs.slide_width < prs.slide_height)


@metric("check_transition")
def check_transition(pptx_file, rules, **_) -> float:
    """The slide (`slide_idx`, 0-based, by its part's name) has a transition of `transition_type`."""
    p = "{%s}" % NS["p"]
    with zipfile.ZipFile(pptx_file) as z:
        name = f"ppt/slides/slide{rules['slide_idx'] + 1}.xml"
        if name not in z.namelist():
            return 0.0
        root = ET.fromstring(z.read(name))
    transition = next(root.iter(f"{p}transition"), None)
    return float(transition is not None and transition.find(f".//{p}{rules['transition_type']}") is not None)


@metric("check_image_stretch_and_center")
def check_image_stretch_and_center(modified_ppt, original_ppt, **_) -> float:
    """The first slide's picture (the original's, found by its bytes) fills the slide and sits in its middle
    (within half an inch)."""
    from pptx import Presentation
    from pptx.enum.shapes import MSO_SHAPE_TYPE
    from pptx.util import Inches

    original, modified = Presentation(original_ppt), Presentation(modified_ppt)
    pictures = [s for s in original.slides[0].shapes if s.shape_type == MSO_SHAPE_TYPE.PICTURE]
    if not pictures:
        return 0.0
    matches = [s for s in modified.slides[0].shapes if s.shape_type == MSO_SHAPE_TYPE.PICTURE
               and s.image.blob == pictures[0].image.blob]
    if not matches:
        return 0.0
    s, w, h, tol = matches[-1], original.slide_width, original.slide_height, Inches(0.5)
    return float(abs(s.width - w) <= tol and abs(s.height - h) <= tol and abs(s.left - (w - s.width) / 2) <= tol
                 and abs(s.top - (h - s.height) / 2) <= tol)
