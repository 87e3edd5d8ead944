"""Files/terminal templates: create, rename, move, copy, delete, find and edit text files.

The reference solutions open a terminal and type shell commands (`Agent.type(..., enter=True)`),
so they are GUI-only by construction. Checks read the files back (`compare_text_file`) or list a
folder (`vm_command_line` + `check_include_exclude`).
"""

from __future__ import annotations

from computerrl.tasks.suites import (FILE_STEMS, HOME, PEOPLE, SUITE, WORDS, Instance, cloud_file, download,
                                     template, vm_file)


def _lines(rng, n: int) -> list[str]:
    return [f"{rng.choice(PEOPLE)} {rng.choice(['likes', 'owns', 'wants', 'sells'])} {rng.choice(WORDS)}"
            for _ in range(n)]


def _text(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


def _terminal(*commands: str) -> list[str]:
    return ["Agent.open_app('terminal')", *[f"Agent.type(text={c!r}, enter=True)" for c in commands],
            "Agent.wait()", "Agent.exit(True)"]


def _ls(folder: str) -> dict:
    return {"type": "vm_command_line", "command": f"ls -1 {HOME}/{folder}", "shell": True}


def _task(instruction: str, config: list, func, result, expected, files: dict, solution: list, params: dict,
          conj: str = "and") -> Instance:
    ev = {"func": func, "result": result, "expected": expected}
    if isinstance(func, list):
        ev["conj"] = conj
    task = {"instruction": instruction, "snapshot": "os", "source": "computerrl-suite", "related_apps": ["terminal"],
            "config": config, "evaluator": ev}
    return Instance(task, files, solution, params)


MKDIRS = {"type": "execute", "parameters": {"command": ["mkdir", "-p", f"{HOME}/Documents", f"{HOME}/Desktop"]}}


@template("files_create_text", "files")
def create_text(rng, index):
    stem, line = rng.choice(FILE_STEMS), _lines(rng, 1)[0]
    path = f"{HOME}/Documents/{stem}.txt"
    return _task(f"Create the text file ~/Documents/{stem}.txt containing the single line: {line}", [MKDIRS],
                 "compare_text_file", vm_file(path), cloud_file("gold.txt"), {"gold.txt": _text([line])},
                 _terminal(f"echo '{line}' > ~/Documents/{stem}.txt"), {"stem": stem, "line": line})


@template("files_rename", "files")
def rename(rng, index):
    old, new = rng.sample(FILE_STEMS, 2)
    lines = _lines(rng, rng.randint(2, 4))
    return _task(f"Rename ~/Desktop/{old}.txt to {new}.txt (same folder).",
                 [MKDIRS, download((f"{old}.txt", f"{HOME}/Desktop/{old}.txt"))],
                 ["compare_text_file", "check_include_exclude"], [vm_file(f"{HOME}/Desktop/{new}.txt"), _ls("Desktop")],
                 [cloud_file(f"{old}.txt"), {"type": "rule", "rules": {"include": [f"{new}.txt"],
                                                                        "exclude": [f"{old}.txt"]}}],
                 {f"{old}.txt": _text(lines)}, _terminal(f"mv ~/Desktop/{old}.txt ~/Desktop/{new}.txt"),
                 {"old": old, "new": new, "lines": lines})


@template("files_move", "files")
def move(rng, index):
    stem, folder = rng.choice(FILE_STEMS), rng.choice(["Archive", "Old", "Backup", "Projects", "Work"])
    lines = _lines(rng, rng.randint(1, 3))
    return _task(f"Move ~/Desktop/{stem}.txt into the folder ~/Documents/{folder} (create the folder if needed).",
                 [MKDIRS, download((f"{stem}.txt", f"{HOME}/Desktop/{stem}.txt"))],
                 ["compare_text_file", "check_include_exclude"],
                 [vm_file(f"{HOME}/Documents/{folder}/{stem}.txt"), _ls("Desktop")],
                 [cloud_file(f"{stem}.txt"), {"type": "rule", "rules": {"include": [], "exclude": [f"{stem}.txt"]}}],
                 {f"{stem}.txt": _text(lines)},
                 _terminal(f"mkdir -p ~/Documents/{folder} && mv ~/Desktop/{stem}.txt ~/Documents/{folder}/"),
                 {"stem": stem, "folder": folder, "lines": lines})


@template("files_copy", "files")
def copy(rng, index):
    stem = rng.choice(FILE_STEMS)
    lines = _lines(rng, rng.randint(1, 4))
    return _task(f"Make a copy of ~/Documents/{stem}.txt named ~/Documents/{stem}-copy.txt; keep the original.",
                 [MKDIRS, download((f"{stem}.txt", f"{HOME}/Documents/{stem}.txt"))],
                 ["compare_text_file", "compare_text_file"],
                 [vm_file(f"{HOME}/Documents/{stem}-copy.txt"), vm_file(f"{HOME}/Documents/{stem}.txt")],
                 [cloud_file(f"{stem}.txt"), cloud_file(f"{stem}.txt")], {f"{stem}.txt": _text(lines)},
                 _terminal(f"cp ~/Documents/{stem}.txt ~/Documents/{stem}-copy.txt"), {"stem": stem, "lines": lines})


@template("files_delete", "files")
def delete(rng, index):
    gone, keep = rng.sample(FILE_STEMS, 2)
    return _task(f"Delete the file ~/Desktop/{gone}.txt; leave {keep}.txt alone.",
                 [MKDIRS, download((f"{gone}.txt", f"{HOME}/Desktop/{gone}.txt"),
                                   (f"{keep}.txt", f"{HOME}/Desktop/{keep}.txt"))],
                 "check_include_exclude", _ls("Desktop"),
                 {"type": "rule", "rules": {"include": [f"{keep}.txt"], "exclude": [f"{gone}.txt"]}},
                 {f"{gone}.txt": _text(_lines(rng, 2)), f"{keep}.txt": _text(_lines(rng, 2))},
                 _terminal(f"rm ~/Desktop/{gone}.txt"), {"gone": gone, "keep": keep})


@template("files_make_folders", "files")
def make_folders(rng, index):
    names = rng.sample(["src", "docs", "tests", "data", "assets", "notes", "build"], rng.randint(2, 4))
    project = rng.choice(WORDS)
    return _task(f"Create a folder ~/{project} with the subfolders {', '.join(names)} inside it.", [MKDIRS],
                 "check_include_exclude", _ls(project), {"type": "rule", "rules": {"include": names, "exclude": []}},
                 {}, _terminal(f"mkdir -p ~/{project}/{{{','.join(names)}}}" if len(names) > 1 else
                               f"mkdir -p ~/{project}/{names[0]}"), {"names": names, "project": project})


@template("files_append_line", "files")
def append_line(rng, index):
    stem = rng.choice(FILE_STEMS)
    lines, new = _lines(rng, rng.randint(1, 4)), _lines(rng, 1)[0]
    path = f"{HOME}/Documents/{stem}.txt"
    return _task(f"Append the line '{new}' at the end of ~/Documents/{stem}.txt.",
                 [MKDIRS, download((f"{stem}.txt", path))], "compare_text_file", vm_file(path),
                 cloud_file("gold.txt"), {f"{stem}.txt": _text(lines), "gold.txt": _text(lines + [new])},
                 _terminal(f"echo '{new}' >> ~/Documents/{stem}.txt"), {"stem": stem, "lines": lines, "new": new})


@template("files_replace_word", "files")
def replace_word(rng, index):
    stem = rng.choice(FILE_STEMS)
    lines = _lines(rng, rng.randint(3, 6))
    present = sorted({w for line in lines for w in line.split()[2:]})
    old = rng.choice(present)
    new = rng.choice([w for w in WORDS if w not in present])
    path = f"{HOME}/Documents/{stem}.txt"
    gold = [line.replace(old, new) for line in lines]
    return _task(f"In ~/Documents/{stem}.txt, replace every occurrence of the word {old} with {new}.",
                 [MKDIRS, download((f"{stem}.txt", path))], "compare_text_file", vm_file(path), cloud_file("gold.txt"),
                 {f"{stem}.txt": _text(lines), "gold.txt": _text(gold)},
                 _terminal(f"sed -i 's/{old}/{new}/g' ~/Documents/{stem}.txt"),
                 {"stem": stem, "lines": lines, "old": old, "new": new})


@template("files_count_matches", "files")
def count_matches(rng, index):
    stem = rng.choice(FILE_STEMS)
    lines = _lines(rng, rng.randint(4, 9))
    person = rng.choice(PEOPLE)
    count = sum(person in line for line in lines)
    return _task(f"Count the lines of ~/Documents/{stem}.txt that mention {person} and write just that number "
                 f"into ~/answer.txt.", [MKDIRS, download((f"{stem}.txt", f"{HOME}/Documents/{stem}.txt"))],
                 "compare_text_file", vm_file(f"{HOME}/answer.txt"), cloud_file("gold.txt"),
                 {f"{stem}.txt": _text(lines), "gold.txt": _text([str(count)])},
                 _terminal(f"grep -c {person} ~/Documents/{stem}.txt > ~/answer.txt"),
                 {"stem": stem, "lines": lines, "person": person})


@template("files_sort_lines", "files")
def sort_lines(rng, index):
    stem = rng.choice(FILE_STEMS)
    lines = _lines(rng, rng.randint(3, 7))
    return _task(f"Write the lines of ~/Documents/{stem}.txt sorted alphabetically into ~/Documents/{stem}-sorted.txt.",
                 [MKDIRS, download((f"{stem}.txt", f"{HOME}/Documents/{stem}.txt"))], "compare_text_file",
                 vm_file(f"{HOME}/Documents/{stem}-sorted.txt"), cloud_file("gold.txt"),
                 {f"{stem}.txt": _text(lines), "gold.txt": _text(sorted(lines))},  # byte order = LC_ALL=C sort
                 _terminal(f"LC_ALL=C sort ~/Documents/{stem}.txt > ~/Documents/{stem}-sorted.txt"),
                 {"stem": stem, "lines": lines})


assert SUITE  # the URL prefix download()/cloud_file() use


@template("files_find_file", "files")
def find_file(rng, index):
    stems = rng.sample(FILE_STEMS, rng.randint(3, 5))
    target = rng.choice(stems)
    word = rng.choice(WORDS)
    texts = {s: [line for line in _lines(rng, 3) if word not in line] for s in stems}
    texts[target].insert(rng.randint(0, len(texts[target])), f"{rng.choice(PEOPLE)} hides the {word}")
    folder = rng.choice(["Inbox", "Papers", "Stuff"])
    return _task(f"Exactly one file in ~/{folder} mentions {word}. Write that file's name (just the name, "
                 f"e.g. notes.txt) into ~/answer.txt.",
                 [MKDIRS, download(*[(f"{s}.txt", f"{HOME}/{folder}/{s}.txt") for s in stems])],
                 "compare_text_file", vm_file(f"{HOME}/answer.txt"), cloud_file("gold.txt"),
                 {**{f"{s}.txt": _text(t) for s, t in texts.items()}, "gold.txt": _text([f"{target}.txt"])},
                 _terminal(f"cd ~/{folder} && grep -l {word} *.txt > ~/answer.txt; cd ~"),
                 {"texts": texts, "word": word, "folder": folder})
