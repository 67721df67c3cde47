#!/bin/sh
# Install trace-scorer with its runtime dependencies only (no extras, no dev tools) into a new
# virtual environment, from a source tree.
#
#   sh deploy/install.sh SOURCE_DIR VENV_DIR
#
# deploy/Dockerfile runs exactly this in its build stage, and deploy/check-dockerfile-steps.sh replays
# it in CI in a fresh temporary directory: keep it plain POSIX sh, no Docker-only assumptions.
# PYTHON selects the interpreter that creates the venv (default: python3).
set -eu

src=${1:?usage: install.sh SOURCE_DIR VENV_DIR}
venv=${2:?usage: install.sh SOURCE_DIR VENV_DIR}
python=${PYTHON:-python3}

wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT

"$python" -m venv "$venv"
# Build the wheel first and install that (not the source tree): the image then holds exactly what a
# user gets from `pip install trace-scorer`, with no source files or build leftovers.
"$venv/bin/python" -m pip wheel --quiet --no-deps --wheel-dir "$wheels" "$src"
"$venv/bin/python" -m pip install --quiet "$wheels"/trace_scorer-*.whl
"$venv/bin/trace-scorer" --version
