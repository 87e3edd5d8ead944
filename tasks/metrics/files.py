"""OSWorld's metrics over whole files the agent made: archives, HTML, e-books, PDFs' and documents'
images, MP3 tags, small text results, with the verdicts of OSWorld's (`metrics/chrome.py`, `vscode.py`,
`general.py`, `others.py`, `docs.py`, `basic_os.py`; desktop-env 1.0.2).

The first argument is the agent's result, the second the gold file or the rule dict. Departures:
- archives (compare_archive, compare_zip_files) are read, never unpacked where they lie: members go
  to a temporary folder, at most ARCHIVE_MEMBERS of them and ARCHIVE_BYTES unpacked in all; an
  archive past the caps, or with a member named absolutely, with `..` or as a link, scores 0
  (OSWorld's unpacks anything next to the file; shutil skips such zip members silently);
- the PDFs in compare_zip_files are read by PyMuPDF, not PyPDF2; compare_epub works in memory where
  OSWorld's writes `<file>.dir/` (and crashes on an .html member in a sub-folder, read here as any other);
- compare_htmls and check_html_background_image rebuild, on lxml and the standard html.parser, the
  parts of BeautifulSoup's tree that OSWorld's verdicts read (bs4 is no dependency);
- where OSWorld's raises on a missing or unreadable result (None, a file that is not text), it is 0.
check_mp3_meta reads tags with mutagen (EasyID3), imported when it runs.
Not here: contains_mp4_video, which a task names but OSWorld never defined (no verdict to follow).
"""

from __future__ import annotations

import bz2
import datetime
import difflib
import gzip
import io
import logging
import lzma
import os
import re
import tarfile
import tempfile
import zipfile
import zlib
from html.parser import HTMLParser
from pathlib import Path

from computerrl.tasks.metrics.table import match_value_to_rule
from computerrl.tasks.registry import METRICS, metric

log = logging.getLogger(__name__)

ARCHIVE_BYTES = 200 << 20  # most an archive may unpack to (a tar: its whole stream, headers included)
ARCHIVE_MEMBERS = 10_000  # most members an archive may hold
CHUNK = 1 << 20


