"""`ImpressTools`: the Impress half of the API-GUI action space (ComputerRL's 22 presentation APIs).

Names, parameters and defaults follow ComputerRL's public `ImpressTools` (the tool class its agent
runs inside the VM). Where that class is vague we pin the meaning down and say so in the
one-line doc the model sees:

- slides are numbered from 1 (`slide_index`, `page_index`), boxes (the shapes of a slide, in
  z-order, as `app_info` lists them) from 0 (`box_index`);
- colors are "#RRGGBB" or a common name, the same names as `CalcTools` (`parse_color`);
- positions and sizes given as dicts are percentages of the slide ({"x": 10, "y": 20});
- file paths are in the home folder (/home/user/…); a missing file or folder is a clear error, never a guess.

`uno` is imported inside methods only: the parser and the trainer import this module without
LibreOffice. Every method runs on LibreOffice's main thread (see `Desktop.run_api`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from computerrl.apis.app_api import ApiError, AppApi, implements
from computerrl.apis.kit import parse_color
from computerrl.apis.registry import Len, Range, register_api

Slide = Annotated[int, Range(1, None)]  # 1-based slide number
Box = Annotated[int, Range(0, None)]  # 0-based shape index on a slide
Color = Annotated[str, Len(1, 40)]
FilePath = Annotated[str, Len(1, 1000)]
Percent = dict[str, Annotated[float, Range(0, 100)]]
Position = Literal["left", "right", "center", "top", "bottom", "top-left", "top-right", "bottom-left",
                   "bottom-right"]
ImageFormat = Literal["png", "jpeg", "jpg", "gif", "bmp", "tiff"]


@register_api
class ImpressTools:
    @staticmethod
    def save() -> None:
        """Save the presentation to its file, in its current format."""

    @staticmethod
    def go_to_slide(slide_index: Slide) -> None:
        """Show a slide (1-based) in the editing view."""

    @staticmethod
    def get_slide_count() -> int:
        """Number of slides in the presentation."""

    @staticmethod
    def duplicate_slide(slide_index: Slide, target_position: Slide) -> None:
        """Copy slide slide_index and place the copy right after slide target_position (both 1-based)."""

    @staticmethod
    def set_slide_font(slide_index: Slide, font_name: Annotated[str, Len(1, 100)]) -> None:
        """Set the font (e.g. "Arial") of all text on a slide, title included."""

    @staticmethod
    def write_text(content: Annotated[str, Len(0, 20000)], page_index: Slide, box_index: Box, bold: bool = False,
                   italic: bool = False, size: Annotated[float, Range(1, 999)] | None = None,
                   append: bool = False) -> None:
        """Replace (or with append=True add to) the text of box box_index on slide page_index; "\\n" starts a paragraph."""

    @staticmethod
    def set_style(slide_index: Slide, box_index: Box, bold: bool | None = None, italic: bool | None = None,
                  underline: bool | None = None) -> None:
        """Make all text of a box bold, italic or underlined (True), plain (False) or leave it (None)."""

    @staticmethod
    def configure_auto_save(enabled: bool, interval_minutes: Annotated[float, Range(1, 60)]) -> None:
        """Turn LibreOffice's AutoRecovery save on or off and set its interval in minutes."""

    @staticmethod
    def set_background_color(slide_index: Slide, box_index: Box, color: Color) -> None:
        """Fill the background of one box with a color ("#RRGGBB" or a name)."""

    @staticmethod
    def set_text_color(slide_index: Slide, box_index: Box, color: Color) -> None:
        """Color all text of one box ("#RRGGBB" or a name)."""

    @staticmethod
    def delete_content(slide_index: Slide, box_index: Box) -> None:
        """Delete one box (text box, image, …) from a slide; the later boxes move up one index."""

    @staticmethod
    def set_slide_orientation(orientation: Literal["portrait", "landscape"]) -> None:
        """Make all slides portrait (taller than wide) or landscape."""

    @staticmethod
    def position_box(slide_index: Slide, box_index: Box, position: Position) -> None:
        """Move a box to a place on its slide ("center", "top-left", "bottom", …), keeping its size."""

    @staticmethod
    def insert_file(file_path: FilePath, slide_index: Slide | None = None, position: Percent | None = None,
                    size: Percent | None = None, autoplay: bool = False) -> None:
        """Insert a video/audio file on a slide (default: current); position {"x","y"}, size {"width","height"} in % of the slide."""

    @staticmethod
    def set_slide_background(slide_index: Slide | None = None, color: Color | None = None,
                             image_path: FilePath | None = None) -> None:
        """Set the background of one slide (default: all slides) to a color or, if given, a stretched image."""

    @staticmethod
    def save_as(file_path: FilePath, overwrite: bool = False) -> None:
        """Save the presentation under a new path; the extension picks the format (.odp, .pptx, .ppt, .pdf)."""

    @staticmethod
    def insert_image(slide_index: Slide, image_path: FilePath, width: Annotated[float, Range(0.1, 500)] | None = None,
                     height: Annotated[float, Range(0.1, 500)] | None = None, position: Percent | None = None) -> None:
        """Insert an image on a slide; width/height in cm (default: its own size), position {"x","y"} in % of the slide."""

    @staticmethod
    def configure_display_settings(use_presenter_view: bool | None = None, primary_monitor_only: bool | None = None,
                                   monitor_for_presentation: Annotated[int, Range(1, 16)] | None = None) -> None:
        """Slide show display: presenter console on/off, primary monitor only, or which monitor (1-based) shows it."""

    @staticmethod
    def set_text_strikethrough(slide_index: Slide, box_index: Box,
                               line_numbers: Annotated[list[Annotated[int, Range(1, None)]], Len(1, 1000)],
                               apply: bool) -> None:
        """Strike through (apply=True) or un-strike lines (paragraphs, 1-based) of a box's text."""

    @staticmethod
    def set_textbox_alignment(slide_index: Slide, box_index: Box,
                              alignment: Literal["left", "center", "right", "justify"]) -> None:
        """Align the paragraphs of a box left, center, right or justified."""

    @staticmethod
    def set_slide_number_color(color: Color) -> None:
        """Color the slide numbers (the number fields on the masters and slides)."""

    @staticmethod
    def export_to_image(file_path: FilePath, format: ImageFormat, slide_index: Slide | None = None) -> None:
        """Export one slide to an image file, or every slide to <name>_<n>.<format> when slide_index is None."""


