"""Column names and `datasets.Features` of every dataset kind that passes between stages."""

from __future__ import annotations

import dataclasses

import datasets

# --- env manifest (spawn-envs output, read by rollout / eval / build-apis) -------------------
MANIFEST_FEATURES = datasets.Features({
    "env_id": datasets.Value("string"),  # stable name; a replacement keeps it
    "address": datasets.Value("string"),  # host:port of the env server
    "backend": datasets.Value("string"),  # "local", "docker", …
    "status": datasets.Value("string"),  # "starting", "healthy", "unhealthy: <why>", "failed: <why>", "stopped"
    "desktops": datasets.Value("int32"),  # desktops hosted by the server
    "token": datasets.Value("string"),  # shared secret every call must carry ("" = none)
    "detail": datasets.Value("string"),  # backend detail as JSON (pid, container id, docker host)
    "restarts": datasets.Value("int32"),  # times the supervisor restarted this env
})
MANIFEST_COLUMNS = list(MANIFEST_FEATURES)


def check_columns(ds: datasets.Dataset, required: list[str], what: str) -> None:
    """Fail early, naming the missing columns, when a stage gets the wrong kind of dataset."""
    missing = [c for c in required if c not in ds.column_names]
    if missing:
        raise ValueError(f"{what} lacks column(s) {', '.join(missing)}; has {', '.join(ds.column_names)}")


# --- task dataset (`tasks build` output, read by rollout / eval / sft) ------------------------
TASK_FEATURES = datasets.Features({
    "task_id": datasets.Value("string"),  # unique; "<template>-s<seed>-<index>" for generated tasks
    "domain": datasets.Value("string"),  # "calc", "writer", "files", "multi", …
    "template": datasets.Value("string"),  # generating template ("" for hand-written tasks)
    "instruction": datasets.Value("string"),
    "task_json": datasets.Value("string"),  # the whole OSWorld-format task, JSON
    "solution": datasets.Sequence(datasets.Value("string")),  # reference solution: one action code line per step
    "gui_solution": datasets.Sequence(datasets.Value("string")),  # Agent.*-only solution ([] = none)
    "ood": datasets.Value("bool"),  # its template was held out of train (out-of-distribution test task)
})
TASK_COLUMNS = list(TASK_FEATURES)

# --- API dataset (`build-apis` output: every API proposed, accepted or not) ------------------------
API_FEATURES = datasets.Features({
    "app": datasets.Value("string"),  # calc, writer, impress
    "name": datasets.Value("string"),
    "signature": datasets.Value("string"),  # "def name(a: str) -> None" ("" for a spec that could not be read)
    "doc": datasets.Value("string"),  # its one-line doc
    "code": datasets.Value("string"),  # the function, as the model last wrote it
    "tests": datasets.Value("string"),  # its test_ functions
    "verdict": datasets.Value("string"),  # accepted, rejected
    "reason": datasets.Value("string"),  # accepted, or why not: failed, hung, crashed, refused, no_assertion, no_code,
                                         # clash, duplicate, bad_spec
    "rounds": datasets.Value("int32"),  # implementation attempts (0: dropped at the analysis)
    "error": datasets.Value("string"),  # the last attempt's error ("" when accepted)
    "source_tasks": datasets.Sequence(datasets.Value("string")),  # the example tasks that asked for it
    "seconds": datasets.Value("float32"),  # wall time to build it (model and desktop)
})

