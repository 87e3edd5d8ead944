"""What `grpo` and `sft` share: the model to train (full, LoRA, or its top layers), micro-batches of alike prompts,
an optimizer step over many micro-batches (token-mean across all of them), resumable state, and
the checkpoint a stage writes.

accelerate carries the same loop from this CPU to many GPUs and nodes (`accelerate launch
--config_file configs/accelerate/<ddp|fsdp>.yaml -m computerrl.cli.main grpo …`): every
process takes its share of the micro-batches, gradients are averaged, and only the main process
writes checkpoints, state and metrics.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import random
import shutil
import time
import uuid
from pathlib import Path
from typing import Callable, Sequence

from computerrl.data.config import MODEL, OUT, SEED, setting
from computerrl.policy.checkpoint import (ADAPTER_CONFIG, base_of, is_vision, load_model, load_tokenizer, peft_quietly,
                                          resolve, write_lineage)
from computerrl.policy.frozen_trunk import FrozenTrunk
from computerrl.policy.logprobs import decoder_of
from computerrl.policy.vision import load_processor

STATE = "trainer_state.json"
MEMORY_AND_BOOKKEEPING = ("device", "overwrite", "save_every", "micro_batch_tokens", "gradient_checkpointing",
                          "trunk_memory_gib")
log = logging.getLogger(__name__)


@dataclasses.dataclass
class TrainConfig:
    """Options every training stage has (the stages' configs extend it)."""
    model: str = setting("embedded", MODEL)  # the checkpoint to train
    out: Path = setting(Path("runs/train"), OUT, "--out", "-o")  # the new checkpoint folder
    lr: float = setting(1e-5, "AdamW learning rate (constant after --warmup).")
    warmup: int = setting(0, "Optimizer steps of linear learning-rate warm-up.")
    weight_decay: float = setting(0.0, "AdamW weight decay.")
    max_grad_norm: float = setting(1.0, "Clip the gradient to this norm (0 = no clipping).")
    # tokens per forward pass: the shared prompt prefix once + rows × the rest, padded
    micro_batch_tokens: int = setting(8192, "Padded tokens per forward pass; rows of alike length are batched "
                                            "together, gradients accumulate over the step.")
    lora_rank: int = setting(0, "0 = full fine-tuning; > 0 trains a LoRA adapter of this rank (a LoRA --model keeps "
                                "training its own adapter).")
    lora_alpha: int = setting(32, "LoRA scaling alpha.")
    # N > 0 also trains the final norm; with LoRA, adapters go on those N layers only
    train_layers: int = setting(0, "0 = every layer; N trains only the top N decoder layers (backward stops there: "
                                   "about 3x cheaper, how the CPU demo fine-tunes).")
    train_vision: bool = setting(False, "A vision-language checkpoint: train its vision tower and projector too "
                                        "(frozen by default: the language model learns).")
    trunk_memory_gib: float = setting(2.0, "With --train-layers and more than one pass over the rows: memory on "
                                           "the model's device for what the frozen layers make of each row (its "
                                           "tokens x hidden size x dtype bytes), computed in its first pass so "
                                           "later passes run the trained layers alone; 0 = recompute it. Used in "
                                           "one process, for a text model, not for an adapter given as --model.")
    gradient_checkpointing: bool = setting(False, "Recompute activations in the backward pass: less memory, about a "
                                                  "third slower.")
    device: str = setting("", "Torch device: cpu, cuda ('' = accelerate's choice).")  # "": the GPU when there is one
    dtype: str = setting("float32", "Weights' dtype: float32, bfloat16 (GPUs).")
    save_every: int = setting(1, "Optimizer steps between resumable states (a killed run resumes from the last one; "
                                 "rerun the same command).")
    seed: int = setting(0, SEED)
    overwrite: bool = setting(False, "Train again even if --out holds a finished checkpoint.")

    def __post_init__(self):
        self.out = Path(self.out)
        if self.lr <= 0 or self.micro_batch_tokens < 16 or self.save_every < 1 or self.trunk_memory_gib < 0:
            raise ValueError("--lr must be > 0, --micro-batch-tokens >= 16, --save-every >= 1 and "
                             "--trunk-memory-gib >= 0")
        if self.lora_rank < 0 or self.train_layers < 0:
            raise ValueError("--lora-rank and --train-layers must be >= 0 (0 = full fine-tuning, every layer)")

    @property
    def state_dir(self) -> Path:
        return self.out.with_name(f".{self.out.name}.state")


def micro_batches(prompts: Sequence[Sequence[int]], lengths: Sequence[int], max_tokens: int, seed: int) -> list[list[int]]:
    """Row indices in micro-batches that cost at most max_tokens each, in a seeded random order.

    Rows are ordered by their prompt's tokens, so the steps of one task (and the tasks of one app)
    sit together, and packed while shared prefix + rows × (longest − shared prefix) ≤ max_tokens:
    `response_logprobs` runs the prefix the batch shares once. A row longer than that goes alone."""
    from computerrl.policy.logprobs import MIN_SHARED

    order = sorted(range(len(lengths)), key=lambda i: (list(prompts[i]), lengths[i]))
    batches, current, shared, longest = [], [], 0, 0

    def cost(n, shared_, longest_):
        shared_ = shared_ if shared_ >= MIN_SHARED else 0
        return shared_ + n * (longest_ - shared_)

    for i in order:
        if current:
            first = prompts[current[0]]
            limit = min(shared, len(prompts[i]) - 1)
            common = next((k for k in range(limit) if prompts[i][k] != first[k]), limit)
            if cost(len(current) + 1, common, max(longest, lengths[i])) <= max_tokens:
                current.append(i)
                shared, longest = common, max(longest, lengths[i])
                continue
            batches.append(current)
        current, shared, longest = [i], len(prompts[i]) - 1, lengths[i]
    if current:
        batches.append(current)
    random.Random(seed).shuffle(batches)
    return batches


class Trainer:
    """One model under training. `step(micro, loss_fn)` is one optimizer step; the loss function
    returns (sum of per-token losses, logs) for one micro-batch and the trainer divides by the
    tokens of the whole step, so every token weighs the same however the rows were batched."""

    def __init__(self, cfg: TrainConfig, console=None, *, passes: int = 1):
        """`console`: the stage's; it goes quiet on every process but the main one (one speaks for all);
        `passes`: how many times the run goes over each row (more than one: the frozen layers' output is kept)."""
        import torch
        from accelerate import Accelerator
        from accelerate.utils import DistributedType, set_seed

        self.cfg = cfg
        # a killed run resumes only into the same run: settings that change how, not what, it computes aside
        self.key = key = {k: str(v) for k, v in dataclasses.asdict(cfg).items() if k not in MEMORY_AND_BOOKKEEPING}
        # Tied input/output embeddings (SmolLM2, Qwen2.5) are saved once: accelerate warns about it at every save.
        logging.getLogger("accelerate.utils.other").setLevel(logging.ERROR)
        # With no GPU, accelerate puts the processes of `accelerate launch` in one gloo group only when told
        # cpu=True; otherwise each would train alone on the whole batch and write its own checkpoint.
        self.accelerator = Accelerator(cpu=cfg.device == "cpu" or (not cfg.device and not torch.accelerator.is_available()))
        if os.environ.get("ACCELERATE_USE_FSDP") == "true" and self.accelerator.distributed_type != "FSDP":
            # accelerate 1.15 chooses FSDP only for GPU-like devices (AcceleratorState): on a CPU it is DDP.
            log.warning("FSDP asked for, but accelerate runs %s here: parameters are not sharded",
                        self.accelerator.distributed_type)
        set_seed(cfg.seed)
        self.state = {"key": key, "updates": 0, "log": []}  # log: one dict per optimizer step
        source = resolve(cfg.model)
        self.tokenizer = load_tokenizer(source)
        self.base = base_of(source).resolve()  # what a LoRA adapter of this run sits on
        model = load_model(source, dtype=cfg.dtype, trainable=True)
        adapter = (Path(source) / ADAPTER_CONFIG).exists()  # an adapter keeps training its own weights
        self.processor = load_processor(self.base) if is_vision(self.base) else None  # rebuilds rows' image inputs
        top = _top_layers(model, cfg.train_layers)
        if self.processor and not cfg.train_vision and not adapter:
            top = top or list(range(len(model.get_decoder().layers)))  # the language model's layers, all of them
        if cfg.lora_rank and not adapter:
            from peft import LoraConfig, get_peft_model

            with peft_quietly():
                model = get_peft_model(model, LoraConfig(
                    r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, lora_dropout=0.0, task_type="CAUSAL_LM",
                    target_modules=_linear_modules(model, top) if top else "all-linear"),
                    # peft's default float32 adapters cast every adapted layer's input to float32 and keep it for
                    # backward: in bfloat16 LoRA then held 1.5x the activations of full fine-tuning
                    autocast_adapter_dtype=False)
        elif cfg.train_layers and not adapter:
            _freeze_all_but(model, top)
        elif self.processor and not cfg.train_vision and not adapter:
            _freeze_vision(model)
        if cfg.gradient_checkpointing:
            _checkpoint(model, lora=bool(cfg.lora_rank or adapter))
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        warmup = max(1, cfg.warmup)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
        self.model, self.optimizer, self.scheduler = self.accelerator.prepare(model, optimizer, scheduler)
        self.trunk = None  # the frozen layers' output per row, kept (no layer swapped inside a sharding wrapper)
        decoder = decoder_of(model)
        if (passes > 1 and top and not adapter and not self.processor and cfg.trunk_memory_gib
                and self.accelerator.distributed_type == DistributedType.NO and FrozenTrunk.fits(decoder, top[0])):
            self.trunk = FrozenTrunk(decoder, top[0], int(cfg.trunk_memory_gib * 2**30))
        if self._resumable():  # weights, optimizer, scheduler and RNG as they were after the last saved step
            if (cfg.state_dir / "accelerate").exists():
                self.accelerator.load_state(str(cfg.state_dir / "accelerate"))
            self.state = json.loads((cfg.state_dir / STATE).read_text())
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.halvings = 0  # micro-batches are split in 2**halvings after running out of memory
        if console is not None:
            console.quiet = console.quiet or not self.is_main

    @property
    def updates(self) -> int:
        return self.state["updates"]

    @property
    def device(self):
        return self.accelerator.device

    @property
    def is_main(self) -> bool:
        return self.accelerator.is_main_process

    def _resumable(self) -> bool:
        path = self.cfg.state_dir / STATE
        return path.exists() and json.loads(path.read_text()).get("key") == self.key

    def my_share(self, micro: list[list[int]]) -> list[list[int]]:
        """This process's micro-batches of one optimizer step (all of them on one process)."""
        n, k = self.accelerator.num_processes, self.accelerator.process_index
        return micro[k::n]

    def step(self, micro: list[list[int]], n_tokens: int, loss_fn: Callable[[list[int]], tuple]) -> dict:
        """One optimizer step over `micro` (row-index lists; this process runs its share).

        `n_tokens`: response tokens of the whole step, over all processes; `loss_fn(rows)` returns
        (sum of the per-token losses of those rows, {name: summed value}) — the summed logs are
        added up over micro-batches and divided by n_tokens as well.

        A step that runs out of GPU memory is run again, from its start, in less memory: first with
        gradient checkpointing, then with every micro-batch halved (the step's result is the same, as
        gradients are token sums). The smaller size holds for the rest of the run."""
        import torch

        start, cuda = time.perf_counter(), self.device.type == "cuda"
        while True:
            try:
                logs = self._step([part for rows in micro for part in _split(rows, self.halvings)], n_tokens, loss_fn)
                logs["seconds"] = time.perf_counter() - start  # retries after running out of memory included
                if cuda:  # the process's peak so far
                    logs["peak_memory_gib"] = torch.cuda.max_memory_allocated(self.device) / 2**30
                return logs
            except torch.OutOfMemoryError as error:
                if self.accelerator.num_processes > 1:  # the other processes wait in a collective: no retry
                    raise RuntimeError(f"out of GPU memory: {_FIT_ADVICE}") from error
                longest = max(len(rows) for rows in micro)
            # out of the except block, so the failed pass's tensors are freed with its traceback
            self.optimizer.zero_grad(set_to_none=True)
            if self.trunk is not None:
                self.trunk = None  # its kept states first: they grow through the first pass
                torch.cuda.empty_cache()
                log.warning("out of GPU memory: the step runs again without the frozen layers' kept output "
                            "(--trunk-memory-gib 0 saves this retry)")
                continue
            torch.cuda.empty_cache()
            if not self.cfg.gradient_checkpointing:
                self.cfg.gradient_checkpointing = True
                _checkpoint(self.unwrapped(), lora=self.cfg.lora_rank > 0 or hasattr(self.unwrapped(), "peft_config"))
                log.warning("out of GPU memory: the step runs again with gradient checkpointing (--gradient-"
                            "checkpointing saves this retry)")
            elif 2 ** self.halvings < longest:
                self.halvings += 1
                log.warning("out of GPU memory: the step runs again with each micro-batch split in %d "
                            "(--micro-batch-tokens %d saves this retry)", 2 ** self.halvings,
                            self.cfg.micro_batch_tokens >> self.halvings)
            else:
                raise RuntimeError(f"out of GPU memory with one row per pass and gradient checkpointing: "
                                   f"{_FIT_ADVICE}")

    def _step(self, micro: list[list[int]], n_tokens: int, loss_fn: Callable[[list[int]], tuple]) -> dict:
        mine = self.my_share(micro)
        # A process with no micro-batch (more processes than micro-batches) still joins the gradient sync,
        # with a zero loss. DDP syncs once per step, but FSDP gathers the sharded weights in every
        # pass: there every process runs as many passes as the busiest one, the spare ones weighing zero.
        sharded = self.accelerator.distributed_type == "FSDP"
        passes = max(1, -(-len(micro) // self.accelerator.num_processes) if sharded else len(mine))
        sums: dict[str, float] = {}
        scale = self.accelerator.num_processes / n_tokens  # gradients are averaged over processes
        self.model.train()
        for k in range(passes):
            real = k < len(mine)
            with contextlib.nullcontext() if k == passes - 1 else self.accelerator.no_sync(self.model):
                loss_sum, logs = loss_fn(mine[k] if real else micro[0])
                self.accelerator.backward(loss_sum * (scale if real else 0.0))
            for name, value in logs.items():
                sums[name] = sums.get(name, 0.0) + (float(value) if real else 0.0)
        norm = self.accelerator.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm or float("inf"))
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        totals = self._gather(sums)
        logs = {name: value / n_tokens for name, value in totals.items()}
        logs.update(grad_norm=float(norm), lr=self.scheduler.get_last_lr()[0], tokens=n_tokens)
        return logs

    def _gather(self, sums: dict[str, float]) -> dict[str, float]:
        if self.accelerator.num_processes == 1:
            return sums
        import torch

        names = sorted(sums)
        local = torch.tensor([sums[n] for n in names], device=self.device, dtype=torch.float64)
        return dict(zip(names, self.accelerator.reduce(local, reduction="sum").tolist()))

    def unwrapped(self):
        return self.accelerator.unwrap_model(self.model)

    def record(self, logs: dict) -> None:
        """Count an optimizer step as done and keep its logs; save a resumable state every save_every."""
        self.state["updates"] += 1
        self.state["log"].append(logs)
        if self.updates % self.cfg.save_every == 0:
            self.save_state()

    def save_state(self) -> None:
        """Weights, optimizer, scheduler, RNG (accelerate's state, sharded as the run is) and the logs
        so far; the previous state is replaced only once the new one is whole."""
        tmp = self.cfg.state_dir.with_name(f"{self.cfg.state_dir.name}.tmp")
        if self.is_main:
            shutil.rmtree(tmp, ignore_errors=True)
            (tmp / "accelerate").mkdir(parents=True)  # before any process writes its shard or RNG state into it
        self.accelerator.wait_for_everyone()
        if self.updates:
            # Before the first step the weights are --model's and the optimizer is empty. Saved under FSDP,
            # torch fills an empty optimizer by a zero-lr step, which Adam counts: the first update would shrink.
            self.accelerator.save_state(str(tmp / "accelerate"))
        self.accelerator.wait_for_everyone()  # every process's files are in before the state is made current
        if self.is_main:
            (tmp / STATE).write_text(json.dumps(self.state, default=float))
            _replace(tmp, self.cfg.state_dir)
        self.accelerator.wait_for_everyone()

    def save_final(self, lineage: dict, summary: dict) -> Path:
        """The trained checkpoint at OUT, atomically, with lineage.json, summary.json and the metrics
        dataset (OUT/metrics, one row per optimizer step); the resumable state goes."""
        weights = self.accelerator.get_state_dict(self.model)  # gathered from every process's shard
        summary = dict(summary, processes=self.accelerator.num_processes, parallel=self.accelerator.distributed_type.value)
        if self.is_main:
            import datasets

            from computerrl.data.schemas import METRICS_FILE

            tmp = self.cfg.out.with_name(f".{self.cfg.out.name}.tmp-{uuid.uuid4().hex[:8]}")
            model = self.unwrapped()
            if hasattr(model, "peft_config"):  # the adapter alone, pointing at its base as a local folder
                for config in model.peft_config.values():
                    config.base_model_name_or_path = str(self.base)
            elif getattr(model.config, "tie_word_embeddings", False):
                # FSDP gathers tied weights as separate copies, which save_pretrained would store twice
                for tied in getattr(model, "all_tied_weights_keys", {}):
                    weights.pop(tied, None)
            model.save_pretrained(tmp, state_dict=weights, safe_serialization=True)
            (self.processor or self.tokenizer).save_pretrained(tmp)  # a vision model: its image processor too
            write_lineage(tmp, lineage)
            (tmp / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
            datasets.Dataset.from_list(self.state["log"]).save_to_disk(str(tmp / METRICS_FILE))
            _replace(tmp, self.cfg.out)
            shutil.rmtree(self.cfg.state_dir, ignore_errors=True)
        self.accelerator.wait_for_everyone()
        return self.cfg.out


def new_version(stage: str, out: Path) -> str:
    """A policy_version no other checkpoint has: the stage, the output's name and a random tag."""
    return f"{stage}:{Path(out).name}:{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def progress(console, label: str, total: int, done: int):
    """A rich progress bar over optimizer steps; yields advance(text) to call after each step."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), TextColumn("{task.fields[info]}"), console=console,
                  transient=False) as bar:
        task = bar.add_task(label, total=total, completed=done, info="")
        yield lambda info="": bar.update(task, advance=1, info=info)


_FIT_ADVICE = ("train fewer weights (--lora-rank 16, --train-layers N), lower --micro-batch-tokens, or "
               "shorten the prompts (--budgets)")


def _checkpoint(model, *, lora: bool) -> None:
    """Gradient checkpointing on: activations are recomputed in backward instead of kept."""
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    if lora:
        model.enable_input_require_grads()


def _split(rows: list[int], halvings: int) -> list[list[int]]:
    """`rows` in up to 2**halvings contiguous parts of near-equal size (rows of alike prompts stay together)."""
    parts = min(len(rows), 2 ** halvings)
    cuts = [round(k * len(rows) / parts) for k in range(parts + 1)]
    return [rows[a:b] for a, b in zip(cuts, cuts[1:])]


def _top_layers(model, n: int) -> list[int]:
    """Indices of the top n decoder layers ([] = all)."""
    if not n:
        return []
    total = len(decoder_of(model).layers)
    return list(range(max(0, total - n), total))


def _linear_modules(model, layers: list[int]) -> list[str]:
    """Full names of the linear modules inside these decoder layers (where LoRA adapters go)."""
    import torch

    wanted = {id(model.get_decoder().layers[i]) for i in layers}
    prefixes = [name for name, module in model.named_modules() if id(module) in wanted]
    return [name for name, module in model.named_modules()
            if isinstance(module, torch.nn.Linear) and any(name.startswith(p + ".") for p in prefixes)]


def _freeze_all_but(model, layers: list[int]) -> None:
    """Only these decoder layers and the final norm train (tied embeddings and the head stay: training
    them would need the gradient all the way down)."""
    decoder = model.get_decoder()
    for p in model.parameters():
        p.requires_grad_(False)
    for i in layers:
        decoder.layers[i].requires_grad_(True)
    if getattr(decoder, "norm", None) is not None:
        decoder.norm.requires_grad_(True)


def _freeze_vision(model) -> None:
    """Only the language model trains (its embeddings and head included): the vision tower and the
    projector into the language model keep their weights."""
    for p in model.parameters():
        p.requires_grad_(False)
    model.get_decoder().requires_grad_(True)
    model.get_output_embeddings().requires_grad_(True)


def _replace(tmp: Path, dest: Path) -> None:
    old = dest.with_name(f".{dest.name}.old-{uuid.uuid4().hex[:8]}")
    if dest.exists():
        os.rename(dest, old)
    os.rename(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)
