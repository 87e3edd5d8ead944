"""Writer metrics that read a document as words and lines, with the semantics of OSWorld's:
`fuzzy_place_math` (`metrics/general.py`: three words, each close to an expected answer) and
`compare_unique_train_records` (`metrics/docs.py`: duplicate records removed, nothing else changed).

Both read a .docx as python-docx does (body paragraphs, tables left out); a file that cannot be
read scores 0.
"""

from __future__ import annotations

import logging

from computerrl.tasks.metrics.basic import fuzz_ratio
from computerrl.tasks.registry import metric

log = logging.getLogger(__name__)
RECORD_FIELDS = 4  # a train record line: "date, train_id, from, to"


def _paragraph_texts(path) -> list[str] | None:
    import docx

    try:
        return [p.text for p in docx.Document(path).paragraphs]
    except Exception as e:  # noqa: BLE001 - not a .docx, a broken one
        log.info("cannot read %s: %s", path, e)
        return None


@metric("fuzzy_place_math")
def fuzzy_place_math(result, rules, **_) -> float:
    """The document holds exactly three words (whitespace-separated, over all paragraphs); each scores its
    best fuzzy ratio against `rules["expected"]` (a list of accepted answers), and the score is their mean."""
    texts = _paragraph_texts(result) if result else None
    if texts is None:
        return 0.0
    words = [w for text in texts for w in text.split()]
    if len(words) != 3:
        return 0.0
    return sum(max((fuzz_ratio(w, answer) / 100 for answer in rules["expected"]), default=0.0) for w in words) / 3


def _records(path) -> tuple[list[str], list[str]] | None:
    """(the non-blank lines, stripped; the train ids: the second field of each line of four fields)."""
    texts = _paragraph_texts(path)
    if texts is None:
        return None
    lines = [t.strip() for t in texts if t.strip()]
    return lines, [line.split(",")[1].strip() for line in lines if len(line.split(",")) == RECORD_FIELDS]


@metric("compare_unique_train_records")
def compare_unique_train_records(result, expected_files, **_) -> float:
    """`expected_files` is [gold, initial]. 1 if every line of the result was in the initial document,
    no train id is there twice, the ids are the gold's, and there are as many lines as in the gold."""
    if not result or not isinstance(expected_files, list) or len(expected_files) < 2 or not all(expected_files[:2]):
        return 0.0
    got, gold, initial = _records(result), _records(expected_files[0]), _records(expected_files[1])
    if got is None or gold is None or initial is None:
        return 0.0
    (lines, ids), (gold_lines, gold_ids) = got, gold
    return float(set(lines) <= set(initial[0]) and len(ids) == len(set(ids)) and set(ids) == set(gold_ids)
                 and len(lines) == len(gold_lines))
