"""`PlayConfig`: the options of the stages that play (`rollout`, `eval`, `async-rl`; each subclasses it with
its own defaults: rollout samples at T = 1 for GRPO groups, eval decodes greedily and keeps screenshots), and
how it opens the policy."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from computerrl.data.config import (DEFAULT_MAX_STEPS, DEVICE, ENGINE, ENVS, LLM_URL, MAX_NEW_TOKENS, MODEL, OUT, SEED,
                                    TASKS, setting)

if TYPE_CHECKING:  # the policy (and every app's API) loads when a stage plays: `computerrl --help` builds the config
    from computerrl.policy.agent import ModelPolicy

# Options that change how fast a run goes, not what it plays: a journal of a run that differs only
# in these is resumed.
NOT_IN_KEY = ("max_batch", "device", "llm_url", "overwrite")


@dataclasses.dataclass
class PlayConfig:
    tasks: Path = setting(Path("runs/tasks/test"), TASKS)
    envs: Path = setting(Path("runs/envs"), ENVS)  # its manifest is followed
    model: str = setting("embedded", MODEL)
    samples: int = setting(1, "Trajectories per task: G, the GRPO group, in rollout; K in eval (pass@K is reported "
                              "when K > 1).")
    max_steps: int = setting(DEFAULT_MAX_STEPS, "Steps per trajectory before it is cut (truncated).")
    out: Path = setting(Path("runs/play"), OUT, "--out", "-o")
    engine: str = setting("transformers", ENGINE)
    temperature: float = setting(0.0, "Sampling temperature (0 = greedy; more than one sample per task in eval needs "
                                      "> 0).")
    max_new_tokens: int = setting(96, MAX_NEW_TOKENS)
    budgets: str = setting("", "Prompt budgets: tiny, quick, small or paper (default: by the model's size).")
    max_batch: int = setting(8, "Answers generated per model call at most.")
    limit: int = setting(0, "Play only the first N tasks (0 = all).")
    seed: int = setting(0, SEED)  # sampling seed
    screenshots: bool = setting(False, "Keep every step's screenshot (for `computerrl view`; a vision model's always).")
    screens: int = setting(2, "A vision-language --model: the screenshots its prompt holds, this step's and those "
                              "of the steps before it (older ones are dropped).")
    coordinates: str = setting("grid", "A vision-language --model's points: grid (0-1000 over the screenshot, as "
                                       "Qwen2-VL and UI-TARS answer) or screen (pixels).")
    device: str = setting("cpu", DEVICE)
    llm_url: str = setting("", LLM_URL)
    apis: Path | None = setting(None, "A `build-apis` output folder: its accepted APIs join the built-in ones in the "
                                      "prompt and the parser (start the envs with the same --apis).")
    overwrite: bool = setting(False, "Replace a finished output instead of stopping.")  # and an unrelated journal

    def __post_init__(self):
        self.tasks, self.envs, self.out = Path(self.tasks), Path(self.envs), Path(self.out)
        if self.apis is not None:
            from computerrl.apis.generated import read_modules

            self.apis = Path(self.apis).resolve()
            read_modules(self.apis)  # says what is wrong with the folder before anything starts
        if self.samples < 1 or self.max_steps < 1 or self.max_batch < 1 or self.screens < 1:
            raise ValueError("--samples, --max-steps, --max-batch and --screens must be at least 1")
        if self.coordinates not in ("grid", "screen"):
            raise ValueError(f"--coordinates {self.coordinates!r}: expected grid or screen")
        if self.engine == "openai" and not self.llm_url:
            raise ValueError("--engine openai needs --llm-url (an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1)")
        if self.budgets:
            from computerrl.policy.prompt import BUDGETS

            BUDGETS[self.budgets]  # an unknown name is refused here, with the known ones

    def check_inputs(self) -> None:
        """Refuses (`WrongInput`, one line) an --envs or --model folder of another kind before anything starts;
        --tasks is checked where it is read (`load_task_set`)."""
        from computerrl.data.folders import ENVS as ENVS_FOLDER, MANIFEST, expect
        from computerrl.policy.checkpoint import resolve

        expect(self.envs, "--envs", ENVS_FOLDER, MANIFEST)
        resolve(self.model)

    @property
    def journal(self) -> Path:
        return self.out.with_name(f".{self.out.name}.journal")

    @property
    def finished(self) -> bool:
        """Its output is whole (a rerun reads it back and plays nothing), and --overwrite was not asked."""
        return (self.out / "summary.json").exists() and not self.journal.exists() and not self.overwrite

    def key(self) -> dict:
        """What makes two runs the same run (a journal of another one is not resumed)."""
        return {k: str(v) for k, v in dataclasses.asdict(self).items() if k not in NOT_IN_KEY}

    def open_policy(self, model: str | Path = "") -> ModelPolicy:
        """The policy (`model`, else --model), served by the thread that plays the episodes
        (`trajectories.play_all`), its prompt and parser knowing the generated APIs of `apis` (registered
        here, beside the built-in ones)."""
        from computerrl.policy.session import open_policy

        if self.apis is not None:
            from computerrl.apis.generated import load

            load(self.apis)
        return open_policy(str(model or self.model), engine=self.engine, temperature=self.temperature,
                           max_new_tokens=self.max_new_tokens, budgets=self.budgets, max_batch=self.max_batch,
                           seed=self.seed, device=self.device, llm_url=self.llm_url, background=False,
                           screens=self.screens, coordinates=self.coordinates)
