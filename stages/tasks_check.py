"""`computerrl tasks check`: what a folder of OSWorld task files holds, what is malformed (file and field), and
which setup steps, getters and metrics the rest need that this build lacks.

With --run, which tasks reward doing nothing: a task whose untouched start already scores rewards an agent
that only says "done", and RL learns exactly that. Each supported task is reset on a real desktop of a
`spawn-envs` run and scored after the agent's first answer, `Agent.exit(success=True)`, with no action before
it (`playing.NO_ACTION`, the same play `tasks build` gives every generated instance). A task that cannot be
set up here (its input files are not in the desktops' `--cache`) is counted apart, with the reason.

Reads:  FOLDER (*.json task files, recursively); with --run, --envs's manifest.
Writes: with --run, OUT/untouched.json: one record per task (task_id, score, detail, error); each play is
        journaled in OUT/.plays, so a run killed half-way resumes.

    computerrl tasks check ../shared/osworld --verbose
    computerrl tasks check runs/osworld-tasks --run --envs runs/envs --json
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

from computerrl.data.config import setting

JOURNAL = ".plays"  # the --run plays of a check in progress (data/journal.py)


@dataclasses.dataclass
class CheckConfig:
    folder: Path = setting(Path("."), "Folder searched recursively for *.json task files.", argument=True)
    verbose: bool = setting(False, "List every problem, not only a summary.", "--verbose", "-v")
    as_json: bool = setting(False, "End with one JSON line: files, supported, unsupported by reason, malformed, "
                                   "needs-account, agent-code (supported, but scored by running a file the agent can "
                                   "rewrite); with --run, untouched: played, scored (the tasks above 0), not set up.",
                            "--json")
    run_them: bool = setting(False, "Score every supported task untouched on real desktops (--envs); resumable: rerun "
                                    "the same command.", "--run")
    envs: Path = setting(Path("runs/envs"), "With --run: a spawn-envs run whose desktops play (give it --cache with "
                                            "the files the tasks download).")
    out: Path = setting(Path("runs/untouched"), "With --run: where untouched.json (task, score, detail, error) and "
                                                "the resumable plays go.", "--out", "-o")

    def __post_init__(self):
        from computerrl.data.folders import TASK_FILES, expect

        self.folder, self.envs, self.out = Path(self.folder), Path(self.envs), Path(self.out)
        expect(self.folder, "FOLDER", TASK_FILES)  # WrongInput: one line, exit code 2


def run(cfg: CheckConfig, console=None) -> bool:
    """Check (and with --run, score untouched) the task files of `cfg.folder`, printing the report; True when
    every file loads and is supported and (--run) none scores untouched. ValueError: FOLDER or --envs unusable."""
    from rich.console import Console
    from rich.table import Table

    from computerrl.tasks.check import check_folder

    report = check_folder(cfg.folder)
    console = console or Console(soft_wrap=True)  # long paths stay on one line: greppable
    console.print(f"[bold]{len(report.files)}[/] task files: [green]{len(report.supported)} load and are supported[/], "
                  f"[yellow]{len(report.unsupported)} need what this build lacks[/], "
                  f"{len(report.needs_account)} need a network account, [red]{len(report.malformed)} malformed[/]")
    if report.agent_code:
        console.print(f"{len(report.agent_code)} of the supported score by running a file the agent can rewrite: "
                      "their scores are marked (agent_code), never the desktop's word")
    if report.missing:
        table = Table("unsupported", "tasks needing it", title="what is missing")
        for what, count in report.missing.most_common():
            table.add_row(what, str(count))
        console.print(table)
    listed = report.unsupported + report.needs_account + report.agent_code
    for line in report.malformed + (listed if cfg.verbose else []):
        print(line)  # unwrapped: one problem per line, easy to grep
    if listed and not cfg.verbose:
        console.print("(--verbose lists these files one by one)")
    summary, starts_solved = report.summary(), []
    if cfg.run_them:
        records = score_untouched(cfg.folder, cfg.envs, cfg.out, console=console)
        starts_solved = [r for r in records if r["score"] > 0]
        not_set_up = Counter(r["error"].partition(":")[0] for r in records if r["error"])
        console.print(f"untouched: played {len(records)}, [red]{len(starts_solved)} score above 0 with no action[/], "
                      f"{sum(not_set_up.values())} could not be set up here"
                      + (f" ({', '.join(f'{k}: {v}' for k, v in not_set_up.most_common())})" if not_set_up else "")
                      + f"; every score in {cfg.out / 'untouched.json'}")
        for r in starts_solved:
            print(f"starts solved: {r['task_id']}: scores {r['score']:g} untouched ({r['detail'][:200]})")
        summary["untouched"] = {"played": len(records), "scored": {r["task_id"]: r["score"] for r in starts_solved},
                                "not_set_up": sum(not_set_up.values())}
    if cfg.as_json:
        print(json.dumps(summary))
    return report.all_supported and not starts_solved


def score_untouched(folder: Path, envs: Path, out: Path, *, model: str = "embedded", console=None) -> list[dict]:
    """Every task under `folder` (task files or a task dataset) that this build supports, scored untouched
    on the desktops of `envs`, in the order of the task set."""
    from computerrl.data.files import write_atomic
    from computerrl.data.journal import Journal
    from computerrl.envs.fleet.pool import EnvPool
    from computerrl.play.scripted import NO_ACTION, ScriptedPlay, play_scripted
    from computerrl.policy.checkpoint import prompt_settings, resolve
    from computerrl.tasks.task_set import load_task_set

    items = [i for i in load_task_set(folder) if not i.skip]
    if not items:
        raise ValueError(f"no task under {folder} is supported here: nothing to play")
    journal = Journal(Path(out) / JOURNAL, {"tasks": str(Path(folder).resolve()), "envs": str(Path(envs).resolve())},
                      restart=True)
    plays = [ScriptedPlay(i.task_id, i.task, i.domain, NO_ACTION, i.task_dir) for i in items]
    pool = EnvPool.from_manifest(envs, max_steps=len(NO_ACTION))
    try:
        played = play_scripted(pool, plays, prompt_settings(resolve(model)), journal, label="untouched",
                               console=console)
    finally:
        pool.close()
    records = [{"task_id": i.task_id, "domain": i.domain, "score": t.score, "detail": t.detail, "error": t.error}
               for i, t in zip(items, played)]
    write_atomic(Path(out) / "untouched.json", json.dumps(records, indent=1))
    journal.remove()  # whole: its records are in untouched.json
    return records
