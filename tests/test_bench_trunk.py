"""bench-trunk at its smallest size, on the tiny stand-in model (conftest's `tiny_model`: what is checked is that
the benchmark runs and reports, not a speed): both runs train the same numbers, and its JSON line says so."""

from __future__ import annotations

import json

import datasets

from computerrl.bench.bench_trunk import main
from computerrl.data.datasets_io import save_atomic
from computerrl.data.schemas import SFT_FEATURES
from test_training import long_chat_rows


def test_bench_trunk_reports_both_settings_and_the_same_losses(tmp_path, tiny_model, capsys):
    save_atomic(datasets.Dataset.from_list(long_chat_rows(4), features=SFT_FEATURES), tmp_path / "data")
    result = main(["--data", str(tmp_path / "data"), "--model", tiny_model, "--epochs", "2", "--train-layers", "1",
                   "--batch-rows", "2"])
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line == result and result["epochs"] == 2
    assert result["recomputed_later_s"] > 0 and result["kept_later_s"] > 0
    assert result["max_loss_difference"] < 1e-4
