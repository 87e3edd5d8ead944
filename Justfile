# computerrl — the lab notebook. `just --list` shows every recipe.
set shell := ["bash", "-euo", "pipefail", "-c"]

venv := justfile_directory() / ".venv/bin"
runs := env("COMPUTERRL_RUNS", "runs")
envs := env("COMPUTERRL_ENVS", "2")
test_workers := env("TEST_WORKERS", "2")

# --- reproduce-osworld: the paper's recipe on GPUs, the `osworld` preset of stages/schedule.py (stages/presets/osworld.yaml) ---
osworld_model := env("OSWORLD_MODEL", "checkpoints/GLM-4-9B-0414")  # a local HF folder (nothing is downloaded)
osworld_tasks := env("OSWORLD_TASKS", "../shared/osworld")  # OSWorld-format JSON (eval split)
osworld_run := env("OSWORLD_RUN", "runs/osworld")
osworld_desktops := env("OSWORLD_DESKTOPS", "256")  # env servers, over $DOCKER_HOST / --docker-hosts
osworld_accelerate := env("OSWORLD_ACCELERATE", "configs/accelerate/fsdp.yaml")

# Install what the demo needs (Calc's desktop, the trainer, the embedded model); `just install --all` adds what
# the tests need (every app, llama.cpp, .venv-vllm, Docker). Idempotent.
[group("setup")]
install *flags:
    bash install.sh {{flags}}

# Refresh constraints.txt with the newest versions pyproject.toml allows (a fresh virtualenv, ~5 min); then `just test`.
[group("setup")]
lock:
    rm -rf .venv-lock && python3 -m venv .venv-lock
    echo /usr/lib/python3/dist-packages > "$(.venv-lock/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/debian-dist-packages.pth"  # Debian's packages count, as in .venv
    .venv-lock/bin/python -m pip install -q --upgrade pip
    .venv-lock/bin/python -m pip install -q torch==2.13.0
    CMAKE_ARGS="-DGGML_NATIVE=OFF" .venv-lock/bin/python -m pip install -q --no-cache-dir ".[dev,llamacpp]"
    .venv-lock/bin/python -m pip install -q --no-deps "$(python3 -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["embedded"])')"
    { grep '^#' constraints.txt; .venv-lock/bin/python -m pip freeze --exclude-editable \
        --path "$(.venv-lock/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
        | grep -v -e '^torch==' -e '^computerrl[ =@]'; } > constraints.txt.new
    mv constraints.txt.new constraints.txt && rm -rf .venv-lock
    git diff --stat constraints.txt

# The whole suite: real desktops, real LibreOffice. Two workers (TEST_WORKERS), one thread each
# (tests/conftest.py), take whole files, the slowest first: ~31 min on 2 cores (by CPU) (the 30 slowest are printed).
[group("dev")]
test *args: (install "--all")
    {{venv}}/python -m pytest -q -ra --durations=30 -n {{test_workers}} --dist loadfile --no-loadscope-reorder {{args}}

# Fast tests only (no desktops).
[group("dev")]
test-fast *args: (install "--all")
    {{venv}}/python -m pytest -q -m "not desktop" {{args}}

# Regenerate the gRPC stubs from envs/service/proto/env.proto.
[group("dev")]
proto:
    cd envs/service/proto && {{venv}}/python -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. env.proto
    sed -i 's/^import env_pb2 as env__pb2/from computerrl.envs.service.proto import env_pb2 as env__pb2/' envs/service/proto/env_pb2_grpc.py

# Start real desktops behind env servers and supervise them (Ctrl-C stops).
[group("stages")]
spawn-envs count=envs *args="":
    {{venv}}/computerrl spawn-envs --count {{count}} --out {{runs}}/envs {{args}}

# The policy plays the train tasks on the envs of `just spawn-envs` (G samples each); step dataset out.
[group("stages")]
rollout tasks=(runs / "tasks/train") out=(runs / "rollout") *args="":
    {{venv}}/computerrl rollout --tasks {{tasks}} --envs {{runs}}/envs --out {{out}} {{args}}

