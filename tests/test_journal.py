"""The one journal and driver of resumable work (data/journal.py): what rollout, eval, tasks build and
build-apis resume from."""

from __future__ import annotations

import pytest

from computerrl.data.journal import Journal, work_through


def test_a_journal_of_other_settings_is_refused_naming_them_or_restarted(tmp_path):
    journal = Journal(tmp_path / "j", {"seed": 0, "samples": 4})
    journal.add("task#0", {"rows": [1, 2]})
    assert Journal(tmp_path / "j", {"seed": 0, "samples": 4}).get("task#0") == {"rows": [1, 2]}  # resumed
    with pytest.raises(ValueError, match=r"other settings \(samples\).*--overwrite"):
        Journal(tmp_path / "j", {"seed": 0, "samples": 8})
    fresh = Journal(tmp_path / "j", {"seed": 0, "samples": 8}, restart=True)
    assert not fresh.has("task#0") and len(fresh) == 0


def test_work_through_resumes_journals_each_record_and_reports_a_failed_job_after_the_others(tmp_path):
    journal = Journal(tmp_path / "j", {})
    journal.add("a", {"n": 1})
    seen, done = [], []

    def do(n: int) -> dict:
        seen.append(n)
        if n == 3:
            raise OSError("the desktop went away")
        return {"n": n}

    with pytest.raises(OSError, match="the desktop went away") as failed:
        work_through(journal, [("a", 1), ("b", 2), ("c", 3), ("d", 4)], do, workers=2, label="jobs",
                     tally=lambda r: {"sum": r["n"]}, on_done=done.append)
    assert "1 of the jobs failed" in failed.value.__notes__[0]
    assert sorted(seen) == [2, 3, 4]  # "a" was done before
    assert [journal.has(x) for x in "abcd"] == [True, True, False, True]
    assert done[-1] == {"done": 2, "sum": 6}
    work_through(journal, [("a", 1), ("b", 2), ("c", 5), ("d", 4)], do, workers=2, label="jobs")  # the rerun
    assert journal.get("c") == {"n": 5} and sorted(seen) == [2, 3, 4, 5]