# --- step dataset (rollout output, grpo input; `tasks build` writes expert replays with it) ----
MESSAGE = {"role": datasets.Value("string"), "content": datasets.Value("string")}
STEP_FEATURES = datasets.Features({
    "task_id": datasets.Value("string"),
    "domain": datasets.Value("string"),
    "group_id": datasets.Value("string"),  # task × iteration: the GRPO group
    "sample": datasets.Value("int32"),  # 0..G-1 within the group
    "step": datasets.Value("int32"),  # 0-based step of the trajectory
    "instruction": datasets.Value("string"),  # the task as the policy was given it
    # The observation the step was taken on, JSON {focused_app, windows, a11y_tree, app_info, last_result}:
    # with the earlier rows' responses and exec_results, enough to re-render the prompt another way.
    "observation": datasets.Value("string"),
    "messages": [MESSAGE],  # the exact chat the model saw
    "response": datasets.Value("string"),  # the model's text answer
    "prompt_ids": datasets.Sequence(datasets.Value("int32")),
    "response_ids": datasets.Sequence(datasets.Value("int32")),
    "behavior_logprobs": datasets.Sequence(datasets.Value("float32")),  # per response token, from the sampler
    "entropy": datasets.Value("float32"),  # mean token entropy of the answer, nats (NaN = unknown: expert, server)
    "action": datasets.Value("string"),  # the parsed action, JSON ("" when invalid)
    "action_valid": datasets.Value("bool"),
    "exec_result": datasets.Value("string"),
    "success": datasets.Value("bool"),  # trajectory outcome (score == 1)
    "score": datasets.Value("float32"),  # evaluator output of the trajectory
    "reward": datasets.Value("float32"),  # step reward: success and action valid (GRPO rule)
    "done": datasets.Value("bool"),  # last step of the trajectory
    "env_id": datasets.Value("string"),
    "policy_version": datasets.Value("string"),  # checkpoint that sampled it ("expert" for reference solutions)
    "engine": datasets.Value("string"),  # what sampled it: transformers, vllm, openai, expert
    "error": datasets.Value("string"),  # why the trajectory was aborted ("" = it was not)
})
STEP_COLUMNS = list(STEP_FEATURES)
SCREENSHOT = "screenshot"  # optional Image column of step datasets (rollout/eval --screenshots)
SCREENS = "screens"  # with it: how many screenshots the prompt held, this step's and the steps' before (0: text only)
STEP_WITH_SCREENSHOT_FEATURES = datasets.Features({**STEP_FEATURES, SCREENSHOT: datasets.Image(),
                                                   SCREENS: datasets.Value("int32")})

# --- SFT dataset (filter-success output, sft input) -----------------------------------------
SFT_FEATURES = datasets.Features({
    "task_id": datasets.Value("string"),
    "domain": datasets.Value("string"),
    "trajectory": datasets.Value("string"),  # "<group_id>/<sample>": the trajectory the step came from
    "step": datasets.Value("int32"),
    "messages": [MESSAGE],  # the chat the model saw, then the assistant's answer (the trained tokens)
    "policy_version": datasets.Value("string"),  # who answered (a checkpoint, or "expert")
})
SFT_COLUMNS = list(SFT_FEATURES)
SCREENSHOTS = "screenshots"  # with it: the screenshots a vision policy's prompt held, oldest first
SFT_WITH_SCREENSHOTS_FEATURES = datasets.Features({**SFT_FEATURES, SCREENSHOTS: datasets.Sequence(datasets.Image())})

# --- training metrics (grpo / sft output, beside the checkpoint) -----------------------------
# One row per optimizer step; a stage's own figures (loss, entropy, kl, clip fractions, reward, …)
# are float columns named in the stage's docstring.
METRICS_FILE = "metrics"  # the metrics dataset's folder inside a checkpoint folder


@dataclasses.dataclass
class Decision:
    """A policy's answer for one step, as the episode loop (play/episode.py) writes it into the
    step row: what the policy read, what it answered, and its tokens."""

    messages: list[dict[str, str]]  # the chat the policy read
    response: str  # its answer
    prompt_ids: list[int] = dataclasses.field(default_factory=list)
    response_ids: list[int] = dataclasses.field(default_factory=list)
    logprobs: list[float] = dataclasses.field(default_factory=list)  # per response token ([] = unknown)
    entropy: float = float("nan")  # mean token entropy of the answer (nan = unknown, e.g. the expert's)
    engine: str = ""  # overrides the policy's engine_name in the row ("openai:no-token-ids")
    screens: int = 0  # screenshots the prompt held (a vision policy): this step's and those of the steps before
    frame: tuple[int, int] | None = None  # the frame of the answer's coordinates (a vision policy's), else the screen
    version: str = ""  # the policy version that answered (a live engine switches versions; "" = the policy's)
