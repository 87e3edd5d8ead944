"""What the playing stages (`rollout`, `eval`) share: `PlayConfig`, their options (each stage subclasses
it with its own defaults: rollout samples at T = 1 for GRPO groups, eval decodes greedily and keeps
screenshots), and how it opens the policy. Not a stage: the stages that play import it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from computerrl.policy.agent import ModelPolicy
from computerrl.policy.prompt import BUDGETS
from computerrl.policy.session import open_policy

# Options that change how fast a run goes, not what it plays: a journal of a run that differs only
# in these is resumed.
NOT_IN_KEY = ("max_batch", "device", "llm_url", "overwrite")


@dataclasses.dataclass
class PlayConfig:
    tasks: Path = Path("runs/tasks/test")  # task dataset (`tasks build`) or folder of OSWorld JSON files
    envs: Path = Path("runs/envs")  # spawn-envs run folder (its manifest is followed)
    model: str = "embedded"  # checkpoint folder (full or LoRA adapter), or "embedded"
    samples: int = 1  # trajectories per task (G for rollout, K for eval)
    max_steps: int = 15  # steps per trajectory before it is cut
    out: Path = Path("runs/play")  # output folder
    engine: str = "transformers"  # generation engine: transformers, llamacpp, vllm, openai
    temperature: float = 0.0  # sampling temperature (0 = greedy)
    max_new_tokens: int = 96  # answer length cap, tokens
    budgets: str = ""  # prompt budgets: tiny, small or paper ("" = by the model's size)
    max_batch: int = 8  # answers generated per call at most
    limit: int = 0  # play only the first N tasks (0 = all)
    seed: int = 0  # sampling seed
    screenshots: bool = False  # store each step's screenshot
    device: str = "cpu"  # torch device of the transformers engine
    llm_url: str = ""  # the openai engine's server(s), comma-separated base URLs (http://127.0.0.1:8000/v1)
    apis: Path | None = None  # a `build-apis` folder: its APIs join the prompt and the parser (the envs need it too)
    overwrite: bool = False  # replace a finished output (and an unrelated journal) instead of stopping

    def __post_init__(self):
        self.tasks, self.envs, self.out = Path(self.tasks), Path(self.envs), Path(self.out)
        if self.apis is not None:
            from computerrl.apis.generated import read_modules

            self.apis = Path(self.apis).resolve()
            read_modules(self.apis)  # says what is wrong with the folder before anything starts
        if self.samples < 1 or self.max_steps < 1 or self.max_batch < 1:
            raise ValueError("--samples, --max-steps and --max-batch must be at least 1")
        if self.engine == "openai" and not self.llm_url:
            raise ValueError("--engine openai needs --llm-url (an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1)")
        if self.budgets:
            BUDGETS[self.budgets]  # an unknown name is refused here, with the known ones

    @property
    def journal(self) -> Path:
        return self.out.with_name(f".{self.out.name}.journal")

    def key(self) -> dict:
        """What makes two runs the same run (a journal of another one is not resumed)."""
        return {k: str(v) for k, v in dataclasses.asdict(self).items() if k not in NOT_IN_KEY}

    def open_policy(self) -> ModelPolicy:
        """The policy, served by the thread that plays the episodes (`trajectories.play_all`), its prompt and
        parser knowing the generated APIs of `apis` (registered here, beside the built-in ones)."""
        if self.apis is not None:
            from computerrl.apis.generated import load

            load(self.apis)
        return open_policy(self.model, engine=self.engine, temperature=self.temperature,
                           max_new_tokens=self.max_new_tokens, budgets=self.budgets, max_batch=self.max_batch,
                           seed=self.seed, device=self.device, llm_url=self.llm_url, background=False)
