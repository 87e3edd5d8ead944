"""Build a task suite: instances from templates × seeds, split into train and test, files cached.

Split rule: instances are drawn template by template, index 0, 1, 2, …; an instance whose
parameters repeat an earlier one of the same template (its `fingerprint`) is skipped, so every
kept instance is distinct. Each template's first distinct instances go to test, the next ones
to train: train and test never share an instance (nor its parameters). Counts are spread over the
templates round-robin; a template whose parameter space runs out leaves its share to the others.
The same seed, counts and templates give the same suite, byte for byte.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from computerrl.data.suites import URL_PREFIX, Instance, all_templates, get_template, make

MAX_REPEATS = 200  # draws in a row that repeat earlier parameters before a template counts as exhausted
JOURNAL = ".replays.jsonl"  # replays of a build in progress, one JSON line each: a rerun resumes from them


@dataclasses.dataclass
class _Stream:
    """The distinct instances of one template, drawn in index order."""

    name: str
    seed: int
    next_index: int = 0
    seen: set = dataclasses.field(default_factory=set)
    exhausted: bool = False

    def draw(self) -> Instance | None:
        for _ in range(MAX_REPEATS):
            inst = make(self.name, self.seed, self.next_index)
            self.next_index += 1
            if inst.fingerprint not in self.seen:
                self.seen.add(inst.fingerprint)
                return inst
        self.exhausted = True
        return None


def _interleave(names: list[str]) -> list[str]:
    """Templates ordered so that consecutive ones cycle through the domains (small suites mix them)."""
    by_domain: dict[str, list[str]] = {}
    for n in names:
        by_domain.setdefault(get_template(n).domain, []).append(n)
    lists = [by_domain[d] for d in sorted(by_domain)]
    return [lst[i] for i in range(max(map(len, lists))) for lst in lists if i < len(lst)]


class _RoundRobin:
    """Distinct instances, one per live template in turn; the turn carries over between takes."""

    def __init__(self, streams: list[_Stream]):
        self.streams, self.turn = streams, 0

    def take(self, n: int) -> list[Instance]:
        out: list[Instance] = []
        while len(out) < n:
            if all(s.exhausted for s in self.streams):
                raise ValueError(f"the templates have only {len(out)} distinct instances left; ask for fewer")
            s = self.streams[self.turn % len(self.streams)]
            self.turn += 1
            if not s.exhausted and (inst := s.draw()) is not None:
                out.append(inst)
        return out


def generate(train: int, test: int, seed: int = 0, templates: list[str] | None = None
             ) -> tuple[list[Instance], list[Instance]]:
    """(train, test) instances; test is drawn first, then train continues each template's stream,
    so the two never overlap."""
    names = [get_template(n).name for n in templates] if templates else [t.name for t in all_templates()]
    rr = _RoundRobin([_Stream(n, seed) for n in _interleave(names)])
    test_set = rr.take(test)
    return rr.take(train), test_set


def write_files(instances: list[Instance], files_dir: Path) -> int:
    """Write every instance's files under files_dir/<task_id>/ and (re)write index.json, the URL →
    file map env servers read with `--cache`. Entries of other suites in the same folder stay."""
    files_dir.mkdir(parents=True, exist_ok=True)
    index_path = files_dir / "index.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    for inst in instances:
        folder = files_dir / inst.task_id
        folder.mkdir(exist_ok=True)
        for name, data in inst.files.items():
            (folder / name).write_bytes(data)
            index[f"{URL_PREFIX}{inst.task_id}/{name}"] = f"{inst.task_id}/{name}"
    tmp = index_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(index, indent=0, sort_keys=True))
    tmp.replace(index_path)
    return len(index)


def task_rows(instances: list[Instance]) -> dict[str, list]:
    """Columns of a task dataset (schemas.TASK_FEATURES)."""
    return {"task_id": [i.task_id for i in instances], "domain": [i.domain for i in instances],
            "template": [i.template for i in instances], "instruction": [i.task["instruction"] for i in instances],
            "task_json": [json.dumps(i.task, sort_keys=True) for i in instances],
            "solution": [list(i.solution) for i in instances], "gui_solution": [list(i.gui_solution) for i in instances]}


@dataclasses.dataclass
class BuildConfig:
    out: Path = Path("runs/tasks")  # suite folder: files/ (the cache), train/, test/, expert/
    train: int = 2000  # train instances generated (before replay drops any)
    test: int = 300  # test instances generated (before replay drops any)
    seed: int = 0  # the same seed (and counts, templates) gives the same suite
    templates: str = ""  # comma-separated template names ("" = all registered)
    replay: bool = True  # replay every reference solution on real desktops, keep the 1.0 ones
    envs: int = 2  # local env servers (one desktop each) replaying in parallel
    workdir: str = ""  # where the env servers keep their state ("" = OUT/.envs)

    def __post_init__(self):
        if self.train < 0 or self.test < 0 or self.train + self.test == 0:
            raise ValueError("--train and --test must be >= 0 and not both 0")
        if self.envs < 1:
            raise ValueError("--envs must be at least 1")
        for name in self.template_names:
            get_template(name)  # unknown name: KeyError listing the known ones

    @property
    def template_names(self) -> list[str]:
        return [t.strip() for t in self.templates.split(",") if t.strip()]


def run(cfg: BuildConfig, console=None) -> dict:
    """Generate, write the cache, replay (optional), write train/test (and expert) datasets."""
    import time
    from collections import Counter

    import datasets
    from rich.console import Console

    from computerrl.data.datasets_io import lineage, save_atomic
    from computerrl.data.schemas import STEP_FEATURES, TASK_FEATURES

    console = console or Console(soft_wrap=True)
    out = Path(cfg.out)
    t0 = time.perf_counter()
    train, test = generate(cfg.train, cfg.test, cfg.seed, cfg.template_names or None)
    gen_s = time.perf_counter() - t0
    write_files(train + test, out / "files")
    console.print(f"generated {len(train)} train + {len(test)} test instances from "
                  f"{len({i.template for i in train + test})} templates in {gen_s:.1f} s; files in {out / 'files'}")
    summary: dict = {"generated": {"train": len(train), "test": len(test)}, "generate_s": round(gen_s, 2)}
    if cfg.replay and train + test:
        replays = _replay(cfg, out, train + test, console)
        kept = {r.task_id for r in replays if r.kept}
        dropped = [r for r in replays if not r.kept]
        reasons = Counter(r.reason.split(":")[0] for r in dropped)
        console.print(f"replay: kept {len(kept)}, dropped {len(dropped)}" +
                      (f" ({', '.join(f'{k}: {v}' for k, v in reasons.items())})" if dropped else ""))
        for r in dropped:
            console.print(f"  dropped {r.task_id}: {r.reason[:300]}", markup=False, highlight=False)
        train, test = [i for i in train if i.task_id in kept], [i for i in test if i.task_id in kept]
        from computerrl.data.suites.replay import step_rows

        rows = step_rows(replays)
        expert = datasets.Dataset.from_list(rows, features=STEP_FEATURES) if rows else \
            datasets.Dataset.from_dict({k: [] for k in STEP_FEATURES}, features=STEP_FEATURES)
        save_atomic(expert, out / "expert", lineage=lineage("tasks build", cfg))
        summary.update(kept=len(kept), dropped={r.task_id: r.reason for r in dropped}, expert_steps=len(rows),
                       replay_s=round(sum(r.seconds for r in replays), 1))
    for split, insts in (("train", train), ("test", test)):
        ds = datasets.Dataset.from_dict(task_rows(insts), features=TASK_FEATURES)
        save_atomic(ds, out / split, lineage=lineage("tasks build", cfg, {"split": split}))
    (out / JOURNAL).unlink(missing_ok=True)  # the build is whole: nothing to resume
    summary.update(train=len(train), test=len(test),
                   per_domain=dict(Counter(i.domain for i in train + test)))
    console.print(f"wrote {out / 'train'} ({len(train)} tasks) and {out / 'test'} ({len(test)} tasks)")
    return summary


class _Journal:
    """Replays written one line at a time as they finish, so a build killed half-way resumes. The first
    line is the config: a journal of another config (seed, counts, templates) is started afresh."""

    def __init__(self, path: Path, cfg: BuildConfig):
        import threading

        from computerrl.data.suites.replay import Replay

        self.path, self.lock, self.done = path, threading.Lock(), []
        key = json.dumps({k: v for k, v in dataclasses.asdict(cfg).items() if k not in ("envs", "workdir")},
                         sort_keys=True, default=str)
        lines = path.read_text().splitlines() if path.exists() else []
        if lines and lines[0] == key:
            for line in lines[1:]:
                try:
                    self.done.append(Replay(**json.loads(line)))
                except (ValueError, TypeError):  # the line a kill cut short
                    break
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(key + "\n")

    def add(self, replay) -> None:
        with self.lock, open(self.path, "a") as f:
            f.write(json.dumps(dataclasses.asdict(replay)) + "\n")


def _replay(cfg: BuildConfig, out: Path, instances: list[Instance], console) -> list:
    """Start `cfg.envs` local env servers reading out/files, replay every instance, stop them."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from computerrl.envs.backends.local import LocalBackend
    from computerrl.envs.pool import EnvPool, wait_healthy
    from computerrl.data.suites.replay import replay_all

    journal = _Journal(out / JOURNAL, cfg)
    results = [r for r in journal.done if r.task_id in {i.task_id for i in instances}]
    todo = [i for i in instances if i.task_id not in {r.task_id for r in results}]
    if results:
        console.print(f"resuming: {len(results)} replays of an interrupted build are kept, {len(todo)} to go")
    if not todo:
        return results
    instances = todo
    backend = LocalBackend(cfg.workdir or out / ".envs", server_args=("--cache", str((out / "files").resolve())))
    handles = []
    try:
        handles = [backend.start(f"build-{k}") for k in range(min(cfg.envs, len(instances)))]
        max_steps = max(len(i.solution) for i in instances) + 2
        pool = EnvPool(handles, backend, max_steps=max_steps)
        for h in handles:
            problem = wait_healthy(pool.clients[h.env_id], pool.start_timeout_s)
            if problem:
                raise RuntimeError(f"env server {h.env_id} did not become healthy: {problem}")
        with Progress(TextColumn("replay"), BarColumn(), MofNCompleteColumn(), TextColumn("kept {task.fields[kept]}"),
                      TimeElapsedColumn(), console=console) as bar:
            job = bar.add_task("replay", total=len(instances), kept=0)
            kept = [0]

            def done(r):
                journal.add(r)
                kept[0] += r.kept
                bar.update(job, advance=1, kept=kept[0])

            results += replay_all(pool, instances, on_done=done)
        pool.close()
        return results
    finally:
        for h in handles:
            backend.stop(h)
