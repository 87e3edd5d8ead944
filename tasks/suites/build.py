"""Build a task suite: instances from templates × seeds, split into train, test and (optionally)
valid, files cached.

Split rule: instances are drawn template by template, index 0, 1, 2, …; an instance whose
parameters repeat an earlier one of the same template (its `fingerprint`) is skipped, so every
kept instance is distinct. Each template's first distinct instances go to test, the next ones
to train, then to valid: no two splits share an instance (nor its parameters). Counts are spread
over the templates round-robin; a template whose parameter space runs out leaves its share to the
others.
The same seed, counts and templates give the same suite, byte for byte.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from computerrl.data.files import write_atomic
from computerrl.tasks.suites import URL_PREFIX, Instance, all_templates, get_template, make

MAX_REPEATS = 200  # draws in a row that repeat earlier parameters before a template counts as exhausted


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


def generate(train: int, test: int, seed: int = 0, templates: list[str] | None = None,
             holdout: list[str] | None = None) -> tuple[list[Instance], list[Instance]]:
    """(train, test) instances: `splits` without a validation split."""
    drawn = splits(train, test, 0, seed, templates, holdout)
    return drawn["train"], drawn["test"]


def splits(train: int, test: int, valid: int = 0, seed: int = 0, templates: list[str] | None = None,
           holdout: list[str] | None = None, rl: int = 0) -> dict[str, list[Instance]]:
    """The train, test, valid and rl instances. Test is drawn first, then train, valid and rl continue
    each template's stream, so none overlap, and asking for a validation or RL split changes neither
    train nor test. `holdout`: templates that only test draws from (out-of-distribution tasks: no
    other instance shares even their template); valid draws from train's templates, so settings
    chosen on it never see a test task or a held-out template; so does rl, fresh tasks for RL to play
    (train's are the ones behaviour cloning imitated)."""
    names = [get_template(n).name for n in templates] if templates else [t.name for t in all_templates()]
    unknown = sorted(set(holdout or []) - set(names))
    if unknown:
        raise ValueError(f"held-out template(s) {', '.join(unknown)} are not among the suite's templates")
    rr = _RoundRobin([_Stream(n, seed) for n in _interleave(names)])
    test_set = rr.take(test)
    if holdout:
        rr = _RoundRobin([s for s in rr.streams if s.name not in holdout])
        if not rr.streams:
            raise ValueError("every template is held out: train would be empty")
    train_set = rr.take(train)
    return {"train": train_set, "test": test_set, "valid": rr.take(valid), "rl": rr.take(rl)}  # drawn in this order


def pick_holdout(spec: str, seed: int, templates: list[str] | None = None) -> list[str]:
    """`--holdout-templates`: a count N (N templates drawn with the seed) or comma-separated names."""
    import random

    names = [get_template(n).name for n in templates] if templates else [t.name for t in all_templates()]
    spec = spec.strip()
    if not spec:
        return []
    if spec.isdigit():
        if int(spec) >= len(names):
            raise ValueError(f"--holdout-templates {spec}: the suite has only {len(names)} templates")
        return sorted(random.Random(f"holdout:{seed}").sample(sorted(names), int(spec)))
    return [get_template(n.strip()).name for n in spec.split(",") if n.strip()]


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
    write_atomic(index_path, json.dumps(index, indent=0, sort_keys=True))
    return len(index)


def task_rows(instances: list[Instance], holdout: list[str] | None = None) -> dict[str, list]:
    """Columns of a task dataset (schemas.TASK_FEATURES); `holdout`: templates kept out of train."""
    return {"task_id": [i.task_id for i in instances], "domain": [i.domain for i in instances],
            "template": [i.template for i in instances], "instruction": [i.task["instruction"] for i in instances],
            "task_json": [json.dumps(i.task, sort_keys=True) for i in instances],
            "solution": [list(i.solution) for i in instances], "gui_solution": [list(i.gui_solution) for i in instances],
            "ood": [i.template in (holdout or []) for i in instances]}
