"""Linearization, pruning and D-Bus marshalling of envs/desktop/a11y.py on synthetic data (no desktop)."""

from __future__ import annotations

import time

import pytest
from jeepney import DBusAddress, new_error, new_method_call, new_method_return
from jeepney.low_level import Message

from computerrl.envs.desktop.a11y import A11yError, A11yReader, Node, RawNode, _call, _replies, linearize, prune


def raw(path, parent, role="push button", name="", box=(0, 0, 10, 10), **kw):
    return RawNode(path, parent, role, name, box=box, **kw)


def test_linearize_is_a_table_with_box_centres():
    text = linearize([Node("push button", "OK", "", 100, 200, 40, 20), Node("table cell", "A1", "hello", 0, 0, 3, 5)])
    assert text.splitlines() == ["tag\tname\ttext\tposition\tsize",
                                 "push-button\tOK\t\t(120, 210)\t(40, 20)",
                                 "table-cell\tA1\thello\t(1, 2)\t(3, 5)"]


def test_linearize_escapes_line_breaks_and_tabs_and_truncates_long_fields():
    line = linearize([Node("paragraph", "n" * 300, "one\ntwo\tthree\r", 0, 0, 1, 1)]).splitlines()[1]
    tag, name, text, *_ = line.split("\t")
    assert text == "one\\ntwo\\tthree" and len(line.split("\t")) == 5
    assert len(name) == 100 and name.endswith("…")


@pytest.mark.parametrize("n, budget, shown, trailer", [(5, 5, 5, None), (6, 5, 4, "... 2 more nodes"), (0, 5, 0, None)])
def test_linearize_budget_keeps_the_first_nodes_and_counts_the_rest(n, budget, shown, trailer):
    lines = linearize([Node("label", f"n{i}", "", 0, 0, 1, 1) for i in range(n)], budget).splitlines()
    body = [ln for ln in lines[1:] if not ln.startswith("...")]
    assert [ln.split("\t")[1] for ln in body] == [f"n{i}" for i in range(shown)]
    assert (lines[-1] if trailer else None) == trailer
    assert len(lines) - 1 <= budget


def test_prune_drops_subtrees_of_empty_or_offscreen_boxes():
    nodes = prune([raw("w", None, "frame", "Win", (0, 0, 100, 100)),
                   raw("bar", "w", "menu bar", "", (0, 19, 100, 0)),      # zero height: subtree hidden
                   raw("m", "bar", "menu", "File", (0, 19, 30, 19)),
                   raw("off", "w", "menu item", "Gone", (-2147483648, -2147483648, 1, 1)),
                   raw("ok", "w", "push button", "OK", (10, 10, 5, 5))])
    assert [n.name for n in nodes] == ["Win", "OK"]


def test_prune_drops_empty_layout_containers_but_keeps_their_children():
    nodes = prune([raw("w", None, "frame", "Win", (0, 0, 100, 100)),
                   raw("p", "w", "panel", "", (0, 0, 50, 50)),
                   raw("b", "p", "push button", "", (1, 1, 5, 5)),                 # unnamed, but not layout
                   raw("named", "w", "panel", "Properties", (0, 0, 5, 5)),
                   raw("status", "w", "label", "", (0, 0, 5, 5), text="Sheet 1 of 1"),
                   raw("empty", "w", "label", "", (0, 0, 5, 5)),
                   raw("nobox", "w", "filler", "", None),                          # no Component
                   raw("inside", "nobox", "text", "", (2, 2, 5, 5), text="typed")])
    assert [(n.role, n.name or n.text) for n in nodes] == [
        ("frame", "Win"), ("push button", ""), ("panel", "Properties"), ("label", "Sheet 1 of 1"), ("text", "typed")]


