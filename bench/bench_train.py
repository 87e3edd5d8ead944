"""Training benchmark: the GRPO update of the `grpo` stage against the plain implementation.

    python -m computerrl.bench.bench_train --rollouts runs/demo/rl1/rollout-1                # ~4 min
    python -m computerrl.bench.bench_train --rollouts runs/demo/rl1/rollout-1 --rows 8 --repeats 3   # ~30 min

On the embedded model (full fine-tuning, every layer trainable on both sides) and `--rows` real
rollout rows of varied length, one optimizer step's forward + backward:
- stage: `policy.grpo_loss.rows_loss` over the stage's micro-batches (rows grouped by prompt, the
  shared prompt prefix run once, logits only at answer positions);
- plain: the obvious implementation, written here: rows right-padded in dataset order into
  micro-batches of the same padded-token budget, the model's logits at every position, a
  full-vocabulary log-softmax, a mask over the answer tokens.
Reported: tokens/s of each (prompt + answer tokens of the rows ÷ seconds, median of --repeats),
their ratio (goal ≥ 1.3), the largest difference of the token-mean loss (goal ≤ 1e-5), the peak
resident memory each adds over the loaded model (each measured in a child process of its own), and
SFT tokens/s of the `sft` stage's loss on the same rows. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import multiprocessing.connection
import resource
import statistics
import time
from pathlib import Path

ADVANTAGES = (1.0, -1.0)  # alternate, so both sides of the clip are exercised
DEFAULT_ROLLOUTS = "runs/demo/rl1/rollout-1"  # written by `just demo --quick` (its RL phase 1)


def load_rows(path: str, n: int) -> list[dict]:
    from computerrl.data.datasets_io import load

    ds = load(path)
    ds = ds.filter(lambda r: len(r["response_ids"]) > 0 and len(r["behavior_logprobs"]) == len(r["response_ids"]))
    if len(ds) < n:
        raise SystemExit(f"{path} has only {len(ds)} rows with token ids and log-probs; need --rows {n}")
    # varied lengths: spread the picks over the rows sorted by length
    order = sorted(range(len(ds)), key=lambda i: len(ds[i]["prompt_ids"]) + len(ds[i]["response_ids"]))
    picks = [order[round(k * (len(order) - 1) / max(1, n - 1))] for k in range(n)]
    return [ds[i] for i in picks]


def plain_loss_sum(model, rows, clip, max_tokens: int, pad_id: int):
    """Σ per-token loss, full logits: the plain padded implementation, micro-batched in row order."""
    import torch

    total = 0.0
    batches, current = [], []
    for r in rows:
        width = max([len(x["prompt_ids"]) + len(x["response_ids"]) for x in current + [r]])
        if current and (len(current) + 1) * width > max_tokens:
            batches.append(current)
            current = []
        current.append(r)
    batches.append(current)
    for batch in batches:
        width = max(len(r["prompt_ids"]) + len(r["response_ids"]) for r in batch)
        ids = torch.full((len(batch), width), pad_id)
        mask, answer = torch.zeros(len(batch), width, dtype=torch.long), torch.zeros(len(batch), width)
        old, adv = torch.zeros(len(batch), width), torch.zeros(len(batch), width)
        for b, r in enumerate(batch):
            p, a = len(r["prompt_ids"]), len(r["response_ids"])
            ids[b, :p + a] = torch.tensor(r["prompt_ids"] + r["response_ids"])
            mask[b, :p + a] = 1
            answer[b, p:p + a] = 1
            old[b, p:p + a] = torch.tensor(r["behavior_logprobs"])
            adv[b, p:p + a] = r["advantage"]
        logits = model(input_ids=ids, attention_mask=mask).logits
        logp = torch.zeros(len(batch), width)
        logp[:, 1:] = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        ratio = torch.exp(logp - old)
        per_token = -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip.low, 1 + clip.high) * adv)
        loss = (per_token * answer).sum()
        loss.backward()
        total += loss.item()
    return total


def _over_micro_batches(model, rows, max_tokens: int, loss_of) -> float:
    """Σ loss_of(batch indices) over the stage's micro-batches of `rows`, backward after each."""
    from computerrl.policy.trainer import micro_batches

    prompts = [r["prompt_ids"] for r in rows]
    lengths = [len(r["prompt_ids"]) + len(r["response_ids"]) for r in rows]
    total = 0.0
    for batch in micro_batches(prompts, lengths, max_tokens, seed=0):
        loss = loss_of(batch)
        loss.backward()
        total += loss.item()
    return total


def stage_loss_sum(model, rows, clip, max_tokens: int, pad_id: int):
    import torch

    from computerrl.policy.grpo_loss import rows_loss

    return _over_micro_batches(model, rows, max_tokens, lambda batch: rows_loss(
        model, [rows[i]["prompt_ids"] for i in batch], [rows[i]["response_ids"] for i in batch],
        [rows[i]["advantage"] for i in batch], [torch.tensor(rows[i]["behavior_logprobs"]) for i in batch], clip,
        pad_id=pad_id)[0])


