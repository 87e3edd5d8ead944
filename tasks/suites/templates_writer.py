"""Writer templates: a .docx is opened, the solution edits it and saves (Ctrl+S or
`WriterTools.save()`; the profile keeps .docx without a dialog); `compare_docx_files` checks the
paragraphs' text.

The typing templates are GUI-only (`gui_solution` stays empty: it would be the same list); the
editing ones use WriterTools. Typed sentences start with a capital letter and contain no quotes,
dashes or ordinals: LibreOffice's autocorrect would rewrite those.

No template checks paragraph formatting (alignment, font, size): neither docx metric reads it
(compare_docx_files and simple_docx_compare compare text only), so an untouched file would pass.
"""

from __future__ import annotations

from computerrl.tasks.suites import HOME, PEOPLE, WORDS, Instance, cloud_file, docx, download, open_step, template, vm_file

VERBS = ["meets", "visits", "calls", "thanks", "helps", "invites"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]


def _sentence(rng) -> str:
    return f"{rng.choice(PEOPLE)} {rng.choice(VERBS)} {rng.choice(PEOPLE)} near the {rng.choice(WORDS)} on {rng.choice(DAYS)}."


def _writer_task(instruction: str, start: list[str], gold: list[str], solution: list[str], params: dict) -> Instance:
    path = f"{HOME}/doc.docx"
    task = {"instruction": instruction, "snapshot": "libreoffice_writer", "source": "computerrl-suite",
            "related_apps": ["libreoffice_writer"], "config": [download(("doc.docx", path)), open_step(path)],
            "evaluator": {"func": "compare_docx_files", "result": vm_file(path), "expected": cloud_file("gold.docx")}}
    return Instance(task, {"doc.docx": docx(start), "gold.docx": docx(gold)}, solution, params)


SAVE = ["Agent.hotkey(['ctrl', 's'])", "Agent.wait()", "Agent.exit(True)"]


@template("writer_append_paragraph", "writer")
def append_paragraph(rng, index):
    start = [_sentence(rng) for _ in range(rng.randint(1, 3))]
    new = _sentence(rng)
    return _writer_task(f"Add a new paragraph at the end of the document saying: {new} Save the document.",
                        start, start + [new],
                        ["Agent.hotkey(['ctrl', 'End'])", "Agent.type(text='', enter=True)",
                         f"Agent.type(text={new!r})", *SAVE], {"start": start, "new": new})


@template("writer_insert_title", "writer")
def insert_title(rng, index):
    start = [_sentence(rng) for _ in range(rng.randint(1, 3))]
    title = f"{rng.choice(WORDS)} {rng.choice(['Report', 'Notes', 'Plan', 'Review', 'Minutes'])}"
    return _writer_task(f"Insert the title '{title}' as a new first paragraph of the document and save it.",
                        start, [title, *start],
                        ["Agent.hotkey(['ctrl', 'Home'])", f"Agent.type(text={title!r}, enter=True)", *SAVE],
                        {"start": start, "title": title})


@template("writer_write_list", "writer")
def write_list(rng, index):
    items = rng.sample(WORDS, rng.randint(2, 5))
    return _writer_task("The document is empty. Write these items, one per paragraph, in this order, and save: "
                        + ", ".join(items) + ".", [], items,
                        [*[f"Agent.type(text={w!r}, enter=True)" for w in items], *SAVE], {"items": items})


API_SAVE = ["WriterTools.save()", "Agent.exit(True)"]


def _api_task(instruction: str, start: list[str], gold: list[str], solution: list[str], params: dict) -> Instance:
    return _writer_task(instruction, start, gold, [*solution, *API_SAVE], params)


@template("writer_find_replace", "writer")
def find_replace(rng, index):
    old, new = rng.sample(PEOPLE, 2)
    start = [_sentence(rng) for _ in range(rng.randint(2, 4))]
    start[rng.randrange(len(start))] = f"{old} {rng.choice(VERBS)} {rng.choice(PEOPLE)} near the {rng.choice(WORDS)}."
    start = [s.replace(new, old) for s in start]  # `new` occurs nowhere before the edit
    gold = [s.replace(old, new) for s in start]
    return _api_task(f"Replace every occurrence of the name {old} with {new} in the document and save it.",
                     start, gold, [f"WriterTools.find_and_replace({old!r}, {new!r})"],
                     {"start": start, "old": old, "new": new})


@template("writer_capitalize_words", "writer")
def capitalize_words(rng, index):
    n = rng.randint(1, 3)
    lines = [" ".join(w.lower() for w in rng.sample(WORDS, rng.randint(2, 5))) for _ in range(n)]
    k = rng.randrange(n)
    gold = [line.title() if i == k else line for i, line in enumerate(lines)]
    return _api_task(f"Capitalize the first letter of every word in paragraph {k + 1} of the document (leave the "
                     "other paragraphs as they are) and save it.", lines, gold,
                     [f"WriterTools.capitalize_words([{k}])"], {"lines": lines, "k": k})


@template("writer_fix_typo", "writer")
def fix_typo(rng, index):
    n = rng.randint(2, 4)
    word = rng.choice(WORDS)
    typo = word[:-2] + word[-1] + word[-2]  # the last two letters swapped
    start = [f"{rng.choice(PEOPLE)} {rng.choice(VERBS)} {rng.choice(PEOPLE)} near the {word}." for _ in range(n)]
    k = rng.randrange(n)
    start[k] = start[k].replace(word, typo)
    gold = [s.replace(typo, word) for s in start]
    return _api_task(f"Paragraph {k + 1} misspells {word} as {typo}. Correct it and save the document.", start, gold,
                     [f"WriterTools.find_and_replace({typo!r}, {word!r}, [{k}])"],
                     {"start": start, "k": k, "word": word})


@template("writer_remove_word", "writer")
def remove_word(rng, index):
    filler = rng.choice(["very", "really", "quite", "truly"])
    start = []
    for _ in range(rng.randint(2, 4)):
        a, b = rng.sample(PEOPLE, 2)
        start.append(f"{a} is {filler} glad that {b} {rng.choice(VERBS)} the {rng.choice(WORDS)} team.")
    gold = [s.replace(f" {filler} ", " ") for s in start]
    return _api_task(f"Delete the word '{filler}' everywhere in the document (keep single spaces between the "
                     "remaining words) and save it.", start, gold,
                     [f"WriterTools.find_and_replace({' ' + filler + ' '!r}, ' ')"],
                     {"start": start, "filler": filler})
