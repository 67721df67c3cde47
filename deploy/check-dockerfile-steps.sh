#!/usr/bin/env bash
# Replay deploy/Dockerfile's install and start steps as plain shell in a fresh virtual environment.
#
# CI has no Docker engine, so the image itself is never built there. This script runs what the image
# build would run, read from the Dockerfile itself (not a copy of it):
#   1. the build stage's COPY steps  -> a fresh build context in a temporary directory,
#   2. the build stage's RUN steps   -> with /src and /opt/trace-scorer mapped into that directory,
#   3. checks on the result: `trace-scorer --version` prints pyproject's version, no dev dependency is
#      installed, the entrypoint's command answers `--help`; then the real worker — ENTRYPOINT + CMD
#      with the runtime stage's ENV, from the fresh venv — runs against the Langfuse stand-in
#      (standins/) until it is ready and has posted scores, and the HEALTHCHECK command (as written in
#      the Dockerfile) passes while it is healthy and fails when it is frozen (SIGSTOP), stalled (a
#      tick hangs on Langfuse) and stopped; SIGTERM exits 0 within shutdown_grace.
#
#   bash deploy/check-dockerfile-steps.sh        # PYTHON=python3.12 to choose the interpreter
#
# Needs the package registry (pip installs the runtime dependencies), like the image build does, and
# for the stand-in an interpreter with the dev dependencies: STANDIN_PYTHON (default: $PYTHON).
# Network: loopback only (the worker listens on 127.0.0.1 here, not the image's 0.0.0.0).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
dockerfile=$here/Dockerfile
python=${PYTHON:-python3}
export PYTHON=$python