_SAVE_FILTERS = {".odp": "impress8", ".pptx": "Impress MS PowerPoint 2007 XML", ".ppt": "MS PowerPoint 97",
                 ".pdf": "impress_pdf_Export"}
_IMAGE_FILTERS = {"png": "png", "jpeg": "jpg", "jpg": "jpg", "gif": "gif", "bmp": "bmp", "tiff": "tif"}
_MARGIN = 500  # 1/100 mm between a positioned box and the slide's edge




def _kind(shape) -> str:
    """"com.sun.star.presentation.TitleTextShape" -> "TitleText"."""
    name = shape.getShapeType().rsplit(".", 1)[-1]
    return name[:-5] if name.endswith("Shape") and len(name) > 5 else name


def _has_text(shape) -> bool:
    return shape.supportsService("com.sun.star.drawing.Text")


def _whole(text):
    cursor = text.createTextCursor()
    cursor.gotoStart(False)
    cursor.gotoEnd(True)
    return cursor


def _paragraphs(text) -> list:
    paragraphs, enum = [], text.createEnumeration()
    while enum.hasMoreElements():
        paragraphs.append(enum.nextElement())
    return paragraphs


def _office_context(doc):
    """The office's component context, found among this process's UNO bridges by its desktop."""
    import uno

    local = uno.getComponentContext()
    factory = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.BridgeFactory", local)
    desktop = doc.getCurrentController().getFrame().getCreator()
    for bridge in factory.getExistingBridges():
        try:
            ctx = bridge.getInstance("StarOffice.ComponentContext")
            if ctx is None:
                continue
            theirs = ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)
            if theirs == desktop:
                return ctx
        except Exception:  # noqa: BLE001, S112 - a bridge to another office or one closing
            continue
    raise ApiError("cannot reach LibreOffice's settings from here")


