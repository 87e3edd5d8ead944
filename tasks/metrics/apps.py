"""GIMP's and Thunderbird's metrics and OSWorld's general file metrics, with the semantics of OSWorld's
(`metrics/gimp.py`, `metrics/thunderbird.py`, `metrics/general.py`, `metrics/basic_os.py`).

The first argument is the agent's result, the second the gold or the original image. The image checks
compare structure by SSIM (scikit-image, threshold 0.9 unless said), on equal sizes only.
Refused (not registered, so `tasks check` names the tasks that use them):
- check_thunderbird_folder: OSWorld's skips every message it reads (`if mail.strip(): continue`), so it
  scores 1 whenever both folders are non-empty: a reward an agent would learn to take for nothing.
compare_archive is in files.py, reading archives within caps.
"""

from __future__ import annotations

import ast
import csv
import difflib
import json
import os
import re
import sqlite3

from computerrl.tasks.metrics.table import match_value_to_rule
from computerrl.tasks.registry import metric

SSIM_THRESHOLD = 0.9


def _image(path):
    from PIL import Image

    if not path or not os.path.exists(path) or os.path.getsize(path) == 0:
        return None
    img = Image.open(path)
    img.load()
    return img


def same_structure(img1, img2, threshold: float = SSIM_THRESHOLD) -> bool:
    """SSIM of the two images in RGB (alpha dropped) at least `threshold`; images of different sizes never."""
    import numpy as np
    from skimage.metrics import structural_similarity

    if min(img1.size) < 7 or min(img2.size) < 7 or img1.size != img2.size:
        return False
    a, b = (np.array(i if i.mode == "RGB" else i.convert("RGB")) for i in (img1, img2))
    try:
        return structural_similarity(a, b, win_size=7, channel_axis=2) >= threshold
    except ValueError:
        return False


def _close_by_mse(img1, img2, threshold: float = 0.03) -> bool:
    import numpy as np
    from PIL import Image

    if img1.size != img2.size:
        img1 = img1.resize(img2.size, Image.Resampling.LANCZOS)
    a, b = (np.asarray(i.convert("RGB"), dtype=np.float32) / 255 for i in (img1, img2))
    return float(np.mean((a - b) ** 2)) < threshold


def _brightness(img) -> float:
    from PIL import ImageStat

    return ImageStat.Stat(img.convert("L")).mean[0]


def _normalized_brightness(img, target: float = 128):
    factor = target / _brightness(img)
    return img.point(lambda x: min(255, max(0, int(x * factor))))


def _saturation(img) -> float:
    import numpy as np

    return float(np.mean(np.asarray(img.convert("HSV"))[:, :, 1]))


def _pair(src, tgt):
    return (None, None) if not src or not tgt else (_image(src), _image(tgt))


# ---- GIMP --------------------------------------------------------------------------------------
@metric("check_structure_sim")
def check_structure_sim(src_path, tgt_path, **_) -> float:
    try:
        src, tgt = _pair(src_path, tgt_path)
        return float(src is not None and tgt is not None and same_structure(src, tgt))
    except Exception:  # noqa: BLE001 - not an image: 0, as OSWorld's
        return 0.0


@metric("check_structure_sim_resized")
def check_structure_sim_resized(src_path, tgt_path, **_) -> float:
    """The result, cropped to what is not transparent and resized to the original's size, has its structure."""
    src, tgt = _pair(src_path, tgt_path)
    if src is None or tgt is None:
        return 0.0
    if src.mode in ("RGBA", "LA") or "transparency" in src.info:
        box = src.convert("RGBA").getchannel("A").getbbox()
        if box is None:
            return 0.0
        src = src.convert("RGBA").crop(box).convert("RGB")
    return float(same_structure(src.resize(tgt.size), tgt.convert("RGB")))


@metric("check_structure_sim_with_threshold")
def check_structure_sim_with_threshold(src_path, tgt_path, **options) -> float:
    from PIL import Image

    try:
        src, tgt = _pair(src_path, tgt_path)
        if src is None or tgt is None:
            return 0.0
        if src.size != tgt.size:
            src = src.resize(tgt.size, Image.Resampling.LANCZOS)
        return float(same_structure(src, tgt, options.get("ssim_threshold", 0.85)))
    except Exception:  # noqa: BLE001
        return 0.0


@metric("check_brightness_decrease_and_structure_sim")
def check_brightness_decrease_and_structure_sim(src_path, tgt_path, threshold: float = 0.03, **_) -> float:
    src, tgt = _pair(src_path, tgt_path)
    if src is None or tgt is None:
        return 0.0
    darker = _brightness(tgt) > _brightness(src)
    return float(darker and _close_by_mse(_normalized_brightness(src), _normalized_brightness(tgt), threshold))


