"""GPU benchmark: where the toolkit stands on this machine's accelerator — generation, training, log-probs.

    python -m computerrl.bench.bench_gpu                             # GPU: 135m and 1.7b, bf16 (~6 min on an H100?)
    python -m computerrl.bench.bench_gpu --shapes tiny --device cpu  # the CPU smoke test (~40 s idle, 90 s busy)
    python -m computerrl.bench.bench_gpu --shapes 1.7b --runs grpo,grpo-lora,grpo-gc --rows 256

Nothing is downloaded: each `--shapes` entry is a SmolLM2 model's LlamaConfig shape (hidden size,
layers, heads, kv heads, intermediate size, vocabulary 49,152, tied embeddings), randomly initialised
and saved as a checkpoint folder with the embedded model's tokenizer (`--tokenizer` another folder).
For each shape:
- engine: the `transformers` engine samples one batch (`--batch` chats of about `--prompt-tokens`
  tokens, `--new-tokens` answer tokens each, after one warm-up batch): generated tokens/s, peak memory.
- log-prob agreement: the engine's behaviour log-probs against the trainer's recomputation
  (`policy.logprobs.response_logprobs`) on the same weights and dtype: mean and max |difference|, nats.
- training: `computerrl sft` and `computerrl grpo` (full, LoRA, gradient checkpointing: `--runs`),
  each a subprocess of the real CLI on synthetic datasets of the stages' schemas (`--rows` rows, in
  groups of `--group` with rewards 0 and 1 for grpo; their rows carry engine "vllm", so πold is
  recomputed as for a GPU rollout). Wall time of the command; over its optimizer steps (the first left
  out as warm-up when there are more): seconds, tokens/s, model TFLOP/s (the count is `train_flops`')
  and its share of the peak below, the GPU-busy share (nvidia-smi's utilization, sampled); the peak
  memory of the whole command (torch.cuda.max_memory_allocated on a GPU; peak RSS always).
The peak: a large matrix product in the run's dtype (bf16 8192³ on a GPU; float32 2048³ on a CPU).
On a CPU the GPU-only figures are null. Prints a table, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import math
import multiprocessing
import multiprocessing.connection
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from computerrl.policy.checkpoint import VOCAB, random_checkpoint

SHAPES = {  # LlamaConfig fields; SmolLM2's own values but for `tiny`
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=256),
    "135m": dict(hidden_size=576, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                 intermediate_size=1536),
    "360m": dict(hidden_size=960, num_hidden_layers=32, num_attention_heads=15, num_key_value_heads=5,
                 intermediate_size=2560),
    "1.7b": dict(hidden_size=2048, num_hidden_layers=24, num_attention_heads=32, num_key_value_heads=32,
                 intermediate_size=8192, rope_parameters={"rope_type": "default", "rope_theta": 130000.0}),
}
RUNS = {"sft": ["sft"], "grpo": ["grpo"], "grpo-lora": ["grpo", "--lora-rank", "16"],
        "grpo-gc": ["grpo", "--gradient-checkpointing"], "sft-lora": ["sft", "--lora-rank", "16"]}
# per device: shapes, engine batch and tokens, training rows, group size, optimizer steps per run, runs
DEFAULTS = {"cuda": dict(shapes="135m,1.7b", batch=16, prompt_tokens=1650, response_tokens=64, new_tokens=128, rows=128,
                         group=8, steps=4, runs="sft,grpo,grpo-lora"),
            "cpu": dict(shapes="tiny", batch=4, prompt_tokens=160, response_tokens=16, new_tokens=16, rows=8, group=4,
                        steps=2, runs="sft,grpo,grpo-lora")}
# pyproject's lower bounds (transformers 5.24: models take `cache=`); the engine needs the first two
NEEDED = {"torch": "2.4", "transformers": "5.24", "accelerate": "1.0", "datasets": "2.19", "typer": "0.12",
          "rich": "13"}
ACTION = json.dumps({"api": "CalcTools", "name": "set_cell_value", "args": {"cell": "B2", "value": 1}})
FILLER = "CalcTools.set_cell_value(cell: str, value) -> None: put a number, text or formula in one cell of the sheet.\n"


def check_packages(runs: list[str]) -> None:
    """Stop at once, naming every missing or too old package these runs need, before anything loads."""
    wanted = dict(list(NEEDED.items())[:2] if not runs else NEEDED,
                  **({"peft": "0.17"} if any("lora" in r for r in runs) else {}))
    problems = []
    for name, least in wanted.items():
        if importlib.util.find_spec(name) is None:
            problems.append(f"{name}>={least} (missing)")
            continue
        found = importlib.metadata.version(name)
        if _numbers(found) < _numbers(least):
            problems.append(f"{name}>={least} (found {found})")
    if problems:
        raise SystemExit("bench_gpu needs " + ", ".join(problems) + ". Install them (`pip install "
                         + " ".join(f"'{p.split(' ')[0]}'" for p in problems) + "`; offline, from wheels you carry: "
                         "`pip install --no-index --find-links WHEELS ...`)"
                         + ("; or leave the runs that need them out of --runs" if runs else ""))


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int("".join(c for c in part if c.isdigit()) or 0) for part in version.split(".")[:3])


# --- children: each measurement runs in a fresh process (its own peak memory, its own CUDA context) ---

def run_child(target, *args) -> dict:
    ctx = multiprocessing.get_context("spawn")
    reader, writer = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_send, args=(target, writer, *args))
    proc.start()
    multiprocessing.connection.wait([reader, proc.sentinel])  # a child that dies sends nothing
    result = reader.recv() if reader.poll() else None
    proc.join()
    if result is None:
        raise SystemExit(f"{target.__name__} died (exit code {proc.exitcode}) without a result; its error is above")
    return result


def _send(target, writer, *args) -> None:
    writer.send(target(*args))


def hardware(device: str) -> dict:
    """The device this run uses and the peak of its matrix products (TFLOP/s) in the dtype training uses."""
    import torch

    cuda = device != "cpu" and torch.cuda.is_available()
    if device == "cuda" and not cuda:
        raise SystemExit("--device cuda: torch sees no CUDA GPU")
    dev, dtype, n = ("cuda", torch.bfloat16, 8192) if cuda else ("cpu", torch.float32, 2048)
    a, b = torch.randn(n, n, device=dev, dtype=dtype), torch.randn(n, n, device=dev, dtype=dtype)
    seconds = []
    for _ in range(6 if cuda else 3):
        _sync(dev)
        t = time.perf_counter()
        for _ in range(10 if cuda else 1):
            a @ b
        _sync(dev)
        seconds.append((time.perf_counter() - t) / (10 if cuda else 1))
    return {"device": dev, "name": torch.cuda.get_device_name() if cuda else f"cpu ({torch.get_num_threads()} threads)",
            "peak_tflops": 2 * n ** 3 / min(seconds[1:]) / 1e12, "peak_of": f"{str(dtype)[6:]} matmul {n}^3"}


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def build_checkpoint(shape: str, folder: Path, tokenizer: Path, device: str, dtype: str) -> int:
    """A randomly initialised model of `shape` saved at `folder` with the tokenizer's files; its parameters."""
    return random_checkpoint(folder, SHAPES[shape], tokenizer, version=f"bench-{shape}", device=device, dtype=dtype)