# Success per domain of a checkpoint on the held-out tasks (table, summary.json, plots); then `computerrl view OUT`.
[group("stages")]
eval model="embedded" tasks=(runs / "tasks/test") out=(runs / "eval") *args="":
    {{venv}}/computerrl eval --model {{model}} --tasks {{tasks}} --envs {{runs}}/envs --out {{out}} {{args}}

# One step-level GRPO update from a rollout (add --lora-rank, --beta, … as you like).
[group("stages")]
grpo rollouts model out *args="":
    {{venv}}/computerrl grpo --rollouts {{rollouts}} --model {{model}} --out {{out}} {{args}}

# Rollout and GRPO at once: the desktops keep playing while the trainer trains; --sync to compare (docs/guide.md).
[group("stages")]
async-rl model="embedded" tasks=(runs / "tasks/train") out=(runs / "async") *args="":
    {{venv}}/computerrl async-rl --model {{model}} --tasks {{tasks}} --envs {{runs}}/envs --out {{out}} {{args}}

# Keep the successful trajectories of step datasets as SFT chats (at most k per task).
[group("stages")]
filter-success out *rollouts:
    {{venv}}/computerrl filter-success --out {{out}} {{prepend("--rollouts ", rollouts)}}

# Supervised fine-tuning on chats: BC on expert replays, or Entropulse on successes.
[group("stages")]
sft data model out *args="":
    {{venv}}/computerrl sft --data {{data}} --model {{model}} --out {{out}} {{args}}

# Stop the env servers of a detached spawn-envs.
[group("stages")]
stop-envs:
    {{venv}}/computerrl spawn-envs --stop --out {{runs}}/envs

# The web console of the envs of `just spawn-envs`: desktops, thumbnails, work in flight, actions, /metrics.
[group("stages")]
console port="8765":
    {{venv}}/computerrl console --envs {{runs}}/envs --port {{port}}

# The CPU demo: the whole Entropulse schedule with the embedded model (about an hour; `just demo --quick` ~4 min).
[group("pipelines")]
demo *args: install
    {{venv}}/computerrl entropulse --out {{runs}}/demo {{args}}

# Start desktops and play a scripted episode in each (no model): a look at the env service alone.
[group("pipelines")]
desktops-demo count=envs: install
    {{venv}}/python -m computerrl.play.desktops_demo --count {{count}} --out {{runs}}/desktops-demo

# The paper's recipe on GPUs: BC → RL → Entropulse → RL with eval on OSWorld after each phase (the `osworld`
# preset; add --set KEY=VALUE to change a setting, --dry-run to see the commands).
[group("osworld")]
reproduce-osworld *args:
    {{venv}}/computerrl entropulse --preset osworld --model {{osworld_model}} --out {{osworld_run}} --set eval_tasks={{osworld_tasks}} --set envs={{osworld_desktops}} --set launcher="{{venv}}/accelerate launch --config_file {{osworld_accelerate}}" {{args}}

# Env benchmarks: reset/step latency, memory per desktop, desktops alive, steps/s (JSON last line).
[group("bench")]
bench-envs *args: install
    {{venv}}/python -m computerrl.bench.bench_envs {{args}}

# App benchmarks: PSS of a desktop with each app open, launch-to-settled-window and reset after it (JSON last line).
[group("bench")]
bench-apps *args: (install "--all")
    {{venv}}/python -m computerrl.bench.bench_apps {{args}}

# Rollout benchmarks: embedded model in real desktops at 1/4/8 desktops, model vs desktop time, overlap (JSON last line).
[group("bench")]
bench-rollout *args: install
    {{venv}}/python -m computerrl.bench.bench_rollout {{args}}

# Training benchmarks: GRPO update tokens/s of the stage vs the plain padded implementation, memory, SFT tokens/s.
[group("bench")]
bench-train *args: install
    {{venv}}/python -m computerrl.bench.bench_train {{args}}

# Async loop benchmark: sync vs async at 4 and 16 desktops with stand-in GPU engine/trainer, weight sync per engine (JSON last line).
[group("bench")]
bench-async *args: (install "--all")
    {{venv}}/python -m computerrl.bench.bench_async {{args}}

# GPU benchmark: engine tokens/s, sft/grpo (full, LoRA) time, memory, TFLOP/s and share of bf16 peak, GPU busy, log-prob agreement (JSON last line).
[group("bench")]
bench-gpu *args: install
    {{venv}}/python -m computerrl.bench.bench_gpu {{args}}