@metric("check_saturation_increase_and_structure_sim")
def check_saturation_increase_and_structure_sim(src_path, tgt_path, **_) -> float:
    src, tgt = _pair(src_path, tgt_path)
    if src is None or tgt is None:
        return 0.0
    hsv_src, hsv_tgt = src.convert("HSV"), tgt.convert("HSV")
    more = _saturation(tgt) < _saturation(src)
    return float(more and all(same_structure(hsv_src.getchannel(band), hsv_tgt.getchannel(band)) for band in "HV"))


@metric("check_contrast_increase_and_structure_sim")
def check_contrast_increase_and_structure_sim(src_path, tgt_path, **_) -> float:
    import numpy as np

    src, tgt = _pair(src_path, tgt_path)
    if src is None or tgt is None:
        return 0.0
    higher = float(np.std(np.asarray(tgt, dtype=np.float32))) < float(np.std(np.asarray(src, dtype=np.float32)))
    return float(higher and same_structure(src, tgt, 0.65))


@metric("check_palette_and_structure_sim")
def check_palette_and_structure_sim(src_path, tgt_path, **_) -> float:
    try:
        src, tgt = _pair(src_path, tgt_path)
        return float(src is not None and tgt is not None and src.mode == "P"
                     and same_structure(src.convert("RGB"), tgt))
    except Exception:  # noqa: BLE001
        return 0.0


@metric("check_file_exists_and_structure_sim")
def check_file_exists_and_structure_sim(src_path, tgt_path, **_) -> float:
    if not src_path or not tgt_path or not os.path.isfile(src_path):
        return 0.0
    src, tgt = _pair(src_path, tgt_path)
    return float(src is not None and tgt is not None and same_structure(src, tgt))


@metric("check_image_mirror")
def check_image_mirror(src_path, tgt_path, **_) -> float:
    from PIL import Image

    src, tgt = _pair(src_path, tgt_path)
    if src is None or tgt is None:
        return 0.0
    return float(same_structure(src.transpose(Image.Transpose.FLIP_LEFT_RIGHT), tgt, 0.99))


def _sharpness(img) -> float:
    """OpenCV's measure, as OSWorld takes it: the variance of the 3x3 Laplacian of the grey image,
    borders reflected without repeating the edge (cv2's default)."""
    import numpy as np

    g = np.pad(np.asarray(img.convert("RGB").convert("L"), dtype=np.float64), 1, mode="reflect")
    lap = g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:] - 4 * g[1:-1, 1:-1]
    return float(np.var(lap))


@metric("check_sharper")
def check_sharper(src_path, tgt_path, **_) -> float:
    """The result is sharper than the original. As OSWorld's, nothing says it is the same picture: the
    task pairs it with another check (multi_apps/bb7db4c2: the page's background is the result)."""
    src, tgt = _pair(src_path, tgt_path)
    if src is None or tgt is None:
        return 0.0
    return float(_sharpness(src) > _sharpness(tgt))


@metric("check_green_background")
def check_green_background(src_path, tgt_path, **_) -> float:
    """Where the original is not black, the result is green (green above red and blue). As OSWorld's, the
    pixel at (x, y) is read as row x, column y: an image that is not square may raise."""
    import numpy as np

    src, tgt = _pair(src_path, tgt_path)
    if src is None or tgt is None:
        return 0.0
    s, t = np.array(src), np.array(tgt)
    for x in range(tgt.width):
        for y in range(tgt.height):
            if tuple(t[x, y][:3]) != (0, 0, 0):
                r, g, b = (int(c) for c in s[x, y][:3])
                if not (g > r and g > b):
                    return 0.0
    return 1.0


@metric("check_textbox_on_leftside")
def check_textbox_on_leftside(src_path, *_, **__) -> float:
    import numpy as np

    img = _image(src_path)
    if img is None:
        return 0.0
    dark = np.asarray(img.convert("L")) < 128
    columns = [int(np.argmax(row)) for row in dark if row.any()]
    return float(bool(columns) and min(columns) < 0.05 * img.width)


