"""Image and PDF metrics with the semantics of OSWorld's: `compare_images` (structural similarity, as
scikit-image computes it) and `compare_pdfs` (the text of every page, as PyMuPDF extracts it, by
fuzzy ratio), both with partial credit as OSWorld's give; `check_pdf_pages` (a PDF's page count).
"""

from __future__ import annotations

from computerrl.tasks.metrics.basic import fuzz_ratio
from computerrl.tasks.registry import metric

SSIM_MARGIN = 0.01  # with a reference base, a similarity must beat it by this much to count


@metric("compare_images")
def compare_images(image1, image2, **options) -> float:
    """SSIM of the two images in grey, both resized (Lanczos) to the smaller size — smaller as OSWorld
    compares sizes, (width, height) in that order; with `reference_base_result` b, the part of the way
    from b to 1 that the similarity covers (0 unless it beats b by SSIM_MARGIN)."""
    import numpy as np
    from PIL import Image
    from skimage.metrics import structural_similarity

    if not image1 or not image2:
        return 0.0
    a, b = Image.open(image1).convert("L"), Image.open(image2).convert("L")
    size = min(a.size, b.size)
    a, b = a.resize(size, Image.Resampling.LANCZOS), b.resize(size, Image.Resampling.LANCZOS)
    similarity = float(structural_similarity(np.array(a), np.array(b)))
    base = options.get("reference_base_result")
    if base is None:
        return similarity
    return (similarity - base) / (1 - base) if similarity >= base + SSIM_MARGIN else 0.0


@metric("check_pdf_pages")
def check_pdf_pages(pdf_file, rules, **_) -> float:
    """The PDF's page count compared with `rules["ref_value"]` by `rules["relation"]` (an `operator`
    name: eq, ge, lt, …). A file that is no PDF scores 0, where OSWorld's raises."""
    import operator

    import fitz

    if rules["relation"] not in ("eq", "ne", "lt", "le", "gt", "ge"):
        raise ValueError(f"check_pdf_pages: relation {rules['relation']!r} is not a comparison")
    if not pdf_file:
        return 0.0
    try:
        with fitz.open(pdf_file) as pdf:
            pages = pdf.page_count if pdf.is_pdf else None
    except Exception:  # noqa: BLE001 - not a PDF
        return 0.0
    return 0.0 if pages is None else float(getattr(operator, rules["relation"])(pages, rules["ref_value"]))


def pdf_text(path) -> str:
    import pymupdf

    with pymupdf.open(path) as doc:
        return "".join(page.get_text() for page in doc).strip()


@metric("compare_pdfs")
def compare_pdfs(pdf1, pdf2, **options) -> float:
    """The mean, over the expected PDFs (one, or a list paired with the results), of each pair's text
    similarity; a pair that cannot be read scores 0."""
    results, expected = (pdf1, pdf2) if isinstance(pdf2, list) else ([pdf1], [pdf2])
    scores = []
    for result, gold in zip(results, expected):
        try:
            scores.append(fuzz_ratio(pdf_text(result), pdf_text(gold)) / 100)
        except Exception:  # noqa: BLE001 - a missing or broken PDF: 0 for the pair, as OSWorld's
            scores.append(0.0)
    return sum(scores) / len(expected) if expected else 0.0
