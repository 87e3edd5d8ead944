"""`computerrl view` in a real headless Chromium: the page opens, lists the trajectories, filters
them, and shows a step's screenshot."""

from __future__ import annotations

import subprocess
from pathlib import Path

import datasets
import pytest
from PIL import Image
from typer.testing import CliRunner

from computerrl.cli.main import app
from computerrl.data.datasets_io import save_atomic
from computerrl.data.schemas import STEP_WITH_SCREENSHOT_FEATURES

CHROMIUM = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"]
RED = (230, 20, 20)


def row(task: str, sample: int, step: int, success: bool, response: str, action: str = "", error: str = "") -> dict:
    shot = Image.new("RGB", (1920, 1080), RED if task == "t-ok" else (20, 20, 230))
    return {"task_id": task, "domain": "calc", "group_id": f"{task}:0", "sample": sample, "step": step,
            "instruction": f"instruction of {task}", "observation": "{}", "messages": [], "response": response,
            "prompt_ids": [], "response_ids": [], "behavior_logprobs": [], "entropy": 0.5, "action": action,
            "action_valid": bool(action), "exec_result": "Done" if action else "Invalid action: no action found",
            "success": success, "score": float(success), "reward": float(success and bool(action)),
            "done": True, "env_id": "e0", "policy_version": "v", "engine": "transformers", "error": error,
            "screenshot": shot, "screens": 0}


@pytest.fixture
def page(tmp_path) -> Path:
    rows = [row("t-ok", 0, 0, True, "<think>type it</think>\n```python\nAgent.type(text='<b>42</b>')\n```",
                '{"api": "Agent", "name": "type", "args": {"text": "<b>42</b>"}}'),
            row("t-bad", 0, 0, False, "I am <script>alert(1)</script> unsure"),
            row("t-lost", 1, 0, False, "hm", error="desktop lost at step 0: UNAVAILABLE")]
    save_atomic(datasets.Dataset.from_list(rows, features=STEP_WITH_SCREENSHOT_FEATURES), tmp_path / "steps")
    result = CliRunner().invoke(app, ["view", str(tmp_path / "steps"), "--out", str(tmp_path / "view.html")])
    assert result.exit_code == 0, result.output
    return tmp_path / "view.html"


def dom(url: str, tmp_path: Path) -> str:
    out = subprocess.run(CHROMIUM + [f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_the_page_lists_every_trajectory_and_filters_by_outcome(page, tmp_path):
    html = dom(page.as_uri(), tmp_path)
    assert "3 of 3 trajectories shown" in html
    assert html.count('class="trajectory"') == 3
    assert html.count("<img ") == 3  # a thumbnail that fails to load is replaced by the words "screenshot missing"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html  # model text is text
    assert 'Agent.type(text="&lt;b&gt;42&lt;/b&gt;")' in html
    filtered = dom(page.as_uri() + "#outcome=aborted", tmp_path)
    assert "1 of 3 trajectories shown" in filtered and "desktop lost at step 0" in filtered


def test_a_steps_screenshot_is_shown(page, tmp_path):
    shot = tmp_path / "page.png"
    out = subprocess.run(CHROMIUM + [f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,800",
                                     f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    import numpy as np

    pixels = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    red = int(((abs(pixels[..., 0] - RED[0]) < 20) & (pixels[..., 1] < 60) & (pixels[..., 2] < 60)).sum())
    assert red > 50_000  # the first trajectory is open and its red screenshot is drawn (480 px wide)
