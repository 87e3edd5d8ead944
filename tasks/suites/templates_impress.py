"""Impress templates: a .pptx made with python-pptx is opened, the solution edits it (ImpressTools
API) and saves it; the saved deck is compared with a gold deck made the same way.

Text tasks use `simple_pptx_compare` (per slide: the sorted texts of its boxes; empty
placeholders do not count), so LibreOffice's own geometry and font defaults do not matter.
Formatting tasks use `compare_pptx_files` with only the property the task changes examined, plus
the text: LibreOffice writes explicit sizes and positions that a python-pptx gold lacks. Text
colour is left out on purpose: compare_pptx_files compares colours only when both decks set one,
so an untouched deck would pass.
"""

from __future__ import annotations

import io

from computerrl.tasks.suites import HOME, PEOPLE, WORDS, Instance, stable_zip, cloud_file, download, open_step, \
    template, vm_file

TOPICS = ["Budget", "Roadmap", "Hiring", "Results", "Risks", "Timeline", "Goals", "Feedback", "Launch", "Review"]
COLORS = {"red": "FF0000", "green": "00FF00", "blue": "0000FF", "yellow": "FFFF00", "orange": "FFA500",
          "purple": "800080", "gray": "808080", "black": "000000"}
SAVE_EXIT = ["ImpressTools.save()", "Agent.exit(True)"]
# Only what a task changes is examined (see the module docstring); the text always is.
ONLY = {f"examine_{k}": False for k in ("number_of_slides", "background_color", "note", "shape", "alignment",
                                        "indent", "font_name", "font_size", "font_bold", "font_italic",
                                        "color_rgb", "font_underline", "strike_through", "bullets")}


def pptx(slides: list[tuple[str, list[str]]], *, background: dict[int, str] | None = None,
         bold: set[int] = frozenset(), align: dict[int, str] | None = None, centred_titles: bool = False) -> bytes:
    """A deck of "Title and Content" slides: (title, body lines) each; "" / [] leave a box empty.
    `background`, `bold` and `align` are keyed by 1-based slide number (bold and align: the body).
    `centred_titles` writes the titles' alignment out, as LibreOffice does when it saves."""
    from pptx import Presentation
    from pptx.dml.color import RGBColor
    from pptx.enum.text import PP_ALIGN

    prs = Presentation()
    for n, (title, lines) in enumerate(slides, 1):
        slide = prs.slides.add_slide(prs.slide_layouts[1])
        if title:
            slide.shapes.title.text = title
            if centred_titles:
                slide.shapes.title.text_frame.paragraphs[0].alignment = PP_ALIGN.CENTER
        body = slide.placeholders[1].text_frame
        for i, line in enumerate(lines):
            p = body.paragraphs[0] if i == 0 else body.add_paragraph()
            run = p.add_run()
            run.text = line
            if n in bold:
                run.font.bold = True
            if align and n in align:
                p.alignment = getattr(PP_ALIGN, align[n].upper())
        if background and n in background:
            fill = slide.background.fill
            fill.solid()
            fill.fore_color.rgb = RGBColor.from_string(background[n])
    buf = io.BytesIO()
    prs.save(buf)
    return stable_zip(buf.getvalue())


def impress_task(instruction: str, start: bytes, gold: bytes, solution: list[str], params: dict, *,
                 func: str = "simple_pptx_compare", options: dict | None = None) -> Instance:
    path = f"{HOME}/deck.pptx"
    evaluator = {"func": func, "result": vm_file(path), "expected": cloud_file("gold.pptx")}
    if options:
        evaluator["options"] = options
    task = {"instruction": instruction, "snapshot": "libreoffice_impress", "source": "computerrl-suite",
            "related_apps": ["libreoffice_impress"], "config": [download(("deck.pptx", path)), open_step(path)],
            "evaluator": evaluator}
    return Instance(task, {"deck.pptx": start, "gold.pptx": gold}, solution, params)


def _deck(rng, lo: int = 2, hi: int = 4) -> list[tuple[str, list[str]]]:
    return [(t, rng.sample(WORDS, rng.randint(1, 3))) for t in rng.sample(TOPICS, rng.randint(lo, hi))]


