"""What a folder of task files holds for this build (`computerrl tasks check`): which load and are
supported, which are malformed (file and field), which need what this build lacks (and what, counted),
which need a network account, and which of the supported are scored by a file the agent can rewrite."""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from pathlib import Path

from computerrl.tasks.task import Task, TaskError, load_task, task_files


@dataclasses.dataclass
class Check:
    files: list[Path]
    supported: list[Task]
    malformed: list[str]  # "FILE: what is wrong (field)", and files that are no regular file
    unsupported: list[str]  # "FILE: needs …"
    needs_account: list[str]
    missing: Counter  # what unsupported tasks need, by how many need it

    @functools.cached_property
    def agent_code(self) -> list[str]:
        return [f"{t.path}: scored by what the agent can rewrite ({'; '.join(why)})"
                for t in self.supported if (why := t.agent_code())]

    @property
    def all_supported(self) -> bool:
        return len(self.supported) == len(self.files)

    def summary(self) -> dict:
        """The counts, as `tasks check --json` prints them."""
        return {"files": len(self.files), "supported": len(self.supported), "unsupported": len(self.unsupported),
                "unsupported_by_reason": dict(self.missing.most_common()), "malformed": len(self.malformed),
                "needs_account": len(self.needs_account), "agent_code": len(self.agent_code)}


def check_folder(folder: Path) -> Check:
    """Every *.json task file under `folder`, loaded and sorted; ValueError when there is none."""
    regular, not_regular = task_files(folder)
    files = regular + [Path(line.partition(": ")[0]) for line in not_regular]
    if not files:
        raise ValueError(f"no *.json files under {folder}")
    report = Check(files, [], list(not_regular), [], [], Counter())
    for f in regular:
        try:
            task = load_task(f)
        except TaskError as e:
            report.malformed.append(str(e))
            continue
        if task.needs_account():  # apart: no build runs these offline, however complete
            report.needs_account.append(f"{f}: needs a network account ({', '.join(task.needs_account())})")
        elif missing := task.unsupported():
            report.unsupported.append(f"{f}: needs {', '.join(missing)}")
            report.missing.update(missing)
        else:
            report.supported.append(task)
    return report