def test_prune_moves_a_vcl_root_pane_onto_its_gtk_host_and_resets_inside_gtk_widgets():
    # LibreOffice gtk3: the GTK panel hosting the VCL root pane starts at y=44, the root pane
    # claims y=19; a GTK entry embedded back into VCL reports its position right.
    nodes = prune([raw("win", None, "frame", "Calc", (0, 0, 1920, 1080)),
                   raw("host", "win", "panel", "", (0, 44, 1920, 1036)),
                   raw("rp", "host", "root pane", "Calc", (0, 19, 1920, 1036), relinked=True),
                   raw("tb", "rp", "tool bar", "Standard", (0, 19, 1262, 39)),
                   raw("new", "tb", "push button", "New", (4, 21, 44, 35)),
                   raw("vclbox", "rp", "panel", "Name Box", (4, 99, 162, 34)),
                   raw("gtk", "vclbox", "text", "", (4, 124, 126, 34), text="A1", relinked=True),
                   raw("cell", "rp", "table cell", "A1", (41, 157, 82, 17))])
    pos = {n.name or n.text: (n.x, n.y) for n in nodes}
    assert pos == {"Calc": (0, 44), "Standard": (0, 44), "New": (4, 46), "Name Box": (4, 124), "A1": (41, 182)}
    assert [n.text for n in nodes if n.role == "text"] == ["A1"]
    assert next(n for n in nodes if n.role == "text").y == 124  # not moved twice


def test_prune_ignores_relinks_other_than_root_panes_and_keeps_states():
    nodes = prune([raw("w", None, "frame", "W", (0, 0, 100, 100), states=frozenset({"active"})),
                   raw("x", "w", "push button", "B", (5, 5, 10, 10), relinked=True, states=frozenset({"focused"}))])
    assert [(n.x, n.y, n.states) for n in nodes] == [(0, 0, frozenset({"active"})), (5, 5, frozenset({"focused"}))]


def test_hand_marshalled_calls_parse_as_the_same_dbus_messages():
    data = _call(7, ":1.2", "/org/a11y/atspi/accessible/12", "org.a11y.atspi.Table", "GetAccessibleAt", "ii", (3, -4))
    msg = Message.from_buffer(data)
    ref = new_method_call(DBusAddress("/org/a11y/atspi/accessible/12", ":1.2", "org.a11y.atspi.Table"),
                          "GetAccessibleAt", "ii", (3, -4))
    assert msg.header.serial == 7 and msg.body == (3, -4) and msg.header.fields == ref.header.fields
    msg = Message.from_buffer(_call(8, ":1.2", "/p", "org.freedesktop.DBus.Properties", "Get", "ss", ("a.b", "Näme")))
    assert msg.body == ("a.b", "Näme")
    assert Message.from_buffer(_call(9, ":1.2", "/p", "i.f", "GetExtents", "u", (0,))).body == (0,)


def test_reply_scanner_returns_bodies_by_serial_keeps_partial_messages_and_skips_signals():
    calls = [new_method_call(DBusAddress("/p", ":1.2", "i.f"), "M") for _ in range(3)]
    for serial, c in enumerate(calls, 1):
        c.header.serial = serial
    stream = (new_method_return(calls[0], "a(so)", ([(":1.2", "/a"), (":1.2", "/b")],)).serialise(100)
              + new_error(calls[1], "org.a11y.Error").serialise(101)
              + new_method_return(calls[2], "(iiii)", ((1, 2, 3, 4),)).serialise(102))
    buf = bytearray(stream[:-5])
    assert _replies(buf) == [(1, ([(":1.2", "/a"), (":1.2", "/b")],)), (2, None)]
    buf += stream[-5:]
    assert _replies(buf) == [(3, ((1, 2, 3, 4),))] and buf == bytearray()


def test_reader_on_a_missing_bus_raises_a11y_error_quickly_and_closes_twice():
    reader = A11yReader("unix:path=/nonexistent/bus", timeout_s=0.5)
    t = time.monotonic()
    with pytest.raises(A11yError):
        reader.tree(1234)
    assert time.monotonic() - t < 2
    reader.close()
    reader.close()