def engine_and_agreement(shape: str, folder: str, tokenizer: str, device: str, dtype: str, a) -> dict:
    """Build the shape, sample one batch with the transformers engine, recompute its log-probs as the trainer does."""
    import torch

    from computerrl.policy.engines import Sampling, make_engine
    from computerrl.policy.logprobs import response_logprobs

    params = build_checkpoint(shape, Path(folder), Path(tokenizer), device, dtype)
    if device == "cuda":
        torch.cuda.empty_cache()
    engine = make_engine("transformers", Path(folder), Sampling(temperature=1.0, max_new_tokens=a.new_tokens),
                         device=device, dtype=dtype)
    chats = [c[:-1] for c in make_chats(engine.tokenizer, a.batch, a.prompt_tokens, a.response_tokens, seed=1)]
    engine.generate(chats, seed=0)  # warm-up: kernels, allocator
    if hasattr(engine, "forget_prefixes"):
        engine.forget_prefixes()  # the timed batch starts cold, as a rollout's first step
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    _sync(device)
    t = time.perf_counter()
    gens = engine.generate(chats, seed=1)
    _sync(device)
    seconds = time.perf_counter() - t
    new = sum(len(g.response_ids) for g in gens)
    with torch.no_grad():
        recomputed = response_logprobs(engine.model, [g.prompt_ids for g in gens], [g.response_ids for g in gens],
                                       1.0, pad_id=engine.pad_id)
    diff = torch.cat([(torch.tensor(g.logprobs) - r.float().cpu()).abs() for g, r in zip(gens, recomputed)])
    return {"params": params, "engine": {
        "batch": len(gens), "prompt_tokens": round(sum(len(g.prompt_ids) for g in gens) / len(gens)),
        "new_tokens": new, "seconds": seconds, "tokens_per_s": new / seconds,
        "peak_gpu_mb": torch.cuda.max_memory_allocated() / 2 ** 20 if device == "cuda" else None,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024},
        "logprob_diff": {"mean": diff.mean().item(), "max": diff.max().item(), "tokens": len(diff)}}


