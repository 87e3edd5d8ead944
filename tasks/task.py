"""One task in OSWorld's JSON format, loaded and checked field by field.

    {"id": "...", "instruction": "...", "snapshot": "libreoffice_calc", "source": "...",
     "config": [{"type": "open", "parameters": {"path": "/home/user/a.xlsx"}}, ...],
     "related_apps": ["libreoffice_calc"],
     "evaluator": {"func": "compare_table" | [...], "conj": "and" | "or",
                   "result": {"type": "vm_file", ...} | [...], "expected": {...} | [...],
                   "options": {...} | [...], "postconfig": [...]}}

A malformed file fails with a `TaskError` that names the file and the field; `unsupported()`
names every setup step, getter and metric the task uses that this build cannot run. What OSWorld's
own loader takes loads here too: an empty evaluator (`"func": ""`, or none at all) makes a task with
no evaluator, and a getter whose parameters cannot work (an empty path) makes a task that names it
among its needs; neither is malformed.
"""

from __future__ import annotations

import dataclasses
import json
import stat
from pathlib import Path
from typing import Any

from computerrl.tasks.registry import GETTERS, METRICS, SETUP_STEPS

ACCOUNT_STEPS = {"googledrive", "login"}  # OSWorld's steps that sign in to an outside service
ACCOUNT_GETTERS = {"googledrive_file"}
# Metrics whose starting state only the network makes: offline the task starts solved
NETWORK_STATE_METRICS = {"is_cookie_deleted": "no site sets the cookies it wants deleted"}


class TaskError(ValueError):
    """A task file that is not a valid task; the message names the file and the field."""


@dataclasses.dataclass(frozen=True)
class Task:
    id: str
    instruction: str
    config: list[dict[str, Any]]  # setup steps: {"type": ..., "parameters": {...}}
    evaluator: dict[str, Any]
    snapshot: str = ""
    source: str = ""
    related_apps: list[str] = dataclasses.field(default_factory=list)
    path: str = ""  # the file it came from ("" when built in memory)
    network: bool = False  # the desktop's sandbox shares the host's network (our extension; default: none)
    no_evaluator: str = ""  # why the task has no evaluator ("" = it has one)

    @property
    def metrics(self) -> list[str]:
        func = self.evaluator.get("func", [])
        return [func] if isinstance(func, str) else list(func)

    @property
    def getters(self) -> list[dict[str, Any]]:
        """Every getter spec of the evaluator (result and expected, single or lists)."""
        out = []
        for key in ("result", "expected"):
            spec = self.evaluator.get(key)
            out += spec if isinstance(spec, list) else [spec] if spec else []
        return out

    def needs_account(self) -> list[str]:
        """The steps and getters that need an outside account (Google Drive, a web login): no build runs
        them offline, whatever it supports."""
        steps = [s["type"] for s in self.config + self.evaluator.get("postconfig", [])]
        return list(dict.fromkeys([f"setup step {t!r}" for t in steps if t in ACCOUNT_STEPS]
                                  + [f"getter {g['type']!r}" for g in self.getters if g["type"] in ACCOUNT_GETTERS]))

    def agent_code(self) -> list[str]:
        """The evaluation's commands that run a file the agent can rewrite (tasks/agent_code.py):
        a score from them is marked, never taken for the desktop's word."""
        from computerrl.tasks.agent_code import agent_code

        return agent_code(self)

    def unsupported(self) -> list[str]:
        """What this task needs that is not registered, e.g. ["setup step 'download'", "metric 'x'"]."""
        from computerrl.tasks import catalog, getters, metrics, setup  # noqa: F401 - catalog fills the registries

        missing = [f"no evaluator ({self.no_evaluator})"] if self.no_evaluator else []
        steps = [s["type"] for s in self.config + self.evaluator.get("postconfig", [])]
        missing += [f"setup step {t!r}" for t in dict.fromkeys(steps) if t not in SETUP_STEPS]
        programs = [setup.missing_program(s) for s in self.config + self.evaluator.get("postconfig", [])]
        missing += [p for p in dict.fromkeys(programs) if p]
        missing += [f"getter {g['type']!r}" for g in self.getters if g["type"] not in GETTERS]
        missing += [p for p in dict.fromkeys(setup.missing_package(g) for g in self.getters) if p]
        missing += [f"metric {m!r} without the network ({NETWORK_STATE_METRICS[m]}: it would start solved; "
                    "\"network\": true runs it)"
                    for m in dict.fromkeys(self.metrics) if m in NETWORK_STATE_METRICS and not self.network]
        missing += [f"getter {g['type']!r} with {name} {problem}" for g in self.getters
                    for name, problem in setup.check_parameters(g["type"], g, getters.GETTER_PARAMETERS)]
        missing += [f"metric {m!r}" for m in dict.fromkeys(self.metrics) if m not in METRICS]
        options = self.evaluator.get("options") or {}
        for name, opts in zip(self.metrics, options if isinstance(options, list) else [options] * len(self.metrics)):
            if name == "compare_table":
                try:
                    metrics.check_table_rules((opts or {}).get("rules", []))
                except ValueError as e:
                    missing.append(str(e).split(";")[0])  # "compare_table rule 'sheet_print' is not supported"
        return missing


