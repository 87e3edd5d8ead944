"""Decode benchmark: the `transformers` engine generating on this CPU with its output layer as it is (MKL's
product) and packed (`engine_transformers.packed_head`, oneDNN), the embedded model, the quick demo's prompt
budgets, float32.

    python -m computerrl.bench.bench_decode                      # batches of 1, 3 and 8 (~3 min on 2 cores)
    python -m computerrl.bench.bench_decode --batches 3 --repeats 3 --model runs/demo/seed-0/bc

For each batch size: one warm-up call per path, then `--repeats` calls per path, alternating, of `--batch`
chats (a Calc task's first prompt, other values) answered at T = 1 with the same seed, so both paths draw
the same tokens. Reports the median seconds a call, the seconds a decoded token (the call less a one-token
call's, over the tokens after the first) and the largest |difference| of their log-probs. Prints the
figures, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def chats(n: int, count_tokens) -> list[list[dict]]:
    from computerrl.policy.prompt import BUDGETS, build_messages

    observation = {"a11y_tree": "\n".join(f"cell A{r} text 'item {r}'" for r in range(1, 40)), "app_info": "",
                   "focused_app": "calc", "windows": [], "last_result": ""}
    return [build_messages(f"Put {v} in B{v % 9 + 2}.", observation, [], BUDGETS["quick"], count_tokens)
            for v in range(n)]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,3,8", help="comma-separated batch sizes")
    parser.add_argument("--repeats", type=int, default=3, help="measured calls per path and batch size")
    parser.add_argument("--new-tokens", type=int, default=32, help="answer tokens a call generates at most")
    parser.add_argument("--model", default="", help="a checkpoint folder ('' = the embedded model)")
    a = parser.parse_args(argv)

    from computerrl.policy.checkpoint import embedded_checkpoint, load_model, load_tokenizer
    from computerrl.policy.engine_transformers import TransformersEngine
    from computerrl.policy.engines import Sampling

    folder = a.model or embedded_checkpoint()
    model, tokenizer = load_model(folder, dtype="float32"), load_tokenizer(folder)
    paths = {packed: TransformersEngine(folder, Sampling(1.0, a.new_tokens), model=model, tokenizer=tokenizer,
                                        packed_head=packed) for packed in (False, True)}
    first = {packed: TransformersEngine(folder, Sampling(1.0, 1), model=model, tokenizer=tokenizer,
                                        packed_head=packed) for packed in (False, True)}
    results: dict = {"new_tokens": a.new_tokens, "repeats": a.repeats}
    for n in (int(b) for b in a.batches.split(",")):
        batch = chats(n, paths[True].count_tokens)
        calls: dict = {False: [], True: []}
        prefill: dict = {False: [], True: []}
        gens = {}
        for repeat in range(a.repeats + 1):
            for packed in (False, True):
                t0 = time.perf_counter()
                gens[packed] = paths[packed].generate(batch, seed=7)
                t1 = time.perf_counter()
                first[packed].generate(batch, seed=7)
                if repeat:  # the first round warms both up
                    calls[packed].append(t1 - t0)
                    prefill[packed].append(time.perf_counter() - t1)
        tokens = max(len(g.response_ids) for g in gens[True])
        assert [g.response_ids for g in gens[True]] == [g.response_ids for g in gens[False]], "paths drew differently"
        gap = max(abs(x - y) for g, h in zip(gens[True], gens[False]) for x, y in zip(g.logprobs, h.logprobs))
        for packed, name in ((False, "as_is"), (True, "packed")):
            call = statistics.median(calls[packed])
            results[f"call_s_{name}_{n}"] = round(call, 3)
            results[f"token_ms_{name}_{n}"] = round(1000 * (call - statistics.median(prefill[packed])) /
                                                    max(tokens - 1, 1), 1)
        results[f"speedup_{n}"] = round(results[f"call_s_as_is_{n}"] / results[f"call_s_packed_{n}"], 2)
        results[f"max_logprob_difference_{n}"] = gap
        print(f"batch {n}: a call {results[f'call_s_as_is_{n}']} s as is, {results[f'call_s_packed_{n}']} s packed "
              f"({results[f'speedup_{n}']}×); a decoded token {results[f'token_ms_as_is_{n}']} → "
              f"{results[f'token_ms_packed_{n}']} ms; {tokens} tokens; log-probs differ by at most {gap:.1e}",
              flush=True)
    print(json.dumps(results))
    return results


if __name__ == "__main__":
    main()
