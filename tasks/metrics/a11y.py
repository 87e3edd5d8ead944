"""Metrics on the desktop's accessibility tree (the `accessibility_tree` getter's XML, envs/desktop/a11y_xml.py),
with the semantics of OSWorld's `check_accessibility_tree` (metrics/general.py) and `check_left_panel`
(metrics/slides.py). A tree that is missing or not XML scores 0, where OSWorld's raise."""

from __future__ import annotations


from lxml import etree

from computerrl.envs.desktop.a11y_xml import NS
from computerrl.tasks.metrics.basic import fuzz_ratio
from computerrl.tasks.registry import metric


def _tree(result):
    if not isinstance(result, str) or not result:
        return None
    try:
        return etree.fromstring(result.encode(), etree.XMLParser(resolve_entities=False, huge_tree=False))
    except etree.XMLSyntaxError:
        return None


@metric("check_accessibility_tree")
def check_accessibility_tree(result, rules, osname: str = "ubuntu", **_) -> float:
    """Each rule selects elements by `xpath`, else by `selectors` (CSS, joined by ", "): none selected
    scores 0; with `text`, the best element's text scores 1/0 (`exact`) or its fuzzy ratio in [0, 1].
    The score is the product over the rules."""
    from lxml.cssselect import CSSSelector

    if osname != "ubuntu":
        raise ValueError(f"check_accessibility_tree: only the ubuntu tree exists here, not {osname!r}")
    root = _tree(result)
    if root is None:
        return 0.0
    total = 1.0
    for r in rules:
        if "xpath" in r:
            elements = root.xpath(r["xpath"], namespaces=NS)
        elif "selectors" in r:
            elements = CSSSelector(", ".join(r["selectors"]), namespaces=NS)(root)
        else:
            raise ValueError("check_accessibility_tree: a rule needs xpath or selectors")
        if not elements:
            return 0.0
        if "text" in r:
            exact, text = r["exact"], r["text"]
            total *= max(float(e.text == text) if exact else fuzz_ratio(text, e.text) / 100 if e.text is not None
                         else 0.0 for e in elements)
    return float(total)


@metric("check_left_panel")
def check_left_panel(accessibility_tree, *_, **__) -> float:
    """Impress's slide pane is open: a `document-frame` named "Slides View" is in the tree."""
    root = _tree(accessibility_tree)
    return float(root is not None and any(e.get("name") == "Slides View" for e in root.iter("document-frame")))
