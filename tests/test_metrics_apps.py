"""GIMP's and Thunderbird's metrics and OSWorld's general file metrics, on files made here that agree and
disagree (no desktop)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from PIL import Image, ImageDraw, ImageEnhance, ImageFilter

import computerrl.tasks.metrics  # noqa: F401 - registers every metric
from computerrl.tasks.metrics import apps as metrics_apps
from computerrl.tasks.registry import METRICS


def m(name, *args, **options):
    return METRICS[name](*args, **options)


@pytest.fixture
def photo(tmp_path):
    """A small picture with structure: stripes, a disc and a gradient."""
    img = Image.new("RGB", (96, 64), (40, 120, 200))
    draw = ImageDraw.Draw(img)
    for x in range(0, 96, 12):
        draw.rectangle((x, 0, x + 5, 63), fill=(200, 180, 60))
    draw.ellipse((30, 15, 70, 55), fill=(180, 40, 40))
    img.save(tmp_path / "orig.png")
    return tmp_path / "orig.png"


def save(img, tmp_path, name):
    img.save(tmp_path / name)
    return str(tmp_path / name)


def test_structure_brightness_saturation_contrast_and_mirror(photo, tmp_path):
    orig = Image.open(photo)
    assert m("check_structure_sim", str(photo), str(photo)) == 1.0
    assert m("check_structure_sim", save(orig.rotate(90, expand=True), tmp_path, "rot.png"), str(photo)) == 0.0
    darker = save(ImageEnhance.Brightness(orig).enhance(0.6), tmp_path, "dark.png")
    assert m("check_brightness_decrease_and_structure_sim", darker, str(photo)) == 1.0
    assert m("check_brightness_decrease_and_structure_sim", str(photo), darker) == 0.0  # brighter, not darker
    h, sat, v = orig.convert("HSV").split()  # more saturated, hue and value kept (as GIMP's Saturation does)
    vivid = save(Image.merge("HSV", (h, sat.point(lambda x: min(255, int(x * 1.3))), v)).convert("RGB"),
                 tmp_path, "vivid.png")
    assert m("check_saturation_increase_and_structure_sim", vivid, str(photo)) == 1.0
    assert m("check_saturation_increase_and_structure_sim", str(photo), vivid) == 0.0
    sharp = save(ImageEnhance.Contrast(orig).enhance(1.5), tmp_path, "contrast.png")
    assert m("check_contrast_increase_and_structure_sim", sharp, str(photo)) == 1.0
    assert m("check_contrast_increase_and_structure_sim", darker, str(photo)) == 0.0
    mirrored = save(orig.transpose(Image.Transpose.FLIP_LEFT_RIGHT), tmp_path, "mirror.png")
    assert m("check_image_mirror", mirrored, str(photo)) == 1.0
    assert m("check_image_mirror", str(photo), str(photo)) == 0.0
    palette = save(orig.convert("P", palette=Image.Palette.ADAPTIVE, colors=16), tmp_path, "pal.png")
    assert m("check_palette_and_structure_sim", palette, str(photo)) == 1.0
    assert m("check_palette_and_structure_sim", str(photo), str(photo)) == 0.0  # not a palette image
    assert m("check_structure_sim", None, str(photo)) == 0.0


def test_sharper_is_opencvs_laplacian_variance(photo, tmp_path):
    orig = Image.open(photo)
    sharpened = save(orig.filter(ImageFilter.UnsharpMask(radius=2, percent=150)), tmp_path, "sharp.png")
    blurred = save(orig.filter(ImageFilter.GaussianBlur(1.5)), tmp_path, "blur.png")
    assert m("check_sharper", sharpened, str(photo)) == 1.0
    assert m("check_sharper", blurred, str(photo)) == 0.0
    assert m("check_sharper", str(photo), str(photo)) == 0.0  # as sharp is not sharper
    assert m("check_sharper", str(tmp_path / "missing.png"), str(photo)) == 0.0
    spot = Image.new("L", (3, 3))
    spot.putpixel((1, 1), 9)  # Laplacian [[0,18,0],[18,-36,18],[0,18,0]] with borders reflected as cv2's
    assert metrics_apps._sharpness(spot) == 272.0


def test_sizes_positions_and_backgrounds(photo, tmp_path):
    orig = Image.open(photo)
    big = save(orig.resize((192, 128)), tmp_path, "big.png")
    assert m("check_image_size", big, {"width": 192, "height": 128}) == 1.0
    assert m("check_image_size", big, {"height": 64}) == 0.0
    assert m("check_structure_sim_resized", big, str(photo)) == 1.0
    assert m("check_image_file_size", str(photo), {"max_size": 10_000_000}) == 1.0
    assert m("check_image_file_size", str(photo), {"max_size": 10}) == 0.0

    def canvas(name, box):
        img = Image.new("RGB", (100, 100), "white")
        ImageDraw.Draw(img).polygon(box, fill="blue")
        ImageDraw.Draw(img).rectangle((0, 0, 99, 0), fill="black")  # a third, most rare colour
        return save(img, tmp_path, name)

    assert m("check_triangle_position", canvas("mid.png", [(40, 60), (60, 60), (50, 40)])) == 1.0
    assert m("check_triangle_position", canvas("corner.png", [(5, 25), (25, 25), (15, 5)])) == 0.0
    text = Image.new("RGB", (100, 40), "white")
    ImageDraw.Draw(text).rectangle((2, 10, 30, 20), fill="black")
    assert m("check_textbox_on_leftside", save(text, tmp_path, "left.png")) == 1.0
    assert m("check_textbox_on_leftside", save(text.transpose(Image.Transpose.FLIP_LEFT_RIGHT), tmp_path, "r.png")) == 0.0
    shape = Image.new("RGB", (50, 50), "black")
    ImageDraw.Draw(shape).rectangle((10, 10, 20, 20), fill="white")
    green = Image.new("RGB", (50, 50), (0, 200, 0))
    assert m("check_green_background", save(green, tmp_path, "g.png"), save(shape, tmp_path, "s.png")) == 1.0
    assert m("check_green_background", save(shape, tmp_path, "s2.png"), save(shape, tmp_path, "s3.png")) == 0.0


def test_gimp_config_status(tmp_path):
    rc = tmp_path / "sessionrc"
    rc.write_text('# GIMP sessionrc\n(session-info "toolbox"\n    (position 10 20))\n(hide-docks yes)\n(single-window-mode no)\n')
    assert m("check_config_status", str(rc), {"key": "hide-docks", "value": "yes"}) == 1.0
    assert m("check_config_status", str(rc), {"key": "single-window-mode", "value": "yes"}) == 0.0
    gimprc = tmp_path / "gimprc"
    gimprc.write_text('(theme "Light")\n(undo-levels 100)\n')
    assert m("check_config_status", str(gimprc), {"key": "theme", "value": '"Light"'}) == 1.0
    assert m("check_config_status", None, {"key": "theme", "value": '"Light"'}) == 0.0


def test_thunderbird_prefs_and_filters(tmp_path):
    prefs = tmp_path / "prefs.js"
    prefs.write_text('// Mozilla User Preferences\nuser_pref("mail.identity.id1.auto_quote", false);\n'
                     'user_pref("extensions.activeThemeID", "thunderbird-compact-dark@mozilla.org");\n'
                     'user_pref("mail.server.default.autosync_offline_stores", true);\n')
    assert m("check_thunderbird_prefs", str(prefs), {"expect": {
        "mail.identity.id1.auto_quote": {"method": "eq", "ref": False},
        "extensions.activeThemeID": {"method": "re", "ref": "dark"}}}) == 1.0
    assert m("check_thunderbird_prefs", str(prefs), {"expect": {
        "mail.identity.id1.auto_quote": {"method": "eq", "ref": True}}}) == 0.0
    assert m("check_thunderbird_prefs", str(prefs), {"expect": {"mail.missing": {"method": "eq", "ref": 1}}}) == 0.0
    assert m("check_thunderbird_prefs", str(prefs), {"unexpect": {
        "mail.server.default.autosync_offline_stores": {"method": "eq", "ref": True}}}) == 0.0
    rules = tmp_path / "msgFilterRules.dat"
    rules.write_text('version="9"\nlogging="no"\nname="Promotions"\nenabled="yes"\ntype="17"\n'
                     'action="Move to folder"\nactionValue="mailbox://nobody@Local%20Folders/Promotions"\n'
                     'condition="AND (subject,contains,discount)"\n')
    want = {"enabled": "yes", "action": "Move to folder", "actionValue": "mailbox://nobody@Local%20Folders/Promotions",
            "condition": ["AND (subject,contains,discount)"]}
    assert m("check_thunderbird_filter", str(rules), {"expect": [want]}) == 1.0
    assert m("check_thunderbird_filter", str(rules), {"expect": [{**want, "enabled": "no"}]}) == 0.0
    assert m("check_thunderbird_filter", str(rules), {"expect": [], "unexpect": [{"name": "Promotions"}]}) == 0.0
    assert "check_thunderbird_folder" not in METRICS  # refused: OSWorld's never compares a message


def test_general_file_metrics(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"a": {"b": ["smart", 1]}, "c": "folderTree smart"}))
    rule = {"expect": [{"key": ["c"], "method": "re", "ref": r"\bsmart\b"}]}
    assert m("check_json", str(tmp_path / "x.json"), rule) == 1.0
    assert m("check_json", str(tmp_path / "x.json"), {"expect": [{"key": ["a", "b"], "method": "eq", "ref": ["smart", 1]}],
                                                     "unexpect": [{"key": ["zz"], "method": "eq", "ref": 1}]}) == 1.0
    assert m("check_json", str(tmp_path / "x.json"), {"expect": [{"key": ["missing"], "method": "eq", "ref": 1}]}) == 0.0
    (tmp_path / "a.csv").write_text("url,user\nimap://x,anna\n")
    assert m("check_csv", str(tmp_path / "a.csv"), {"expect": [{"user": "anna"}]}) == 1.0
    assert m("check_csv", str(tmp_path / "a.csv"), {"unexpect": [{"url": "imap://x", "user": "anna"}]}) == 0.0
    db = tmp_path / "g.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("create table t (starred int)")
        conn.execute("insert into t values (1)")
    assert m("run_sqlite3", str(db), {"sql": "select sum(starred) > 0 from t"}) == 1.0
    assert m("run_sqlite3", str(db), {"sql": "select sum(starred) > 1 from t"}) == 0.0
    (tmp_path / "1.txt").write_text("a\nb\nc\nd\n")
    (tmp_path / "2.txt").write_text("a\nb\nx\nd\n")
    assert m("diff_text_file", str(tmp_path / "1.txt"), str(tmp_path / "1.txt")) == 1.0
    assert m("diff_text_file", str(tmp_path / "2.txt"), str(tmp_path / "1.txt")) == pytest.approx(0.75)
    (tmp_path / "sar.txt").write_text("CPU %user %idle\n12:00:01 1\n12:00:02 2\nno time\n")
    assert m("file_contains", str(tmp_path / "sar.txt"), {"expected": ["CPU", "%idle"]}) == 1.0
    assert m("file_contains", str(tmp_path / "sar.txt"), {"expected": ["%steal"]}) == 0.0
    assert m("check_line_number", str(tmp_path / "sar.txt"), {"expected": "2"}) == 1.0
    assert m("check_line_number", str(tmp_path / "sar.txt"), {"expected": "3"}) == 0.0
    apps = "['thunderbird.desktop', 'google-chrome.desktop']\n"
    assert m("check_gnome_favorite_apps", apps, {"expected": ["google-chrome.desktop", "thunderbird.desktop"]}) == 1.0
    assert m("check_gnome_favorite_apps", apps, {"expected": ["google-chrome.desktop"]}) == 0.0
    with pytest.raises(ValueError):  # read as a literal, never run: a call is not a list of apps
        m("check_gnome_favorite_apps", "__import__('os').system('true')", {"expected": []})