@metric("check_triangle_position")
def check_triangle_position(tgt_path, *_, **__) -> float:
    """The triangle (as OSWorld's picks it: the image's second least frequent colour) centred within 5 %."""
    import numpy as np

    img = _image(tgt_path)
    if img is None:
        return 0.0
    arr = np.array(img)
    colors, counts = np.unique(arr.reshape(-1, arr.shape[2]), axis=0, return_counts=True)
    color = colors[np.argsort(counts)][1]
    centroid = np.argwhere(np.all(arr == color, axis=2)).mean(axis=0)
    middle = np.array(arr.shape[:2]) / 2
    return float(bool(np.all(np.abs(centroid - middle) < 0.05 * np.array(arr.shape[:2]))))


@metric("check_image_size")
def check_image_size(src_path, rule, **_) -> float:
    img = _image(src_path)
    if img is None:
        return 0.0
    if rule.get("ignore_transparent", False) and img.mode in ("RGBA", "LA") or "transparency" in img.info:
        box = img.convert("RGBA").getchannel("A").getbbox()
        width, height = (box[2] - box[0], box[3] - box[1]) if box else (0, 0)
    else:
        width, height = img.size
    return float((rule.get("height") is None or height == rule["height"])
                 and (rule.get("width") is None or width == rule["width"]))


@metric("check_image_file_size")
def check_image_file_size(src_path, rule, **_) -> float:
    return float(bool(src_path) and os.path.getsize(src_path) < rule["max_size"])