# build-apis benchmark: a 10-API transcript replayed on 2 desktops, seconds per API, desktop vs stage (JSON last line).
[group("bench")]
bench-apis *args: install
    {{venv}}/python -m computerrl.bench.bench_apis {{args}}

# Task-suite benchmarks: generation time, replay steps/s, per-domain counts (JSON last line).
[group("bench")]
bench-tasks *args: install
    {{venv}}/python -m computerrl.bench.bench_tasks {{args}}

# Check a folder of OSWorld-format task files: what loads, what this build lacks.
[group("tasks")]
tasks-check dir:
    {{venv}}/computerrl tasks check {{dir}}

# The demo's RL phase from a schedule run's BC (`just demo`'s, or one with --set stop_after=bc), 2 versions of 6 groups
# of G = 4 played --sync, then asynchronously, on the same 4 desktops; each policy evaluated on the first `limit`
# held-out tasks of the run's suite. Alone on the machine, ~75 min here; resumes. Prints the figures and a JSON line.
[group("bench")]
compare-async run=(runs / "demo") tasks=(run / "tasks") out=(runs / "compare-async") limit="32":
    {{venv}}/computerrl spawn-envs --count 4 --out {{out}}/envs --cache {{tasks}}/files --detach
    status=0; for loop in sync async; do [ -e {{out}}/$loop/summary.json ] || {{venv}}/computerrl async-rl \
        --model {{run}}/bc --tasks {{tasks}}/train --envs {{out}}/envs --out {{out}}/$loop --samples 4 --groups 6 \
        --updates 2 --max-steps 4 --max-new-tokens 48 --budgets tiny --grpo lr=5e-5 --grpo epochs=2 --grpo updates_per_epoch=4 --grpo train_layers=8 \
        --seed 1 --$([ $loop = sync ] || echo no-)sync || status=$?; done; \
    for name in bc sync async; do model={{out}}/$name/policy-2; [ $name != bc ] || model={{run}}/bc; \
        [ $status != 0 ] || [ -e {{out}}/eval-$name/summary.json ] || {{venv}}/computerrl eval --model $model \
        --tasks {{tasks}}/test --limit {{limit}} --envs {{out}}/envs --out {{out}}/eval-$name --max-steps 4 \
        --max-new-tokens 48 --budgets tiny --seed 0 --no-screenshots || status=$?; done; \
    {{venv}}/computerrl spawn-envs --stop --out {{out}}/envs; [ $status = 0 ] || exit $status
    {{venv}}/python -m computerrl.bench.bench_async --compare {{out}}

# One arm of issue 42 (docs/rl-arms.md): RL 1 from seed `seed`'s BC, shared by every arm (built once in
# runs/arms/seed-N with its suite and its greedy eval on 96 valid tasks), evaluated on those valid tasks only, each
# iteration on the first 24 of them (`track`). `settings`: the arm's, e.g. --set grpo.anchor=nll. Resumes; a
# finished arm's report files are kept in docs/runs/arms/NAME/seed-N (committed: runs/ does not outlive a machine),
# and an arm kept there is not run again. BC's eval is kept too, in docs/runs/arms/seed-N/eval-bc with the first
# answers `track` measures drift from: a machine that trains the seed's BC again takes its eval from there, once
# its BC is found to give those answers (stages/schedule.py, check_restored). The model plays in float32 on every machine
# (bfloat16 where a CPU computes it would make arms run on two kinds of machine differ by more than their settings).
[group("bench")]
rl-arm name seed *settings: install
    export COMPUTERRL_CPU_DTYPE=float32; kept=docs/runs/arms/{{name}}/seed-{{seed}}; [ ! -e $kept/eval-rl1/summary.json ] || { echo "$kept: done"; exit 0; }; \
    base={{runs}}/arms/seed-{{seed}}; arm={{runs}}/arms/{{name}}/seed-{{seed}}; shared=docs/runs/arms/seed-{{seed}}/eval-bc; \
    common="--seed {{seed}} --set envs=8 --set suite=$base/tasks --set valid_tasks=96 --set eval_tasks=$base/tasks/valid --set explore_tasks=0"; \
    [ -e $base/eval-bc ] || [ ! -e $shared/first-answers.json ] || { mkdir -p $base && cp -r $shared $base/eval-bc; }; \
    {{venv}}/computerrl entropulse --out $base $common --set stop_after=bc && mkdir -p $arm && \
    for d in bc eval-bc; do [ -e $arm/$d ] || cp -r $base/$d $arm/$d; done && \
    {{venv}}/computerrl entropulse --out $arm $common --set stop_after=rl1 --set track=24 --set rl_iterations=6 {{settings}} && \
    {{just_executable()}} keep-report-files $arm $kept && \
    {{just_executable()}} keep-report-files $base $(dirname $shared) && cp $arm/eval-bc/first-answers.json $shared/

