"""Writer templates: a .docx is opened, the solution types into it and saves with Ctrl+S (the
profile keeps .docx without a dialog); `compare_docx_files` checks the paragraphs' text.

There is no WriterTools API yet, so the reference solutions are GUI-only (`gui_solution` stays
empty: it would be the same list). Typed sentences start with a capital letter and contain no
quotes, dashes or ordinals: LibreOffice's autocorrect would rewrite those.
"""

from __future__ import annotations

from computerrl.data.suites import HOME, PEOPLE, WORDS, Instance, cloud_file, docx, download, open_step, template, vm_file

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
