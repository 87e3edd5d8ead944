"""The whole accessibility tree of a desktop as OSWorld's server gives it (`/accessibility` on
Linux): XML, `desktop-frame` > one element per application > its objects, each element named by
its role ("page tab list" -> `page-tab-list`), with `name`, the states (`st:focused="true"`), the
object attributes (`attr:id`), where visible and showing its screen box (`cp:screencoord`,
`cp:size`), `image`/`selection` when it has those interfaces, its value (`val:value`, …), its
actions (`act:click_desc`, `act:click_kb`) and its text as the element's text. OSWorld's
`accessibility_tree` getter returns it; `check_accessibility_tree` (CSS selectors or XPath) and
`check_left_panel` read it.

Read over the desktop's AT-SPI bus with the pipelined calls of `A11yReader` (a level of the walk
costs a few batches, not a round trip per property), within OSWorld's bounds (50 levels, 1024
children per object) and ours (MAX_NODES objects, each object once however the application links
them). Departure: a table that manages its descendants (a Calc sheet) is not enumerated, where
OSWorld lists the cells on screen. What the tree says is what the desktop's applications say of
themselves: a program the agent wrote could show any tree, as on OSWorld's machine.
"""

from __future__ import annotations

import re

from lxml import etree

from computerrl.envs.desktop.a11y import ACC, COMP, PROPS, ROOT, TEXT, A11yReader, from_words

NS = {"st": "https://accessibility.ubuntu.example.org/ns/state",
      "attr": "https://accessibility.ubuntu.example.org/ns/attributes",
      "cp": "https://accessibility.ubuntu.example.org/ns/component",
      "doc": "https://accessibility.ubuntu.example.org/ns/document",
      "docattr": "https://accessibility.ubuntu.example.org/ns/document/attributes",
      "txt": "https://accessibility.ubuntu.example.org/ns/text",
      "val": "https://accessibility.ubuntu.example.org/ns/value",
      "act": "https://accessibility.ubuntu.example.org/ns/action"}
STATE_NAMES = ("invalid", "active", "armed", "busy", "checked", "collapsed", "defunct", "editable", "enabled",
               "expandable", "expanded", "focusable", "focused", "has_tooltip", "horizontal", "iconified", "modal",
               "multi_line", "multiselectable", "opaque", "pressed", "resizable", "selectable", "selected",
               "sensitive", "showing", "single_line", "stale", "transient", "vertical", "visible",
               "manages_descendants", "indeterminate", "required", "truncated", "animated", "invalid_entry",
               "supports_autocompletion", "selectable_text", "is_default", "visited", "checkable", "has_popup",
               "read_only")  # AtspiStateType, as pyatspi names them (STATE_MULTI_LINE -> multi_line)
VISIBLE_SHOWING = 1 << 30 | 1 << 25
MANAGES = 1 << 31
MAX_DEPTH, MAX_WIDTH = 50, 1024  # OSWorld's
MAX_NODES = 30_000  # objects in all: an application claiming millions is cut there
BATCH = 2_000  # calls per pipelined batch (each batch has the reader's deadline)
IMAGE, SELECTION, VALUE, ACTION = (f"org.a11y.atspi.{i}" for i in ("Image", "Selection", "Value", "Action"))
NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
XML_NAME = re.compile(r"[A-Za-z_][\w.-]*$")


def _clean(s) -> str:
    return NOT_XML.sub("", str(s))


def osworld_tree(reader: A11yReader) -> str:
    """The desktop's accessibility tree as OSWorld's XML (A11yError when the bus fails)."""
    root, done = etree.Element("desktop-frame", nsmap=NS), set()
    level = [((app.bus_name, ROOT), root) for app in reader.applications()]
    for depth in range(1, MAX_DEPTH + 1):  # breadth first: a few pipelined batches per level
        objs = []
        for obj, parent in level:  # each object once, where it was first reached
            if obj not in done and len(done) < MAX_NODES:
                done.add(obj)
                objs.append((obj, parent))
        if not objs:
            break
        walk = []
        for (obj, parent), (element, states, count) in zip(objs, _describe(reader, [o for o, _ in objs])):
            parent.append(element)
            if depth < MAX_DEPTH and count > 0 and not states & MANAGES:
                walk.append((obj, element))
        replies = _batch(reader, [(bus, path, ACC, "GetChildren") for (bus, path), _ in walk])
        level = [((child_bus, child), element) for (_, element), r in zip(walk, replies) if r
                 for child_bus, child in r[0][:MAX_WIDTH]]
    return etree.tostring(root, encoding="unicode")


