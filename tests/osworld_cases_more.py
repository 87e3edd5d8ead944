"""More cases for test_osworld_differential.py: the metrics added for OSWorld's files nobody here tuned for
(Writer words and records, Impress colours, GNOME text scaling, the clipboard, audio and video)."""

from __future__ import annotations

from pathlib import Path

import docx
from pptx import Presentation
from pptx.dml.color import RGBColor


def writer_cases(tmp: Path, add) -> None:
    def doc(name, lines):
        d = docx.Document()
        for line in lines:
            d.add_paragraph(line)
        d.save(tmp / name)
        return str(tmp / name)

    answers = {"expected": ["Paris", "Rome", "Madrid", "Berlin"]}
    for name, lines in (("exact", ["Paris", "Rome", "Madrid"]), ("typo", ["Pariss Rome", "", "Madird"]),
                        ("two words", ["Paris Rome"]), ("four words", ["Paris Rome Madrid Berlin"]),
                        ("unrelated", ["cat dog owl"])):
        add("fuzzy_place_math", name, doc(f"place-{name}.docx", lines), answers)

    initial = ["Train records", "2024-01-02, T1, Oslo, Bergen", "2024-01-02, T1, Oslo, Bergen",
               "2024-01-03, T2, Oslo, Trondheim", "2024-01-04, T3, Bergen, Oslo"]
    gold = doc("trains-gold.docx", [initial[0], *initial[2:]])
    expected = [gold, doc("trains-initial.docx", initial)]
    for name, lines in (("deduplicated", [initial[0], *initial[2:]]), ("kept duplicate", initial),
                        ("dropped a record", initial[:2] + initial[3:4]),
                        ("edited a line", [initial[0], initial[1], initial[3], "2024-01-04, T3, Bergen, Stavanger"])):
        add("compare_unique_train_records", name, doc(f"trains-{name}.docx", lines), expected)


def impress_cases(tmp: Path, add) -> None:
    def deck(name, backgrounds, master=None):
        prs = Presentation()
        if master is not None:
            fill = prs.slide_master.background.fill
            fill.solid()
            fill.fore_color.rgb = RGBColor(*master)
        for rgb in backgrounds:
            slide = prs.slides.add_slide(prs.slide_layouts[6])
            if rgb is not None:
                slide.background.fill.solid()
                slide.background.fill.fore_color.rgb = RGBColor(*rgb)
        prs.save(tmp / name)
        return str(tmp / name)

    navy = {"rgb": [0, 0, 128], "original_rgb": [255, 255, 255]}
    for name, path in (("all navy", deck("n1.pptx", [(0, 0, 128)] * 2)),
                       ("near navy", deck("n2.pptx", [(10, 0, 120), (0, 0, 128)])),
                       ("one left white", deck("n3.pptx", [(0, 0, 128), (255, 255, 255)])),
                       ("from the master", deck("n4.pptx", [None, None], master=(0, 0, 128))),
                       ("master white", deck("n5.pptx", [None], master=(255, 255, 255))),
                       ("red", deck("n6.pptx", [(200, 0, 0)]))):
        add("evaluate_presentation_fill_to_rgb_distance", name, path, navy)

    template = Presentation()
    template.save(tmp / "numbers.pptx")

    def numbered(name, colors):
        """A deck whose first master names these solid RGB colours in order (the page numbers': the last but one)."""
        import zipfile

        fills = "".join(f'<a:solidFill><a:srgbClr val="{c}"/></a:solidFill>' for c in colors)
        with zipfile.ZipFile(tmp / "numbers.pptx") as src, zipfile.ZipFile(tmp / name, "w") as dst:
            for item in src.infolist():
                data = src.read(item.filename)
                if item.filename == "ppt/slideMasters/slideMaster1.xml":
                    data = data.replace(b"</p:cSld>", f'<p:extLst xmlns:a="http://schemas.openxmlformats.org/'
                                        f'drawingml/2006/main"><p:ext uri="x">{fills}</p:ext></p:extLst></p:cSld>'
                                        .encode(), 1)
                dst.writestr(item, data)
        return str(tmp / name)

    for name, colors, color in (("red", ["000000", "C9211E", "FFFFFF"], "red"),
                                ("red wanted, black", ["C9211E", "000000", "FFFFFF"], "red"),
                                ("green", ["000000", "00A933", "FFFFFF"], "green"),
                                ("black", ["FF0000", "101010", "FFFFFF"], "black"),
                                ("blue", ["000000", "0000FF", "FFFFFF"], "blue"),
                                ("navy blue", ["000000", "2A6099", "FFFFFF"], "blue"),
                                ("any other colour", ["000000", "123456", "FFFFFF"], "orange")):
        add("check_page_number_colors", name, numbered(f"pn-{name}.pptx", colors), {"color": color})


