"""`computerrl sft`: supervised fine-tuning on chat rows — behaviour cloning on expert replays, and
the Entropulse phase on the policy's own successes (`filter-success`).

Each row is a chat whose last message is the assistant's answer; the loss is the negative
log-likelihood of that answer's tokens (and its end-of-turn token) only, averaged over every
answer token of an optimizer step. Earlier assistant turns are part of the prompt: they are the
collapsed history the policy is shown, cut to its budget, not something to imitate. Step datasets
(`tasks build`'s expert replays, rollouts) are read as chats too: their `messages` + `response`.

Reads:  --data, one or more SFT datasets (filter-success) or step datasets; --model.
Writes: --out, a checkpoint (full model + tokenizer, or a LoRA adapter) with lineage.json, and
        OUT/metrics (one row per optimizer step: loss, entropy, grad_norm, lr, tokens, epoch).

    computerrl sft --data runs/tasks/expert --epochs 1 --out runs/sft-bc
    accelerate launch --config_file configs/accelerate/fsdp.yaml -m computerrl.cli.main sft \\
        --data runs/successes --model runs/rl1/policy-9 --lr 1e-5 --dtype bfloat16 --out runs/entropulse
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from pathlib import Path

from computerrl.data.config import require_datasets, setting
from computerrl.data.folders import CHATS, STEPS
from computerrl.policy.trainer import TrainConfig


@dataclasses.dataclass
class SFTConfig(TrainConfig):
    data: list[Path] = setting([], "SFT dataset (filter-success) or step dataset (tasks build's expert replays, a "
                                   "rollout); repeat to pool several.")
    out: Path = Path("runs/sft")
    epochs: int = setting(2, "Passes over the data.")
    batch_rows: int = setting(16, "Rows per optimizer step.")
    lr: float = 5e-5

    def __post_init__(self):
        super().__post_init__()
        self.data = [Path(p) for p in self.data]
        if not self.data:
            raise ValueError("give at least one dataset with --data")
        require_datasets(self.data, "--data", CHATS, STEPS)
        if self.epochs < 1 or self.batch_rows < 1:
            raise ValueError("--epochs and --batch-rows must be at least 1")


def chats(paths: list[Path]) -> list[list[dict]]:
    """Every row of the datasets as a chat ending in the assistant's answer (a vision policy's rows with
    the screenshots their prompt held, `vision.with_screens`)."""
    from computerrl.data.datasets_io import load
    from computerrl.data.schemas import SCREENSHOTS, check_columns
    from computerrl.policy.vision import with_screens

    out = []
    for path in paths:
        ds = load(path)
        check_columns(ds, ["messages"], f"SFT data {path}")
        with_response = "response" in ds.column_names
        screens = [SCREENSHOTS] if SCREENSHOTS in ds.column_names else []
        for row in ds.select_columns(["messages", *(["response"] if with_response else []), *screens]):
            chat = list(row["messages"])
            if chat and chat[-1]["role"] != "assistant":
                if not with_response:
                    raise ValueError(f"{path}: a row's messages end with {chat[-1]['role']!r} and it has no "
                                     "'response' column: nothing to train on")
                chat.append({"role": "assistant", "content": row["response"]})
            if screens and row[SCREENSHOTS]:
                chat = with_screens(chat[:-1], row[SCREENSHOTS]) + chat[-1:]
            out.append(chat)
    return out


def run(cfg: SFTConfig, console=None) -> dict:
    import torch
    from rich.console import Console

    from computerrl.data.datasets_io import lineage
    from computerrl.policy.checkpoint import policy_version, resolve
    from computerrl.policy.logprobs import answer_ids, chat_prompt_ids, response_logprobs
    from computerrl.policy.trainer import Trainer, micro_batches, new_version, progress
    from computerrl.policy.vision import screen_prompt

    console = console or Console(soft_wrap=True)
    if cfg.out.exists() and not cfg.state_dir.exists() and not cfg.overwrite:
        console.print(f"{cfg.out} is already trained (--overwrite trains again)")
        return json.loads((cfg.out / "summary.json").read_text())
    trainer = Trainer(cfg, console, passes=cfg.epochs)
    tok = trainer.tokenizer
    data = chats(cfg.data)
    if not data:
        raise ValueError(f"no rows in {', '.join(map(str, cfg.data))}: nothing to train on")
    if trainer.processor:  # a vision model: the prompts with their screenshots, as rollout built them
        prompts = [screen_prompt(trainer.processor, c[:-1]) for c in data]
    elif any(not isinstance(m["content"], str) for c in data for m in c):
        raise ValueError(f"{', '.join(map(str, cfg.data))} holds screenshots: train a vision-language --model on it")
    else:
        prompts = [chat_prompt_ids(tok, c[:-1]) for c in data]
    answers = [answer_ids(tok, c[-1]["content"]) for c in data]
    per_epoch = math.ceil(len(data) / cfg.batch_rows)
    total = per_epoch * cfg.epochs
    if trainer.updates:
        console.print(f"resuming {cfg.out} after {trainer.updates} of {total} optimizer steps")

    def loss_fn(rows: list[int]):
        logp, entropy = response_logprobs(trainer.model, [prompts[i] for i in rows], [answers[i] for i in rows],
                                          pad_id=trainer.pad_id, with_entropy=True, trunk=trainer.trunk)
        logp, entropy = torch.cat(logp), torch.cat(entropy)
        return -logp.sum(), {"loss": -logp.sum().item(), "entropy": entropy.sum().item()}

    with progress(console, f"sft {cfg.out.name}", total, trainer.updates) as advance:
        for epoch in range(cfg.epochs):
            order = list(range(len(data)))
            random.Random(cfg.seed * 7919 + epoch).shuffle(order)
            for b in range(per_epoch):
                if epoch * per_epoch + b < trainer.updates:
                    continue  # done before the run was interrupted
                rows = order[b * cfg.batch_rows:(b + 1) * cfg.batch_rows]
                lengths = [len(prompts[i]) + len(answers[i]) for i in rows]
                micro = [[rows[j] for j in m]
                         for m in micro_batches([prompts[i] for i in rows], lengths, cfg.micro_batch_tokens, cfg.seed + b)]
                logs = trainer.step(micro, sum(len(answers[i]) for i in rows), loss_fn)
                logs["epoch"] = epoch
                trainer.record(logs)
                advance(f"loss {logs['loss']:.3f} entropy {logs['entropy']:.2f}")
    log = trainer.state["log"]
    summary = {"rows": len(data), "updates": len(log), "first_loss": log[0]["loss"], "last_loss": log[-1]["loss"]}
    card = lineage("sft", cfg, {"data": [str(p) for p in cfg.data], "model": cfg.model})
    card.update(policy_version=new_version("sft", cfg.out), parent=policy_version(resolve(cfg.model)))
    out = trainer.save_final(card, summary)
    console.print(f"wrote {out}: {len(data)} rows, {len(log)} optimizer steps, loss "
                  f"{summary['first_loss']:.3f} → {summary['last_loss']:.3f}")
    if trainer.trunk:
        console.print(f"the frozen layers ran once for {len(trainer.trunk.kept)} of {len(data)} rows "
                      f"({trainer.trunk.bytes / 2**20:.0f} MiB kept); {trainer.trunk.reused} later passes of a row "
                      f"ran the top {cfg.train_layers} layers alone")
    return summary
