#!/usr/bin/env bash
# Replay deploy/Dockerfile's install and start steps as plain shell in a fresh virtual environment.
#
# CI has no Docker engine, so the image itself is never built there. This script runs what the image
# build would run, read from the Dockerfile itself (not a copy of it):
#   1. the build stage's COPY steps  -> a fresh build context in a temporary directory,
#   2. the build stage's RUN steps   -> with /src and /opt/trace-scorer mapped into that directory,
#   3. checks on the result: `trace-scorer --version` prints pyproject's version, no dev dependency is
#      installed, the entrypoint's command answers `--help`, and the HEALTHCHECK command (as written in
#      the Dockerfile) passes against a healthy /healthz and fails against a stalled one.
#
#   bash deploy/check-dockerfile-steps.sh        # PYTHON=python3.12 to choose the interpreter
#
# Needs the package registry (pip installs the runtime dependencies), like the image build does.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
dockerfile=$here/Dockerfile
python=${PYTHON:-python3}
export PYTHON=$python

work=$(mktemp -d)
server_pid=
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

ctx=$work/src            # stands for the build stage's WORKDIR /src
venv=$work/opt/trace-scorer  # stands for /opt/trace-scorer
mkdir -p "$ctx" "$(dirname "$venv")"

say() { printf '== %s\n' "$*"; }
fail() { printf 'check-dockerfile-steps: FAILED: %s\n' "$*" >&2; exit 1; }

# --- the build stage's instructions, continuation lines joined ------------------------------------------
build_stage=$(awk '
    /^FROM .* AS build *$/ { inside = 1; next }
    inside && /^FROM / { exit }
    inside { print }
' "$dockerfile" | sed -e ':a' -e '/\\$/N; s/\\\n/ /; ta' | grep -v '^[[:space:]]*#' | grep -v '^[[:space:]]*$')
[ -n "$build_stage" ] || fail "no 'FROM … AS build' stage in $dockerfile"

workdir=$(printf '%s\n' "$build_stage" | awk '$1 == "WORKDIR" { print $2 }' | tail -n 1)
[ "$workdir" = /src ] || fail "the build stage's WORKDIR is '$workdir', this script maps /src"

map_paths() { sed -e "s#/opt/trace-scorer#$venv#g" -e "s#/src#$ctx#g"; }

# --- 1. COPY -----------------------------------------------------------------------------------------------
say "COPY steps of the build stage"
while read -r instruction rest; do
    [ "$instruction" = COPY ] || continue
    case $rest in --*) fail "COPY with options is not replayed here: COPY $rest" ;; esac
    read -r -a parts <<<"$rest"
    dest=${parts[-1]}
    unset 'parts[-1]'
    for source in "${parts[@]}"; do
        echo "   COPY $source -> $dest"
        if [ -d "$root/$source" ]; then
            mkdir -p "$ctx/$dest"
            cp -R "$root/$source/." "$ctx/$dest"
        elif [[ $dest == */ ]]; then
            mkdir -p "$ctx/$dest"
            cp "$root/$source" "$ctx/$dest"
        else
            mkdir -p "$(dirname "$ctx/$dest")"
            cp "$root/$source" "$ctx/$dest"
        fi
    done
done <<<"$build_stage"
# what deploy/Dockerfile.dockerignore keeps out of the context
find "$ctx" -name __pycache__ -type d -prune -exec rm -rf {} +

# --- 2. RUN ------------------------------------------------------------------------------------------------
say "RUN steps of the build stage"
runs=$(printf '%s\n' "$build_stage" | sed -n 's/^RUN //p')
[ -n "$runs" ] || fail "no RUN step in the build stage"
while IFS= read -r step; do
    mapped=$(printf '%s' "$step" | map_paths)
    echo "   RUN $step"
    (cd "$ctx" && sh -c "$mapped") || fail "RUN $step"
done <<<"$runs"

# --- 3. checks on the installed result ----------------------------------------------------------------
say "trace-scorer --version"
expected=$("$python" -c "import tomllib; print(tomllib.load(open('$root/pyproject.toml', 'rb'))['project']['version'])")
version=$("$venv/bin/trace-scorer" --version)
echo "   $version"
[ "$version" = "trace-scorer $expected" ] || fail "version '$version', pyproject says $expected"

say "only runtime dependencies"
for dev in pytest respx hypothesis mypy ruff; do
    if "$venv/bin/python" -c "import $dev" 2>/dev/null; then fail "dev dependency '$dev' is installed"; fi
done
"$venv/bin/python" -c "import prometheus_client, trace_scorer.ops" || fail "runtime dependency missing"

say "the entrypoint's command"
entrypoint=$(sed -n 's/^ENTRYPOINT //p' "$dockerfile")
[ "$entrypoint" = '["trace-scorer", "run"]' ] || fail "ENTRYPOINT is $entrypoint"
"$venv/bin/trace-scorer" run --help >/dev/null || fail "trace-scorer run --help"

say "HEALTHCHECK command, as written in the Dockerfile"
healthcheck=$(sed -e ':a' -e '/\\$/N; s/\\\n/ /; ta' "$dockerfile" | sed -n 's/^HEALTHCHECK .* CMD \(\[.*\]\)$/\1/p')
[ -n "$healthcheck" ] || fail "no exec-form HEALTHCHECK … CMD [...] in $dockerfile"
healthcheck=$(printf '%s' "$healthcheck" | map_paths)
port=$("$venv/bin/python" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")

# A stand-in for the worker's endpoints, from the installed package: healthy, or with a stalled target.
# TODO(lead): once `trace-scorer run` can start against a Langfuse stand-in, start it here instead.
cat >"$work/serve.py" <<'PY'
import asyncio, sys
from trace_scorer.ops import Health, OpsServer, Telemetry

async def main(port: int, stalled: bool) -> None:
    health = Health(liveness_min=0)
    health.watch("agent", 0.001 if stalled else 3600)
    async with OpsServer(health, Telemetry(), host="127.0.0.1", port=port):
        print("ready", flush=True)
        await asyncio.sleep(120)

asyncio.run(main(int(sys.argv[1]), sys.argv[2] == "stalled"))
PY

run_healthcheck() {
    TRACE_SCORER_HTTP__PORT=$port "$venv/bin/python" -c "
import json, subprocess, sys
sys.exit(subprocess.run(json.loads(sys.argv[1])).returncode)" "$healthcheck" 2>/dev/null
}

for mode in healthy stalled; do
    "$venv/bin/python" "$work/serve.py" "$port" "$mode" >"$work/serve.out" 2>"$work/serve.err" &
    server_pid=$!
    for _ in $(seq 100); do grep -q ready "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
    grep -q ready "$work/serve.out" || { cat "$work/serve.err" >&2; fail "stand-in server did not start"; }
    if run_healthcheck; then outcome=pass; else outcome=fail; fi
    kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=
    echo "   $mode: HEALTHCHECK ${outcome}ed"
    case $mode/$outcome in
        healthy/pass | stalled/fail) ;;
        *) fail "HEALTHCHECK should $([ "$mode" = healthy ] && echo pass || echo fail) when $mode" ;;
    esac
done

say "all Dockerfile steps replayed: OK"