def _text(path) -> str | None:
    """The file's text as Python's open() reads it (UTF-8, universal newlines); None if it cannot be read."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


# ---- archives ----------------------------------------------------------------------------------
class ArchiveRefused(ValueError):
    """An archive past the caps, or with a member that could land outside its folder."""


class _Budget:
    """What an archive may still unpack to: members and bytes."""

    def __init__(self):
        self.bytes, self.members = ARCHIVE_BYTES, ARCHIVE_MEMBERS

    def member(self, name: str) -> None:
        self.members -= 1
        if self.members < 0:
            raise ArchiveRefused(f"more than {ARCHIVE_MEMBERS} members")
        if name.startswith(("/", "\\")) or ".." in name.replace("\\", "/").split("/"):
            raise ArchiveRefused(f"member {name!r} points outside the archive")

    def take(self, n: int) -> None:
        self.bytes -= n
        if self.bytes < 0:
            raise ArchiveRefused(f"unpacks to more than {ARCHIVE_BYTES >> 20} MB")


def _chunks(reader, budget: _Budget | None):
    while chunk := reader.read(CHUNK):
        if budget:
            budget.take(len(chunk))
        yield chunk


class _Capped(io.RawIOBase):
    """A decompressed tar stream that stops at the budget: a tar bomb is cut off, headers and all."""

    def __init__(self, f, budget: _Budget):
        self.f, self.budget = f, budget

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self.f.read(len(b))
        self.budget.take(len(data))
        b[:len(data)] = data
        return len(data)


def _zip_members(path, budget: _Budget):
    """(name as stored, chunks of its bytes, or None for a folder) of each member, in order."""
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            budget.member(info.filename)
            if info.is_dir():
                yield info.filename, None
            else:
                with zf.open(info) as f:
                    yield info.filename, _chunks(f, budget)


def _tar_members(path, budget: _Budget):
    """As _zip_members, for a tar (plain, gzip, bzip2 or xz), read as one stream: a member's chunks are
    good until the next member. A link or a device is refused."""
    with open(path, "rb") as raw:
        opener = {b"\x1f\x8b": gzip.GzipFile, b"BZ": bz2.BZ2File, b"\xfd7": lzma.LZMAFile}.get(raw.read(2))
        raw.seek(0)
        with tarfile.open(fileobj=_Capped(opener(fileobj=raw) if opener else raw, budget), mode="r|") as tar:
            for member in tar:
                budget.member(member.name)
                if member.isdir():
                    yield member.name, None
                elif member.isreg():
                    yield member.name, _chunks(tar.extractfile(member), None)  # the stream counts them
                else:
                    raise ArchiveRefused(f"member {member.name!r} is a link or a device")


UNREADABLE = (ArchiveRefused, OSError, EOFError, zipfile.BadZipFile, tarfile.TarError, zlib.error, lzma.LZMAError,
              RuntimeError, NotImplementedError)  # the last two: zipfile's encrypted or unknown compression


def unpack(path, into: Path) -> None:
    """Unpack the zip or tar archive (told apart by content) into the new folder `into`, within the caps."""
    into.mkdir()
    members = _zip_members if zipfile.is_zipfile(path) else _tar_members
    for name, chunks in members(path, _Budget()):
        rel = "/".join(p for p in name.replace("\\", "/").split("/") if p not in ("", "."))
        if not rel:
            continue
        if chunks is None:
            (into / rel).mkdir(parents=True, exist_ok=True)
            continue
        (into / rel).parent.mkdir(parents=True, exist_ok=True)
        with open(into / rel, "wb") as out:
            for chunk in chunks:
                out.write(chunk)


def _zip_contents(path) -> dict[str, bytes]:
    """Every member's bytes by its stored name (a folder's: b""); the last of a repeated name, as ZipFile.read."""
    return {name: b"".join(chunks or ()) for name, chunks in _zip_members(path, _Budget())}


ARCHIVE_FILE_TYPES = {"text": "compare_text_file", "pdf": "compare_pdfs", "docx": "compare_docx_files",
                      "ppt": "compare_pptx_files", "image": "compare_images", "csv": "compare_csv",
                      "table": "compare_table", "audio": "compare_audios", "video": "compare_videos"}


@metric("compare_archive")
def compare_archive(result, expected, **options) -> float:
    """The entries right under `file_path` ("" = the archive's top) of both archives have the same names,
    and the mean score of each pair by the metric for `file_type` (ARCHIVE_FILE_TYPES, default text), to
    which the other options go. No entries, or a refused archive: 0."""
    options = dict(options)
    file_path, file_type = options.pop("file_path", ""), options.pop("file_type", "text")
    if file_type not in ARCHIVE_FILE_TYPES:
        raise ValueError(f"compare_archive: unknown file_type {file_type!r}; known: {', '.join(ARCHIVE_FILE_TYPES)}")
    compare = METRICS[ARCHIVE_FILE_TYPES[file_type]]
    if not result:
        return 0.0
    with tempfile.TemporaryDirectory(prefix="compare_archive-") as tmp:
        unpack(expected, Path(tmp) / "gold")  # the task's own file: if it fails, the evaluator is broken
        try:
            unpack(result, Path(tmp) / "pred")
            pred_dir, gold_dir = Path(tmp, "pred", file_path), Path(tmp, "gold", file_path)
            names, gold_names = sorted(os.listdir(pred_dir)), sorted(os.listdir(gold_dir))
        except UNREADABLE as e:
            log.info("compare_archive: %s", e)
            return 0.0
        if names != gold_names or not names:
            return 0.0
        return sum(compare(str(pred_dir / n), str(gold_dir / n), **options) for n in names) / len(names)


def _pdf_bytes_text(data: bytes) -> str:
    import pymupdf

    with pymupdf.open(stream=data, filetype="pdf") as doc:
        return "".join(page.get_text() for page in doc)


@metric("compare_zip_files")
def compare_zip_files(result, expected, **_) -> float:
    """The same member names, and each member equal: a .pdf by its text (difflib ratio at least 0.95),
    anything else byte for byte."""
    if not result:
        return 0.0
    gold = _zip_contents(expected)
    try:
        ours = _zip_contents(result)
    except UNREADABLE:
        return 0.0
    if set(ours) != set(gold):
        return 0.0
    for name, data in ours.items():
        if name.lower().endswith(".pdf"):
            try:
                same = difflib.SequenceMatcher(None, _pdf_bytes_text(data), _pdf_bytes_text(gold[name])).ratio() >= 0.95
            except Exception:  # noqa: BLE001 - a PDF that cannot be read is a wrong member
                same = False
        else:
            same = data == gold[name]
        if not same:
            return 0.0
    return 1.0


# ---- HTML --------------------------------------------------------------------------------------
ASCII_SPACES = "\x20\x0a\x09\x0c\x0d"  # what bs4 counts as whitespace when it collapses a blank string
STRING_KINDS = {"style": "stylesheet", "script": "script", "template": "template", "rt": "ruby-text",
                "rp": "ruby-paren"}  # the strings below these tags are of their own kind
LIST_ATTRIBUTES = {"*": {"class", "accesskey", "dropzone"}, "a": {"rel", "rev"}, "link": {"rel", "rev"},
                   "td": {"headers"}, "th": {"headers"}, "form": {"accept-charset"}, "object": {"archive"},
                   "area": {"rel"}, "icon": {"sizes"}, "iframe": {"sandbox"}, "output": {"for"}}  # split on blanks


class _Soup:
    """lxml parser target that records BeautifulSoup's ("lxml") tree in document order: a tag is
    ["tag", name, attrs, end], a string ["str", text, kind], kind "text" for a plain one."""

    def __init__(self):
        self.nodes, self.open, self.buffer = [], [], []

    def _flush(self, kind: str | None = None) -> None:
        if not self.buffer:
            return
        text, self.buffer = "".join(self.buffer), []
        names = [self.nodes[i][1] for i in self.open]
        if not {"pre", "textarea"} & set(names) and all(c in ASCII_SPACES for c in text):
            text = "\n" if "\n" in text else " "  # bs4 keeps a blank string as one space or newline
        if kind is None:
            kind = next((STRING_KINDS[n] for n in reversed(names) if n in STRING_KINDS), "text")
        self.nodes.append(["str", text, kind])

    def start(self, tag, attrib, nsmap=None):
        self._flush()
        lists = LIST_ATTRIBUTES["*"] | LIST_ATTRIBUTES.get(tag.lower(), set())
        attrs = {k: re.findall(r"\S+", v) if k in lists else v for k, v in attrib.items()}
        self.open.append(len(self.nodes))
        self.nodes.append(["tag", tag, attrs, None])

    def end(self, tag):
        self._flush()
        if any(self.nodes[i][1] == tag for i in self.open):  # pop up to and with the last one of that name
            while self.open:
                i = self.open.pop()
                self.nodes[i][3] = len(self.nodes)
                if self.nodes[i][1] == tag:
                    break

    def data(self, text):
        self.buffer.append(text)

    def comment(self, text):
        self._flush()
        self.buffer.append(text)
        self._flush("comment")

    def doctype(self, name, pubid, system):
        self._flush()
        value = name or ""
        if pubid is not None:
            value += f' PUBLIC "{pubid}"' + (f' "{system}"' if system is not None else "")
        elif system is not None:
            value += f' SYSTEM "{system}"'
        self.buffer.append(value)
        self._flush("doctype")

    def pi(self, target, data=None):
        self._flush()
        self.buffer.append(target + " " + data)
        self._flush("pi")

    def close(self):
        self._flush()
        for i in self.open:
            self.nodes[i][3] = len(self.nodes)
        return self.nodes

    def text(self, i: int) -> str:
        """bs4's Tag.text: the strings below the tag of the kind its own strings have."""
        _, name, _, end = self.nodes[i]
        kind = STRING_KINDS.get(name, "text")
        return "".join(n[1] for n in self.nodes[i + 1:end] if n[0] == "str" and n[2] == kind)


def _soup(path) -> _Soup | None:
    from lxml import etree

    markup = _text(path)
    if markup is None:
        return None
    markup = markup.removeprefix("\ufeff")
    for data, encoding in ((markup, None), (markup.encode("utf8"), "utf8")):  # bs4 tries text, then UTF-8 bytes
        soup = _Soup()
        try:
            parser = etree.HTMLParser(target=soup, recover=True, huge_tree=False, encoding=encoding)
            parser.feed(data)
            parser.close()
            return soup
        except (UnicodeDecodeError, LookupError, etree.ParserError):
            continue
    return None


@metric("compare_htmls")
def compare_htmls(result, expected, **options) -> float:
    """Walking both documents' nodes in order (as far as the shorter goes), each pair is equal: strings by
    value; tags by name, stripped text and attributes (`ignore_sdnum`: but LibreOffice's sdnum)."""
    ours, gold = _soup(result), _soup(expected)
    if ours is None or gold is None:
        return 0.0
    ignore_sdnum = options.get("ignore_sdnum", None)
    for i, (a, b) in enumerate(zip(ours.nodes, gold.nodes)):
        if a[0] != "tag" or b[0] != "tag":
            if a[0] != b[0] or a[1] != b[1]:
                return 0.0
            continue
        if a[1] != b[1] or ours.text(i).strip() != gold.text(i).strip():
            return 0.0
        if a[2] != b[2] and not (ignore_sdnum and _but_sdnum(a[2]) == _but_sdnum(b[2])):
            return 0.0
    return 1.0


def _but_sdnum(attrs: dict) -> dict:
    return {k: v for k, v in attrs.items() if k != "sdnum"}


class _Styles(HTMLParser):
    """The text of every <style> element, as bs4's "html.parser" reads it (raw, not entity-decoded)."""

    def __init__(self):
        super().__init__(convert_charrefs=False)
        self.texts, self.depth = [], 0

    def handle_starttag(self, tag, attrs):
        if tag == "style":
            self.texts.append("")
            self.depth += 1

    def handle_endtag(self, tag):
        if tag == "style" and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth:
            self.texts[-1] += data


@metric("check_html_background_image")
def check_html_background_image(result, rule, **_) -> float:
    """A <style> of the page contains `background-image: url('<value>')`, written exactly so."""
    html = _text(result)
    if html is None:
        return 0.0
    styles = _Styles()
    styles.feed(html)
    styles.close()
    return float(any(f"background-image: url('{rule['value']}')" in t for t in styles.texts))


# ---- e-books, PDFs' and documents' images, MP3 tags -------------------------------------------
def _epub_texts(path) -> list[list[str]]:
    """The lines OSWorld compares of an EPUB, member by member in name order: toc.ncx less its navPoint
    lines, content.opf less its dc:identifier lines, each .html member re-serialised by lxml with its line
    breaks dropped first. Not a zip: no members."""
    import lxml.html

    try:
        members = _zip_contents(path)
    except zipfile.BadZipFile:
        return []
    texts = {}
    for name, drop in (("toc.ncx", "navPoint"), ("content.opf", "dc:identifier")):
        if name in members:
            texts[name] = [line for line in members[name].decode().splitlines() if drop not in line]
    for name, data in members.items():
        if name.endswith(".html"):
            flat = data.decode().replace("\n", "").replace("\r", "").encode()
            texts[name] = lxml.html.tostring(lxml.html.fromstring(flat), pretty_print=True,
                                             encoding="unicode").splitlines()
    return [texts[name] for name in sorted(texts)]


@metric("compare_epub")
def compare_epub(result, expected, **_) -> float:
    """The mean, over the result's compared members, of difflib's line ratio with the expected member at the
    same place in name order (so a member too many or too few lowers it)."""
    if not result:
        return 0.0
    try:
        ours = _epub_texts(result)
    except Exception:  # noqa: BLE001 - past the caps, text that is not UTF-8, an empty page: OSWorld's raises
        return 0.0
    gold = _epub_texts(expected)
    total = sum(difflib.SequenceMatcher(a=a, b=b).ratio() for a, b in zip(ours, gold))
    return total / len(ours) if ours else 0.0


def _phash(image):
    """imagehash's phash: the 8x8 lowest frequencies of the 32x32 grey image's DCT, above their median."""
    import numpy as np
    import scipy.fftpack
    from PIL import Image

    pixels = np.asarray(image.convert("L").resize((32, 32), Image.Resampling.LANCZOS))
    low = scipy.fftpack.dct(scipy.fftpack.dct(pixels, axis=0), axis=1)[:8, :8]
    return (low > np.median(low)).flatten()


def _pdf_images(path) -> list:
    import pymupdf
    from PIL import Image

    images = []
    with pymupdf.open(path) as doc:
        for page in doc:
            for img in page.get_images(full=True):
                data = doc.extract_image(img[0])["image"]
                try:
                    images.append(Image.open(io.BytesIO(data)))
                except Exception:  # noqa: BLE001 - an image PIL cannot open is left out, as OSWorld's
                    log.info("compare_pdf_images: an image of %s cannot be read", path)
    return images


@metric("compare_pdf_images")
def compare_pdf_images(result, expected, **_) -> float:
    """The PDFs' embedded images, page by page, pair up (same count) and the share of pairs whose perceptual
    hashes differ in at most 5 bits; two PDFs without images: 1."""
    if not result or not expected or not (os.path.exists(result) and os.path.exists(expected)):
        return 0.0
    try:
        ours, gold = _pdf_images(result), _pdf_images(expected)
    except Exception:  # noqa: BLE001 - not a PDF: 0, as OSWorld's
        return 0.0
    if len(ours) != len(gold):
        return 0.0
    if not ours:
        return 1.0
    return sum(int((_phash(a) != _phash(b)).sum()) <= 5 for a, b in zip(ours, gold)) / len(ours)


@metric("compare_docx_images")
def compare_docx_images(result, expected, **_) -> float:
    """The documents' bodies link the same number of images, pairwise of equal pixels (in relation order)."""
    import docx
    from PIL import Image

    if not result or not expected:
        return 0.0
    try:
        docs = docx.Document(result), docx.Document(expected)
    except Exception:  # noqa: BLE001 - not a .docx: 0, as OSWorld's
        return 0.0
    ours, gold = ([rel.target_part.blob for rel in d.part.rels.values() if "image" in rel.reltype] for d in docs)
    if len(ours) != len(gold):
        return 0.0
    return float(all(Image.open(io.BytesIO(a)).tobytes() == Image.open(io.BytesIO(b)).tobytes()
                     for a, b in zip(ours, gold)))


@metric("check_mp3_meta")
def check_mp3_meta(result, meta, **_) -> float:
    """Every tag named in `meta` (EasyID3's names: title, artist, …; several values joined by ",") matches
    its {"method", "ref"} rule. Needs mutagen; a file without an ID3 tag scores 0."""
    from mutagen.easyid3 import EasyID3
    from mutagen.id3 import ID3NoHeaderError

    if not result:
        return 0.0
    try:
        tags = EasyID3(result)
    except ID3NoHeaderError:
        return 0.0
    for key, rule in meta.items():
        value = tags.get(key, "")
        if not match_value_to_rule(",".join(value) if isinstance(value, list) else value, rule):
            return 0.0
    return 1.0


# ---- text results ------------------------------------------------------------------------------
def _python_lines(text: str) -> str:
    """OSWorld's normalisation: a shebang or coding line among the first three dropped, blank lines dropped,
    tabs expanded to 4, trailing blanks cut."""
    lines, i = text.splitlines(), 0
    while i < min(len(lines), 3) and lines[i].strip().startswith(("#!", "# -*- coding:", "# coding:", "# coding=")):
        i += 1
    return "\n".join(line.expandtabs(4).rstrip() for line in lines[i:] if line.strip())


@metric("compare_python_pure_text")
def compare_python_pure_text(result, expected, **_) -> float:
    ours, gold = _text(result), _text(expected)
    return float(ours is not None and gold is not None and _python_lines(ours) == _python_lines(gold))


@metric("compare_config")
def compare_config(result, rules, **_) -> float:
    """The file's text is exactly `rules["expected"]`."""
    text = _text(result)
    return float(text is not None and text == rules["expected"])


@metric("compare_result_files")
def compare_result_files(result, expected, **_) -> float:
    """Stripped texts equal; or, when the expected one is a number, the result contains it or is a number
    within 1e-4 of it."""
    ours, gold = _text(result), _text(expected)
    if ours is None or gold is None:
        return 0.0
    ours, gold = ours.strip(), gold.strip()
    try:
        number = float(gold)
        return float(gold in ours or abs(float(ours) - number) < 1e-4)
    except ValueError:
        return float(ours == gold)


@metric("compare_time_in_speedtest_results")
def compare_time_in_speedtest_results(result, time_diff, **_) -> float:
    """The second CSV line's second field ends in a time of day (HH:MM) less than `time_diff` minutes from
    now's, both read on this machine's clock (no wrap at midnight)."""
    lines = (_text(result) or "").split("\n")  # as a file's lines: the second keeps its newline if one follows
    try:
        stamp = (lines[1] + "\n" * (len(lines) > 2)).split(",")[1][-5:]
        now = datetime.datetime.now().strftime("%H:%M")
        minutes = abs((datetime.datetime.strptime(stamp, "%H:%M") - datetime.datetime.strptime(now, "%H:%M"))
                      .total_seconds()) / 60
        return float(minutes < int(time_diff))
    except (IndexError, ValueError, TypeError):
        return 0.0


@metric("is_utc_0")
def is_utc_0(result, expected=None, **_) -> float:
    """`timedatectl status`'s fourth line (Time zone: …) ends in "+0000)"."""
    lines = result.split("\n") if isinstance(result, str) else []
    return float(len(lines) > 3 and lines[3].endswith("+0000)"))


@metric("check_moved_jpgs")
def check_moved_jpgs(result, rule, **_) -> float:
    """The folder (a list_directory tree) holds exactly the expected names, no more, none twice."""
    if not result:
        return 0.0
    names = [node["name"] for node in result.get("children", [])]
    return float(len(names) == len(rule["expected"]) and set(names) == set(rule["expected"]))