def task_files(folder: Path) -> tuple[list[Path], list[str]]:
    """The *.json files under `folder` that are regular files inside it (a link to one inside included), and
    a line for each other one saying why it was skipped. Only stat is called on those: never opened. A link
    out of the folder is never followed: the folder is a stranger's, and a fetch may run as root."""
    kinds = {stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket", stat.S_ISCHR: "a character device",
             stat.S_ISBLK: "a block device", stat.S_ISDIR: "a folder"}
    files, skipped = [], []
    inside = folder.resolve()
    for path in sorted(folder.rglob("*.json")):
        try:
            target = path.resolve()
        except (OSError, RuntimeError):  # a loop of links
            skipped.append(f"{path}: a loop of links (not followed)")
            continue
        if not target.is_relative_to(inside):
            skipped.append(f"{path}: a link out of the task folder (not followed)")
            continue
        try:
            mode = path.stat().st_mode
        except OSError as e:
            skipped.append(f"{path}: cannot read: {e.strerror}")
            continue
        if stat.S_ISREG(mode):
            files.append(path)
        else:
            kind = next((name for test, name in kinds.items() if test(mode)), "not a file")
            skipped.append(f"{path}: {kind}, not a regular file (not read)")
    return files, skipped


def load_task(path: Path | str) -> Task:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"{path}: cannot read: {e}") from None
    except json.JSONDecodeError as e:
        raise TaskError(f"{path}: not JSON: {e}") from None
    except RecursionError:
        raise TaskError(f"{path}: not a task: JSON nested too deeply to read") from None
    except ValueError as e:  # e.g. an integer of thousands of digits
        raise TaskError(f"{path}: not a task: {e}") from None
    try:
        return parse_task(data, str(path))
    except RecursionError:
        raise TaskError(f"{path}: not a task: nested too deeply") from None


def parse_task(data: Any, where: str = "<task>") -> Task:
    def need(cond: bool, field: str, what: str) -> None:
        if not cond:
            raise TaskError(f"{where}: field {field!r}: {what}")

    need(isinstance(data, dict), "(top level)", "expected a JSON object")
    for key in ("id", "instruction"):
        need(isinstance(data.get(key), str) and data[key].strip() != "", key, "expected a non-empty string")
    config = data.get("config", [])
    need(isinstance(config, list), "config", "expected a list of setup steps")
    for i, step in enumerate(config):
        _check_step(step, f"config[{i}]", need)
    ev = data.get("evaluator")
    no_evaluator = ("it is missing" if ev is None else f"it is {json.dumps(ev)[:40]}, not an object"
                    if not isinstance(ev, dict) else "its func is empty" if ev.get("func") in ("", []) else "")
    if not no_evaluator and isinstance(ev.get("func"), list):  # OSWorld asserts one getter per metric
        counts = {key: len(ev[key]) for key in ("result", "expected") if isinstance(ev.get(key), list)}
        no_evaluator = next((f"OSWorld's loader refuses it: {len(ev['func'])} metrics, {k} {key} getters"
                             for key, k in counts.items() if k != len(ev["func"])), "")
    if no_evaluator:  # as OSWorld loads such a file: a task that cannot be scored
        ev = {"func": [], "postconfig": ev.get("postconfig", []) if isinstance(ev, dict) else []}
    func = ev.get("func")
    need(isinstance(func, str) or (isinstance(func, list) and (func or no_evaluator)
                                   and all(isinstance(f, str) for f in func)),
         "evaluator.func", "expected a metric name or a non-empty list of them")
    n = 1 if isinstance(func, str) else len(func)
    need(ev.get("conj", "and") in ("and", "or"), "evaluator.conj", 'expected "and" or "or"')
    for key in ("result", "expected"):
        spec = ev.get(key)
        if spec is None and (key == "expected" or func == "infeasible" or no_evaluator):
            continue  # some metrics compare against options only; infeasible needs no result
        specs = spec if isinstance(spec, list) else [spec]
        one_per_metric = isinstance(spec, list) and len(spec) == n if isinstance(func, list) else isinstance(spec, dict)
        need(one_per_metric, f"evaluator.{key}", f"expected a list of {n} getters (one per metric)"
             if isinstance(func, list) else "expected a getter object")
        for i, s in enumerate(specs):
            field = f"evaluator.{key}[{i}]" if isinstance(spec, list) else f"evaluator.{key}"
            need(isinstance(s, dict) and isinstance(s.get("type"), str), f"{field}.type",
                 "expected a getter type (string)")
    options = ev.get("options", {})
    need(isinstance(options, dict) or (isinstance(func, list) and isinstance(options, list) and len(options) == n
                                       and all(o is None or isinstance(o, dict) for o in options)),
         "evaluator.options", f"expected an object, or a list of {n} objects (one per metric)")
    post = ev.get("postconfig", [])
    need(isinstance(post, list), "evaluator.postconfig", "expected a list of setup steps")
    for i, step in enumerate(post):
        _check_step(step, f"evaluator.postconfig[{i}]", need)
    apps = data.get("related_apps", [])
    need(isinstance(apps, list) and all(isinstance(a, str) for a in apps), "related_apps", "expected a list of strings")
    need(isinstance(data.get("network", False), bool), "network", "expected true or false")
    return Task(id=data["id"], instruction=data["instruction"], config=config, evaluator=ev,
                snapshot=str(data.get("snapshot", "")), source=str(data.get("source", "")), related_apps=apps,
                path=where, network=data.get("network", False), no_evaluator=no_evaluator)


def _check_step(step: Any, field: str, need) -> None:
    from computerrl.tasks.setup import check_parameters

    need(isinstance(step, dict) and isinstance(step.get("type"), str), f"{field}.type", "expected a step type")
    need(isinstance(step.get("parameters", {}), dict), f"{field}.parameters", "expected an object")
    for name, problem in check_parameters(step["type"], step.get("parameters", {})):
        need(False, f"{field}.parameters.{name}", problem)
