"""The policy on the embedded model (real weights, CPU): prompts, generation, log-probabilities."""

from __future__ import annotations

import os
import threading
import time

import pytest

import computerrl.apis  # noqa: F401  (registers the app API classes)
from computerrl.policy.engine_transformers import fast_dtype
from computerrl.policy.prompt import BUDGETS, OMITTED, build_messages, cut, cut_lines

OBS = {"focused_app": "calc", "windows": [{"id": "0x400003", "app": "calc", "title": "Untitled 1 - LibreOffice Calc"}],
       "a11y_tree": "tag\tname\ttext\tposition\tsize\n" + "\n".join(
           f"table-cell\tB{i}\t{i}\t(300, {200 + 20 * i})\t(80, 20)" for i in range(1, 400)),
       "app_info": "Sheet1, used A1:B399", "last_result": "Done"}


@pytest.fixture(scope="module")
def engine():
    from computerrl.policy.checkpoint import embedded_checkpoint
    from computerrl.policy.engines import Sampling, make_engine

    # float32, the trainer's dtype: its numbers must be the trainer's to 1e-4
    return make_engine("transformers", embedded_checkpoint(), Sampling(temperature=0.7, max_new_tokens=24),
                       dtype="float32")


def test_the_prompt_has_computerrls_parts_and_the_focused_apps_api_only():
    system, user = build_messages("Sum column B into B400.", OBS, [], BUDGETS["paper"])
    assert system["content"].endswith("Task: Sum column B into B400.")
    assert "class Agent:" in system["content"] and "class CalcTools:" in system["content"]
    assert "class WriterTools:" not in system["content"]
    assert [line.split(":")[0] for line in user["content"].split("\n\n")] == [
        "* Apps", "* Current App", "* A11y Tree", "* App Info", "* Previous Action Result"]
    writer = build_messages("t", {**OBS, "focused_app": "writer"}, [], BUDGETS["paper"])[0]["content"]
    assert "class WriterTools:" in writer and "class CalcTools:" not in writer


def test_the_quick_budget_lists_only_its_functions_and_the_parser_still_takes_every_other():
    from computerrl.apis.parser import Action, parse_action

    system = build_messages("Make A1:B1 bold.", OBS, [], BUDGETS["quick"])[0]["content"]
    listed = [line.split("(")[0].strip() for line in system.splitlines() if line.strip().startswith("def ")]
    assert listed == ["def exit", "def format_range", "def freeze_panes", "def rename_sheet", "def save"]
    assert len(system) < len(build_messages("Make A1:B1 bold.", OBS, [], BUDGETS["tiny"])[0]["content"]) / 2
    assert isinstance(parse_action("```python\nCalcTools.set_cell_value('B2', 4)\n```"), Action)  # not listed, taken


def test_token_budgets_cut_the_tree_by_whole_rows(engine):
    budgets = BUDGETS["small"]
    user = build_messages("t", OBS, [], budgets, engine.count_tokens)[-1]["content"]
    tree = user.split("* A11y Tree: ")[1].split("\n\n* App Info")[0]
    rows = tree.splitlines()
    assert rows[-1] == "…" and 5 < len(rows) < 399  # cut, but not to nothing
    assert all(r.count("\t") == 4 for r in rows[:-1])  # no row cut in half
    assert engine.count_tokens(tree) <= budgets.tree_tokens + 1
    small_chat = engine.chat_ids(build_messages("t", OBS, [], budgets, engine.count_tokens))
    paper_chat = engine.chat_ids(build_messages("t", OBS, [], BUDGETS["paper"], engine.count_tokens))
    assert len(small_chat) < 2000 < len(paper_chat)


def test_older_turns_are_collapsed_and_only_the_last_ones_kept():
    history = [(f"<think>step {i}</think>\n```python\nAgent.wait()\n```", f"result {i}") for i in range(5)]
    budgets = BUDGETS["small"]
    messages = build_messages("t", OBS, history, budgets)
    turns = messages[1:-1]
    assert len(turns) == 2 * budgets.history_turns
    assert [m["role"] for m in turns] == ["user", "assistant"] * budgets.history_turns
    assert turns[0]["content"] == f"{OMITTED}\nPrevious Action Result: result 2"  # the step before the first kept
    assert "step 3" in turns[1]["content"] and "step 4" in turns[-1]["content"]
    assert "* A11y Tree:" in messages[-1]["content"] and "* A11y Tree:" not in "".join(m["content"] for m in turns)


