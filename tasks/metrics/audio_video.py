"""Audio and video metrics with the semantics of OSWorld's (`metrics/vlc.py`), on the libraries it uses, so
the same file decodes to the same samples and frames:

- `compare_audios`: librosa's MFCCs of both files (resampled to 22,050 Hz), each coefficient normalised
  over time, aligned by FastDTW with cosine distance; the score is exp(-distance per step of the path),
  in (0, 1]. Two unreadable or empty files score 1, one of them 0, as in OSWorld.
- `contains_mp4_video` (named by one OSWorld task, defined by none of its code): a slide embeds a video
  in an MP4-family container (ISO base media, as .mp4, .m4v and .mov are: the file opens with an `ftyp` box).
- `compare_videos`: OpenCV decodes both (its bundled FFmpeg); the first `max_frames_to_check` frame pairs
  are compared by perceptual hash (imagehash's phash), and more than `threshold` pairs whose hashes differ
  by more than `threshold` bits fail. Videos of different lengths (within those frames) fail.

What the agent made is decoded here, in the metric worker's capped child (memory, CPU time). Audio is
read up to AUDIO_SECONDS: FastDTW is pure Python, and a longer file would spend the worker's CPU time
before it scored (no task's audio is near that long).
"""

from __future__ import annotations

import logging
import posixpath
import re
import zipfile

from computerrl.tasks.registry import metric

log = logging.getLogger(__name__)
AUDIO_SECONDS = 600.0  # of each audio file read (from its start)
RELS_LIMIT = 1 << 20  # bytes of one slide's relationships read (an honest one is a few KB)
VIDEO_RELATIONS = ("/relationships/video", "/relationships/media")  # OOXML's and Office 2007's, as LibreOffice writes both
SLIDE_RELS = re.compile(r"ppt/slides/_rels/slide\d+\.xml\.rels")


def _load_audio(path):
    """(samples at 22,050 Hz mono, the rate), or None when the file cannot be decoded or holds no sample."""
    import librosa

    try:
        samples, rate = librosa.load(path, duration=AUDIO_SECONDS)
    except Exception as e:  # noqa: BLE001 - not audio, a broken file: as OSWorld's, scored below
        log.info("cannot load audio %s: %s", path, e)
        return None
    return (samples, rate) if samples.shape[0] else None


@metric("compare_audios")
def compare_audios(audio1, audio2, **_) -> float:
    import librosa
    import numpy as np
    from fastdtw import fastdtw
    from scipy.spatial.distance import cosine

    if not audio1 or not audio2:
        return 0.0
    a, b = _load_audio(audio1), _load_audio(audio2)
    if a is None or b is None:
        return float(a is None and b is None)
    try:
        mfcc = [librosa.util.normalize(librosa.feature.mfcc(y=y, sr=sr), axis=1) for y, sr in (a, b)]
    except Exception as e:  # noqa: BLE001 - a clip too short for one MFCC frame: 0, as OSWorld's
        log.info("no MFCCs: %s", e)
        return 0.0
    distance, path = fastdtw(mfcc[0].T, mfcc[1].T, dist=cosine)
    return float(np.exp(-distance / len(path))) if path else 0.0


@metric("compare_videos")
def compare_videos(video1, video2, max_frames_to_check: int = 100, threshold: int = 5, **_) -> float:
    import cv2
    import imagehash
    from PIL import Image

    if not video1 or not video2:  # no file: 0, where OSWorld's raises
        return 0.0
    captures = [cv2.VideoCapture(video1), cv2.VideoCapture(video2)]
    try:
        mismatches = 0
        for _frame in range(max_frames_to_check):
            (ok1, frame1), (ok2, frame2) = (c.read() for c in captures)
            if not ok1 or not ok2:
                return float(ok1 == ok2)  # both ended: the same length
            hashes = [imagehash.phash(Image.fromarray(cv2.cvtColor(f, cv2.COLOR_BGR2RGB))) for f in (frame1, frame2)]
            if hashes[0] - hashes[1] > threshold:
                mismatches += 1
                if mismatches > threshold:
                    return 0.0
        return 1.0
    finally:
        for c in captures:
            c.release()


@metric("contains_mp4_video")
def contains_mp4_video(pptx_file, *_, **__) -> float:
    """1 if a slide embeds a video whose file is of the MP4 family (linked videos are outside the file: 0)."""
    from lxml import etree

    if not pptx_file:
        return 0.0
    with zipfile.ZipFile(pptx_file) as z:
        parts = {i.filename: i for i in z.infolist()}
        for name in filter(SLIDE_RELS.fullmatch, parts):
            if parts[name].file_size > RELS_LIMIT:
                continue
            for rel in etree.fromstring(z.read(name)):
                target = posixpath.normpath(posixpath.join("ppt/slides", rel.get("Target", "")))
                if rel.get("Type", "").endswith(VIDEO_RELATIONS) and rel.get("TargetMode") != "External" \
                        and target in parts and z.open(target).read(8)[4:8] == b"ftyp":
                    return 1.0
    return 0.0
