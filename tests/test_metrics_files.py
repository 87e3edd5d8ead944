"""OSWorld's whole-file metrics (tasks/metrics/files.py) on files made here that agree and disagree,
each verdict also compared with OSWorld's own function where it can run here (no desktop)."""

from __future__ import annotations

import datetime
import importlib
import io
import sys
import tarfile
import types
import zipfile
from pathlib import Path

import docx
import pytest
from PIL import Image, ImageDraw

from computerrl.tasks.metrics import files as metrics_files
from computerrl.tasks.registry import METRICS

importlib.import_module("computerrl.tasks.metrics")  # registers every metric: compare_archive uses others

OSWORLD = Path(__file__).resolve().parents[1] / ".venv" / "osworld" / "desktop_env"
MODULES = ("utils", "chrome", "general", "vscode", "others", "docs", "basic_os")
OPTIONAL = ("pdfplumber", "imagehash", "borb", "borb.pdf", "easyocr", "PyPDF2", "mutagen", "mutagen.easyid3",
            "formulas", "fastdtw", "cv2", "librosa", "acoustid")  # stood in for when absent; what needs one is skipped


@pytest.fixture(scope="module")
def osworld():
    """OSWorld's metric functions by name, from .venv/osworld, loaded module by module (no package __init__)."""
    if not OSWORLD.exists():
        pytest.skip("run `bash install.sh --all`: it installs OSWorld's desktop-env in .venv/osworld")
    saved = {k: v for k, v in sys.modules.items() if k.startswith("desktop_env")}
    for k in saved:
        del sys.modules[k]  # another test's load may hold modules built on its stand-ins
    stubs = []
    for name in OPTIONAL:
        try:
            importlib.import_module(name)
        except ImportError:
            stub = types.ModuleType(name)
            stub.__getattr__ = lambda attr: None
            sys.modules[name] = stub
            stubs.append(name)
    for package, path in (("desktop_env", OSWORLD), ("desktop_env.evaluators", OSWORLD / "evaluators"),
                          ("desktop_env.evaluators.metrics", OSWORLD / "evaluators" / "metrics")):
        module = types.ModuleType(package)
        module.__path__ = [str(path)]
        sys.modules[package] = module
    funcs = {"missing": stubs}
    for name in MODULES:
        module = importlib.import_module(f"desktop_env.evaluators.metrics.{name}")
        funcs.update({k: v for k, v in vars(module).items() if callable(v) and not k.startswith("_")})
    yield funcs
    for k in [k for k in sys.modules if k.startswith("desktop_env")] + stubs:
        del sys.modules[k]
    sys.modules.update(saved)


def check(osworld, name, args, want, theirs_args=None, needs=(), **options):
    """Our verdict is `want`, and OSWorld's is the same (unless it needs a module absent here)."""
    ours = METRICS[name](*args, **options)
    assert ours == pytest.approx(want), f"{name}: ours {ours}, want {want}"
    if not set(needs) & set(osworld["missing"]):
        theirs = osworld[name](*(args if theirs_args is None else theirs_args), **options)
        assert float(theirs) == pytest.approx(want), f"{name}: OSWorld's {theirs}, want {want}"


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def zip_of(path: Path, members: dict) -> str:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return str(path)


def picture(seed: int) -> Image.Image:
    img = Image.new("RGB", (64, 48), (30 * seed % 255, 90, 160))
    draw = ImageDraw.Draw(img)
    for x in range(0, 64, 8 + 4 * seed):
        draw.rectangle((x, 0, x + 3, 47), fill=(220, 200, 40))
    draw.ellipse((10 + 8 * seed, 8, 40 + 8 * seed, 40), fill=(200, 30, 30))
    return img


def pdf(path: Path, text: str, images=()) -> str:
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), text)
    for i, img in enumerate(images):
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        page.insert_image(pymupdf.Rect(72, 100 + 120 * i, 232, 220 + 120 * i), stream=buf.getvalue())
    doc.save(str(path))
    return str(path)