def test_cut_respects_its_budget():
    count = len  # one token a character
    assert cut("short", 10, count) == "short"
    assert cut("x" * 50, 10, count) == "x" * 9 + "…"
    assert cut_lines("a\nbb\nccc", 6, count) == "a\nbb\n…"


def test_behaviour_logprobs_agree_with_the_trainers_recomputation(engine):
    """The engine's log-probs (batched, left-padded generate) and the trainer's (right-padded
    forward, logits only at answer positions) are the same numbers at the sampling temperature."""
    import torch

    from computerrl.policy.logprobs import response_logprobs

    chats = [build_messages(f"Put {v} in B2.", OBS, [], BUDGETS["small"], engine.count_tokens) for v in (1, 22)]
    chats[1] = chats[1][:1] + [{"role": "user", "content": "Short one."}]  # very different prompt lengths
    chats.append(chats[1][:1] + [{"role": "user", "content": "A longer one: " + "cell " * 40}])  # same system prompt
    assert engine.prefix_cache  # on a CPU: one call from the cached head they share (up to the task's line)
    head = engine._head(chats, [engine.chat_ids(c) for c in chats])
    assert engine.tokenizer.decode(head).endswith("\n\n") and "Task:" not in engine.tokenizer.decode(head)
    gens = engine.generate(chats, seed=3)
    assert all(g.response_ids and len(g.logprobs) == len(g.response_ids) for g in gens)
    assert all(lp <= 0 for g in gens for lp in g.logprobs)
    with torch.no_grad():
        recomputed, entropies = response_logprobs(engine.model, [g.prompt_ids for g in gens],
                                                  [g.response_ids for g in gens], temperature=0.7,
                                                  pad_id=engine.pad_id, with_entropy=True)
    for g, r, h in zip(gens, recomputed, entropies):
        assert torch.allclose(torch.tensor(g.logprobs), r, atol=1e-4), (torch.tensor(g.logprobs) - r).abs().max()
        assert g.entropy > 0 and abs(g.entropy - h.mean().item()) < 1e-3
    assert gens[0].prompt_ids == engine.chat_ids(chats[0])


def test_the_packed_output_layer_follows_the_weights_it_was_packed_from(tiny_model):
    """Generating on a CPU, the output layer multiplies through a packed copy of its weight (faster for the
    few rows a decoded token has): weights changed in place (an optimizer step, a new version loaded) give
    the new weights' numbers at the next call, and the model outside generate is its own again. Any model
    shows this: the tiny stand-in."""
    import torch

    from computerrl.policy.engines import Sampling, make_engine
    from computerrl.policy.logprobs import response_logprobs

    engine = make_engine("transformers", tiny_model, Sampling(1.0, 6), dtype="float32")
    chats = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"Put {v} in B2."}]
             for v in (1, 22)]

    def agreeing_logprobs():
        gens = engine.generate(chats, seed=3)
        with torch.no_grad():
            mine = response_logprobs(engine.model, [g.prompt_ids for g in gens], [g.response_ids for g in gens],
                                     1.0, pad_id=engine.pad_id)
        for g, m in zip(gens, mine):
            assert torch.allclose(torch.tensor(g.logprobs), m, atol=1e-5), (torch.tensor(g.logprobs) - m).abs().max()
        return gens

    before = agreeing_logprobs()
    assert engine._head_packed and "forward" not in vars(engine.model.lm_head)  # packed, and put back
    with torch.no_grad():
        engine.model.lm_head.weight.mul_(3.0)  # in place, as an optimizer step changes it
    engine.forget_prefixes()  # the system prompts' cached keys came from the old (tied) embeddings
    after = agreeing_logprobs()  # the new weights' numbers, not the packed old ones'
    assert [g.logprobs for g in before] != [g.logprobs for g in after]


