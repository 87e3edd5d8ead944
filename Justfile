# computerrl — the lab notebook. `just --list` shows every recipe.
set shell := ["bash", "-euo", "pipefail", "-c"]

venv := justfile_directory() / ".venv/bin"
runs := env("COMPUTERRL_RUNS", "runs")
envs := env("COMPUTERRL_ENVS", "2")

# Install system packages, the virtualenv and the package (idempotent).
[group("setup")]
install:
    bash install.sh

# The whole suite: real desktops, real LibreOffice.
[group("dev")]
test *args: install
    {{venv}}/python -m pytest -q -ra {{args}}

# Fast tests only (no desktops).
[group("dev")]
test-fast *args: install
    {{venv}}/python -m pytest -q -m "not desktop" {{args}}

# Regenerate the gRPC stubs from envs/proto/env.proto.
[group("dev")]
proto:
    cd envs/proto && {{venv}}/python -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. env.proto
    sed -i 's/^import env_pb2 as env__pb2/from computerrl.envs.proto import env_pb2 as env__pb2/' envs/proto/env_pb2_grpc.py

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

# Stop the env servers of a detached spawn-envs.
[group("stages")]
stop-envs:
    {{venv}}/computerrl spawn-envs --stop --out {{runs}}/envs

# CPU demo: start desktops, run a scripted episode in each, print what happened.
[group("pipelines")]
demo count=envs: install
    {{venv}}/python -m computerrl.envs.demo --count {{count}} --out {{runs}}/demo

# Env benchmarks: reset/step latency, memory per desktop, desktops alive, steps/s (JSON last line).
[group("bench")]
bench-envs *args: install
    {{venv}}/python -m computerrl.bench.bench_envs {{args}}

# Rollout benchmarks: embedded model in real desktops at 1/4/8 desktops, model vs desktop time, overlap (JSON last line).
[group("bench")]
bench-rollout *args: install
    {{venv}}/python -m computerrl.bench.bench_rollout {{args}}

# Task-suite benchmarks: generation time, replay steps/s, per-domain counts (JSON last line).
[group("bench")]
bench-tasks *args: install
    {{venv}}/python -m computerrl.bench.bench_tasks {{args}}

# Check a folder of OSWorld-format task files: what loads, what this build lacks.
[group("tasks")]
tasks-check dir:
    {{venv}}/computerrl tasks check {{dir}}

# Generate the task suites (train/test + file cache), replaying every reference solution.
[group("tasks")]
tasks-build out=(runs / "tasks") *args="":
    {{venv}}/computerrl tasks build --out {{out}} {{args}}

# Build the desktop image for --backend docker (needs a Docker engine).
[group("setup")]
docker-image tag="computerrl-desktop:latest":
    docker build -f envs/Dockerfile -t {{tag}} .
