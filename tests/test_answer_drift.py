"""bench/answer_drift.py on the embedded model: an answer the model would give scores far above one it
would not, and the benchmark's last line is its JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import datasets

from computerrl.policy.checkpoint import embedded_checkpoint, load_tokenizer


def test_the_model_samples_its_likely_answer_far_more_often_than_an_unlikely_one(tmp_path):
    tokenizer = load_tokenizer(embedded_checkpoint())
    prompt = tokenizer(tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France? One word."}],
                                                     add_generation_prompt=True, tokenize=False),
                       add_special_tokens=False).input_ids
    answer = {name: tokenizer(text, add_special_tokens=False).input_ids
              for name, text in (("likely", "Paris"), ("unlikely", "Banana bread"))}
    rows = [{"task_id": "likely-1", "step": 0, "prompt_ids": prompt, "response_ids": answer["likely"]},
            {"task_id": "unlikely-1", "step": 0, "prompt_ids": prompt, "response_ids": answer["unlikely"]}]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "steps"))
    done = subprocess.run([sys.executable, "-m", "computerrl.bench.answer_drift", str(tmp_path / "steps"),
                           str(embedded_checkpoint())], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    chance = json.loads(done.stdout.strip().splitlines()[-1])["chance"][str(embedded_checkpoint())]
    assert set(chance) == {"likely", "unlikely"}
    assert chance["likely"] > 100 * chance["unlikely"], chance


def test_a_restored_eval_stands_only_for_the_model_whose_greedy_answers_it_kept(tmp_path, tiny_model):
    """`just rl-arm` restores BC's eval from its committed files on a machine that trained BC again; the
    schedule checks that BC answers as the one evaluated before measuring drift from it (tiny stand-in model:
    only its greedy choice matters)."""
    import pytest
    import torch

    from computerrl.policy.checkpoint import load_model
    from computerrl.stages.schedule import check_restored

    tokenizer, model = load_tokenizer(tiny_model), load_model(tiny_model)
    picked = {}
    for template, text in (("add", "Sum column B."), ("bold", "Bold the header.")):
        prompt = tokenizer(text, add_special_tokens=False).input_ids
        greedy = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=12)[0, len(prompt):].tolist()
        picked[template] = [{"task_id": f"{template}-1", "step": 0, "prompt_ids": prompt, "response_ids": greedy}]
    restored = tmp_path / "eval-bc"
    restored.mkdir()
    (restored / "first-answers.json").write_text(json.dumps(picked))
    check_restored(restored, tiny_model)  # its own answers: no error

    for rows in picked.values():  # another model's: every answer differs in the token after its first
        rows[0]["response_ids"][1:] = [(t + 1) % len(tokenizer) for t in rows[0]["response_ids"][1:]]
    (restored / "first-answers.json").write_text(json.dumps(picked))
    with pytest.raises(RuntimeError, match="played by another model"):
        check_restored(restored, tiny_model)