@metric("check_config_status")
def check_config_status(actual_config_path, rule, **_) -> float:
    """A line of GIMP's config file (gimprc, sessionrc) setting `key` (or a two-word key) to `value`."""
    if not actual_config_path:
        return 0.0
    key, value = rule["key"], rule["value"]
    with open(actual_config_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("#") or line == "\n":
                continue
            items = line.strip().lstrip("(").rstrip(")\n").split()
            if isinstance(key, str) and items[0] == key and items[-1] == value:
                return 1.0
            if isinstance(key, list) and len(key) == 2 and items[:2] == key and items[-1] == value:
                return 1.0
    return 0.0


@metric("compare_image_list")
def compare_image_list(pred_img_path_list, gold_img_path_list, **_) -> float:
    from PIL import Image, ImageChops

    preds, golds = ((pred_img_path_list, gold_img_path_list) if isinstance(pred_img_path_list, list)
                    else ([pred_img_path_list], [gold_img_path_list]))
    for pred, gold in zip(preds, golds):
        if not pred or not gold:
            return 0.0
        p, g = Image.open(pred), Image.open(gold)
        if p.size != g.size:
            p = p.resize(g.size, Image.Resampling.LANCZOS)
        if ImageChops.difference(p.convert(g.mode), g).getbbox() is not None:
            return 0.0
    return 1.0


# ---- Thunderbird -------------------------------------------------------------------------------
PREF = re.compile(r'^user_pref\("(?P<key>(?:[^"]|\\")+)\", (?P<val>.+)\);$')
FILTER_CONDITION = re.compile(r'\b(?:AND|OR) \((?:[\w ]+),(?:[\w \']+),(?:"(?:(?:[^"]|\")+)"|(?:[^)]+))\)|\bALL\b')


@metric("check_thunderbird_prefs")
def check_thunderbird_prefs(result, rule, **_) -> float:
    """Each `expect` preference present in prefs.js and matching; no `unexpect` one matching."""
    if not result:
        return 0.0
    expect, unexpect = rule.get("expect", {}), rule.get("unexpect", {})
    seen, clean = dict.fromkeys(expect, False), True
    with open(result, encoding="utf-8", errors="replace") as f:
        for line in f:
            match = PREF.match(line.strip())
            if match is None:
                continue
            key, value = match["key"], json.loads(match["val"])
            if key in expect:
                seen[key] = match_value_to_rule(value, expect[key])
            elif key in unexpect:
                clean = clean and not match_value_to_rule(value, unexpect[key])
    return float(all(seen.values()) and clean)


@metric("check_thunderbird_filter")
def check_thunderbird_filter(result, rules, **_) -> float:
    """Each `expect` record matched by a message filter of msgFilterRules.dat, no `unexpect` one by any."""
    if not result:
        return 0.0

    def text(v: str) -> str:
        return v.replace('\\"', '"').replace("\\\\", "\\")

    filters, current = [], {}
    with open(result, encoding="utf-8", errors="replace") as f:
        for line in f:
            for key in ("name", "enabled", "type", "action", "actionValue", "condition"):
                if line.startswith(f"{key}="):
                    value = text(line[len(key) + 2:-2])
                    if key == "name":
                        current = {"name": value}
                    elif key == "condition":
                        current["condition"] = FILTER_CONDITION.findall(value)
                        filters.append(current)
                    else:
                        current[key] = value
                    break

    return float(_records_match(filters, rules))


# ---- OSWorld's general file metrics ---------------------------------------------------------------
def _records_match(rows: list[dict], rules: dict) -> bool:
    def matches(pattern: dict, record: dict) -> bool:
        return all(k in record and record[k] == v for k, v in pattern.items())

    return (all(any(matches(p, r) for r in rows) for p in rules.get("expect", []))
            and not any(matches(p, r) for r in rows for p in rules.get("unexpect", [])))


@metric("check_csv")
def check_csv(result, rules, **_) -> float:
    if not result:
        return 0.0
    with open(result, newline="", encoding="utf-8", errors="replace") as f:
        return float(_records_match(list(csv.DictReader(f)), rules))


@metric("check_json")
def check_json(result, rules, **options) -> float:
    """Each `expect` rule's value (found by its `key` path) matching; no `unexpect` one's."""
    if not result or not os.path.exists(result):
        return 0.0
    try:
        with open(result, encoding="utf-8") as f:
            if options.get("is_yaml", False):
                import yaml

                data = yaml.safe_load(f)
            else:
                data = json.load(f)
    except Exception:  # noqa: BLE001 - not JSON (or YAML): 0, as OSWorld's
        return 0.0
    if data is None:
        return 0.0
    try:
        ok = True
        for r in rules.get("expect", []):
            value = data
            for k in r["key"]:
                try:
                    value = value[k]
                except (KeyError, TypeError, IndexError):
                    return 0.0
            ok = ok and match_value_to_rule(value, r)
        for r in rules.get("unexpect", []):
            value = data
            for k in r["key"]:
                try:
                    value = value[k]
                except (KeyError, TypeError, IndexError):
                    value = None
                    break
            ok = ok and not match_value_to_rule(value, r)
        return float(ok)
    except Exception:  # noqa: BLE001
        return 0.0


@metric("run_sqlite3")
def run_sqlite3(result, rules, **_) -> float:
    """The first value of `rules["sql"]` on the result database (e.g. whether a message is starred)."""
    with sqlite3.connect(f"file:{result}?mode=ro", uri=True) as conn:
        value = conn.execute(rules["sql"]).fetchone()[0]
    return float(value or 0)


@metric("diff_text_file")
def diff_text_file(result, expect, **_) -> float:
    if not result or not expect:
        return 0.0
    with open(result, encoding="utf-8", errors="replace") as a, open(expect, encoding="utf-8", errors="replace") as b:
        return difflib.SequenceMatcher(a=a.read().splitlines(), b=b.read().splitlines()).ratio()


@metric("file_contains")
def file_contains(file_path, config, **_) -> float:
    try:
        with open(file_path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        return float(all(s in text for s in config["expected"]))
    except Exception:  # noqa: BLE001
        return 0.0


@metric("check_line_number")
def check_line_number(file_path, line_number, **_) -> float:
    """As many lines with a time of day (hh:mm:ss) as expected."""
    try:
        with open(file_path, encoding="utf-8", errors="replace") as f:
            count = sum(1 for line in f if re.search(r"([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)", line))
        return float(count == int(line_number["expected"]))
    except Exception:  # noqa: BLE001
        return 0.0


@metric("check_gnome_favorite_apps")
def check_gnome_favorite_apps(apps_str, rule, **_) -> float:
    apps = ast.literal_eval(apps_str.strip())  # gsettings prints a Python-like list; never eval'd as code
    return float(len(apps) == len(rule["expected"]) and set(apps) == set(rule["expected"]))


@metric("compare_conference_city_in_order")
def compare_conference_city_in_order(actual_city_list_path, expected_city, **_) -> float:
    """C2:C22 of the active sheet, in order, each holding (as a part, accents and case aside) its expected
    city or one of its alternatives."""
    import unicodedata

    def norm(value) -> str:
        text = unicodedata.normalize("NFKD", str(value))
        text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
        return re.sub(r"[^a-z0-9]+", " ", text).strip()

    import openpyxl

    sheet = openpyxl.load_workbook(actual_city_list_path).active
    actual = [sheet[f"C{row}"].value for row in range(2, 23)]
    try:
        for i, want in enumerate(expected_city["expected"]):
            candidates = want if isinstance(want, list) else [want]
            if not any(norm(c) and norm(c) in norm(actual[i]) for c in candidates):
                return 0.0
    except Exception:  # noqa: BLE001 - fewer rows than expected: 0, as OSWorld's
        return 0.0
    return 1.0
