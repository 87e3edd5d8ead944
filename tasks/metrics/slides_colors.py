"""Impress colour metrics with the semantics of OSWorld's (`metrics/slides.py`):
`evaluate_presentation_fill_to_rgb_distance` (how close every slide's background is to a colour) and
`check_page_number_colors` (the colour the first slide master gives its page numbers).

Departures: a presentation without slides, or whose master names fewer than two colours, scores 0
where OSWorld's raises; check_page_number_colors reads a colour's hex digits in place (`FF0000` is
red 255), where OSWorld's reads them one place off (red from digits 2-3, blue from digit 6 alone),
so pure blue `0000FF` fails its blue check.
"""

from __future__ import annotations

import math
import zipfile

from lxml import etree

from computerrl.tasks.metrics.docs import NS, slide_background_rgb
from computerrl.tasks.registry import metric

MASTER = "ppt/slideMasters/slideMaster1.xml"
MASTER_LIMIT = 16 << 20  # bytes of the master's XML read (an honest one is tens of KB)
FARTHEST = math.sqrt(3 * 255**2)  # black to white: the largest RGB distance
MARGIN = 50  # how far a colour's main channel must exceed the others (OSWorld's threshold)


@metric("evaluate_presentation_fill_to_rgb_distance")
def evaluate_presentation_fill_to_rgb_distance(pptx_file, rules, **_) -> float:
    """1 minus the mean, over slides, of each background's RGB distance to `rules["rgb"]` (as a part of
    the largest distance). A slide whose background has no RGB of its own, or that still has
    `rules["original_rgb"]`, counts as the farthest."""
    from pptx import Presentation

    slides = list(Presentation(pptx_file).slides)
    if not slides:
        return 0.0
    want, original = tuple(rules["rgb"]), rules.get("original_rgb")

    def distance(slide) -> float:
        rgb = slide_background_rgb(slide)
        if rgb is None or original is not None and tuple(rgb) == tuple(original):
            return 1.0
        return math.dist(tuple(rgb), want) / FARTHEST

    return 1 - sum(distance(s) for s in slides) / len(slides)


def _channels(hex_rgb: str) -> tuple[int, int, int]:
    return int(hex_rgb[0:2], 16), int(hex_rgb[2:4], 16), int(hex_rgb[4:6], 16)


COLOR_TESTS = {  # colour name -> test of (r, g, b); any other name passes, as in OSWorld
    "red": lambda r, g, b: r > g + MARGIN and r > b + MARGIN,
    "green": lambda r, g, b: g > r + MARGIN and g > b + MARGIN,
    "blue": lambda r, g, b: b > g + MARGIN and b > r + MARGIN,
    "black": lambda r, g, b: max(r, g, b) < MARGIN,
}


@metric("check_page_number_colors")
def check_page_number_colors(pptx_file, rules, **_) -> float:
    """1 if the colour of the first slide master's page numbers is `rules["color"]` (red, green, blue,
    black). As OSWorld's, the page numbers' colour is the last but one solid RGB fill the master
    names (the number field comes last but one in LibreOffice's masters)."""
    with zipfile.ZipFile(pptx_file) as z:
        if z.getinfo(MASTER).file_size > MASTER_LIMIT:
            return 0.0
        root = etree.fromstring(z.read(MASTER))
    colors = root.findall(".//a:solidFill//a:srgbClr", NS)
    if len(colors) < 2 or colors[-2].get("val") is None:
        return 0.0
    test = COLOR_TESTS.get(rules["color"])
    return float(test is None or test(*_channels(colors[-2].get("val"))))