def test_sampling_draws_from_the_whole_distribution_the_logprobs_describe(tiny_model):
    """Behaviour log-probs are those of plain temperature sampling, so tokens outside the 50 likeliest
    must be drawn too (transformers' generate cuts to those 50 unless told not to): at T = 3 many are. On the
    tiny stand-in (the sampler is the subject, not the model: under a cut to 50, no rank reaches 50 on any)."""
    import torch

    from computerrl.policy.engines import Sampling, make_engine

    engine = make_engine("transformers", tiny_model, Sampling(temperature=3.0, max_new_tokens=24), dtype="float32")
    chats = [build_messages(f"Put {v} in B2.", OBS, [], BUDGETS["quick"], engine.count_tokens) for v in (1, 22)]
    ranks = []
    for g in engine.generate(chats, seed=0):
        ids = torch.tensor([g.prompt_ids + g.response_ids])
        with torch.no_grad():
            logits = engine.model(input_ids=ids).logits[0, len(g.prompt_ids) - 1:-1]
        chosen = logits.gather(-1, torch.tensor(g.response_ids).unsqueeze(-1))
        ranks += (logits > chosen).sum(-1).tolist()  # how many tokens were likelier than the one drawn
    assert max(ranks) >= 50, ranks


def test_generate_settings_are_ones_transformers_takes_without_a_warning():
    """Greedy evals and sampled rollouts pass `generate` the same settings, which it accepts as they
    are (strict validation raises where transformers would print a warning on every call): its greedy
    step, which takes the token our sampler left possible at a temperature above 0."""
    from computerrl.policy.engine_transformers import generation_config
    from computerrl.policy.engines import Sampling

    config = generation_config(Sampling(temperature=1.0, max_new_tokens=8), eos_id=2, pad_id=2)
    config.validate(strict=True)
    assert not config.do_sample and config.top_k is None and config.max_new_tokens == 8


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_the_sampler_draws_each_token_as_often_as_its_probability_at_the_temperature(temperature):
    """40,000 draws from one distribution: each token's share within 4 standard errors of
    softmax(logits / T) (0.01; T = 2 moves the first share by 0.12), a token of probability 0 never,
    and exactly one token left possible in every row."""
    import torch

    from computerrl.policy.engine_transformers import InverseCdfSampler

    logits = torch.tensor([0.5, 0.3, 0.15, 0.05, 0.0]).log()
    n = 40_000
    torch.manual_seed(0)
    out = InverseCdfSampler(temperature)(None, logits.expand(n, -1).clone())
    assert (out.isfinite().sum(-1) == 1).all()
    share = torch.bincount(out.argmax(-1), minlength=5) / n
    expected = torch.softmax(logits / temperature, -1)
    assert (share - expected).abs().max() < 4 * (0.25 / n) ** 0.5, (share, expected)
    assert share[4] == 0


def test_the_sampler_refuses_logits_that_are_not_numbers():
    import torch

    from computerrl.policy.engine_transformers import InverseCdfSampler

    with pytest.raises(ValueError, match="inf or nan"):
        InverseCdfSampler(1.0)(None, torch.tensor([[0.0, 1.0], [float("nan"), 0.0]]))