def _batch(reader: A11yReader, calls: list[tuple]) -> list:
    """The reader's pipelined calls, in slices each answered within its deadline."""
    return [r for i in range(0, len(calls), BATCH) for r in reader.batch(calls[i:i + BATCH])]


def _describe(reader: A11yReader, objs: list[tuple[str, str]]) -> list[tuple]:
    """(element, state bits, child count) per (bus, path), as OSWorld's _create_atspi_node makes it."""
    per = ("GetRoleName", "GetAll", "GetState", "GetAttributes", "GetInterfaces")
    r = _batch(reader, [(bus, p, PROPS, "GetAll", "s", (ACC,)) if m == "GetAll" else (bus, p, ACC, m)
                        for bus, p in objs for m in per])
    rows = [r[i * len(per):(i + 1) * len(per)] for i in range(len(objs))]
    ifaces = [set(row[4][0]) if row[4] else set() for row in rows]
    states = [from_words(row[2][0]) if row[2] else 0 for row in rows]
    extra = []  # what some objects also answer: extents, text, value, actions
    for (bus, p), st, i in zip(objs, states, ifaces):
        if st & VISIBLE_SHOWING == VISIBLE_SHOWING and COMP in i:
            extra.append(((bus, p), "box", (bus, p, COMP, "GetExtents", "u", (0,))))
        if TEXT in i:
            extra.append(((bus, p), "text", (bus, p, TEXT, "GetText", "ii", (0, -1))))
        if VALUE in i:
            extra.append(((bus, p), "value", (bus, p, PROPS, "GetAll", "s", (VALUE,))))
        if ACTION in i:
            extra.append(((bus, p), "actions", (bus, p, ACTION, "GetActions")))
    more: dict[tuple, object] = {}
    for (obj, kind, _), reply in zip(extra, _batch(reader, [c for _, _, c in extra])):
        if reply:
            more[obj, kind] = reply[0]
    return [_element(obj, row, st, i, more) for obj, row, st, i in zip(objs, rows, states, ifaces)]


def _element(path: tuple, row: list, states: int, ifaces: set, more: dict) -> tuple:
    role, props, _, attributes, _ = (x[0] if x else None for x in row)
    props = {k: v for k, (_, v) in (props or {}).items()}
    attrib = {"name": _clean(props.get("Name", ""))}
    attrib.update({f"{{{NS['st']}}}{name}": "true" for i, name in enumerate(STATE_NAMES) if i and states >> i & 1})
    attrib.update({f"{{{NS['attr']}}}{k}": _clean(v) for k, v in (attributes or {}).items() if XML_NAME.match(k)})
    if (path, "box") in more:
        x, y, w, h = more[path, "box"]
        attrib[f"{{{NS['cp']}}}screencoord"], attrib[f"{{{NS['cp']}}}size"] = str((x, y)), str((w, h))
    if IMAGE in ifaces:
        attrib["image"] = "true"
    if SELECTION in ifaces:
        attrib["selection"] = "true"
    if (path, "value") in more:
        value = {k: v for k, (_, v) in more[path, "value"].items()}
        for key, prop in (("value", "CurrentValue"), ("min", "MinimumValue"), ("max", "MaximumValue"),
                          ("step", "MinimumIncrement")):
            if prop in value:
                attrib[f"{{{NS['val']}}}{key}"] = str(value[prop])
    for name, description, keys in more.get((path, "actions"), []):
        name = name.replace(" ", "-")
        if XML_NAME.match(name + "_kb"):
            attrib[f"{{{NS['act']}}}{name}_desc"] = _clean(description)
            attrib[f"{{{NS['act']}}}{name}_kb"] = _clean(keys)
    tag = (role or "").strip().replace(" ", "-") or "unknown"
    element = etree.Element(tag if XML_NAME.match(tag) else "unknown", attrib=attrib, nsmap=NS)
    text = more.get((path, "text"), "")
    if text := _clean(text).replace("\ufffc", "").replace("\ufffd", ""):
        element.text = text
    return element, states, int(props.get("ChildCount", 0) or 0)