def sft_loss_sum(model, rows, clip, max_tokens: int, pad_id: int):
    """The `sft` stage's loss (answer NLL) over the same rows and micro-batches."""
    import torch

    from computerrl.policy.logprobs import response_logprobs

    return _over_micro_batches(model, rows, max_tokens, lambda batch: -torch.cat(response_logprobs(
        model, [rows[i]["prompt_ids"] for i in batch], [rows[i]["response_ids"] for i in batch], pad_id=pad_id)).sum())


IMPLEMENTATIONS = {"stage": stage_loss_sum, "plain": plain_loss_sum, "sft": sft_loss_sum}


def measure(name: str, rows_path: str, n: int, repeats: int, max_tokens: int, out) -> None:
    """In a child process: load the model, run `name` `repeats` times, report seconds, loss, peak RSS."""
    import torch

    from computerrl.policy.checkpoint import embedded_checkpoint, load_model, load_tokenizer
    from computerrl.policy.grpo_loss import Clip

    rows = load_rows(rows_path, n)
    for k, r in enumerate(rows):
        r["advantage"] = ADVANTAGES[k % 2]
    folder = embedded_checkpoint()
    model = load_model(folder, trainable=True)
    pad_id = load_tokenizer(folder).pad_token_id or 0
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    seconds, loss = [], 0.0
    for _ in range(repeats):
        model.zero_grad(set_to_none=True)
        t = time.perf_counter()
        loss = IMPLEMENTATIONS[name](model, rows, Clip(), max_tokens, pad_id)
        seconds.append(time.perf_counter() - t)
    tokens = sum(len(r["prompt_ids"]) + len(r["response_ids"]) for r in rows)
    answer_tokens = sum(len(r["response_ids"]) for r in rows)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out.send({"name": name, "seconds": seconds, "tokens": tokens, "loss": loss / answer_tokens,
              "peak_mb_over_model": (peak - base) / 1024, "threads": torch.get_num_threads()})


def run_child(name: str, args) -> dict:
    ctx = multiprocessing.get_context("spawn")
    reader, writer = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=measure, args=(name, args.rollouts, args.rows, args.repeats, args.micro_batch_tokens,
                                             writer))
    proc.start()
    # wait for the result or the child's end, whichever comes first: a child that dies sends nothing
    multiprocessing.connection.wait([reader, proc.sentinel])
    result = reader.recv() if reader.poll() else None
    proc.join()
    if result is None:
        raise SystemExit(f"the {name!r} measurement died (exit code {proc.exitcode}) without a result; "
                         "its error is printed above")
    return result


def check_rollouts(path: str, rows: int) -> None:
    """Refuse a missing or too small --rollouts before any child starts, saying how to make one."""
    if not Path(path).exists():
        raise SystemExit(f"no dataset at {path}: bench-train needs rollout rows with token ids and log-probs. "
                         f"Make them with `just demo --quick` (~10 min on a CPU; its RL phase 1 writes "
                         f"{DEFAULT_ROLLOUTS}), or with `computerrl rollout ... --out DIR` and pass --rollouts DIR")
    load_rows(path, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", default=DEFAULT_ROLLOUTS, help="a step dataset (rollout output)")
    parser.add_argument("--rows", type=int, default=4, help="rows in the batch")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs of each implementation (median)")
    parser.add_argument("--micro-batch-tokens", type=int, default=8192, help="padded tokens per forward, both sides")
    args = parser.parse_args()
    check_rollouts(args.rollouts, args.rows)
    results = {name: run_child(name, args) for name in ("stage", "plain", "sft")}
    for name, r in results.items():
        median = statistics.median(r["seconds"])
        r["tokens_per_s"] = r["tokens"] / median
        print(f"{name:6s} {r['tokens']} tokens in {median:.1f} s (runs {', '.join(f'{s:.1f}' for s in r['seconds'])}): "
              f"{r['tokens_per_s']:.0f} tokens/s, loss {r['loss']:+.7f}, peak +{r['peak_mb_over_model']:.0f} MB")
    stage, plain = results["stage"], results["plain"]
    summary = {"rows": args.rows, "tokens": stage["tokens"], "stage_tokens_per_s": round(stage["tokens_per_s"], 1),
               "plain_tokens_per_s": round(plain["tokens_per_s"], 1),
               "speedup": round(stage["tokens_per_s"] / plain["tokens_per_s"], 2),
               "loss_diff": abs(stage["loss"] - plain["loss"]),
               "stage_peak_mb": round(stage["peak_mb_over_model"]), "plain_peak_mb": round(plain["peak_mb_over_model"]),
               "sft_tokens_per_s": round(results["sft"]["tokens_per_s"], 1)}
    print(f"speedup {summary['speedup']}x (goal ≥ 1.3), loss difference {summary['loss_diff']:.2e} (goal ≤ 1e-5)")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