work=$(mktemp -d)
worker_pid=
standin_pid=
cleanup() {
    if [ -n "$worker_pid" ]; then kill -CONT "$worker_pid" 2>/dev/null || true; kill "$worker_pid" 2>/dev/null || true; fi
    if [ -n "$standin_pid" ]; then kill "$standin_pid" 2>/dev/null || true; fi
    wait 2>/dev/null || true
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

map_paths() {
    sed -e "s#/opt/trace-scorer#$venv#g" -e "s#/src#$ctx#g" \
        -e "s#/etc/trace-scorer#$work/etc/trace-scorer#g" -e "s#/var/lib/trace-scorer#$work/var/lib/trace-scorer#g"
}

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

# The real worker, started the way the image starts it (ENTRYPOINT + CMD, the runtime stage's ENV),
# from the fresh venv, against the Langfuse stand-in (standins/, test code: it runs with
# $STANDIN_PYTHON — default $PYTHON — which needs the dev dependencies, and the repository on PYTHONPATH).
standin_python=${STANDIN_PYTHON:-$python}
PYTHONPATH=$root "$standin_python" -c "import standins.langfuse_server" 2>/dev/null ||
    fail "the Langfuse stand-in cannot start with $standin_python: set STANDIN_PYTHON to an interpreter with the dev dependencies"

# GET/POST with the fresh venv's python (the slim image has no curl either): prints "STATUS BODY".
http() {
    "$venv/bin/python" - "$@" <<'PY'
import sys, urllib.error, urllib.request
method, url, body = sys.argv[1], sys.argv[2], (sys.argv[3].encode() if len(sys.argv) > 3 else None)
request = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(request, timeout=5) as answer:
        print(answer.status, answer.read().decode(errors="replace"))
except urllib.error.HTTPError as error:
    print(error.code, error.read().decode(errors="replace"))
except OSError as error:
    print(0, error)
PY
}
# wait_for SECONDS WHAT COMMAND…: until COMMAND succeeds (bounded).
wait_for() {
    local seconds=$1 what=$2
    shift 2
    for _ in $(seq $((seconds * 10))); do "$@" && return 0; sleep 0.1; done
    "$@" || { tail -n 20 "$work/worker.log" >&2 2>/dev/null; fail "$what: not within $seconds s"; }
}
answers() { [ "$(http GET "$worker_url$1" | cut -d' ' -f1)" = "$2" ]; }
metric_above_zero() {
    http GET "$worker_url/metrics" | awk -v name="$1" '$1 ~ "^"name"(\\{|$)" && $2 > 0 { found = 1 } END { exit !found }'
}

say "the worker from the fresh venv, against the Langfuse stand-in"
PYTHONPATH=$root "$standin_python" -m standins.langfuse_server --port 0 --seed 7 --traces 20 --spacing 1 \
    --scenario-json '{"datasets": []}' >"$work/standin.out" 2>"$work/standin.err" &
standin_pid=$!
for _ in $(seq 200); do grep -q '"url"' "$work/standin.out" 2>/dev/null && break; sleep 0.1; done
langfuse_url=$(sed -n 's/.*"url": "\([^"]*\)".*/\1/p' "$work/standin.out" | head -n 1)
[ -n "$langfuse_url" ] || { cat "$work/standin.err" >&2; fail "the Langfuse stand-in did not start"; }
echo "   Langfuse stand-in at $langfuse_url"

etc=$work/etc/trace-scorer            # stands for /etc/trace-scorer (the mounted settings.toml)
home=$work/var/lib/trace-scorer       # stands for /var/lib/trace-scorer (WORKDIR: the state)
mkdir -p "$etc" "$home"
cat >"$etc/settings.toml" <<TOML
[langfuse]
retry = { initial = "0.25s", multiplier = 2.0, max = "0.5s", max_attempts = 8 }

[http]
liveness_intervals = 2      # /healthz fails 2 s after the last sign of life (the image's default: 2 min)
liveness_min = "0s"

[worker]
shutdown_grace = "5s"

[[targets]]
name = "agent"
source = "traces"
interval = "1s"
lag = "0s"
quiet_period = "0s"
lookback = "30m"
# Any text will do as the reference: this checks that the installed worker computes and posts scores.
references = { expected = ["\$.trace.input.question"] }
metrics = [{ metric = "rouge" }]
TOML

# The runtime stage's ENV, paths mapped; then the two values a loopback-only CI runner must change.
runtime_env=$(awk '/^FROM / { stage++ } stage == 2' "$dockerfile" | sed -e ':a' -e '/\\$/N; s/\\\n/ /; ta' |
    sed -n 's/^ENV //p' | map_paths | tr -s ' ')
[ -n "$runtime_env" ] || fail "no ENV in the runtime stage of $dockerfile"
command=$("$venv/bin/python" -c "
import json, sys
print('\n'.join(json.loads(sys.argv[1]) + json.loads(sys.argv[2])))" \
    "$(sed -n 's/^ENTRYPOINT //p' "$dockerfile")" "$(sed -n 's/^CMD //p' "$dockerfile")" | map_paths)
mapfile -t argv <<<"$command"
echo "   ENV $runtime_env"
echo "   then TRACE_SCORER_HTTP__HOST=127.0.0.1 TRACE_SCORER_HTTP__PORT=$port (loopback only, a free port)"
echo "   ${argv[*]}"
(
    cd "$home"
    for assignment in $runtime_env; do export "${assignment%%=*}=$(eval "printf '%s' \"${assignment#*=}\"")"; done
    export TRACE_SCORER_HTTP__HOST=127.0.0.1 TRACE_SCORER_HTTP__PORT=$port
    export LANGFUSE_BASE_URL=$langfuse_url LANGFUSE_PUBLIC_KEY=pk-lf-standin LANGFUSE_SECRET_KEY=sk-lf-standin
    [ "$(command -v "${argv[0]}")" = "$venv/bin/${argv[0]}" ] || fail "${argv[0]} is not the fresh venv's"
    exec "${argv[@]}"
) >"$work/worker.log" 2>&1 &
worker_pid=$!
worker_url=http://127.0.0.1:$port

wait_for 30 "the worker ready (Langfuse reached)" answers /readyz 200
wait_for 20 "traces scored and their scores posted" metric_above_zero trace_scorer_scores_posted_total
echo "   ready; $(http GET "$worker_url/metrics" | grep -E '^trace_scorer_(traces_scored|scores_posted)_total' | tr '\n' ' ')"

run_healthcheck() {
    TRACE_SCORER_HTTP__PORT=$port "$venv/bin/python" -c "
import json, subprocess, sys
sys.exit(subprocess.run(json.loads(sys.argv[1])).returncode)" "$healthcheck" 2>/dev/null
}
expect_healthcheck() {  # expect_healthcheck pass|fail WHEN
    if run_healthcheck; then outcome=pass; else outcome=fail; fi
    echo "   $2: HEALTHCHECK ${outcome}ed"
    [ "$outcome" = "$1" ] || fail "HEALTHCHECK should $1 when $2"
}

expect_healthcheck pass "healthy (ticks coming)"

kill -STOP "$worker_pid"
expect_healthcheck fail "frozen (SIGSTOP: no answer within the check's timeout)"
kill -CONT "$worker_pid"
wait_for 15 "healthy again after SIGCONT" answers /healthz 200

# A tick stuck on a Langfuse read (30 s) for longer than the liveness limit: the loop still answers.
http POST "$langfuse_url/_standin/faults" \
    '{"script": [{"kind": "latency", "route": "GET /api/public/v2/observations", "seconds": 30}]}' >/dev/null
wait_for 15 "/healthz failing while the tick hangs" answers /healthz 503
expect_healthcheck fail "stalled (a tick hangs: /healthz answers 503)"

started=$(date +%s)
kill -TERM "$worker_pid"
code=0
wait "$worker_pid" || code=$?
worker_pid=
took=$(($(date +%s) - started))
echo "   SIGTERM: exit code $code after ${took}s (shutdown_grace 5 s: the hung tick is cancelled)"
[ "$code" = 0 ] || { tail -n 20 "$work/worker.log" >&2; fail "the worker exited $code on SIGTERM"; }
[ "$took" -le 7 ] || fail "the worker took ${took}s to stop, shutdown_grace is 5 s"
[ -s "$home/trace-scorer.db" ] || fail "no state file in the working directory"
expect_healthcheck fail "stopped"

say "all Dockerfile steps replayed: OK"