# Every arm of docs/rl-arms.md on BC seeds 0 and 1, one after another (about an hour each here); resumes.
[group("bench")]
rl-arms:
    for seed in 0 1; do \
        {{just_executable()}} rl-arm plain $seed && \
        {{just_executable()}} rl-arm anchor-kl $seed --set grpo.anchor=kl --set grpo.anchor_weight=1.0 && \
        {{just_executable()}} rl-arm anchor-nll $seed --set grpo.anchor=nll --set grpo.anchor_weight=0.1 && \
        {{just_executable()}} rl-arm broad $seed --set rl_draw=stratified --set rl_tasks=12 --set dynamic_sampling=2 && \
        {{just_executable()}} rl-arm small $seed --set grpo.updates_per_epoch=1 --set grpo.lr=1e-5 || exit 1; \
    done

# docs/rl-arms.md's rule on the arms done so far: each arm's RL 1 − BC on valid (90% interval over seeds 0 and 1),
# its worst train template, and the setting chosen.
[group("bench")]
rl-arms-rule: install
    {{venv}}/python -m computerrl.bench.arms_rule --runs docs/runs/arms

# Score every supported task of a folder untouched on fresh desktops and list those that start solved.
[group("tasks")]
tasks-audit dir count="4" out=(runs / "audit"):
    {{venv}}/computerrl spawn-envs --count {{count}} --out {{out}}/envs --detach
    status=0; {{venv}}/computerrl tasks check {{dir}} --run --envs {{out}}/envs --out {{out}} --json || status=$?; \
        {{venv}}/computerrl spawn-envs --stop --out {{out}}/envs; exit $status

# Generate the task suites (train/test + file cache), replaying every reference solution.
[group("tasks")]
tasks-build out=(runs / "tasks") *args="":
    {{venv}}/computerrl tasks build --out {{out}} {{args}}

# Build the desktop image for --backend docker from Debian's and PyPI's packages alone (root, an engine at $DOCKER_HOST; --slim: Calc only).
[group("setup")]
docker-image *args:
    bash envs/fleet/docker_image.sh {{args}}

# RL 1 on the valid split from one BC: uniform task draws against rl_draw=signal and gain, each with dynamic sampling (resumable).
[group("experiments")]
tune-rl-draw out=(runs / "tune") *args="":
    {{venv}}/computerrl entropulse --out {{out}}/uniform --set suite={{out}}/tasks --set valid_tasks=24 --set eval_tasks={{out}}/tasks/valid --set explore_tasks=24 --set stop_after=rl1 {{args}}
    for draw in signal gain; do \
      mkdir -p {{out}}/$draw && for done in bc eval-bc explore-bc; do [ -e {{out}}/$draw/$done ] || cp -r {{out}}/uniform/$done {{out}}/$draw/; done; \
      {{venv}}/computerrl entropulse --out {{out}}/$draw --set suite={{out}}/tasks --set valid_tasks=24 --set eval_tasks={{out}}/tasks/valid --set explore_tasks=24 --set stop_after=rl1 --set rl_draw=$draw --set dynamic_sampling=1 {{args}} || exit 1; \
    done

# Copy a schedule run's small files, all `entropulse --report` reads (data/report.py: REPORT_FILES), e.g.
# runs/demo/seed-0 into the repo, to pool seeds run elsewhere.
[group("experiments")]
keep-report-files run dest:
    {{venv}}/python -c 'import sys; from computerrl.data.report import keep_report_files; print(keep_report_files(*sys.argv[1:]), "files copied")' {{run}} {{dest}}