# --- implementation --------------------------------------------------------------------------

@implements("ImpressTools")
class ImpressApi(AppApi):
    app = "impress"
    service = "com.sun.star.presentation.PresentationDocument"
    noun = "presentation"
    save_as_hint = "use save_as with a path like /home/user/slides.pptx"

    # helpers

    @property
    def _controller(self):
        return self.doc.getCurrentController()

    @property
    def _pages(self):
        return self.doc.getDrawPages()

    def _slide(self, slide_index: int):
        pages = self._pages
        count = pages.getCount()
        if not 1 <= slide_index <= count:
            raise ApiError(f"slide {slide_index} does not exist: the presentation has {count} slides (1-{count})")
        return pages.getByIndex(slide_index - 1)

    def _box(self, slide_index: int, box_index: int, text: bool = False):
        slide = self._slide(slide_index)
        count = slide.getCount()
        if box_index >= count:
            have = f"boxes 0-{count - 1}" if count else "no boxes"
            raise ApiError(f"slide {slide_index} has no box {box_index} (it has {have})")
        shape = slide.getByIndex(box_index)
        if text and not _has_text(shape):
            raise ApiError(f"box {box_index} on slide {slide_index} is a {_kind(shape)} and holds no text")
        return shape

    def _dispatch(self, command: str) -> None:
        """Run a ".uno:" command on this document's frame (for what UNO's API cannot do)."""
        import uno

        url = uno.createUnoStruct("com.sun.star.util.URL")
        url.Complete = url.Main = f".uno:{command}"
        url.Protocol, url.Path = ".uno:", command
        frame = self._controller.getFrame()
        dispatch = frame.queryDispatch(url, "", 0)
        if dispatch is None:
            raise ApiError(f"Impress cannot run {command} in its current view")
        dispatch.dispatch(url, ())

    def _config(self, node: str):
        from com.sun.star.beans import PropertyValue

        ctx = _office_context(self.doc)
        provider = ctx.ServiceManager.createInstanceWithContext(
            "com.sun.star.configuration.ConfigurationProvider", ctx)
        return provider.createInstanceWithArguments("com.sun.star.configuration.ConfigurationUpdateAccess",
                                                    (PropertyValue(Name="nodepath", Value=node),))

    def _place(self, slide, shape, position: dict | None, size: dict | None = None) -> None:
        import uno

        for given, keys in ((position, {"x", "y"}), (size, {"width", "height"})):
            if given is not None and not set(given) <= keys:
                raise ApiError(f"unknown keys {sorted(set(given) - keys)}; use {sorted(keys)} (percentages of the slide)")
        if size:
            current = shape.Size
            new = uno.createUnoStruct("com.sun.star.awt.Size")
            new.Width = round(size["width"] * slide.Width / 100) if "width" in size else current.Width
            new.Height = round(size["height"] * slide.Height / 100) if "height" in size else current.Height
            shape.Size = new
        point = uno.createUnoStruct("com.sun.star.awt.Point")
        position = position or {}
        point.X = round(position.get("x", 0) * slide.Width / 100)
        point.Y = round(position.get("y", 0) * slide.Height / 100)
        shape.Position = point

    # the API

    def go_to_slide(self, slide_index: int) -> str:
        self._controller.setCurrentPage(self._slide(slide_index))
        return f"Showing slide {slide_index}"

    def get_slide_count(self) -> int:
        return self._pages.getCount()

    def duplicate_slide(self, slide_index: int, target_position: int) -> str:
        source = self._slide(slide_index)
        count = self._pages.getCount()
        if target_position > count:
            raise ApiError(f"target_position {target_position} does not exist: the presentation has {count} slides")
        copy = self.doc.duplicate(source)  # inserted right after the source, at 0-based index slide_index
        controller, pages = self._controller, self._pages
        at, want = slide_index, target_position  # 0-based: the copy goes after slide target_position
        while at != want:  # UNO has no "move slide"; the slide sorter's commands do it one step at a time
            controller.setCurrentPage(copy)
            self._dispatch("MovePageDown" if at < want else "MovePageUp")
            now = next(i for i in range(pages.getCount()) if pages.getByIndex(i) == copy)
            if now == at:
                raise ApiError(f"duplicated slide {slide_index} but could not move the copy after slide {target_position}")
            at = now
        controller.setCurrentPage(copy)
        return f"Duplicated slide {slide_index} as slide {at + 1}"

    def set_slide_font(self, slide_index: int, font_name: str) -> str:
        slide = self._slide(slide_index)
        changed = 0
        for i in range(slide.getCount()):
            shape = slide.getByIndex(i)
            if _has_text(shape):
                cursor = _whole(shape.getText())
                for prop in ("CharFontName", "CharFontNameAsian", "CharFontNameComplex"):
                    cursor.setPropertyValue(prop, font_name)
                changed += 1
        return f"Set font {font_name!r} in {changed} boxes of slide {slide_index}"

    def write_text(self, content: str, page_index: int, box_index: int, bold: bool = False, italic: bool = False,
                   size: float | None = None, append: bool = False) -> str:
        text = self._box(page_index, box_index, text=True).getText()
        if append:
            cursor = text.createTextCursor()
            cursor.gotoEnd(False)
            text.insertString(cursor, content, False)
            cursor = text.createTextCursor()
            cursor.gotoEnd(False)
            cursor.goLeft(len(content), True)  # select just the new text (a paragraph break is one step)
        else:
            text.setString(content)
            cursor = _whole(text)
        cursor.setPropertyValue("CharWeight", 150.0 if bold else 100.0)  # awt.FontWeight BOLD / NORMAL
        cursor.setPropertyValue("CharPosture", _posture(italic))
        if size is not None:
            cursor.setPropertyValue("CharHeight", float(size))
        self.doc.setModified(True)  # edits through the text API leave the flag alone; the user would see them
        return f"Wrote {len(content)} characters to box {box_index} on slide {page_index}"

    def set_style(self, slide_index: int, box_index: int, bold: bool | None = None, italic: bool | None = None,
                  underline: bool | None = None) -> None:
        if bold is None and italic is None and underline is None:
            raise ApiError("give at least one of bold, italic, underline (True or False)")
        cursor = _whole(self._box(slide_index, box_index, text=True).getText())
        if bold is not None:
            cursor.setPropertyValue("CharWeight", 150.0 if bold else 100.0)
        if italic is not None:
            cursor.setPropertyValue("CharPosture", _posture(italic))
        if underline is not None:
            cursor.setPropertyValue("CharUnderline", 1 if underline else 0)  # awt.FontUnderline SINGLE / NONE

    def configure_auto_save(self, enabled: bool, interval_minutes: float) -> str:
        access = self._config("/org.openoffice.Office.Recovery/AutoSave")
        access.setPropertyValue("Enabled", enabled)
        access.setPropertyValue("TimeIntervall", round(interval_minutes))  # sic: LibreOffice's spelling
        access.commitChanges()
        return f"AutoRecovery save {'on' if enabled else 'off'}, every {round(interval_minutes)} minutes"

    def set_background_color(self, slide_index: int, box_index: int, color: str) -> None:
        import uno

        rgb = parse_color(color)
        shape = self._box(slide_index, box_index)
        shape.FillStyle = uno.Enum("com.sun.star.drawing.FillStyle", "SOLID")
        shape.FillColor = rgb

    def set_text_color(self, slide_index: int, box_index: int, color: str) -> None:
        rgb = parse_color(color)
        _whole(self._box(slide_index, box_index, text=True).getText()).setPropertyValue("CharColor", rgb)

    def delete_content(self, slide_index: int, box_index: int) -> str:
        slide = self._slide(slide_index)
        shape = self._box(slide_index, box_index)
        kind = _kind(shape)
        slide.remove(shape)
        return f"Deleted box {box_index} ({kind}) from slide {slide_index}"

    def set_slide_orientation(self, orientation: str) -> str:
        pages = self._pages
        first = pages.getByIndex(0)
        width, height = first.Width, first.Height
        if (width >= height) == (orientation == "landscape"):
            return f"The slides are already {orientation}"
        for i in range(pages.getCount()):
            page = pages.getByIndex(i)
            page.Width, page.Height = height, width
        return f"The slides are now {orientation} ({height / 100:g} x {width / 100:g} mm)"

    def position_box(self, slide_index: int, box_index: int, position: str) -> str:
        import uno

        slide = self._slide(slide_index)
        shape = self._box(slide_index, box_index)
        size = shape.Size
        free_x, free_y = slide.Width - size.Width, slide.Height - size.Height
        x = {"left": _MARGIN, "right": free_x - _MARGIN}.get(position.split("-")[-1], free_x // 2)
        y = {"top": _MARGIN, "bottom": free_y - _MARGIN}.get(position.split("-")[0], free_y // 2)
        point = uno.createUnoStruct("com.sun.star.awt.Point")
        point.X, point.Y = int(x), int(y)
        shape.Position = point
        return f"Moved box {box_index} on slide {slide_index} to {position} ({point.X / 100:g}, {point.Y / 100:g} mm)"

    def insert_file(self, file_path: str, slide_index: int | None = None, position: dict | None = None,
                    size: dict | None = None, autoplay: bool = False) -> str:
        self.existing(file_path, "file_path")
        # Setting MediaURL starts LibreOffice's GStreamer player, which hung soffice on these desktops
        # (no sound device) until the 30 s deadline killed it: refuse rather than lose the episode.
        raise ApiError("inserting audio or video is not supported on this desktop; use insert_image for pictures")

    def set_slide_background(self, slide_index: int | None = None, color: str | None = None,
                             image_path: str | None = None) -> str:
        import uno

        if color is None and image_path is None:
            raise ApiError("give a color or an image_path")
        rgb = None if color is None else parse_color(color)
        image = None if image_path is None else self.existing(image_path, "image_path")
        pages = self._pages
        targets = [self._slide(slide_index)] if slide_index else [pages.getByIndex(i) for i in range(pages.getCount())]
        for page in targets:
            background = self.doc.createInstance("com.sun.star.drawing.Background")
            if image is not None:
                background.FillStyle = uno.Enum("com.sun.star.drawing.FillStyle", "BITMAP")
                background.FillBitmapURL = self.url(image)
                background.FillBitmapMode = uno.Enum("com.sun.star.drawing.BitmapMode", "STRETCH")
            else:
                background.FillStyle = uno.Enum("com.sun.star.drawing.FillStyle", "SOLID")
                background.FillColor = rgb
            page.Background = background
        where = f"slide {slide_index}" if slide_index else f"all {len(targets)} slides"
        return f"Set the background of {where}"

    def save_as(self, file_path: str, overwrite: bool = False) -> str:
        path = self.path(file_path)
        if not self.is_dir(path.parent):
            raise ApiError(f"folder {str(path.parent)!r} does not exist")
        if self.is_file(path) and not overwrite:
            raise ApiError(f"{str(path)!r} already exists; pass overwrite=True to replace it")
        suffix = path.suffix.lower()
        if suffix not in _SAVE_FILTERS:
            raise ApiError(f"unknown extension {suffix or '(none)'!r}; use one of {', '.join(_SAVE_FILTERS)}")
        # storeAsURL would make a PDF "the document's file"; a PDF is an export.
        self.store(path, _SAVE_FILTERS[suffix], to=suffix == ".pdf", Overwrite=overwrite)
        return f"Saved to {path}"

    def insert_image(self, slide_index: int, image_path: str, width: float | None = None,
                     height: float | None = None, position: dict | None = None) -> str:
        import uno

        slide = self._slide(slide_index)
        path = self.existing(image_path, "image_path")
        shape = self.doc.createInstance("com.sun.star.drawing.GraphicObjectShape")
        slide.add(shape)
        shape.GraphicURL = self.url(path)
        graphic = shape.Graphic
        if graphic is None:
            slide.remove(shape)
            raise ApiError(f"{str(path)!r} is not an image LibreOffice can read")
        natural = graphic.Size100thMM
        if natural.Width <= 0 or natural.Height <= 0:  # pixels only: 96 dpi
            pixels = graphic.SizePixel
            natural.Width, natural.Height = round(pixels.Width * 2540 / 96), round(pixels.Height * 2540 / 96)
        size = uno.createUnoStruct("com.sun.star.awt.Size")
        ratio = natural.Height / natural.Width
        w = None if width is None else width * 1000  # cm -> 1/100 mm
        h = None if height is None else height * 1000
        size.Width = round(w if w is not None else (h / ratio if h is not None else natural.Width))
        size.Height = round(h if h is not None else (w * ratio if w is not None else natural.Height))
        shape.Size = size
        self._place(slide, shape, position)
        return f"Inserted {path.name} on slide {slide_index} as box {slide.getCount() - 1}"

    def configure_display_settings(self, use_presenter_view: bool | None = None,
                                   primary_monitor_only: bool | None = None,
                                   monitor_for_presentation: int | None = None) -> str:
        if use_presenter_view is None and primary_monitor_only is None and monitor_for_presentation is None:
            raise ApiError("give at least one of use_presenter_view, primary_monitor_only, monitor_for_presentation")
        done = []
        if use_presenter_view is not None:
            access = self._config("/org.openoffice.Office.Impress/Misc/Start")
            access.setPropertyValue("EnablePresenterScreen", use_presenter_view)
            access.commitChanges()
            done.append(f"presenter console {'on' if use_presenter_view else 'off'}")
        if primary_monitor_only or monitor_for_presentation is not None:
            # Presentation.Display: 0 = all monitors, n = monitor n (1-based), as the dialog's list.
            monitor = 1 if primary_monitor_only else monitor_for_presentation
            self.doc.getPresentation().Display = monitor
            done.append(f"slide show on monitor {monitor}")
        elif primary_monitor_only is False:
            self.doc.getPresentation().Display = 0
            done.append("slide show on all monitors")
        return "Display: " + ", ".join(done)

    def set_text_strikethrough(self, slide_index: int, box_index: int, line_numbers: list, apply: bool) -> str:
        paragraphs = _paragraphs(self._box(slide_index, box_index, text=True).getText())
        bad = [n for n in line_numbers if n > len(paragraphs)]
        if bad:
            raise ApiError(f"box {box_index} on slide {slide_index} has {len(paragraphs)} lines; no line {bad[0]}")
        for n in line_numbers:
            paragraphs[n - 1].setPropertyValue("CharStrikeout", 1 if apply else 0)  # awt.FontStrikeout SINGLE / NONE
        return f"{'Struck through' if apply else 'Cleared strike-through on'} lines {line_numbers}"

    def set_textbox_alignment(self, slide_index: int, box_index: int, alignment: str) -> None:
        import uno

        value = {"left": "LEFT", "center": "CENTER", "right": "RIGHT", "justify": "BLOCK"}[alignment]
        for paragraph in _paragraphs(self._box(slide_index, box_index, text=True).getText()):
            paragraph.ParaAdjust = uno.Enum("com.sun.star.style.ParagraphAdjust", value)

    def set_slide_number_color(self, color: str) -> str:
        rgb = parse_color(color)
        changed = 0
        for pages in (self.doc.getMasterPages(), self._pages):
            for i in range(pages.getCount()):
                page = pages.getByIndex(i)
                for j in range(page.getCount()):
                    shape = page.getByIndex(j)
                    if _has_text(shape) and _holds_page_number(shape):
                        _whole(shape.getText()).setPropertyValue("CharColor", rgb)
                        changed += 1
        if not changed:
            raise ApiError("the presentation has no slide number field to color")
        return f"Colored {changed} slide number boxes"

    def export_to_image(self, file_path: str, format: str, slide_index: int | None = None) -> str:
        path = self.path(file_path)
        if not self.is_dir(path.parent):
            raise ApiError(f"folder {str(path.parent)!r} does not exist")
        filter_name = f"impress_{_IMAGE_FILTERS[format]}_Export"
        controller, pages = self._controller, self._pages
        current = controller.getCurrentPage()
        numbers = [slide_index] if slide_index else list(range(1, pages.getCount() + 1))
        written = []
        try:
            for n in numbers:
                controller.setCurrentPage(self._slide(n))  # the graphic filters export the current slide
                target = path if slide_index or len(numbers) == 1 else path.with_name(f"{path.stem}_{n}{path.suffix}")
                self.store(target, filter_name)
                written.append(target.name)
        finally:
            controller.setCurrentPage(current)
        return f"Exported {', '.join(written)} to {path.parent}"

    # --- observation ---

    @classmethod
    def app_info(cls, doc: Any, max_chars: int) -> str:
        """Each slide and its boxes (index, kind, text), the current slide marked, trimmed to max_chars."""
        pages = doc.getDrawPages()
        count = pages.getCount()
        current = doc.getCurrentController().getCurrentPage()
        lines, used, shown = [], 0, 0
        head = f"Presentation with {count} slides; slides are numbered from 1, boxes from 0"
        used = len(head) + 1
        for i in range(count):
            page = pages.getByIndex(i)
            block = [f"Slide {i + 1}{' (current)' if page == current else ''}:"]
            for j in range(page.getCount()):
                shape = page.getByIndex(j)
                text = shape.getText().getString() if _has_text(shape) else None
                shown_text = "" if text is None else ": " + (
                    text.replace("\r\n", "\n").replace("\n", " | ")[:300] if text else "(empty)")
                block.append(f"  Box {j} [{_kind(shape)}]{shown_text}")
            cost = sum(len(x) + 1 for x in block)
            if used + cost > max_chars - 40:
                room = max_chars - 40 - used
                part = []
                for line in block:  # as much of this slide as fits, then stop
                    if len(line) + 1 > room:
                        break
                    part.append(line)
                    room -= len(line) + 1
                lines += part
                break
            lines += block
            used += cost
            shown += 1
        if shown < count:
            lines.append(f"… ({count - shown} more slides)")
        return "\n".join([head, *lines])


def _posture(italic: bool):
    import uno

    return uno.Enum("com.sun.star.awt.FontSlant", "ITALIC" if italic else "NONE")


def _holds_page_number(shape) -> bool:
    if _kind(shape) == "SlideNumber":
        return True
    for paragraph in _paragraphs(shape.getText()):
        portions = paragraph.createEnumeration()
        while portions.hasMoreElements():
            portion = portions.nextElement()
            field = portion.TextField if portion.TextPortionType == "TextField" else None
            if field is not None and any(field.supportsService(f"com.sun.star.{m}.TextField.PageNumber")
                                         for m in ("text", "presentation")):
                return True
    return False
