"""bench-gpu on the CPU with the tiny shape: every figure there, the GPU-only ones null, and a clear
refusal when a package it needs is missing."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest


def test_the_tiny_shape_on_the_cpu_reports_every_figure_and_nulls_the_gpu_only_ones():
    done = subprocess.run([sys.executable, "-m", "computerrl.bench.bench_gpu", "--shapes", "tiny", "--device", "cpu",
                           "--runs", "sft,grpo-lora"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])  # the house rule: one JSON line last
    assert out["device"] == "cpu" and out["dtype"] == "float32" and out["peak_tflops"] > 0
    tiny = out["shapes"]["tiny"]
    assert 3e6 < tiny["params"] < 4e6  # 2 layers of width 64 and SmolLM2's 49,152-token embedding
    engine = tiny["engine"]
    assert engine["batch"] == 4 and 0 < engine["new_tokens"] <= 4 * 16 and engine["tokens_per_s"] > 0
    assert engine["peak_gpu_mb"] is None and engine["peak_rss_mb"] > 100
    diff = tiny["logprob_diff"]  # float32, the same weights: float error only
    assert diff["tokens"] == engine["new_tokens"] and 0 <= diff["mean"] <= diff["max"] < 1e-3
    assert set(tiny["runs"]) == {"sft", "grpo-lora"}
    for name, run in tiny["runs"].items():
        assert run["ok"] and not run["oom"], (name, run)
        assert run["steps"] == 2 and run["wall_s"] > run["step_s"] > 0, (name, run)
        assert run["tokens_per_s"] > 0 and run["tflops"] > 0 and 0 < run["peak_share"] < 3, (name, run)
        assert run["gpu_busy"] is None and run["peak_gpu_mb"] is None and run["peak_rss_mb"] > 100, (name, run)
    assert "tiny (3M): engine" in done.stdout and "sft:" in done.stdout and "grpo-lora:" in done.stdout


def test_the_flop_count_is_the_formula_written_out_and_knows_lora_and_a_shared_prefix():
    from transformers import LlamaConfig, LlamaForCausalLM

    from computerrl.bench.bench_gpu import SHAPES, VOCAB, train_flops

    model = LlamaForCausalLM(LlamaConfig(**SHAPES["tiny"], vocab_size=VOCAB, tie_word_embeddings=True))
    prompts, answers = [list(range(3, 13)), list(range(100, 120))], [[5, 6, 7], [8, 9]]
    weights = 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 256)  # layers × (q, o; k, v; gate, up, down)
    matmuls = 2 * weights * (13 + 22) + 2 * 64 * VOCAB * 5  # decoder tokens; logits at the 5 answer tokens
    attention = 4 * 64 * 2 * (13 ** 2 + 22 ** 2) / 2  # QKᵀ and AV over the causal pairs, 2 layers
    assert train_flops(model, prompts, answers) == 3 * matmuls + 3 * attention  # forward + backward (twice)
    model.get_output_embeddings().weight.requires_grad_(False)  # frozen weights (LoRA): no weight gradients
    assert train_flops(model, prompts, answers) == 2 * matmuls + 3 * attention
    shared = [list(range(3, 43)) + [1, 2], list(range(3, 43)) + [7]]  # 40 tokens in common: run once
    apart = [[1] + shared[0], [2] + shared[1]]  # a token longer each, nothing in common
    assert train_flops(model, shared, answers) < train_flops(model, apart, answers)


def test_a_missing_package_stops_it_at_once_naming_it_and_how_to_install_it(monkeypatch):
    from computerrl.bench import bench_gpu

    monkeypatch.setitem(bench_gpu.NEEDED, "no_such_package_here", "1.0")
    monkeypatch.setitem(bench_gpu.NEEDED, "torch", "999.0")
    with pytest.raises(SystemExit) as stop:
        bench_gpu.check_packages(["sft", "grpo-lora"])
    message = str(stop.value)
    assert "no_such_package_here>=1.0 (missing)" in message and "torch>=999.0 (found" in message
    assert "pip install" in message and "--find-links" in message
    monkeypatch.setitem(bench_gpu.NEEDED, "torch", "0.1")
    bench_gpu.check_packages([])  # the engine alone needs neither datasets nor the made-up package


def test_bad_input_is_refused_before_anything_loads(tmp_path):
    for args, says in ((["--shapes", "tiny,huge"], "unknown shape or run huge; shapes: tiny, 135m"),
                       (["--tokenizer", str(tmp_path)], f"--tokenizer {tmp_path}: no tokenizer.json there")):
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "computerrl.bench.bench_gpu", "--device", "cpu", *args],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode != 0 and says in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert time.monotonic() - start < 20
