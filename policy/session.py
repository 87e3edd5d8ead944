"""A policy's playing session: `open_policy`, from a `--model` value and sampling options to a ready
`ModelPolicy` (checkpoint resolved, engine loaded, prompt budgets chosen, version read from the
lineage)."""

from __future__ import annotations

from computerrl.policy.agent import ModelPolicy
from computerrl.policy.checkpoint import parameter_count, policy_version, resolve
from computerrl.policy.engines import Sampling, make_engine
from computerrl.policy.prompt import BUDGETS, budgets_for


def open_policy(model: str, *, engine: str = "transformers", temperature: float = 1.0, max_new_tokens: int = 96,
                budgets: str = "", max_batch: int = 8, seed: int = 0, device: str = "cpu",
                llm_url: str = "", background: bool = True, screens: int = 2, coordinates: str = "grid") -> ModelPolicy:
    """`device`: the transformers engine's torch device; `llm_url`: the openai engine's server(s),
    comma-separated (its API key, if any, from $OPENAI_API_KEY); `background`: see `ModelPolicy`."""
    folder = resolve(model)
    chosen = BUDGETS[budgets or budgets_for(parameter_count(folder))]
    eng = open_engine(folder, engine=engine, temperature=temperature, max_new_tokens=max_new_tokens, device=device,
                      llm_url=llm_url, screens=screens)
    return ModelPolicy(eng, chosen, version=policy_version(folder), max_batch=max_batch, seed=seed,
                       background=background, screens=screens, coordinates=coordinates)


def open_engine(folder, *, engine: str, temperature: float, max_new_tokens: int, device: str, llm_url: str,
                screens: int = 2):
    """A generation engine on a resolved checkpoint folder, with the options its kind takes."""
    import os

    options = {"transformers": {"device": device}, "vision": {"device": device}, "llamacpp": {},
               "vllm": {"images_per_prompt": max(screens, 1)},
               "openai": {"llm_url": llm_url, "api_key": os.environ.get("OPENAI_API_KEY", "")}}.get(engine, {})
    return make_engine(engine, folder, Sampling(temperature, max_new_tokens), **options)
