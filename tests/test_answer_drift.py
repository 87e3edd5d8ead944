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