def test_decoding_reads_the_shared_system_prompt_once_and_samples_what_sdpa_samples(engine, monkeypatch):
    """A batch samples from its cached system prompt with `shared_attention` (its prompt as plain
    matrix products, each decode step reading the head's keys once for every row): every layer takes
    that path, and the answers are plain SDPA's (float32, the same seed), their log-probs as near the float64
    truth as SDPA's: every float32 path (this one, SDPA, the trainer's) is ~2e-5 from it, and so ~1e-5 from
    each other, more on CPUs whose kernels sum in another order (AVX-512)."""
    import contextlib
    import copy

    import torch

    from computerrl.policy import engine_transformers, shared_attention
    from computerrl.policy.logprobs import response_logprobs

    chats = [build_messages(f"Put {v} in B2.", OBS, [(f"answer {k}", "Done") for k in range(v % 3)], BUDGETS["quick"],
                            engine.count_tokens) for v in (1, 22, 333)]  # other lengths: padding after the head
    used = []
    split = shared_attention.shared_prefix

    @contextlib.contextmanager
    def watched(tokens):
        with split(tokens):
            yield
            used.append((tokens, len(shared_attention.STATE.head), bool(shared_attention.STATE.prompt_mask)))

    monkeypatch.setattr(shared_attention, "shared_prefix", watched)
    monkeypatch.setattr(shared_attention, "SCORES_PER_BLOCK", 20_000)  # the prompt in several blocks of queries
    shared = engine.generate(chats, seed=7)
    head = engine._head(chats, [engine.chat_ids(c) for c in chats])
    assert used == [(len(head), engine.model.config.num_hidden_layers, True)]  # the prompt took it too
    monkeypatch.setattr(engine_transformers, "shared_head_attention", lambda model, tokens: contextlib.nullcontext())
    plain = engine.generate(chats, seed=7)
    assert engine.model.config._attn_implementation == "sdpa"  # put back after the shared call
    for s, p in zip(shared, plain):
        assert s.response_ids == p.response_ids
    with torch.no_grad():
        truth = response_logprobs(copy.deepcopy(engine.model).double(), [g.prompt_ids for g in plain],
                                  [g.response_ids for g in plain], temperature=0.7, pad_id=engine.pad_id)

    def error(gens):  # the largest distance of a path's log-probs from float64's
        return max((torch.tensor(g.logprobs, dtype=torch.float64) - t).abs().max().item() for g, t in zip(gens, truth))

    assert error(shared) <= max(2 * error(plain), 1e-5), (error(shared), error(plain))


def test_bfloat16_rows_say_so_and_stay_close_to_the_trainers_numbers():
    """The bfloat16 engine (the CPU demo's where the CPU computes bfloat16) names its precision in the
    rows, so GRPO recomputes πold in float32; its numbers stay near the trainer's."""
    import torch

    from computerrl.policy.checkpoint import embedded_checkpoint, load_model
    from computerrl.policy.engines import Sampling, make_engine
    from computerrl.policy.logprobs import response_logprobs

    engine = make_engine("transformers", embedded_checkpoint(), Sampling(1.0, 24), dtype="bfloat16")
    trainer = load_model(embedded_checkpoint())
    chats = [build_messages(f"Put {v} in B2.", OBS, [], BUDGETS["small"], engine.count_tokens) for v in (3, 44)]
    gens = engine.generate(chats, seed=5)
    assert {g.engine for g in gens} == {"transformers:bfloat16"}
    with torch.no_grad():
        mine = response_logprobs(trainer, [g.prompt_ids for g in gens], [g.response_ids for g in gens], 1.0,
                                 pad_id=engine.pad_id)
    gap = torch.cat([(torch.tensor(g.logprobs) - m).abs() for g, m in zip(gens, mine)])
    assert gap.mean() < 0.1, gap  # observed 0.027-0.031 (max 0.13): bfloat16 rounding, not another distribution


def test_the_same_seed_samples_the_same_answers(tiny_model):
    """On the tiny stand-in: the seeding is the subject, which any model shows (T = 1, all 24 tokens drawn)."""
    from computerrl.policy.engines import Sampling, make_engine

    engine = make_engine("transformers", tiny_model, Sampling(temperature=1.0, max_new_tokens=24), dtype="float32")
    chats = [build_messages("Put 5 in B2.", OBS, [], BUDGETS["quick"], engine.count_tokens)]
    assert engine.generate(chats, seed=11)[0].response_ids == engine.generate(chats, seed=11)[0].response_ids


