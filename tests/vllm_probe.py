"""Run by tests/test_vllm_engine.py under .venv-vllm (vLLM's CPU build pins its own transformers):
the `vllm` engine on a checkpoint answers the chats it is given, and the answers go back as JSON.

    .venv-vllm/bin/python tests/vllm_probe.py CHECKPOINT CHATS.json OUT.json

CHATS.json holds {"chats": [...], "runs": [{"temperature": T, "max_new_tokens": N, "seed": S}, ...]}:
every run answers every chat; a run with "load": FOLDER first switches the engine to that checkpoint's
weights (`load_weights`, timed). vLLM starts its engine core in a process of its own, hence the
`__main__` guard."""

from __future__ import annotations

import dataclasses
import json
import sys
import time


def main(checkpoint: str, chats_file: str, out_file: str) -> None:
    from computerrl.policy.engines import Sampling, make_engine

    spec = json.loads(open(chats_file).read())
    started = time.monotonic()
    engine = make_engine("vllm", checkpoint, Sampling(1.0, 16))
    loaded = time.monotonic() - started
    runs = []
    for run in spec["runs"]:
        engine.sampling = Sampling(run["temperature"], run["max_new_tokens"])
        if "load" in run:
            t = time.monotonic()
            engine.load_weights(run["load"])
            run = {**run, "load_seconds": time.monotonic() - t}
        t = time.monotonic()
        gens = engine.generate(spec["chats"], seed=run["seed"])
        runs.append({**run, "seconds": time.monotonic() - t, "generations": [dataclasses.asdict(g) for g in gens]})
    engine.close()
    with open(out_file, "w") as f:
        json.dump({"load_seconds": loaded, "eos_id": engine.eos_id, "runs": runs}, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
