"""bench-decode at its smallest size, on the tiny stand-in model (conftest's `tiny_model`: what is checked is that
the benchmark runs and reports, not a speed): both paths draw the same answers with the same log-probs, and its
JSON line says so."""

from __future__ import annotations

import json

from computerrl.bench.bench_decode import main


def test_bench_decode_reports_both_paths_and_their_agreement(tiny_model, capsys):
    result = main(["--batches", "2", "--repeats", "1", "--new-tokens", "4", "--model", tiny_model])
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line == result
    assert result["call_s_as_is_2"] > 0 and result["call_s_packed_2"] > 0 and result["speedup_2"] > 0
    assert result["max_logprob_difference_2"] < 1e-4
