"""`WriterTools`: the Writer half of the API-GUI action space (ComputerRL's 19 text-document APIs).

Names, parameters and defaults follow ComputerRL's public `WriterTools` (the paper's appendix and
the tool class its agent runs inside the VM). Where that class is vague or inconsistent we pin
the meaning down and say so in the one-line doc the model sees:

- paragraphs are numbered from 0 in document order, counting body paragraphs only (tables are
  skipped), exactly as `app_info` and `get_paragraphs` list them; `paragraph_indices=None` means
  every paragraph, those inside tables included; an index out of range is an error, never skipped;
- `pattern` is a Python regular expression matched within one paragraph at a time; formatting
  touches only the matched characters, and `find_and_replace` replaces only the matches, so the
  rest of a paragraph keeps its formatting (`\\1` / `\\g<name>` work in the replacement);
- "at the cursor" is the text cursor the user sees (the view cursor), so API calls and GUI typing
  share one insertion point; `write_text` leaves the cursor after what it wrote;
- colors are "#RRGGBB" or a common name, as in `CalcTools`; `insert_image_at_cursor` sizes are in
  pixels at 96 dpi (the original's "pixels" were really millimetres);
- `set_default_font` changes this document's default paragraph style, never the user profile
  (which later episodes on the same desktop would inherit);
- `capitalize_words` upper-cases the first letter of each word and leaves the other letters as
  they are ("iPhone" stays), in place, so formatting survives.

`uno` is imported inside methods only: the parser and the trainer import this module without
LibreOffice. Every method runs on LibreOffice's main thread (see `Desktop.run_api`).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from computerrl.apis.app_api import ApiError, AppApi, implements
from computerrl.apis.kit import parse_color
from computerrl.apis.registry import Len, Range, register_api

Pattern = Annotated[str, Len(1, 1000)]
Indices = Annotated[list[int], Len(1, None)] | None  # None = every paragraph
Color = Annotated[str, Len(1, 40)] | Annotated[int, Range(0, 0xFFFFFF)]
PageNumberPosition = Literal["bottom_left", "bottom_center", "bottom_right", "top_left", "top_center", "top_right"]
PageNumberFormat = Literal["1", "Page 1", "1 of N", "Page 1 of N"]


@register_api
class WriterTools:
    @staticmethod
    def save() -> None:
        """Save the document to its file, in its current format."""

    @staticmethod
    def write_text(text: Annotated[str, Len(1, 100000)], bold: bool = False, italic: bool = False,
                   size: Annotated[float, Range(1, 999)] | None = None) -> None:
        """Type text at the cursor ("\\n" starts a new paragraph), bold/italic/size in points as given."""

    @staticmethod
    def get_paragraphs(start_index: Annotated[int, Range(0, None)] = 0,
                       count: Annotated[int, Range(1, None)] | None = None) -> str:
        """The text of count paragraphs (None = all) from start_index (0-based), as a JSON list."""

    @staticmethod
    def set_color(pattern: Pattern, color: Color, paragraph_indices: Indices = None) -> None:
        """Color the text matching a regex ("#RRGGBB" or a name) in the given paragraphs (None = all)."""

    @staticmethod
    def find_and_replace(pattern: Pattern, replacement: str, paragraph_indices: Indices = None) -> str:
        """Replace every match of a regex with replacement (\\1 = group 1) in the given paragraphs (None = all)."""

    @staticmethod
    def set_font(font_name: Annotated[str, Len(1, 200)], paragraph_indices: Indices = None) -> None:
        """Set the font (e.g. "Times New Roman") of whole paragraphs (None = all)."""

    @staticmethod
    def set_line_spacing(spacing_value: Annotated[float, Range(0.25, 10)], paragraph_indices: Indices = None) -> None:
        """Set proportional line spacing (1.0 single, 1.5, 2.0 double) of paragraphs (None = all)."""

    @staticmethod
    def remove_highlighting(paragraph_indices: Indices = None) -> None:
        """Remove all highlighting (text background color) from paragraphs (None = all)."""

    @staticmethod
    def find_highlighted_text(highlight_color: Color) -> str:
        """The text segments highlighted in a color ("yellow", "#FFFF00"), as a JSON list."""

    @staticmethod
    def insert_formula_at_cursor(formula: Annotated[str, Len(1, 10000)]) -> None:
        """Insert a math formula in LibreOffice Math syntax (e.g. "a^2 + b^2 = c^2") at the cursor."""

    @staticmethod
    def insert_image_at_cursor(image_path: Annotated[str, Len(1, 4096)],
                               width: Annotated[int, Range(1, 20000)] | None = None,
                               height: Annotated[int, Range(1, 20000)] | None = None) -> None:
        """Insert an image file at the cursor; width/height in pixels (one given: keep the aspect ratio)."""

    @staticmethod
    def set_strikethrough(pattern: Pattern, paragraph_indices: Indices = None) -> None:
        """Strike through the text matching a regex in the given paragraphs (None = all)."""

    @staticmethod
    def set_font_size(font_size: Annotated[float, Range(1, 999)], pattern: Pattern,
                      paragraph_indices: Indices = None) -> None:
        """Set the size in points of the text matching a regex in the given paragraphs (None = all)."""

    @staticmethod
    def export_to_pdf(output_path: str | None = None, output_filename: str | None = None,
                      include_comments: bool = False,
                      quality: Literal["standard", "high", "print"] = "standard") -> str:
        """Export to PDF in output_path (a folder or a .pdf path; default: the document's folder); returns the path."""

    @staticmethod
    def set_paragraph_alignment(alignment: Literal["left", "center", "right", "justify"],
                                paragraph_indices: Indices = None) -> None:
        """Align paragraphs (None = all) left, center, right or justify."""

    @staticmethod
    def capitalize_words(paragraph_indices: Indices = None) -> None:
        """Upper-case the first letter of every word in paragraphs (None = all); other letters unchanged."""

    @staticmethod
    def set_default_font(font_name: Annotated[str, Len(1, 200)],
                         font_size: Annotated[float, Range(1, 999)] | None = None) -> None:
        """Set the font (and size in points) of the document's default paragraph style."""

    @staticmethod
    def add_page_numbers(position: PageNumberPosition, start_number: Annotated[int, Range(0, 100000)] = 1,
                         format: PageNumberFormat | None = None) -> None:
        """Put page numbers in the header ("top_…") or footer ("bottom_…"); format "1" (default) or "Page 1 of N"…"""

    @staticmethod
    def insert_page_break(position: Literal["at_cursor", "end_of_document"] = "at_cursor") -> None:
        """Start a new page at the cursor or after the end of the document; the cursor moves there."""


# --- helpers ---------------------------------------------------------------------------------

PURE_COLORS = {"green": 0x00FF00, "blue": 0x0000FF, "gray": 0xC0C0C0, "grey": 0xC0C0C0,
               "light gray": 0xC0C0C0, "light grey": 0xC0C0C0}  # Word / old palette variants
_WORD_START = re.compile(r"(?<![\w'’])[^\W\d_]")  # a letter not preceded by a letter, digit or apostrophe
PARA_ADJUST = {"left": 0, "right": 1, "justify": 2, "center": 3}  # com.sun.star.style.ParagraphAdjust
MATH_CLSID = "078B7ABA-54FC-457F-8551-6147e776a997"
PX_TO_MM100 = 2540 / 96  # pixels at 96 dpi -> 1/100 mm
MAX_PARAGRAPH_CHARS = 500  # app_info shows at most this much of one paragraph


def _u16(s: str, i: int) -> int:
    """A Python string index -> UTF-16 units, which is what a UNO text cursor counts."""
    return len(s[:i].encode("utf-16-le")) // 2


def _color(color: str | int) -> int:
    return color if isinstance(color, int) else parse_color(color)


def _regex(pattern: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise ApiError(f"pattern {pattern!r} is not a valid regular expression: {e}") from None


def _go(cursor, n: int, expand: bool) -> None:
    while n > 0:  # goRight takes a 16-bit count
        step = min(n, 32767)
        cursor.goRight(step, expand)
        n -= step


def _select(paragraph, start: int, end: int):
    """A text cursor selecting UTF-16 units [start, end) of a paragraph."""
    cursor = paragraph.getText().createTextCursorByRange(paragraph.getStart())
    _go(cursor, start, False)
    _go(cursor, end - start, True)
    return cursor


def _replace(paragraph, start: int, end: int, new: str) -> None:
    """Replace UTF-16 units [start, end) of a paragraph, the new text keeping the old one's formatting.

    Text typed at a position takes the attributes of the character before it, so the new text goes
    in right after the match and the match is deleted afterwards (setString on the selection
    would give the new text the attributes of whatever precedes the match)."""
    if new:
        after = _select(paragraph, end, end)
        after.getText().insertString(after, new, False)
    if end > start:
        _select(paragraph, start, end).setString("")


def _is_paragraph(element) -> bool:
    return element.supportsService("com.sun.star.text.Paragraph")


# --- implementation --------------------------------------------------------------------------

@implements("WriterTools")
class WriterApi(AppApi):
    app = "writer"
    service = "com.sun.star.text.TextDocument"

    # helpers

    @property
    def _view_cursor(self):
        return self.doc.getCurrentController().getViewCursor()

    def _paragraphs(self) -> list:
        """Body paragraphs in order, tables skipped: what paragraph indices count."""
        enum = self.doc.getText().createEnumeration()
        out = []
        while enum.hasMoreElements():
            element = enum.nextElement()
            if _is_paragraph(element):
                out.append(element)
        return out

    def _table_paragraphs(self) -> list:
        out = []
        tables = self.doc.getTextTables()
        for t in range(tables.getCount()):
            table = tables.getByIndex(t)
            for name in table.getCellNames():
                enum = table.getCellByName(name).getText().createEnumeration()
                while enum.hasMoreElements():
                    element = enum.nextElement()
                    if _is_paragraph(element):
                        out.append(element)
        return out

    def _targets(self, indices: list | None) -> list:
        """The paragraphs a call acts on: the listed body paragraphs, or every paragraph for None."""
        paragraphs = self._paragraphs()
        if indices is None:
            return paragraphs + self._table_paragraphs()
        n = len(paragraphs)
        bad = [i for i in indices if not 0 <= i < n]
        if bad:
            raise ApiError(f"paragraph index {bad[0]} is out of range: the document has {n} paragraphs "
                           f"(0-{n - 1})" if n else "the document has no paragraphs")
        return [paragraphs[i] for i in dict.fromkeys(indices)]

    def _format_matches(self, pattern: str, indices: list | None, what: str, **props) -> str:
        regex = _regex(pattern)
        count = 0
        for paragraph in self._targets(indices):
            s = paragraph.getString()
            for m in regex.finditer(s):
                if m.end() > m.start():
                    cursor = _select(paragraph, _u16(s, m.start()), _u16(s, m.end()))
                    for name, value in props.items():
                        cursor.setPropertyValue(name, value)
                    count += 1
        if not count:
            return f"No text matches {pattern!r}; nothing changed"
        return f"{what} {count} matches of {pattern!r}"

    def _set_on_paragraphs(self, indices: list | None, **props) -> int:
        targets = self._targets(indices)
        for paragraph in targets:
            cursor = paragraph.getText().createTextCursorByRange(paragraph)
            for name, value in props.items():
                cursor.setPropertyValue(name, value)
        return len(targets)

    # the API

    def write_text(self, text: str, bold: bool = False, italic: bool = False, size: float | None = None) -> str:
        import uno
        from com.sun.star.text.ControlCharacter import PARAGRAPH_BREAK

        view = self._view_cursor
        body = view.getText()
        cursor = body.createTextCursorByRange(view.getEnd())
        lines = text.split("\n")
        for i, line in enumerate(lines):
            if i:
                body.insertControlCharacter(cursor, PARAGRAPH_BREAK, False)
            if line:
                body.insertString(cursor, line, False)
        written = sum(_u16(line, len(line)) for line in lines) + len(lines) - 1
        cursor.collapseToEnd()
        end = cursor.getEnd()
        # Select what was written (a paragraph break counts as one step) and format it.
        remaining = written
        while remaining > 0:
            step = min(remaining, 32767)
            cursor.goLeft(step, True)
            remaining -= step
        cursor.CharWeight = 150.0 if bold else 100.0  # com.sun.star.awt.FontWeight BOLD / NORMAL
        cursor.CharPosture = uno.Enum("com.sun.star.awt.FontSlant", "ITALIC" if italic else "NONE")
        if size is not None:
            cursor.CharHeight = cursor.CharHeightAsian = cursor.CharHeightComplex = size
        view.gotoRange(end, False)
        return f"Wrote {len(text)} characters"

    def get_paragraphs(self, start_index: int = 0, count: int | None = None) -> str:
        paragraphs = self._paragraphs()
        n = len(paragraphs)
        if start_index >= n and not (start_index == 0 and n == 0):
            raise ApiError(f"start_index {start_index} is past the last paragraph (the document has {n}, 0-{n - 1})")
        chosen = paragraphs[start_index:] if count is None else paragraphs[start_index:start_index + count]
        return json.dumps([p.getString() for p in chosen], ensure_ascii=False)

    def set_color(self, pattern: str, color: str | int, paragraph_indices: list | None = None) -> str:
        return self._format_matches(pattern, paragraph_indices, "Colored", CharColor=_color(color))

    def find_and_replace(self, pattern: str, replacement: str, paragraph_indices: list | None = None) -> str:
        regex = _regex(pattern)
        plan = []  # (paragraph, text, matches) worked out first: a bad replacement changes nothing
        for paragraph in self._targets(paragraph_indices):
            s = paragraph.getString()
            matches = list(regex.finditer(s))
            if matches:
                try:
                    plan.append((paragraph, s, [(m.start(), m.end(), m.expand(replacement)) for m in matches]))
                except (re.error, IndexError) as e:
                    raise ApiError(f"replacement {replacement!r} is not valid for this pattern: {e}") from None
        for paragraph, s, matches in plan:
            for start, end, new in reversed(matches):  # from the end, so earlier offsets stay valid
                _replace(paragraph, _u16(s, start), _u16(s, end), new)
        total = sum(len(m) for _, _, m in plan)
        if not total:
            return f"No text matches {pattern!r}; nothing replaced"
        return f"Made {total} replacements in {len(plan)} paragraphs"

    def set_font(self, font_name: str, paragraph_indices: list | None = None) -> str:
        n = self._set_on_paragraphs(paragraph_indices, CharFontName=font_name, CharFontNameAsian=font_name,
                                    CharFontNameComplex=font_name)
        return f"Set the font of {n} paragraphs to {font_name!r}"

    def set_line_spacing(self, spacing_value: float, paragraph_indices: list | None = None) -> str:
        import uno

        spacing = uno.createUnoStruct("com.sun.star.style.LineSpacing")
        spacing.Mode, spacing.Height = 0, round(spacing_value * 100)  # PROP, in percent
        n = self._set_on_paragraphs(paragraph_indices, ParaLineSpacing=spacing)
        return f"Set the line spacing of {n} paragraphs to {spacing_value:g}"

    def remove_highlighting(self, paragraph_indices: list | None = None) -> str:
        # CharBackColor is Writer's own highlighting; CharHighlight is what .docx files bring.
        n = self._set_on_paragraphs(paragraph_indices, CharBackColor=-1, CharHighlight=-1)
        return f"Removed highlighting from {n} paragraphs"

    def find_highlighted_text(self, highlight_color: str | int) -> str:
        wanted = {_color(highlight_color)}
        if isinstance(highlight_color, str) and highlight_color.strip().lower() in PURE_COLORS:
            wanted.add(PURE_COLORS[highlight_color.strip().lower()])
        found = []
        for paragraph in self._paragraphs() + self._table_paragraphs():
            portions, run = paragraph.createEnumeration(), ""
            while portions.hasMoreElements():
                portion = portions.nextElement()
                lit = portion.CharBackColor in wanted or portion.CharHighlight in wanted
                if lit:
                    run += portion.getString()
                elif run:
                    found.append(run)
                    run = ""
            if run:
                found.append(run)
        return json.dumps([s for s in found if s.strip()], ensure_ascii=False)

    def insert_formula_at_cursor(self, formula: str) -> str:
        import uno

        obj = self.doc.createInstance("com.sun.star.text.TextEmbeddedObject")
        obj.CLSID = MATH_CLSID
        obj.AnchorType = uno.Enum("com.sun.star.text.TextContentAnchorType", "AS_CHARACTER")
        view = self._view_cursor
        view.getText().insertTextContent(view.getEnd(), obj, False)
        math = obj.getEmbeddedObject()
        if math is None:  # no Math module: take the empty object out again
            obj.dispose()
            raise ApiError("LibreOffice Math is not installed on this desktop, so formulas cannot be inserted")
        math.Formula = formula
        return f"Inserted the formula {formula!r}"

    def insert_image_at_cursor(self, image_path: str, width: int | None = None, height: int | None = None) -> str:
        import uno

        path = self.path(image_path, "image_path")
        if not self.is_file(path):
            raise ApiError(f"no image file at {path}")
        graphic = self.doc.createInstance("com.sun.star.text.TextGraphicObject")
        graphic.AnchorType = uno.Enum("com.sun.star.text.TextContentAnchorType", "AS_CHARACTER")
        graphic.GraphicURL = self.url(path)
        view = self._view_cursor
        view.getText().insertTextContent(view.getEnd(), graphic, False)
        actual = graphic.ActualSize  # known once inserted: the picture's own size in 1/100 mm
        if actual.Width <= 0 or actual.Height <= 0:
            graphic.dispose()
            raise ApiError(f"{path} is not an image LibreOffice can read")
        size = uno.createUnoStruct("com.sun.star.awt.Size")
        if width is None and height is None:
            size.Width, size.Height = actual.Width, actual.Height
        else:
            w = None if width is None else round(width * PX_TO_MM100)
            h = None if height is None else round(height * PX_TO_MM100)
            size.Width = w if w is not None else round(h * actual.Width / actual.Height)
            size.Height = h if h is not None else round(w * actual.Height / actual.Width)
        graphic.Size = size
        return f"Inserted {path.name} ({round(size.Width / PX_TO_MM100)}x{round(size.Height / PX_TO_MM100)} px)"

    def set_strikethrough(self, pattern: str, paragraph_indices: list | None = None) -> str:
        return self._format_matches(pattern, paragraph_indices, "Struck through",
                                    CharStrikeout=1)  # com.sun.star.awt.FontStrikeout.SINGLE

    def set_font_size(self, font_size: float, pattern: str, paragraph_indices: list | None = None) -> str:
        return self._format_matches(pattern, paragraph_indices, f"Set to {font_size:g} pt",
                                    CharHeight=font_size, CharHeightAsian=font_size, CharHeightComplex=font_size)

    def export_to_pdf(self, output_path: str | None = None, output_filename: str | None = None,
                      include_comments: bool = False, quality: str = "standard") -> str:
        import uno
        from com.sun.star.beans import PropertyValue

        if output_filename is not None and (not output_filename.strip() or "/" in output_filename):
            raise ApiError(f"output_filename {output_filename!r} must be a file name without folders, like report.pdf")
        if output_path is None:
            if not self.doc.hasLocation():
                raise ApiError("the document has never been saved; give output_path (a folder or .pdf path under /home/user)")
            source = self.local(self.doc.getLocation())
            folder, name = source.parent, source.stem
        else:
            given = self.path(output_path, "output_path")
            if given.suffix.lower() == ".pdf" and output_filename is None:
                folder, name = given.parent, given.name
            else:
                folder = given
                name = (self.local(self.doc.getLocation()).stem if self.doc.hasLocation()
                        else self.doc.getTitle())
        name = output_filename or name
        path = folder / (name if name.lower().endswith(".pdf") else name + ".pdf")
        jpeg, reduce = {"standard": (75, True), "high": (95, False), "print": (100, False)}[quality]
        data = (PropertyValue(Name="Quality", Value=jpeg), PropertyValue(Name="ReduceImageResolution", Value=reduce),
                PropertyValue(Name="ExportNotes", Value=include_comments))
        self.store(path, "writer_pdf_Export",
                    FilterData=uno.Any("[]com.sun.star.beans.PropertyValue", data))
        return str(path)

    def set_paragraph_alignment(self, alignment: str, paragraph_indices: list | None = None) -> str:
        n = self._set_on_paragraphs(paragraph_indices, ParaAdjust=PARA_ADJUST[alignment])
        return f"Aligned {n} paragraphs {alignment}"

    def capitalize_words(self, paragraph_indices: list | None = None) -> str:
        changed = 0
        for paragraph in self._targets(paragraph_indices):
            s = paragraph.getString()
            for m in _WORD_START.finditer(s):
                letter = m.group()
                if letter != letter.upper() and len(letter.upper()) == 1:
                    _replace(paragraph, _u16(s, m.start()), _u16(s, m.end()), letter.upper())
                    changed += 1
        return f"Capitalized {changed} words"

    def set_default_font(self, font_name: str, font_size: float | None = None) -> str:
        styles = self.doc.getStyleFamilies().getByName("ParagraphStyles")
        style = styles.getByName("Standard")  # "Default Paragraph Style"; the others inherit from it
        for suffix in ("", "Asian", "Complex"):
            style.setPropertyValue(f"CharFontName{suffix}", font_name)
            if font_size is not None:
                style.setPropertyValue(f"CharHeight{suffix}", font_size)
        size = f", {font_size:g} pt" if font_size is not None else ""
        return f"The default paragraph style now uses {font_name!r}{size}"

    def add_page_numbers(self, position: str, start_number: int = 1, format: str | None = None) -> str:
        paragraphs = self._paragraphs()
        first = paragraphs[0]
        style_name = first.PageStyleName
        style = self.doc.getStyleFamilies().getByName("PageStyles").getByName(style_name)
        top = position.startswith("top")
        if top:
            style.HeaderIsOn = True
            target = style.HeaderText
        else:
            style.FooterIsOn = True
            target = style.FooterText
        target.setString("")
        cursor = target.createTextCursor()
        cursor.ParaAdjust = PARA_ADJUST[position.split("_")[1]]
        fmt = format or "1"

        def field(kind: str):
            f = self.doc.createInstance(f"com.sun.star.text.TextField.{kind}")
            f.NumberingType = 4  # com.sun.star.style.NumberingType.ARABIC
            target.insertTextContent(cursor, f, False)

        if fmt.startswith("Page"):
            target.insertString(cursor, "Page ", False)
        field("PageNumber")
        if fmt.endswith("of N"):
            target.insertString(cursor, " of ", False)
            field("PageCount")
        # The first page's number is set where the page style starts: on the first paragraph.
        first.PageDescName = style_name
        first.PageNumberOffset = start_number
        where = "header" if top else "footer"
        return f"Added page numbers ({fmt!r}, from {start_number}) to the {where} of page style {style_name!r}"

    def insert_page_break(self, position: str = "at_cursor") -> str:
        import uno
        from com.sun.star.text.ControlCharacter import PARAGRAPH_BREAK

        view = self._view_cursor
        if position == "end_of_document":
            body = self.doc.getText()
            cursor = body.createTextCursorByRange(body.getEnd())
        else:
            body = view.getText()
            cursor = body.createTextCursorByRange(view.getEnd())
        body.insertControlCharacter(cursor, PARAGRAPH_BREAK, False)
        cursor.collapseToEnd()
        cursor.BreakType = uno.Enum("com.sun.star.style.BreakType", "PAGE_BEFORE")
        view.gotoRange(cursor.getStart(), False)
        return "Inserted a page break " + ("at the cursor" if position == "at_cursor" else "at the end of the document")

    # --- observation ---

    @classmethod
    def app_info(cls, doc: Any, max_chars: int) -> str:
        """The document's paragraphs, numbered as the API counts them, with their style; trimmed."""
        enum = doc.getText().createEnumeration()
        lines, used, index, shown, full = [], 0, 0, 0, False
        while enum.hasMoreElements():
            element = enum.nextElement()
            is_paragraph = _is_paragraph(element)
            if not full:
                if is_paragraph:
                    text = element.getString().replace("\n", " ").replace("\t", " ")
                    if len(text) > MAX_PARAGRAPH_CHARS:
                        text = text[:MAX_PARAGRAPH_CHARS] + f"… ({len(text)} characters)"
                    line = f"Paragraph {index} ({element.ParaStyleName}): {text}"
                elif element.supportsService("com.sun.star.text.TextTable"):
                    line = (f"Table {element.getName()!r} ({element.getRows().getCount()} rows x "
                            f"{element.getColumns().getCount()} columns)")
                else:
                    line = ""
                if line and used + len(line) + 1 > max_chars - 120:
                    full = True
                elif line:
                    lines.append(line)
                    used += len(line) + 1
                    shown += is_paragraph
            index += is_paragraph
        head = f"Document {doc.getTitle()!r}: {index} paragraphs"
        if index > shown:
            lines.append(f"… ({index - shown} more paragraphs)")
        return "\n".join([head, *lines])[:max_chars]

