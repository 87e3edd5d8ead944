"""VLC's metrics, with the semantics of OSWorld's (`metrics/vlc.py`).

The vlcrc checks read the option from every line that holds its name, commented ones included (VLC
writes an untouched option as `#name=default`), the last such line winning, and fall back to VLC's
default when none does; values compare as text. Only the recordings folder skips commented lines
and takes the first. Any failure to read is a 0, as in OSWorld.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from urllib.parse import urlparse

from computerrl.tasks.registry import metric

SLIDER_DEFAULT = "153;210;153;20;210;20;255;199;15;245;39;29"


def _option(path, needle: str, default: str) -> str:
    value = default
    with open(path, encoding="utf-8") as f:
        for line in f.read().split("\n"):
            if needle in line:
                value = line.split("=")[-1].strip()
    return value


def _vlcrc_check(name: str, needle: str, default: str, rule_key: str, normalize=lambda v: v):
    @metric(name)
    def check(config_file, rule, **_) -> float:
        try:
            want = rule[rule_key]
            return float(normalize(_option(config_file, needle, default)) == (str(want) if isinstance(want, int)
                                                                                else want))
        except Exception:  # noqa: BLE001 - no vlcrc, an unreadable one: 0, as OSWorld's
            return 0.0


_vlcrc_check("check_qt_bgcone", "qt-bgcone=", "1", "expected_qt_bgcone")
_vlcrc_check("check_qt_max_volume", "qt-max-volume=", "125", "expected_qt_max_volume")
_vlcrc_check("check_qt_minimal_view", "qt-minimal-view=", "0", "expected_qt_minimal_view")
_vlcrc_check("check_one_instance_when_started_from_file", "one-instance-when-started-from-file=", "1",
             "expected_one_instance_when_started_from_file")
_vlcrc_check("check_play_and_exit", "play-and-exit=", "0", "expected_play_and_exit")
_vlcrc_check("check_global_key_play_pause", "global-key-play-pause=", "", "expected_global_key_play_pause",
             normalize=lambda v: "0" if v == "" else "1")  # any key bound counts; none by default


@metric("check_qt_slider_colours")
def check_qt_slider_colours(config_file, rule, **_) -> float:
    try:
        value = _option(config_file, "qt-slider-colours", SLIDER_DEFAULT)
        if rule["type"] == "match":
            return float(value == rule["expected_qt_slider_colours"])
        if rule["type"] == "blackish":
            numbers = [int(n) for n in value.split(";")]
            return float(all(c < 100 for c in numbers[: len(numbers) // 3 * 3]))
    except Exception:  # noqa: BLE001
        return 0.0
    raise ValueError(f"check_qt_slider_colours: unknown rule type {rule.get('type')!r}")  # OSWorld's gives None


@metric("is_vlc_recordings_folder")
def is_vlc_recordings_folder(config_file, rule, **_) -> float:
    try:
        with open(config_file, encoding="utf-8") as f:
            for line in f.read().split("\n"):
                if line.startswith("#") or not line.strip():
                    continue
                if "input-record-path" in line:
                    return float(line.split("=")[-1].strip() == rule["recording_file_path"])
    except Exception:  # noqa: BLE001
        return 0.0
    return 0.0


@metric("is_vlc_fullscreen")
def is_vlc_fullscreen(window_size, screen_size, **_) -> float:
    if window_size is None or screen_size is None:
        return 0.0
    return float(window_size["width"] == screen_size["width"] and window_size["height"] == screen_size["height"])


def _first_info(root, names: list[str], category: str = "meta") -> str | None:
    for name in names:
        el = root.find(f'information/category[@name="{category}"]/info[@name="{name}"]')
        if el is not None and el.text:
            return el.text
    return None


@metric("is_vlc_playing")
def is_vlc_playing(status_file, rule, **_) -> float:
    """VLC plays, and what it plays is the rule's file (by name) or stream (by URL)."""
    root = ET.parse(status_file).getroot()  # no status (no VLC) raises, as OSWorld's
    if root.find("state").text != "playing":
        return 0.0
    if rule["type"] == "file_name":
        info, want = _first_info(root, ["filename", "title", "uri", "location", "name"]), rule["file_name"]
        return float(info is not None and (os.path.basename(info) == want or info.endswith(want)))
    if rule["type"] == "url":
        want = rule["url"]
        info = _first_info(root, ["url", "URI", "location", "title", "filename"]) or \
            _first_info(root, ["Codec", "Type", "Language"], "Stream 0")
        if info is None:
            return 0.0
        if want in info or info.endswith(want) or info == os.path.basename(urlparse(want).path):
            return 1.0
        got, wanted = urlparse(info), urlparse(want)
        return float("://" in info and got.netloc == wanted.netloc and wanted.path in got.path)
    return 0.0