@template("impress_write_title", "impress")
def write_title(rng, index):
    slides = _deck(rng)
    k = rng.randint(1, len(slides))
    title = slides[k - 1][0] + " " + rng.choice(["Overview", "Update", "Plan", "Summary"])
    start = [("" if n == k else t, body) for n, (t, body) in enumerate(slides, 1)]
    gold = [(title if n == k else t, body) for n, (t, body) in enumerate(start, 1)]
    return impress_task(f"Slide {k} has an empty title box. Write the title '{title}' into it and save the "
                        "presentation.", pptx(start), pptx(gold),
                        [f"ImpressTools.write_text({title!r}, {k}, 0)", *SAVE_EXIT], {"slides": slides, "k": k,
                                                                                     "title": title})


@template("impress_bullet_list", "impress")
def bullet_list(rng, index):
    slides = _deck(rng)
    k = rng.randint(1, len(slides))
    items = rng.sample(PEOPLE, rng.randint(2, 5))
    start = [(t, [] if n == k else body) for n, (t, body) in enumerate(slides, 1)]
    gold = [(t, items if n == k else body) for n, (t, body) in enumerate(start, 1)]
    return impress_task(f"On slide {k} ('{slides[k - 1][0]}'), the content box is empty. Write these names into it "
                        "as a list, one per line, in this order: " + ", ".join(items) + ". Save the presentation.",
                        pptx(start), pptx(gold),
                        [f"ImpressTools.write_text({chr(10).join(items)!r}, {k}, 1)", *SAVE_EXIT],
                        {"slides": start, "k": k, "items": items})


@template("impress_slide_background", "impress")
def slide_background(rng, index):
    slides = _deck(rng)
    k = rng.randint(1, len(slides))
    name = rng.choice(sorted(COLORS))
    return impress_task(f"Set the background of slide {k} to solid {name} (#{COLORS[name]}) and save the "
                        "presentation.", pptx(slides),
                        # LibreOffice saves the master's white background explicitly; python-pptx leaves it out
                        pptx(slides, background={n: COLORS[name] if n == k else "FFFFFF"
                                                 for n in range(1, len(slides) + 1)}),
                        [f"ImpressTools.set_slide_background({k}, '#{COLORS[name]}')", *SAVE_EXIT],
                        {"slides": slides, "k": k, "color": name}, func="compare_pptx_files",
                        options={**ONLY, "examine_number_of_slides": True, "examine_background_color": True})


@template("impress_duplicate_slide", "impress")
def duplicate_slide(rng, index):
    slides = _deck(rng)
    k = rng.randint(1, len(slides))
    gold = slides[:k] + [slides[k - 1]] + slides[k:]
    return impress_task(f"Duplicate slide {k} ('{slides[k - 1][0]}') so that the copy comes right after it, and "
                        "save the presentation.", pptx(slides), pptx(gold),
                        [f"ImpressTools.duplicate_slide({k}, {k})", *SAVE_EXIT], {"slides": slides, "k": k})


@template("impress_bold_body", "impress")
def bold_body(rng, index):
    slides = _deck(rng)
    k = rng.randint(1, len(slides))
    return impress_task(f"Make all the text in the content box of slide {k} ('{slides[k - 1][0]}') bold and save "
                        "the presentation.", pptx(slides), pptx(slides, bold={k}),
                        [f"ImpressTools.set_style({k}, 1, bold=True)", *SAVE_EXIT], {"slides": slides, "k": k},
                        func="compare_pptx_files", options={**ONLY, "examine_number_of_slides": True,
                                                            "examine_font_bold": True})


@template("impress_align_body", "impress")
def align_body(rng, index):
    slides = _deck(rng)
    k = rng.randint(1, len(slides))
    how = rng.choice(["center", "right"])
    return impress_task(f"Align the text of the content box on slide {k} ('{slides[k - 1][0]}') to the {how} and "
                        "save the presentation.", pptx(slides), pptx(slides, align={k: how}, centred_titles=True),
                        [f"ImpressTools.set_textbox_alignment({k}, 1, {how!r})", *SAVE_EXIT],
                        {"slides": slides, "k": k, "how": how}, func="compare_pptx_files",
                        options={**ONLY, "examine_number_of_slides": True, "examine_alignment": True})