def os_cases(tmp: Path, add) -> None:
    for name, printed in (("enlarged", "1.25\n"), ("default", "1.0\n"), ("smaller", "0.8")):
        add("check_text_enlarged", name, printed)
    for name, rules, clipboard in (("path", {"expected": "/home/user/Data3/secret.docx"}, "/home/user/Data3/secret.docx"),
                                   ("other path", {"expected": "/home/user/Data3/secret.docx"}, "/home/user/secret.docx"),
                                   ("all of a list", {"expected": ["None"]}, "None"),
                                   ("part of a list", {"expected": ["May 1", "Vienna"]}, "Deadline: May 1")):
        add("is_in_vm_clickboard", name, rules, clipboard)


def audio_cases(tmp: Path, add) -> None:
    import numpy as np
    import soundfile

    rate, t = 22050, np.arange(0, 3.0, 1 / 22050)
    melody = np.concatenate([np.sin(2 * np.pi * f * t[: len(t) // 4]) for f in (440, 550, 660, 880)])
    rng = np.random.default_rng(0)
    clips = {"melody": melody, "melody quieter": 0.3 * melody, "melody at 44.1 kHz": None,
             "melody reversed": melody[::-1].copy(), "noise": rng.normal(0, 0.3, len(t)), "silence": np.zeros(len(t))}
    for name, samples in clips.items():
        if samples is None:
            soundfile.write(tmp / f"{name}.wav", np.repeat(melody, 2), 2 * rate)
        else:
            soundfile.write(tmp / f"{name}.wav", samples, rate)
    soundfile.write(tmp / "melody.mp3", melody, rate, format="MP3")  # as a slide embeds it: compressed
    add("compare_audios", "melody as MP3", str(tmp / "melody.mp3"), str(tmp / "melody.wav"))
    (tmp / "empty.wav").write_bytes(b"")
    (tmp / "not audio.wav").write_text("hello")
    gold = str(tmp / "melody.wav")
    for name in clips:
        add("compare_audios", name, str(tmp / f"{name}.wav"), gold)
    add("compare_audios", "empty", str(tmp / "empty.wav"), gold)
    add("compare_audios", "both unreadable", str(tmp / "empty.wav"), str(tmp / "not audio.wav"))


def video_cases(tmp: Path, add) -> None:
    import cv2
    import numpy as np

    def frame(i, shift=0):
        img = np.full((96, 128, 3), 30, np.uint8)
        x = (8 * i + shift) % 100
        cv2.rectangle(img, (x, 20), (x + 24, 70), (40, 200, 220), -1)
        cv2.circle(img, (64, 48 + (i % 10)), 12, (200, 60, 60), -1)
        return img

    def video(name, frames):
        writer = cv2.VideoWriter(str(tmp / name), cv2.VideoWriter_fourcc(*"MJPG"), 10, (128, 96))
        for f in frames:
            writer.write(f)
        writer.release()
        return str(tmp / name)

    gold = video("gold.avi", [frame(i) for i in range(30)])
    for name, frames in (("same", [frame(i) for i in range(30)]),
                         ("brighter", [cv2.convertScaleAbs(frame(i), alpha=1.0, beta=25) for i in range(30)]),
                         ("shorter", [frame(i) for i in range(20)]),
                         ("other motion", [frame(i, shift=50) for i in range(30)]),
                         ("mirrored", [cv2.flip(frame(i), 1) for i in range(30)])):
        add("compare_videos", name, video(f"v-{name}.avi", frames), gold)
    add("compare_videos", "shorter within the frames checked", video("v-short.avi", [frame(i) for i in range(20)]), gold,
        max_frames_to_check=10)