# ---- archives ----------------------------------------------------------------------------------
def test_compare_archive_pdfs_in_zip_and_tar(osworld, tmp_path):
    slides = {f"lecture_slides/week{i}.pdf": Path(pdf(tmp_path / f"w{i}.pdf", f"Week {i}: loops")).read_bytes()
              for i in range(3)}
    gold = zip_of(tmp_path / "gold_lecture_slides.zip", slides)
    same = zip_of(tmp_path / "lecture_slides.zip", slides)
    fewer = zip_of(tmp_path / "fewer.zip", dict(list(slides.items())[:2]))
    check(osworld, "compare_archive", (same, gold), 1.0, file_path="lecture_slides", file_type="pdf")
    check(osworld, "compare_archive", (fewer, gold), 0.0, file_path="lecture_slides", file_type="pdf")
    check(osworld, "compare_archive", (None, gold), 0.0, file_type="pdf")

    def tgz(name, texts):
        with tarfile.open(tmp_path / name, "w:gz") as tar:
            for member, text in texts.items():
                tar.add(pdf(tmp_path / member, text), arcname=member)
        return str(tmp_path / name)

    gold_tar = tgz("pdf_gold.tar.gz", {"a.pdf": "Chapter one: the start", "b.pdf": "Chapter two: the end"})
    check(osworld, "compare_archive", (tgz("pdf.tar.gz", {"a.pdf": "Chapter one: the start", "b.pdf":
                                                          "Chapter two: the end"}), gold_tar), 1.0, file_type="pdf")
    half = tgz("half.tar.gz", {"a.pdf": "Chapter one: the start", "b.pdf": "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"})
    assert 0.5 <= METRICS["compare_archive"](half, gold_tar, file_type="pdf") < 0.75  # the mean of the pairs


def tone(hz: int, seconds: float = 0.5, rate: int = 22050) -> bytes:
    """A sine wave as a 16-bit mono WAV."""
    import math
    import wave

    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(rate)
        w.writeframes(b"".join(int(12000 * math.sin(2 * math.pi * hz * i / rate)).to_bytes(2, "little", signed=True)
                               for i in range(int(seconds * rate))))
    return buf.getvalue()


def test_compare_archive_routes_file_types_to_our_metrics(tmp_path):
    def document(name, text):
        d = docx.Document()
        d.add_paragraph(text)
        buf = io.BytesIO()
        d.save(buf)
        return buf.getvalue()

    gold = zip_of(tmp_path / "gold.zip", {"r.docx": document("g", "Quarterly report")})
    assert METRICS["compare_archive"](zip_of(tmp_path / "a.zip", {"r.docx": document("a", "Quarterly report")}), gold,
                                      file_type="docx") == 1.0
    assert METRICS["compare_archive"](zip_of(tmp_path / "b.zip", {"r.docx": document("b", "Another text")}), gold,
                                      file_type="docx") == 0.0
    notes = zip_of(tmp_path / "notes.zip", {"n.txt": "one\n"})
    assert METRICS["compare_archive"](notes, notes) == 1.0  # text by default
    tones = {hz: zip_of(tmp_path / f"{hz}.zip", {"t.wav": tone(hz)}) for hz in (440, 1760)}
    assert METRICS["compare_archive"](tones[440], tones[440], file_type="audio") == pytest.approx(1.0)
    assert METRICS["compare_archive"](tones[1760], tones[440], file_type="audio") < 0.99  # by compare_audios
    with pytest.raises(ValueError, match="unknown file_type"):
        METRICS["compare_archive"](notes, notes, file_type="exe")


