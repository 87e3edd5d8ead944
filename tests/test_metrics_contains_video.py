"""contains_mp4_video: one OSWorld task names it (insert a .mov into a slide) and none of OSWorld's code
defines it, so there is no verdict of OSWorld's to compare with: these are ours, on decks that embed a video."""

from __future__ import annotations

import io

from PIL import Image
from pptx import Presentation
from pptx.util import Inches

from computerrl.tasks.metrics.audio_video import contains_mp4_video

MP4_START = b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom"  # an ISO base media file opens with its ftyp box
MOV_START = b"\x00\x00\x00\x14ftypqt  \x00\x00\x02\x00qt  "
AVI_START = b"RIFF\x00\x10\x00\x00AVI LIST"


def deck(tmp_path, name, video=None, mime="video/mp4"):
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[6])
    if video is not None:
        poster = io.BytesIO()
        Image.new("RGB", (16, 9), "black").save(poster, "PNG")
        (tmp_path / f"{name}.bin").write_bytes(video + b"\x00" * 64)
        slide.shapes.add_movie(str(tmp_path / f"{name}.bin"), Inches(1), Inches(1), Inches(4), Inches(3),
                               poster_frame_image=poster, mime_type=mime)
    prs.save(tmp_path / name)
    return str(tmp_path / name)


def test_an_embedded_mp4_or_mov_counts(tmp_path):
    assert contains_mp4_video(deck(tmp_path, "mp4.pptx", MP4_START)) == 1.0
    assert contains_mp4_video(deck(tmp_path, "mov.pptx", MOV_START, mime="video/quicktime")) == 1.0


def test_no_video_or_another_container_does_not(tmp_path):
    assert contains_mp4_video(deck(tmp_path, "none.pptx")) == 0.0
    assert contains_mp4_video(deck(tmp_path, "avi.pptx", AVI_START, mime="video/x-msvideo")) == 0.0
    assert contains_mp4_video(None) == 0.0
