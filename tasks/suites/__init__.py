"""Generated task suites: templates × parameters → OSWorld-format tasks with proven solutions.

A **template** is a function `(rng, index) -> Instance` registered with `@template(name, domain)`.
It draws its parameters from `rng` (seeded by suite seed, template name and index, so every
instance is reproducible on its own), makes its input and expected files in memory (openpyxl,
python-docx, plain text) and returns the task JSON with a reference solution: a list of action
code lines, API calls where an API exists. Some templates also carry a GUI-only solution
(`Agent.*` only) for the API-GUI vs GUI-only comparison.

URLs in the task JSON are `computerrl://suite/{task_id}/<file>`: `{task_id}` is filled in when
the instance gets its id, and `build` writes the files into a cache folder (`index.json` maps
each URL to its file), which env servers read with `--cache DIR`.

Importing this package registers every template (the `templates_*` modules below).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import random
import zipfile
from typing import Any, Callable

from computerrl.data.registry import Registry

URL_PREFIX = "computerrl://suite/"
SUITE = URL_PREFIX + "{task_id}/"  # templates write SUITE + "file.xlsx"; make() fills the id in
HOME = "/home/user"  # OSWorld's home; the desktop maps it to its own
DOMAINS = ("calc", "writer", "impress", "files", "multi")


@dataclasses.dataclass
class Instance:
    task: dict[str, Any]  # OSWorld task JSON (without "id" until make() sets it)
    files: dict[str, bytes]  # file name -> bytes, inputs and expected files, served under SUITE
    solution: list[str]  # reference solution: one action code line per step, ending in Agent.exit(True)
    params: dict[str, Any]  # the drawn parameters; equal params = the same instance (dedup, split)
    gui_solution: list[str] = dataclasses.field(default_factory=list)  # Agent.* only ([] = none)
    template: str = ""
    domain: str = ""
    index: int = 0

    @property
    def task_id(self) -> str:
        return self.task["id"]

    @property
    def fingerprint(self) -> str:
        """Identity of an instance: template + parameters (two indices may draw the same ones)."""
        key = json.dumps([self.template, self.params], sort_keys=True, default=str)
        return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class Template:
    name: str
    domain: str
    fn: Callable[[random.Random, int], Instance]
    near: str = ""  # the template whose calls this one makes on a new target: held out, a "near" test of it


TEMPLATES = Registry("template")


def template(name: str, domain: str, near: str = ""):
    """Register a task template under `name` in `domain` (one of DOMAINS); `near`: the template whose functions
    and argument kinds its solution uses, in a new combination or on a new target (held out of train beside
    that one, it tests what training on it can reach; a held-out template without one is "far")."""
    if domain not in DOMAINS:
        raise ValueError(f"template {name!r}: unknown domain {domain!r}; known: {', '.join(DOMAINS)}")

    def wrap(fn):
        TEMPLATES.add(name, Template(name, domain, fn, near))
        return fn

    return wrap


def get_template(name: str) -> Template:
    _load()
    return TEMPLATES[name]


def all_templates() -> list[Template]:
    _load()
    return [TEMPLATES[n] for n in sorted(TEMPLATES)]


def make(name: str, seed: int, index: int) -> Instance:
    """Instance `index` of template `name` under suite seed `seed`: same arguments, same instance."""
    t = get_template(name)
    rng = random.Random(f"{seed}:{name}:{index}")  # str seeds hash with sha512: stable across runs
    inst = t.fn(rng, index)
    task_id = f"{name}-s{seed}-{index:05d}"
    text = json.dumps(inst.task).replace("{task_id}", task_id)
    inst.task = {"id": task_id, **json.loads(text)}
    inst.template, inst.domain, inst.index = name, t.domain, index
    return inst


def _load() -> None:
    from computerrl.tasks.suites import (templates_calc, templates_files, templates_impress,  # noqa: F401
                                        templates_multi, templates_writer)


# --- helpers the templates share --------------------------------------------------------------

def download(*files: tuple[str, str]) -> dict[str, Any]:
    """A `download` setup step: (file name in the suite, path on the desktop) pairs."""
    return {"type": "download", "parameters": {"files": [{"url": SUITE + name, "path": path} for name, path in files]}}


def open_step(path: str) -> dict[str, Any]:
    return {"type": "open", "parameters": {"path": path}}


def vm_file(path: str) -> dict[str, Any]:
    return {"type": "vm_file", "path": path, "dest": path.rsplit("/", 1)[-1]}


def cloud_file(name: str) -> dict[str, Any]:
    return {"type": "cloud_file", "path": SUITE + name, "dest": "gold-" + name}


_FIXED_ZIP_TIME = (2024, 1, 1, 0, 0, 0)


def stable_zip(data: bytes) -> bytes:
    """Rewrite an OOXML zip with fixed entry times and no creation/modification stamps, so the
    same parameters give the same bytes (openpyxl and python-docx stamp the current time)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            body = src.read(item.filename)
            if item.filename == "docProps/core.xml":
                import re

                body = re.sub(rb"(<dcterms:(created|modified)[^>]*>)[^<]*", rb"\g<1>2024-01-01T00:00:00Z", body)
            info = zipfile.ZipInfo(item.filename, _FIXED_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(info, body)
    return out.getvalue()


def xlsx(rows: list[list[Any]], *, sheet: str = "Sheet1", extra_sheets: tuple[str, ...] = (),
         bold_header: bool = False, freeze: str | None = None) -> bytes:
    """An .xlsx with `rows` from A1 on its first sheet."""
    import openpyxl
    from openpyxl.styles import Font

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = sheet
    for row in rows:
        ws.append(row)
    if bold_header:
        for cell in ws[1]:
            cell.font = Font(bold=True)
    if freeze:
        ws.freeze_panes = freeze
    for name in extra_sheets:
        wb.create_sheet(name)
    buf = io.BytesIO()
    wb.save(buf)
    return stable_zip(buf.getvalue())


def docx(paragraphs: list[str]) -> bytes:
    import docx as python_docx

    d = python_docx.Document()
    for p in paragraphs:
        d.add_paragraph(p)
    buf = io.BytesIO()
    d.save(buf)
    return stable_zip(buf.getvalue())


def calc_task(instruction: str, rows: list[list[Any]], gold: bytes, rules: list[dict], solution: list[str],
              params: dict, *, gui_solution: list[str] | None = None, name: str = "book.xlsx",
              start: bytes | None = None) -> Instance:
    """A Calc task: the workbook is downloaded to ~/name and opened; compare_table against gold."""
    path = f"{HOME}/{name}"
    task = {"instruction": instruction, "snapshot": "libreoffice_calc", "source": "computerrl-suite",
            "related_apps": ["libreoffice_calc"], "config": [download((name, path)), open_step(path)],
            "evaluator": {"func": "compare_table", "result": vm_file(path), "expected": cloud_file("gold.xlsx"),
                          "options": {"rules": rules}}}
    return Instance(task, {name: start if start is not None else xlsx(rows), "gold.xlsx": gold}, solution, params,
                    gui_solution or [])


SHEET_DATA = [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]
SAVE_EXIT = ["CalcTools.save()", "Agent.exit(True)"]
GUI_SAVE_EXIT = ["Agent.hotkey(['ctrl', 's'])", "Agent.wait()", "Agent.exit(True)"]


def goto_cell(col: int, row: int) -> list[str]:
    """GUI steps from anywhere in a sheet to cell (col, row), 1-based: Ctrl+Home then arrows."""
    return (["Agent.hotkey(['ctrl', 'Home'])"] + ["Agent.hotkey(['down'])"] * (row - 1)
            + ["Agent.hotkey(['right'])"] * (col - 1))


# Words and names the templates draw from. Capitalised on purpose: LibreOffice's autocorrect
# capitalises the first letter of a typed sentence in Calc and Writer, so a GUI solution typing
# lower-case text would not produce what the gold file holds.
WORDS = ["Apple", "Banana", "Cherry", "Delta", "Echo", "Falcon", "Garden", "Harbor", "Island", "Jasmine",
         "Kettle", "Lemon", "Meadow", "Nectar", "Orbit", "Pepper", "Quartz", "River", "Summit", "Tiger",
         "Umber", "Violet", "Willow", "Yarrow", "Zephyr"]
PEOPLE = ["Alice", "Bruno", "Chen", "Dana", "Emeka", "Fatima", "Goran", "Hana", "Ivan", "Jun", "Kofi", "Lena",
          "Mateo", "Nina", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tara"]
FILE_STEMS = ["notes", "report", "todo", "draft", "ideas", "budget", "plan", "summary", "log", "agenda",
              "minutes", "inventory", "contacts", "recipes", "journal"]