def test_hostile_archives_score_0_and_write_nothing_outside(tmp_path, monkeypatch):
    gold = zip_of(tmp_path / "gold.zip", {"a.txt": "x"})
    outside = tmp_path / "evil.txt"
    for name in ("../evil.txt", "/tmp/evil.txt", "a/../../evil.txt"):
        hostile = zip_of(tmp_path / "hostile.zip", {"a.txt": "x", name: "gotcha"})
        assert METRICS["compare_archive"](hostile, gold) == 0.0, name
        assert METRICS["compare_zip_files"](hostile, gold) == 0.0, name
    assert not outside.exists() and not Path("/tmp/evil.txt").exists()
    with tarfile.open(tmp_path / "link.tar", "w") as tar:
        info = tarfile.TarInfo("a.txt")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    assert METRICS["compare_archive"](str(tmp_path / "link.tar"), gold) == 0.0
    monkeypatch.setattr(metrics_files, "ARCHIVE_MEMBERS", 5)
    many = zip_of(tmp_path / "many.zip", {f"{i}.txt": "x" for i in range(6)})
    assert METRICS["compare_archive"](many, many.replace("many", "gold")) == 0.0
    assert METRICS["compare_archive"](zip_of(tmp_path / "five.zip", {f"{i}.txt": "x" for i in range(5)}),
                                      zip_of(tmp_path / "five_gold.zip", {f"{i}.txt": "x" for i in range(5)})) == 1.0