# --- synthetic datasets of the stages' schemas ---

def make_chats(tok, n: int, prompt_tokens: int, answer_tokens: int, seed: int) -> list[list[dict]]:
    """n chats (system, user, assistant) of about prompt_tokens + answer_tokens tokens: one system prompt
    (the API classes, as for every step of an app), users and answers of varied length."""
    rng = random.Random(seed)
    per_line = len(tok(FILLER, add_special_tokens=False).input_ids)
    system = "You act on a LibreOffice Calc sheet.\n" + FILLER * max(1, int(0.8 * prompt_tokens) // per_line)
    rest = max(1, prompt_tokens - len(tok(system, add_special_tokens=False).input_ids))
    chats = []
    for i in range(n):
        user = f"Task {i}: put {i} in cell B{i + 2}.\n" + " A1 cell 12" * max(0, int(rest * rng.uniform(0.8, 1.2)) // 4)
        answer = "<think>" + " set it" * max(1, int(answer_tokens * rng.uniform(0.5, 1.5)) // 2 - 10) + \
                 f"</think>\n```python\nCalcTools.set_cell_value('B{i + 2}', {i})\n```"
        chats.append([{"role": "system", "content": system}, {"role": "user", "content": user},
                      {"role": "assistant", "content": answer}])
    return chats


def write_datasets(work: Path, tok, a) -> tuple[Path, Path]:
    """An SFT dataset of chats and a step dataset (random token ids, groups of `a.group` with rewards 0 and 1)."""
    import datasets

    from computerrl.data.datasets_io import save_atomic
    from computerrl.data.schemas import SFT_FEATURES, STEP_FEATURES

    chats = make_chats(tok, a.rows, a.prompt_tokens, a.response_tokens, seed=2)
    sft = [{"task_id": f"t{i}", "domain": "calc", "trajectory": f"t{i}:0/0", "step": 0, "messages": c,
            "policy_version": "expert"} for i, c in enumerate(chats)]
    save_atomic(datasets.Dataset.from_list(sft, features=SFT_FEATURES), work / "sft-data")
    rng, steps = random.Random(3), []
    for i in range(a.rows):
        group, sample = divmod(i, a.group)
        p, r = int(a.prompt_tokens * rng.uniform(0.9, 1.1)), max(2, int(a.response_tokens * rng.uniform(0.5, 1.5)))
        success = sample % 2 == 0  # every group has rewards 0 and 1: none is skipped
        steps.append({
            "task_id": f"t{group}", "domain": "calc", "group_id": f"t{group}:0", "sample": sample, "step": 0,
            "instruction": f"task {group}", "observation": "{}", "messages": [{"role": "user", "content": "…"}],
            "response": "…", "prompt_ids": [rng.randrange(3, VOCAB) for _ in range(p)],
            "response_ids": [rng.randrange(3, VOCAB) for _ in range(r - 1)] + [2],
            "behavior_logprobs": [-math.log(VOCAB)] * r, "entropy": float("nan"), "action": ACTION,
            "action_valid": True, "exec_result": "", "success": success, "score": float(success),
            "reward": float(success), "done": True, "env_id": "e0", "policy_version": "bench", "engine": "vllm",
            "error": ""})
    save_atomic(datasets.Dataset.from_list(steps, features=STEP_FEATURES), work / "steps")
    return work / "sft-data", work / "steps"


# --- a stage run: the real CLI in a subprocess, its optimizer steps timed from inside ---

def train_flops(model, prompts, responses, share_prefix: bool = True) -> float:
    """Model FLOPs of one forward + backward of `response_logprobs` over these rows: what the model must
    compute, not counting padding or the recomputation of gradient checkpointing. Forward = 2 × the
    decoder's matmul weights × tokens through the decoder (a batch's shared prompt prefix once, as
    response_logprobs runs it) + 4 × query width × layers × causal token pairs (QKᵀ and AV) + 2 × hidden
    × vocabulary × answer tokens (logits only there). Backward = twice the forward where the weights
    train (gradients of activations and of weights), once where they are frozen (LoRA: activations only,
    the adapters' own work left out); attention's backward is twice its forward either way."""
    from computerrl.policy.logprobs import MIN_SHARED, decoder_and_head, shared_prefix

    decoder, head = decoder_and_head(model)
    c = decoder.config
    h, layers = c.hidden_size, c.num_hidden_layers
    d = getattr(c, "head_dim", None) or h // c.num_attention_heads
    q, kv = c.num_attention_heads * d, c.num_key_value_heads * d  # widths of queries and of keys (GQA)
    weights = layers * (2 * h * q + 2 * h * kv + 3 * h * c.intermediate_size)  # q, o; k, v; gate, up, down
    shared = shared_prefix(prompts, min(map(len, prompts)) - 1) if share_prefix and len(prompts) > 1 else 0
    if shared < MIN_SHARED or getattr(decoder, "gradient_checkpointing", False):
        shared = 0
    lengths = [len(p) + len(r) for p, r in zip(prompts, responses)]
    tokens = shared + sum(n - shared for n in lengths)
    pairs = (shared ** 2 + sum(n ** 2 - shared ** 2 for n in lengths)) / 2
    answers = sum(map(len, responses))
    backward = 2 if head.weight.requires_grad else 1  # tied embeddings train with full fine-tuning, not with LoRA
    matmuls = 2 * weights * tokens + 2 * h * c.vocab_size * answers
    return (1 + backward) * matmuls + 3 * 4 * c.num_attention_heads * d * layers * pairs


def stage_child() -> None:
    """`python -c '…stage_child()' REPORT STAGE OPTIONS…`: run `computerrl STAGE OPTIONS…` in this
    process with each optimizer step timed and its FLOPs counted; REPORT (JSON) is written at exit."""
    import torch

    from computerrl.policy import logprobs, trainer

    report, argv = Path(sys.argv[1]), sys.argv[2:]
    cuda = argv[argv.index("--device") + 1] == "cuda"
    steps, current, busy = [], {}, GpuBusy() if cuda else None
    step, logprobs_of = trainer.Trainer.step, logprobs.response_logprobs

    def timed_step(self, micro, n_tokens, loss_fn):
        _sync("cuda" if cuda else "cpu")
        current.update(flops=0.0, tokens=0, start=time.monotonic())
        try:
            return step(self, micro, n_tokens, loss_fn)
        finally:
            _sync("cuda" if cuda else "cpu")
            steps.append(dict(current, end=time.monotonic()))
            current.clear()

    def counted(model, prompts, responses, *args, **kwargs):
        if current:  # inside an optimizer step (not the πold recomputation before the first)
            current["flops"] += train_flops(model, prompts, responses, kwargs.get("share_prefix", True))
            current["tokens"] += sum(len(p) + len(r) for p, r in zip(prompts, responses))
        return logprobs_of(model, prompts, responses, *args, **kwargs)

    trainer.Trainer.step, logprobs.response_logprobs = timed_step, counted
    try:
        from computerrl.cli.main import app

        app(args=argv, prog_name="computerrl")
    finally:
        report.write_text(json.dumps({
            "steps": steps, "busy": busy.samples() if busy else None,
            "peak_gpu_mb": torch.cuda.max_memory_allocated() / 2 ** 20 if cuda else None,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


class GpuBusy:
    """Samples the GPU's utilization (% of time a kernel ran) every 0.2 s in a thread: torch's reading
    (pynvml) when it has one, else nvidia-smi's."""

    def __init__(self):
        self._samples: list[tuple[float, float]] = []
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        import torch

        while True:
            try:
                value = float(torch.cuda.utilization())
            except Exception:  # no pynvml: ask nvidia-smi
                try:
                    out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                                          "-i", str(torch.cuda.current_device())],
                                         capture_output=True, text=True, timeout=5)
                    value = float(out.stdout.split()[0])
                except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
                    return  # no way to read it: the figure stays null
            self._samples.append((time.monotonic(), value))
            time.sleep(0.2)

    def samples(self) -> list[tuple[float, float]]:
        return list(self._samples)


def run_stage(name: str, folder: Path, data: dict, work: Path, device: str, dtype: str, a) -> dict:
    stage, *extra = RUNS[name]
    out, report = work / f"out-{name}", work / f"report-{name}.json"
    n_steps = min(a.steps, a.rows)
    common = ["--model", str(folder), "--out", str(out), "--device", device, "--dtype", dtype, "--overwrite",
              "--micro-batch-tokens", str(a.micro_batch_tokens), "--save-every", "100000", "--lr", "1e-5"]
    options = (["--data", str(data["sft"]), "--epochs", "1", "--batch-rows", str(math.ceil(a.rows / n_steps))]
               if stage == "sft" else
               ["--rollouts", str(data["grpo"]), "--epochs", "1", "--updates-per-epoch", str(n_steps),
                "--temperature", "1.0"])
    cmd = [sys.executable, "-c", "from computerrl.bench.bench_gpu import stage_child; stage_child()", str(report),
           stage, *common, *options, *extra]
    t = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=a.child_timeout)
    except subprocess.TimeoutExpired:
        done = subprocess.CompletedProcess(cmd, -9, "", f"TimeoutExpired: over --child-timeout {a.child_timeout} s")
    wall = time.perf_counter() - t
    shutil.rmtree(out, ignore_errors=True)  # a 1.7B checkpoint is 3.4 GB: none is kept
    got = json.loads(report.read_text()) if report.exists() else {"steps": [], "busy": None}
    result = {"wall_s": wall, "ok": done.returncode == 0, "oom": "out of memory" in done.stderr.lower(),
              "peak_gpu_mb": got.get("peak_gpu_mb"), "peak_rss_mb": got.get("peak_rss_mb")}
    if not result["ok"]:
        result["error"] = (done.stderr.strip().splitlines() or ["(no output)"])[-1][:300]
        print(f"{name} failed (exit {done.returncode}):\n{done.stderr[-3000:]}", file=sys.stderr)
    timed = got["steps"][1:] if len(got["steps"]) > 1 else got["steps"]  # the first warms up
    seconds = sum(s["end"] - s["start"] for s in timed)
    flops, tokens = sum(s["flops"] for s in timed), sum(s["tokens"] for s in timed)
    result.update(steps=len(got["steps"]), step_s=seconds / len(timed) if timed else None,
                  tokens_per_s=tokens / seconds if seconds else None,
                  tflops=flops / seconds / 1e12 if seconds else None)
    samples = [v for t_, v in (got["busy"] or []) if any(s["start"] <= t_ <= s["end"] for s in timed)]
    result["gpu_busy"] = sum(samples) / len(samples) / 100 if samples else None
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", help=f"comma-separated, of {', '.join(SHAPES)} (default: 135m,1.7b on a GPU, "
                                         "tiny on a CPU)")
    parser.add_argument("--device", default="", choices=["", "cuda", "cpu"], help="'' = the GPU when there is one")
    parser.add_argument("--dtype", default="", help="'' = bfloat16 on a GPU, float32 on a CPU")
    parser.add_argument("--runs", help=f"training runs, comma-separated, of {', '.join(RUNS)} ('' = none)")
    for name, about in (("batch", "chats per engine batch"), ("prompt-tokens", "tokens per prompt, about"),
                        ("new-tokens", "tokens the engine samples per chat"),
                        ("response-tokens", "answer tokens of the training rows, about"),
                        ("rows", "training rows (grpo: groups of --group)"), ("group", "G"),
                        ("steps", "optimizer steps per training run (the first is left out as warm-up)")):
        key = name.replace("-", "_")
        parser.add_argument(f"--{name}", type=int,
                            help=f"{about} (default: {DEFAULTS['cuda'][key]} on a GPU, {DEFAULTS['cpu'][key]} "
                                 "on a CPU)")
    parser.add_argument("--micro-batch-tokens", type=int, default=8192, help="the stages' --micro-batch-tokens")
    parser.add_argument("--tokenizer", default="", help="a folder with SmolLM2's tokenizer ('' = the embedded model's)")
    parser.add_argument("--work", default="", help="where checkpoints and datasets go ('' = a temporary folder, "
                                                   "removed)")
    parser.add_argument("--child-timeout", type=int, default=900, help="seconds a stage run may take")
    a = parser.parse_args()
    unknown = [s for s in _names(a.shapes) if s not in SHAPES] + [r for r in _names(a.runs) if r not in RUNS]
    if unknown:
        raise SystemExit(f"unknown shape or run {', '.join(unknown)}; shapes: {', '.join(SHAPES)}; "
                         f"runs: {', '.join(RUNS)}")
    check_packages(_names(a.runs if a.runs is not None else DEFAULTS["cuda"]["runs"]))
    tokenizer = find_tokenizer(a.tokenizer)
    start = time.perf_counter()
    hw = run_child(hardware, a.device)
    for key, value in DEFAULTS[hw["device"]].items():
        if getattr(a, key) is None:
            setattr(a, key, value)
    dtype = a.dtype or ("bfloat16" if hw["device"] == "cuda" else "float32")
    shapes, runs = _names(a.shapes), _names(a.runs)
    from transformers import AutoTokenizer

    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="bench-gpu-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"{hw['name']}: {hw['peak_tflops']:.2f} TFLOP/s peak ({hw['peak_of']}); {dtype}; work in {work}", flush=True)
    try:
        data = dict(zip(("sft", "grpo"), write_datasets(work, AutoTokenizer.from_pretrained(str(tokenizer)), a)
                        if runs else (None, None)))
        results = {}
        for shape in shapes:
            folder = work / f"model-{shape}"
            r = results[shape] = run_child(engine_and_agreement, shape, str(folder), str(tokenizer), hw["device"],
                                           dtype, a)
            e, d = r["engine"], r["logprob_diff"]
            print(f"{shape} ({r['params'] / 1e6:.0f}M): engine {e['tokens_per_s']:.0f} tokens/s (batch {e['batch']}, "
                  f"prompts ~{e['prompt_tokens']} tokens), log-prob |engine - trainer| mean {d['mean']:.2e} "
                  f"max {d['max']:.2e} nats", flush=True)
            r["runs"] = {}
            for name in runs:
                x = r["runs"][name] = run_stage(name, folder, data, work, hw["device"], dtype, a)
                if x["tflops"] is not None:
                    x["peak_share"] = x["tflops"] / hw["peak_tflops"]
                print(f"  {name}: {_line(x)}", flush=True)
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    summary = {**{k: hw[k] for k in ("device", "name", "peak_of")}, "peak_tflops": round(hw["peak_tflops"], 3),
               "dtype": dtype, "seconds": round(time.perf_counter() - start, 1), "shapes": _rounded(results)}
    print(json.dumps(summary))
    if any(not x["ok"] for r in results.values() for x in r["runs"].values()):
        sys.exit(1)


def _names(value: str | None) -> list[str]:
    return [x for x in (value or "").split(",") if x]


def find_tokenizer(given: str) -> Path:
    """The folder whose tokenizer the models get: `given`, else the embedded model's."""
    from computerrl.policy.checkpoint import embedded_checkpoint

    try:
        folder = Path(given) if given else embedded_checkpoint()
    except (ImportError, FileNotFoundError) as e:  # the embedded model is converted on first use, from its GGUF file
        raise SystemExit(f"no tokenizer: the embedded model is not converted here ({e}). Pass "
                         "--tokenizer DIR, a copy of the tokenizer files of `python -m computerrl.policy.checkpoint`'s "
                         "folder (tokenizer.json, tokenizer_config.json, chat_template.jinja)") from None
    if not (folder / "tokenizer.json").exists():
        raise SystemExit(f"--tokenizer {folder}: no tokenizer.json there")
    return folder


def _line(x: dict) -> str:
    if not x["ok"]:
        return ("OUT OF MEMORY" if x["oom"] else "FAILED") + f": {x.get('error', '')}"
    if x["step_s"] is None:
        return f"{x['wall_s']:.1f} s wall, no optimizer step"
    mem = f"{x['peak_gpu_mb']:.0f} MB GPU" if x["peak_gpu_mb"] is not None else f"{x['peak_rss_mb']:.0f} MB RSS"
    busy = f", GPU busy {x['gpu_busy']:.0%}" if x["gpu_busy"] is not None else ""
    return (f"{x['wall_s']:.1f} s wall, {x['steps']} steps of {x['step_s']:.2f} s, {x['tokens_per_s']:.0f} tokens/s, "
            f"{x['tflops']:.3g} TFLOP/s ({x['peak_share']:.0%} of peak){busy}, peak {mem}")


def _rounded(value):
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


if __name__ == "__main__":
    main()
