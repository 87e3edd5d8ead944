"""`build-apis`: application APIs written by a model and proven in a live desktop.

1. Requirement analysis: the model reads a sample of the app's tasks (with their reference solutions)
   and the app's API as the prompt shows it, and proposes missing functions as specs; a spec that
   clashes with or duplicates an existing function is dropped with the reason.
2. Implementation and 3. tests: for each spec the model writes the function (UNO, with the helpers of
   `apis/kit.py`) and tests that set a document up, call it and assert on the document.
4. Self-correction: a failing API goes back to the model with the error, at most `rounds` times.

Model-written code never runs here: `apis/guard.py` checks it, and the env servers of `envs` run
its tests inside a desktop's sandbox (`TestApi`, `apis/worker.py`). Every exchange with the model
is appended to OUT/transcript.jsonl; `replay` answers from such a file instead of a model.

Writes OUT/dataset (every API proposed: verdict, reason, rounds, error, source tasks, seconds),
OUT/<app>_apis.py (the accepted ones, for `--apis OUT`) and OUT/summary.json. Killed, the same
command resumes from its journal, OUT/.journal/ (finished APIs are not built again).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from computerrl.data.config import DEVICE, ENGINE, ENVS, LLM_URL, MAX_NEW_TOKENS, MODEL, OUT, SEED, TASKS, setting
from computerrl.data.files import append_line

if TYPE_CHECKING:  # every app's API loads when a build runs: `computerrl --help` builds this config
    from computerrl.apis.builder import Spec

REASONS = ("accepted", "failed", "hung", "crashed", "refused", "no_assertion", "no_code", "clash", "duplicate",
           "bad_spec", "over_limit")


JOURNAL = ".journal"  # the build in progress (data/journal.py): its analysis and each API built

@dataclasses.dataclass
class BuildApisConfig:
    app: str = setting("calc", "The app whose API grows: calc, writer or impress.")
    tasks: Path = setting(Path("runs/tasks/train"), TASKS)
    envs: Path = setting(Path("runs/envs"), ENVS)  # whose desktops run the tests
    out: Path = setting(Path("runs/apis-calc"), OUT, "--out", "-o")
    model: str = setting("embedded", MODEL)  # for the transformers engine, or what the openai server serves
    engine: str = setting("transformers", ENGINE)
    llm_url: str = setting("", LLM_URL)  # the openai engine's server (chat completions only)
    temperature: float = setting(0.0, "Sampling temperature (0 = greedy).")
    max_new_tokens: int = setting(768, MAX_NEW_TOKENS)  # per answer
    rounds: int = setting(3, "Attempts per API: the first, then corrections with the error.")
    sample_tasks: int = setting(12, "Example tasks the requirement analysis reads.")
    max_apis: int = setting(10, "New functions asked for.")
    timeout_s: float = setting(60.0, "Seconds one API's tests may take together before it is rejected as hung (its "
                                     "desktop is then reset).")
    replay: Path | None = setting(None, "Answer from this transcript (a build's transcript.jsonl) instead of a model: "
                                        "reruns that build exactly.")
    seed: int = setting(0, SEED)
    device: str = setting("cpu", DEVICE)
    overwrite: bool = setting(False, "Build again even if --out holds a finished build.")

    def __post_init__(self):
        from computerrl.apis.generated import APPS, api_class

        self.tasks, self.envs, self.out = Path(self.tasks), Path(self.envs), Path(self.out)
        if self.app not in APPS:
            raise ValueError(f"--app must be one of {', '.join(APPS)}")
        api_class(self.app)
        if self.rounds < 1 or self.sample_tasks < 1 or self.max_apis < 1:
            raise ValueError("--rounds, --sample-tasks and --max-apis must be at least 1")
        if self.replay is not None:
            self.replay = Path(self.replay).resolve()
            if not self.replay.is_file():
                raise ValueError(f"--replay {self.replay}: no such transcript")
            if self.replay == (self.out / "transcript.jsonl").resolve():
                raise ValueError("--replay reads the transcript of --out itself, which the build appends to: "
                                 "give another --out")
        if self.replay is None and self.engine == "openai" and not self.llm_url:
            raise ValueError("--engine openai needs --llm-url (an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1)")


class Llm:
    """The model, or a transcript standing in for it. Every exchange is keyed (step, api, round) and
    appended to the transcript; a replayed exchange whose recorded prompt differs is an error (the
    build is not the one recorded). A transcript line without a prompt answers any prompt."""

    def __init__(self, cfg: BuildApisConfig, transcript: Path):
        self.transcript, self.lock = transcript, threading.Lock()
        self.engine, self.recorded = None, {}
        self.settings = {"engine": cfg.engine, "model": cfg.model, "temperature": cfg.temperature,
                         "max_new_tokens": cfg.max_new_tokens, "seed": cfg.seed}
        if cfg.replay is not None:
            lines = Path(cfg.replay).read_text().split("\n")
            for n, line in enumerate(lines, 1):
                if line.strip():
                    try:
                        row = json.loads(line)
                        self.recorded[_key(row)] = row
                    except (ValueError, KeyError) as e:
                        if n == len(lines):  # a build killed while writing it: the exchange is not in it
                            break
                        raise ValueError(f"{cfg.replay} line {n}: not a transcript line ({e})") from None
        else:
            from computerrl.policy.checkpoint import resolve
            from computerrl.policy.session import open_engine

            self.engine = open_engine(resolve(cfg.model), engine=cfg.engine, temperature=cfg.temperature,
                                      max_new_tokens=cfg.max_new_tokens, device=cfg.device, llm_url=cfg.llm_url)
            served = getattr(self.engine, "model", None)  # the openai engine's: the name its server gives
            self.settings["model"] = served if isinstance(served, str) and served else cfg.model  # not a torch module
        self.seed = cfg.seed

    def ask(self, step: str, api: str, round_: int, messages: list[dict]) -> str:
        key = (step, api, round_)
        with self.lock:  # one exchange at a time: one engine
            if self.engine is None:
                row = self.recorded.get(key)
                if row is None:
                    raise ReplayError(f"the transcript has no answer for {step} of {api or 'the app'}, round {round_}")
                if row.get("prompt") is not None and row["prompt"] != messages:
                    raise ReplayError(f"the transcript's prompt for {step} of {api or 'the app'}, round {round_} "
                                      "differs from this build's: it records another build")
                answer = row["answer"]  # and the model and settings that gave it, as recorded
                settings = {k: row[k] for k in ("engine", "model", "temperature", "max_new_tokens", "seed") if k in row}
            else:
                answer = self.engine.generate([messages], seed=self.seed)[0].text
                settings = self.settings
            append_line(self.transcript, {"step": step, "api": api, "round": round_, "prompt": messages, "answer": answer,
                                      **settings})
            return answer

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()


class ReplayError(RuntimeError):
    """The transcript cannot answer this build."""


def _key(row: dict) -> tuple[str, str, int]:
    return row["step"], row.get("api", ""), int(row.get("round", 0))


# --- one API ---------------------------------------------------------------------------------------

def build_one(spec: Spec, cfg: BuildApisConfig, llm: Llm, test_on) -> dict:
    """Implement, test and correct one spec; its dataset row. `test_on(code, tests)` runs the tests in a
    desktop: (worker answer, hung)."""
    from computerrl.apis import builder
    from computerrl.apis.generated import api_class
    from computerrl.apis.guard import refusals

    api, started = api_class(cfg.app), time.monotonic()
    prompt = builder.implement_prompt(cfg.app, api, spec)
    code = tests = answer = ""
    reason, error, asked = "no_code", "", False
    rounds = 0
    for rounds in range(1, cfg.rounds + 1):
        if rounds > 1:
            prompt = builder.fix_prompt(prompt, answer, error)
        answer = llm.ask("implement", spec.name, rounds, prompt)
        try:
            code, new_tests = builder.split_code(builder.code_blocks(answer), spec.name)
        except ValueError as e:
            reason, error = "no_code", str(e)
            continue
        if not asked:  # once, after the first answer that holds the function
            tests, asked = builder.tests_of(llm.ask("tests", spec.name, 1, builder.tests_prompt(cfg.app, spec))), True
        if new_tests:
            tests = new_tests
        reason, error = _verdict(spec, code, tests, test_on, refusals)
        if reason == "accepted":
            break
    return {"app": cfg.app, "name": spec.name, "signature": spec.signature, "doc": spec.doc, "code": code,
            "tests": tests, "verdict": "accepted" if reason == "accepted" else "rejected", "reason": reason,
            "rounds": rounds, "error": error, "source_tasks": spec.tasks,
            "seconds": round(time.monotonic() - started, 2)}


def _verdict(spec: Spec, code: str, tests: str, test_on, refusals) -> tuple[str, str]:
    """(reason, error) of one attempt: "accepted", or why not."""
    from computerrl.apis import builder

    problem = builder.signature_problem(code, spec)
    if problem:
        return "no_code", problem
    why = refusals(code, frozenset(builder.HELPER_NAMES)) + refusals(tests, frozenset(builder.HELPER_NAMES))
    if why:
        return "refused", "refused: " + "; ".join(why[:5])
    counted = builder.asserting_tests(tests, spec.name)
    if not counted:
        return "no_assertion", (f"no test calls {spec.name} and then asserts on the document (read back through "
                                "doc, cell, cell_range, sheet or used_area)")
    answer, hung = test_on(code, tests)
    if hung:
        return "hung", answer.get("error", "it did not finish in time")
    if not answer.get("ok"):
        return "crashed", answer.get("error", "")
    failed = [f"{t['name']}: {t['error']}" for t in answer["tests"] if not t["passed"]]
    if failed or not any(t["name"] in counted for t in answer["tests"]):
        return "failed", "\n".join(failed) or "no test ran"
    return "accepted", ""


# --- the stage ---------------------------------------------------------------------------------------

def run(cfg: BuildApisConfig, console=None) -> dict:
    from rich.console import Console

    from computerrl.apis.builder import Spec
    from computerrl.data.folders import ENVS, MANIFEST, TASK_FILES, TASKS, expect
    from computerrl.data.journal import Journal

    console = console or Console(soft_wrap=True)
    summary_path = cfg.out / "summary.json"
    if summary_path.exists() and not (cfg.out / JOURNAL).exists() and not cfg.overwrite:
        console.print(f"{cfg.out} holds a finished build (--overwrite builds again)")
        summary = json.loads(summary_path.read_text())
        console.print(table(summary))
        return summary
    if cfg.overwrite:  # afresh, even over a journal of these settings
        for leftover in (summary_path, cfg.out / "transcript.jsonl"):
            leftover.unlink(missing_ok=True)
        shutil.rmtree(cfg.out / JOURNAL, ignore_errors=True)
    expect(cfg.tasks, "--tasks", TASKS, TASK_FILES)  # before its journal, a model or a desktop is started
    expect(cfg.envs, "--envs", ENVS, MANIFEST)
    journal = Journal(cfg.out / JOURNAL, _settings(cfg))
    llm = Llm(cfg, cfg.out / "transcript.jsonl")
    try:
        if not journal.has("analysis"):
            journal.add("analysis", _analyse(cfg, llm))
        analysis = journal.get("analysis")
        specs = [Spec(**s) for s in analysis["specs"]]
        _build_all(cfg, llm, specs, journal, console)
    finally:
        llm.close()
    return _finish(cfg, specs, analysis, {s.name: journal.get(f"api:{s.name}") for s in specs}, journal, console)


def _analyse(cfg: BuildApisConfig, llm: Llm) -> dict:
    from computerrl.apis import builder
    from computerrl.apis.generated import api_class

    api = api_class(cfg.app)
    tasks = _sample_tasks(cfg)
    answer = llm.ask("analyse", "", 1, builder.analysis_prompt(cfg.app, api, tasks, cfg.max_apis))
    specs, dropped = builder.parse_specs(answer, api)
    dropped += [(s.name, "over_limit", f"beyond --max-apis {cfg.max_apis}") for s in specs[cfg.max_apis:]]
    return {"specs": [dataclasses.asdict(s) for s in specs[:cfg.max_apis]],
            "dropped": [{"name": n, "reason": r, "why": w} for n, r, w in dropped], "tasks": [t["task_id"] for t in tasks]}


def _sample_tasks(cfg: BuildApisConfig) -> list[dict]:
    """The app's tasks (domain = app, or the app among their related apps), their solutions when the
    dataset has them, spread evenly over the set."""
    from computerrl.tasks.task_set import load_task_set

    solutions = {}
    if (cfg.tasks / "dataset_info.json").exists():
        from computerrl.data.datasets_io import load

        ds = load(cfg.tasks)
        if "solution" in ds.column_names:
            solutions = dict(zip(ds["task_id"], ds["solution"]))
    items = [i for i in load_task_set(cfg.tasks) if i.domain == cfg.app or cfg.app in i.task.get("related_apps", [])]
    if not items:
        raise ValueError(f"no {cfg.app} task under {cfg.tasks}")
    stride = max(1, len(items) // cfg.sample_tasks)
    return [{"task_id": i.task_id, "instruction": i.task.get("instruction", ""), "solution": solutions.get(i.task_id, [])}
            for i in items[::stride][:cfg.sample_tasks]]


def _build_all(cfg: BuildApisConfig, llm: Llm, specs: list[Spec], journal, console) -> None:
    """Every API the journal lacks, built and tested on the desktops of `cfg.envs`, one per desktop at a time."""
    from computerrl.data.journal import work_through
    from computerrl.envs.fleet.pool import EnvPool
    from computerrl.envs.service.client import EnvError

    if all(journal.has(f"api:{s.name}") for s in specs):
        return
    pool = EnvPool.from_manifest(cfg.envs, call_timeout_s=cfg.timeout_s + 60)

    def test_on(code: str, tests: str) -> tuple[dict, bool]:
        try:
            with pool.lease() as env:
                return env.client.test_api(cfg.app, code, tests, desktop=env.desktop, timeout_s=cfg.timeout_s)
        except EnvError as e:  # the desktop was lost under the code (or before it): that API's, not the build's
            return {"ok": False, "error": f"the desktop was lost: {e}"}, False

    def said(name: str, row: dict) -> str:
        mark = "[green]accepted[/]" if row["verdict"] == "accepted" else f"[red]{row['reason']}[/]"
        return (f"{row['name']}: {mark} after {row['rounds']} round(s), {row['seconds']:.1f} s"
                + (f" — {row['error'][:160]}" if row["error"] else ""))

    try:
        work_through(journal, [(f"api:{s.name}", s) for s in specs], lambda spec: build_one(spec, cfg, llm, test_on),
                     workers=pool.size, label="APIs", console=console, said=said)
    finally:
        pool.close()


def _finish(cfg: BuildApisConfig, specs: list[Spec], analysis: dict, built: dict, journal, console) -> dict:
    import datasets

    from computerrl.apis.generated import GeneratedApi, module_path, module_text
    from computerrl.data.datasets_io import lineage, save_atomic
    from computerrl.data.files import write_atomic
    from computerrl.data.schemas import API_FEATURES

    rows = [built[s.name] for s in specs]
    for d in analysis["dropped"]:
        rows.append({"app": cfg.app, "name": d["name"], "signature": "", "doc": "", "code": "", "tests": "",
                     "verdict": "rejected", "reason": d["reason"], "rounds": 0, "error": d["why"], "source_tasks": [],
                     "seconds": 0.0})
    card = lineage("build-apis", cfg, {"tasks": str(cfg.tasks), "envs": str(cfg.envs),
                                       "replay": str(cfg.replay or "")})
    save_atomic(datasets.Dataset.from_list(rows, features=API_FEATURES), cfg.out / "dataset", lineage=card)
    accepted = [GeneratedApi(cfg.app, r["name"], r["code"]) for r in rows if r["verdict"] == "accepted"]
    write_atomic(module_path(cfg.out, cfg.app), module_text(cfg.app, accepted))
    built = [r for r in rows if r["rounds"]]
    summary = {"app": cfg.app, "proposed": sum(r["name"] != "(answer)" for r in rows), "accepted": len(accepted),
               "rejected": {k: sum(r["reason"] == k for r in rows) for k in REASONS[1:] if any(r["reason"] == k for r in rows)},
               "rounds": {str(n): sum(r["rounds"] == n for r in built) for n in range(1, cfg.rounds + 1)},
               "seconds_per_api": round(sum(r["seconds"] for r in built) / max(1, len(built)), 2),
               "apis": [{k: r[k] for k in ("name", "verdict", "reason", "rounds", "seconds")} for r in rows]}
    write_atomic(cfg.out / "summary.json", json.dumps(summary, indent=2))
    journal.remove()  # the build is whole: nothing to resume
    console.print(table(summary))
    console.print(f"wrote {cfg.out}/dataset, {module_path(cfg.out, cfg.app).name} ({len(accepted)} APIs: load them "
                  f"with --apis {cfg.out}) and summary.json")
    return summary


def table(summary: dict):
    from rich.table import Table

    t = Table(title=f"build-apis: {summary['app']}")
    for col in ("API", "verdict", "reason", "rounds", "seconds"):
        t.add_column(col, justify="right" if col in ("rounds", "seconds") else "left")
    for a in summary["apis"]:
        t.add_row(a["name"], a["verdict"], a["reason"], str(a["rounds"]), f"{a['seconds']:.1f}")
    rejected = ", ".join(f"{k} {v}" for k, v in summary["rejected"].items()) or "none"
    t.caption = (f"proposed {summary['proposed']}, accepted {summary['accepted']}, rejected: {rejected}; "
                 f"rounds used: {summary['rounds']}; {summary['seconds_per_api']:.1f} s per API built")
    return t


def _settings(cfg: BuildApisConfig) -> dict:
    """What a resumed build must share with the one it resumes."""
    keep = ("app", "tasks", "model", "engine", "temperature", "max_new_tokens", "rounds", "sample_tasks", "max_apis",
            "seed")  # not --replay: a replay cut short may resume from a longer transcript (prompts are checked)
    return {k: str(getattr(cfg, k)) for k in keep}