def test_a_zip_bomb_and_a_tar_bomb_stop_at_the_cap(tmp_path):
    zeros = bytes(1 << 20)
    with zipfile.ZipFile(tmp_path / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as zf, zf.open("a.txt", "w") as f:
        for _ in range((metrics_files.ARCHIVE_BYTES >> 20) + 8):
            f.write(zeros)
    with tarfile.open(tmp_path / "bomb.tar.gz", "w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo("a.txt")
        info.size = metrics_files.ARCHIVE_BYTES + (8 << 20)
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    assert (tmp_path / "bomb.zip").stat().st_size < 2 << 20 and (tmp_path / "bomb.tar.gz").stat().st_size < 2 << 20
    gold = zip_of(tmp_path / "gold.zip", {"a.txt": "x"})
    for bomb in ("bomb.zip", "bomb.tar.gz"):
        assert METRICS["compare_archive"](str(tmp_path / bomb), gold) == 0.0
    assert METRICS["compare_zip_files"](str(tmp_path / "bomb.zip"), gold) == 0.0
    assert METRICS["compare_epub"](str(tmp_path / "bomb.zip"), gold) == 0.0


def test_compare_zip_files(osworld, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # OSWorld's writes temp.pdf where it runs
    members = {"essay/": b"", "essay/essay.docx": b"PK fake docx", "essay/notes.txt": b"due Friday\n"}
    gold = zip_of(tmp_path / "gold.zip", members)
    check(osworld, "compare_zip_files", (zip_of(tmp_path / "same.zip", members), gold), 1.0)
    other = zip_of(tmp_path / "other.zip", {**members, "essay/notes.txt": b"due Monday\n"})
    check(osworld, "compare_zip_files", (other, gold), 0.0)
    check(osworld, "compare_zip_files", (zip_of(tmp_path / "extra.zip", {**members, "x.txt": b""}), gold), 0.0)
    check(osworld, "compare_zip_files", (None, gold), 0.0)
    text = "Recruitment and retention of health professionals across Europe " * 4
    with_pdf = zip_of(tmp_path / "pdf_gold.zip", {"essay.pdf": Path(pdf(tmp_path / "g.pdf", text)).read_bytes()})
    check(osworld, "compare_zip_files", (zip_of(tmp_path / "p1.zip", {"essay.pdf": Path(pdf(
        tmp_path / "p1.pdf", text)).read_bytes()}), with_pdf), 1.0, needs=("PyPDF2",))
    check(osworld, "compare_zip_files", (zip_of(tmp_path / "p2.zip", {"essay.pdf": Path(pdf(
        tmp_path / "p2.pdf", "Something else entirely")).read_bytes()}), with_pdf), 0.0, needs=("PyPDF2",))
    assert METRICS["compare_zip_files"](write(tmp_path / "not.zip", "plain text"), gold) == 0.0


# ---- HTML --------------------------------------------------------------------------------------
SURVEY = """<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN">
<html><head><meta http-equiv="content-type" content="text/html; charset=utf-8"/>
<title>annual survey</title><style type="text/css">body { font-family:"Liberation Sans" }</style></head>
<body>
<!-- ************************************************************************** -->
<table cellspacing="0" border="0">
  <tr>
    <td class="a  b" height="17" align="left">Year</td>
    <td align="right" sdval="2021" sdnum="1033;">2021</td>
  </tr>
  <tr><td>Industry</td><td>All industries</td></tr>
</table>
<pre>  keep   spaces </pre>
</body></html>
"""


def test_compare_htmls(osworld, tmp_path):
    gold = write(tmp_path / "gold.html", SURVEY)

    def variant(name, old, new):
        return write(tmp_path / f"{name}.html", SURVEY.replace(old, new))

    for name, old, new, want in (("same", "", "", 1.0), ("classes", '"a  b"', '"a b"', 1.0),
                                 ("blank", "\n  <tr>", "\n\n  <tr>", 1.0), ("text", "All industries", "Some", 0.0),
                                 ("attr", 'align="left"', 'align="right"', 0.0), ("pre", "  keep", " keep", 0.0),
                                 ("css", "Liberation Sans", "Arial", 0.0),
                                 ("longer", "</body>", "<p>more</p></body>", 0.0)):
        check(osworld, "compare_htmls", (variant(name, old, new), gold), want)
    sdnum = variant("sdnum", "1033;", "1033;0;@")
    check(osworld, "compare_htmls", (sdnum, gold), 0.0)
    check(osworld, "compare_htmls", (sdnum, gold), 1.0, ignore_sdnum=True)
    sdval = variant("sdval", 'sdval="2021" sdnum="1033;"', 'sdval="2022" sdnum="1"')
    check(osworld, "compare_htmls", (sdval, gold), 0.0, ignore_sdnum=True)
    assert METRICS["compare_htmls"](None, gold) == 0.0


@pytest.mark.parametrize("markup", [
    "", "<p>a<b>b</b>c", "<p>x</p><!---->", "<?php echo 1 ?><p>x</p>", "<div><script>var a = '<p>'</script>t</div>",
    "<template><p>in</p></template><p>out</p>", "<ruby>漢<rt>kan</rt></ruby>", "<textarea>\n\n</textarea>",
    "<a rel=' nofollow  x' class=c>l</a><td headers='h1 h2'>c</td>", "<svg:rect x='1'/>", "\ufeff<p>bom</p>",
    "<table><tr><td>1<td>2</table>", "<p>a</p>\n\n<p>b</p>", "<input disabled><br/>text",
])
def test_compare_htmls_reads_the_tree_as_beautifulsoup_does(osworld, tmp_path, markup):
    """Against every small variant (a string dropped, a tag renamed, text changed) the verdict is OSWorld's."""
    variants = [markup, markup.replace("p>", "div>"), markup.replace("a", "A"), markup + "<i>tail</i>",
                markup.replace(" ", "  "), markup.replace("\n", "")]
    gold = write(tmp_path / "gold.html", markup)
    for i, variant in enumerate(variants):
        path = write(tmp_path / f"{i}.html", variant)
        assert METRICS["compare_htmls"](path, gold) == osworld["compare_htmls"](path, gold), repr(variant)


def test_check_html_background_image(osworld, tmp_path):
    rule = {"type:": "value", "value": "anmi_sharper.png"}
    page = "<html><head><style>\nbody {{ {} background-size: cover; }}\n</style></head><body>hi</body></html>"
    check(osworld, "check_html_background_image",
          (write(tmp_path / "a.html", page.format("background-image: url('anmi_sharper.png');")), rule), 1.0)
    check(osworld, "check_html_background_image",
          (write(tmp_path / "b.html", page.format("background-image: url('anmi.png');")), rule), 0.0)
    check(osworld, "check_html_background_image",  # written otherwise: OSWorld's exact string only
          (write(tmp_path / "c.html", page.format('background-image: url("anmi_sharper.png");')), rule), 0.0)
    check(osworld, "check_html_background_image",  # in a style attribute, not a <style>
          (write(tmp_path / "d.html", "<body style=\"background-image: url('anmi_sharper.png')\"></body>"), rule), 0.0)
    check(osworld, "check_html_background_image",
          (write(tmp_path / "e.html", "<style/><style>x{background-image: url('anmi_sharper.png')}</style>"), rule),
          1.0)
    check(osworld, "check_html_background_image",  # a <style> left open at the end: html.parser drops its text
          (write(tmp_path / "f.html", "<style>x{background-image: url('anmi_sharper.png')}"), rule), 0.0)
    assert METRICS["check_html_background_image"](None, rule) == 0.0


@pytest.mark.parametrize("markup", [
    "<style>a</style><style/>b", "<STYLE>a</Style >", "<style>a<!-- </style> -->b</style>", "<style>a&amp;</style>",
    "<svg><style>q</style></svg>", "<style>a</style", "<p><style>x</p>y</style>", "<style>x<style>y</style>z</style>",
])
def test_style_texts_are_beautifulsoups(markup):
    bs4 = pytest.importorskip("bs4")
    styles = metrics_files._Styles()
    styles.feed(markup)
    styles.close()
    assert styles.texts == [t.text for t in bs4.BeautifulSoup(markup, "html.parser").find_all("style")]


# ---- e-books, images, tags ---------------------------------------------------------------------
def epub(path: Path, chapters: list[str], identifier: str = "urn:uuid:1") -> str:
    opf = (f'<package>\n<metadata>\n<dc:identifier id="id">{identifier}</dc:identifier>\n'
           '<dc:title>Pass Through</dc:title>\n</metadata>\n</package>\n')
    ncx = ('<ncx>\n<navMap>\n<navPoint id="n1"><text>1</text></navPoint>\n</navMap>\n'
           '<docTitle>Pass Through</docTitle>\n</ncx>\n')
    members = {"mimetype": "application/epub+zip", "content.opf": opf, "toc.ncx": ncx}
    for i, text in enumerate(chapters):
        members[f"index_split_{i:03}.html"] = f"<html><head><title>c{i}</title></head>\n<body>\n" + \
            "".join(f"<p>{line}</p>\n" for line in text.split("\n")) + "</body></html>\n"
    return zip_of(path, members)


def test_compare_epub(osworld, tmp_path):
    chapters = ["Chapter 1\nIt was a dark night.\nThe rain fell.", "Chapter 2\nMorning came."]
    gold = epub(tmp_path / "gold.epub", chapters, identifier="urn:uuid:gold")
    check(osworld, "compare_epub", (epub(tmp_path / "same.epub", chapters, identifier="urn:uuid:other"), gold), 1.0)
    other = epub(tmp_path / "other.epub", ["A\nB\nC", "D"])
    partly = epub(tmp_path / "partly.epub", [chapters[0], "Chapter 2\nEvening came."])
    extra = epub(tmp_path / "extra.epub", [*chapters, "Chapter 3"])
    scores = {}
    for name, path in (("other", other), ("partly", partly), ("extra", extra)):  # partial credit, as OSWorld's
        scores[name] = METRICS["compare_epub"](path, gold)
        assert scores[name] == pytest.approx(osworld["compare_epub"](path, gold)), name
    assert scores["other"] < scores["partly"] < 1.0 and scores["extra"] < 1.0
    check(osworld, "compare_epub", (write(tmp_path / "not.epub", "plain text"), gold), 0.0)
    check(osworld, "compare_epub", (None, gold), 0.0)


def test_compare_pdf_images(osworld, tmp_path):
    gold = pdf(tmp_path / "receipt_Gold.pdf", "Receipt", [picture(0), picture(1)])
    check(osworld, "compare_pdf_images", (pdf(tmp_path / "same.pdf", "Other", [picture(0), picture(1)]), gold), 1.0,
          needs=("imagehash",))
    check(osworld, "compare_pdf_images", (pdf(tmp_path / "half.pdf", "Receipt", [picture(0), picture(3).rotate(90)]),
                                          gold), 0.5, needs=("imagehash",))
    check(osworld, "compare_pdf_images", (pdf(tmp_path / "one.pdf", "Receipt", [picture(0)]), gold), 0.0,
          needs=("imagehash",))
    check(osworld, "compare_pdf_images", (pdf(tmp_path / "none.pdf", "a"), pdf(tmp_path / "none2.pdf", "b")), 1.0,
          needs=("imagehash",))
    assert METRICS["compare_pdf_images"](write(tmp_path / "not.pdf", "x"), gold) == 0.0
    assert METRICS["compare_pdf_images"](None, gold) == 0.0


def test_phash_is_imagehashs(osworld):
    if "imagehash" in osworld["missing"]:
        pytest.skip("imagehash is not installed")
    import imagehash

    for seed in range(4):
        img = picture(seed).rotate(30 * seed)
        assert list(metrics_files._phash(img)) == list(imagehash.phash(img).hash.flatten())


def test_compare_docx_images(osworld, tmp_path):
    def document(name, images):
        d = docx.Document()
        d.add_paragraph("pasted")
        for i, img in enumerate(images):
            img.save(tmp_path / f"{name}{i}.png")
            d.add_picture(str(tmp_path / f"{name}{i}.png"))
        d.save(tmp_path / name)
        return str(tmp_path / name)

    gold = document("image_Gold.docx", [picture(2)])
    check(osworld, "compare_docx_images", (document("image.docx", [picture(2)]), gold), 1.0)
    check(osworld, "compare_docx_images", (document("other.docx", [picture(1)]), gold), 0.0)
    check(osworld, "compare_docx_images", (document("none.docx", []), gold), 0.0)
    check(osworld, "compare_docx_images", (write(tmp_path / "not.docx", "x"), gold), 0.0)


def test_check_mp3_meta(osworld, tmp_path):
    if "mutagen" in osworld["missing"]:
        pytest.skip("mutagen is not installed")
    from mutagen.easyid3 import EasyID3

    def mp3(name, **tags):
        (tmp_path / name).write_bytes(b"\xff\xfb\x90\x00" + bytes(400))
        if tags:
            t = EasyID3()
            t.update(tags)
            t.save(tmp_path / name)
        return str(tmp_path / name)

    rules = {"title": {"method": "eq", "ref": "Missing You"}, "artist": {"method": "eq", "ref": "Cheng Xiang"}}
    check(osworld, "check_mp3_meta", (mp3("a.mp3", title="Missing You", artist="Cheng Xiang"), rules), 1.0)
    check(osworld, "check_mp3_meta", (mp3("b.mp3", title="Missing You", artist="Zhou Xuan"), rules), 0.0)
    check(osworld, "check_mp3_meta", (mp3("c.mp3", title="Missing You"), rules), 0.0)
    check(osworld, "check_mp3_meta", (mp3("d.mp3", title="Missing You", artist=["Cheng", "Xiang"]),
                                      {"artist": {"method": "eq", "ref": "Cheng,Xiang"}}), 1.0)
    assert METRICS["check_mp3_meta"](mp3("blank.mp3"), rules) == 0.0  # no tag at all (OSWorld's raises)
    assert METRICS["check_mp3_meta"](None, rules) == 0.0


# ---- text results ------------------------------------------------------------------------------
def test_compare_python_pure_text(osworld, tmp_path):
    gold = write(tmp_path / "colab_Gold.py", "import math\n\nprint(math.pi)\nfor i in range(3):\n    print(i)\n")
    tidy = write(tmp_path / "a.py", "#!/usr/bin/env python3\n# coding: utf-8\n"
                                    "import math\nprint(math.pi)   \n\nfor i in range(3):\n\tprint(i)\n")
    check(osworld, "compare_python_pure_text", (tidy, gold), 1.0)
    check(osworld, "compare_python_pure_text", (write(tmp_path / "b.py", "```python\nimport math\nprint(math.pi)\n"
                                                      "for i in range(3):\n    print(i)\n```\n"), gold), 0.0)
    check(osworld, "compare_python_pure_text", (write(tmp_path / "c.py", "import math\nprint(math.e)\n"), gold), 0.0)
    check(osworld, "compare_python_pure_text", (None, gold), 0.0)


def test_compare_config(osworld, tmp_path):
    rules = {"expected": '{"workbench.colorTheme": "Visual Studio Dark"}\n'}
    check(osworld, "compare_config", (write(tmp_path / "a.json", rules["expected"]), rules), 1.0)
    check(osworld, "compare_config", (write(tmp_path / "b.json", '{"workbench.colorTheme": "Visual Studio Dark"}'),
                                      rules), 0.0)
    check(osworld, "compare_config", (None, rules), 0.0)


def test_compare_result_files(osworld, tmp_path):
    gold = write(tmp_path / "gold.txt", "245.5\n")
    for text, want in (("245.5", 1.0), ("The median price is 245.5", 1.0), ("245.50001", 1.0), ("245.6", 0.0),
                       ("about two hundred", 0.0)):
        check(osworld, "compare_result_files", (write(tmp_path / "r.txt", text), gold), want)
    words = write(tmp_path / "words.txt", "  Done \n")
    check(osworld, "compare_result_files", (write(tmp_path / "w.txt", "Done"), words), 1.0)
    check(osworld, "compare_result_files", (write(tmp_path / "w.txt", "Done!"), words), 0.0)
    check(osworld, "compare_result_files", (None, words), 0.0)


def test_compare_time_in_speedtest_results(osworld, tmp_path):
    now = datetime.datetime.now()
    later = now + datetime.timedelta(hours=3)

    def export(stamp: datetime.datetime, last: bool = False):
        fields = ["1", stamp.strftime("%m/%d/%Y %H:%M")] + ([] if last else ["95.1", "20.4"])
        return write(tmp_path / "Speedtest Results Export-.csv", "ID,Date,Download,Upload\n" + ",".join(fields) + "\n")

    check(osworld, "compare_time_in_speedtest_results", (export(now), "60"), 1.0)
    check(osworld, "compare_time_in_speedtest_results", (export(later), "60"), 0.0)
    check(osworld, "compare_time_in_speedtest_results", (export(now, last=True), "60"), 0.0)  # "HH:MM\n"[-5:]
    check(osworld, "compare_time_in_speedtest_results", (write(tmp_path / "e.csv", "ID,Date\n"), "60"), 0.0)
    check(osworld, "compare_time_in_speedtest_results", (None, "60"), 0.0)


TIMEDATECTL = """               Local time: Thu 2024-01-25 12:56:06 {abbr}
           Universal time: Thu 2024-01-25 12:56:06 UTC
                 RTC time: Thu 2024-01-25 12:56:05
                Time zone: {zone}
System clock synchronized: yes
"""


def test_is_utc_0(osworld):
    for zone, want in (("Etc/UTC (UTC, +0000)", 1.0), ("Atlantic/Faroe (WET, +0000)", 1.0),
                       ("Asia/Hong_Kong (HKT, +0800)", 0.0)):
        output = TIMEDATECTL.format(abbr="UTC", zone=zone)
        check(osworld, "is_utc_0", (output, None), want, theirs_args=(output,))
    assert METRICS["is_utc_0"](None, None) == 0.0 and METRICS["is_utc_0"]("short\noutput", None) == 0.0


def test_check_moved_jpgs(osworld):
    rule = {"expected": ["emnlp2023.jpg", "hk_group_photo.jpg", "hong-kong-china.jpg"]}

    def tree(*names):
        return {"type": "directory", "name": "cpjpg", "children": [{"type": "file", "name": n} for n in names]}

    check(osworld, "check_moved_jpgs", (tree("hong-kong-china.jpg", "emnlp2023.jpg", "hk_group_photo.jpg"), rule), 1.0)
    check(osworld, "check_moved_jpgs", (tree("emnlp2023.jpg", "hk_group_photo.jpg"), rule), 0.0)
    check(osworld, "check_moved_jpgs", (tree("emnlp2023.jpg", "hk_group_photo.jpg", "hong-kong-china.jpg", "x.png"),
                                        rule), 0.0)
    check(osworld, "check_moved_jpgs", (tree("emnlp2023.jpg", "emnlp2023.jpg", "hk_group_photo.jpg"), rule), 0.0)
    assert METRICS["check_moved_jpgs"](None, rule) == 0.0
