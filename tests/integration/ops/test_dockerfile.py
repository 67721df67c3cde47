"""deploy/Dockerfile: its shape (fast), and its install and start steps replayed as shell (slow).

The image itself is not built here: no Docker engine on this machine or in CI.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


def test_multi_stage_slim_base() -> None:
    froms = [rest for keyword, rest in instructions() if keyword == "FROM"]
    assert len(froms) == 2
    assert froms[0].endswith(" AS build")
    assert all("-slim" in f for f in froms)
    copies = [rest for keyword, rest in instructions() if keyword == "COPY" and rest.startswith("--from=build")]
    assert copies == ["--from=build /opt/trace-scorer /opt/trace-scorer"]


def test_runs_as_non_root_numeric_user() -> None:
    users = [rest for keyword, rest in instructions() if keyword == "USER"]
    assert users and users[-1] == "10001:10001"


def test_entrypoint_config_and_environment() -> None:
    found = dict(instructions())
    assert json.loads(found["ENTRYPOINT"]) == ["trace-scorer", "run"]
    assert json.loads(found["CMD"]) == ["--config", "/etc/trace-scorer/settings.toml"]
    env = " ".join(rest for keyword, rest in instructions() if keyword == "ENV")
    assert "TRACE_SCORER_HTTP__HOST=0.0.0.0" in env
    assert "TRACE_SCORER_LOG__FORMAT=json" in env
    assert found["EXPOSE"] == "9477"


def test_healthcheck_uses_python_urllib_on_healthz() -> None:
    (check,) = [rest for keyword, rest in instructions() if keyword == "HEALTHCHECK"]
    command = json.loads(check.split(" CMD ", 1)[1])
    assert command[0] == "/opt/trace-scorer/bin/python"
    assert "urllib.request" in command[2] and "/healthz" in command[2]
    assert "curl" not in check and "wget" not in check
    compile(command[2], "<healthcheck>", "exec")  # the inline program is valid Python


def test_install_step_is_the_shared_script() -> None:
    runs = [rest for keyword, rest in instructions() if keyword == "RUN"]
    assert runs[0] == "sh deploy/install.sh /src /opt/trace-scorer"
    install = (ROOT / "deploy" / "install.sh").read_text()
    assert "--no-deps --wheel-dir" in install and "[dev]" not in install


def test_dockerignore_lets_the_copied_files_through() -> None:
    ignore = (ROOT / "deploy" / "Dockerfile.dockerignore").read_text().splitlines()
    copied = [rest.split()[:-1] for keyword, rest in instructions() if keyword == "COPY" and "--from" not in rest]
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    for sources in copied:
        for source in sources:
            assert source.rstrip("/") in allowed, source


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_dockerfile_steps_replay_in_a_fresh_venv() -> None:
    """The Dockerfile's build steps, run as shell in a fresh venv (needs the package registry)."""
    done = subprocess.run(
        ["bash", str(ROOT / "deploy" / "check-dockerfile-steps.sh")],
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHON": sys.executable, "HOME": str(Path.home())},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "all Dockerfile steps replayed: OK" in done.stdout