def test_the_batcher_waits_for_every_episode_in_play(engine):
    """One episode still stepping its desktop when the others ask: the batch waits for it, and all
    three are answered by one generate call."""
    from computerrl.policy.agent import ModelPolicy

    sizes = []
    policy = ModelPolicy(engine, BUDGETS["quick"], version="v", max_batch=8, gather_s=5.0,
                         on_batch=lambda n, s: sizes.append(n))
    answers = {}
    in_play = threading.Barrier(3)

    def episode(k: int) -> None:
        with policy.episode():
            in_play.wait()
            time.sleep(0.5 * (k == 2))  # its desktop is slower
            answers[k] = policy.act(f"Put {k} in B2.", OBS, [])

    threads = [threading.Thread(target=episode, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    policy.close(engine=False)  # the engine is the module's fixture
    assert sizes == [3]
    assert all(a.messages[0]["content"].endswith(f"Put {k} in B2.") and a.response_ids for k, a in answers.items())


SECOND_BATCH_FAULTS = """
import resource, sys
import computerrl.apis
from computerrl.policy import engine_transformers
from computerrl.policy.checkpoint import embedded_checkpoint
from computerrl.policy.engines import Sampling, make_engine
from computerrl.policy.prompt import BUDGETS, build_messages
from tests.test_policy import OBS
if sys.argv[1] == "as-is":
    engine_transformers.keep_freed_memory = lambda: None
engine = make_engine("transformers", embedded_checkpoint(), Sampling(1.0, 8))
history = [(f"Agent.click([{k}, 5])", "Done") for k in range(4)]
chats = [build_messages(f"Put {v} in B2.", OBS, history[:v % 5], BUDGETS["small"], engine.count_tokens)
         for v in (1, 22, 333, 4444)]
engine.generate(chats, seed=0)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
engine.generate(chats, seed=1)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def glibc_with_small_pages() -> bool:
    """Whether fresh memory is faulted in 4 KB pages by glibc's malloc (not so with huge pages always
    on, another C library or another malloc preloaded)."""
    import platform
    from pathlib import Path

    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    return (platform.libc_ver()[0] == "glibc" and "[always]" not in (thp.read_text() if thp.exists() else "")
            and "LD_PRELOAD" not in os.environ)


@pytest.mark.skipif(not glibc_with_small_pages(), reason="counts glibc's 4 KB page faults")
@pytest.mark.skipif(fast_dtype("cpu") == "float32", reason="measured for the bfloat16 engine: in "
                    "float32 (a CPU without AVX-512 BF16 or AMX) the second batch still faulted 147,299 pages "
                    "against 363,999 as-is (2.5x, not 20x); not yet understood")
def test_a_cpu_engine_reuses_the_memory_a_batch_freed_for_the_next():
    """Four chats of ~1,870 tokens, twice: the memory the first batch freed (attention scores,
    activations, the KV cache) serves the second. With glibc's thresholds as a process starts, the
    second batch faulted in ~0.4-1 GB of pages afresh (100,000-250,000 faults, each page zeroed by the
    kernel); with the engine's, a few hundred. On one thread, as `just test` computes: with two, the engine's
    second batch still faulted 700-5,500 pages against 27,000-88,000 as-is (measured three times), too
    close to the 20x this asserts. (On the quick budget's ~600 tokens, as-is faulted 6,000-80,000, at times
    too few for 20x: the test keeps its longer chats.)"""
    import subprocess
    import sys
    from pathlib import Path

    faults = {how: int(subprocess.run([sys.executable, "-c", SECOND_BATCH_FAULTS, how], capture_output=True,
                                      text=True, check=True, cwd=Path(__file__).parents[1],
                                      env={**os.environ, "OMP_NUM_THREADS": "1"}).stdout)
              for how in ("as-is", "engine")}
    assert faults["engine"] * 20 < faults["as-is"], faults


def test_the_engines_cpu_precision_follows_the_environment_where_set(monkeypatch):
    """$COMPUTERRL_CPU_DTYPE picks the engines' precision on a CPU (runs compared across machines of both
    kinds); unset, it is what the CPU computes natively; anything else is refused, naming the variable."""
    monkeypatch.setenv("COMPUTERRL_CPU_DTYPE", "float32")
    assert fast_dtype("cpu") == "float32" and fast_dtype("cuda") == "float32"
    monkeypatch.setenv("COMPUTERRL_CPU_DTYPE", "bfloat16")
    assert fast_dtype("cpu") == "bfloat16"
    monkeypatch.setenv("COMPUTERRL_CPU_DTYPE", "fp8")
    with pytest.raises(ValueError, match="COMPUTERRL_CPU_DTYPE"):
        fast_dtype("cpu")
    monkeypatch.delenv("COMPUTERRL_CPU_DTYPE")
    from pathlib import Path

    native = {"amx_bf16", "avx512_bf16"} & set(Path("/proc/cpuinfo").read_text().split())
    assert fast_dtype("cpu") == ("bfloat16" if native else "float32")
