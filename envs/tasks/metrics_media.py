"""Image and PDF metrics with the semantics of OSWorld's: `compare_images` (structural similarity, as
scikit-image computes it) and `compare_pdfs` (the text of every page, as PyMuPDF extracts it, by
fuzzy ratio). Both give partial credit, as OSWorld's do.
"""

from __future__ import annotations

from computerrl.envs.tasks.metrics_basic import fuzz_ratio
from computerrl.envs.tasks.registry import metric

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
