"""deploy/docker-compose.yml: valid against the Compose specification's JSON schema (the copy that
check-jsonschema ships, vendored from compose-spec/compose-spec), before and after variable
interpolation, and wired so that trace-scorer reaches the Langfuse it sits next to — and, in the
"distributed" profile, so that N workers share a database of their own on Langfuse's PostgreSQL. The
script that creates that database runs against the real PostgreSQL of this machine.

No Docker engine here: `docker compose up` itself is untested (docs/deploy.md says so).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from importlib import resources
from typing import Any

import jsonschema
import psycopg
import pytest
import yaml
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from tests.support.paths import ROOT
from tests.support.settings_examples import load_example
from trace_scorer.cli import main
from trace_scorer.config import load_settings
from trace_scorer.config.common import parse_duration
from trace_scorer.config.state import StateSettings
from trace_scorer.state import SCHEMA_VERSION, open_state

DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
CREATE_DATABASE = DEPLOY / "compose" / "create-state-database.sql"
_VARIABLE = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")
#: The services of the "distributed" profile.
DISTRIBUTED = {"trace-scorer-database", "trace-scorer-migrate", "trace-scorer-worker"}
#: This machine's (and CI's) PostgreSQL, trust authentication.
POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"


def compose_schema() -> dict[str, Any]:
    text = (resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def interpolate(value: Any) -> Any:
    """What `docker compose config` does with an empty environment: ``${VAR:-default}`` → default."""
    if isinstance(value, str):
        return _VARIABLE.sub(lambda m: m.group(2) or "", value)
    if isinstance(value, dict):
        return {k: interpolate(v) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v) for v in value]
    return value


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return data


@pytest.mark.parametrize("stage", ["as written", "interpolated"])
def test_valid_against_the_compose_spec(compose: dict[str, Any], stage: str) -> None:
    document = compose if stage == "as written" else interpolate(compose)
    validator = jsonschema.Draft202012Validator(compose_schema(), format_checker=jsonschema.FormatChecker())
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]
    assert errors == []


def test_the_schema_catches_mistakes(compose: dict[str, Any]) -> None:
    broken = json.loads(json.dumps(compose))
    broken["services"]["trace-scorer"]["helthcheck"] = {}
    validator = jsonschema.Draft202012Validator(compose_schema())
    assert any("helthcheck" in e.message for e in validator.iter_errors(broken))


def test_the_langfuse_stack_is_complete(compose: dict[str, Any]) -> None:
    services = compose["services"]
    expected = {"langfuse-web", "langfuse-worker", "postgres", "clickhouse", "redis", "minio", "trace-scorer"}
    assert expected <= set(services)
    assert services["langfuse-web"]["image"].startswith("docker.io/langfuse/langfuse:")
    assert services["langfuse-worker"]["image"].startswith("docker.io/langfuse/langfuse-worker:")
    for name, service in services.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown {dependency}"
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), source
            else:
                assert source in compose["volumes"], source


def test_trace_scorer_reaches_its_langfuse(compose: dict[str, Any]) -> None:
    resolved = interpolate(compose)
    scorer = resolved["services"]["trace-scorer"]
    web = resolved["services"]["langfuse-web"]["environment"]
    assert scorer["environment"]["LANGFUSE_BASE_URL"] == "http://langfuse-web:3000"
    # the keys Langfuse creates for the trial project are the keys trace-scorer uses
    assert scorer["environment"]["LANGFUSE_PUBLIC_KEY"] == web["LANGFUSE_INIT_PROJECT_PUBLIC_KEY"]
    assert scorer["environment"]["LANGFUSE_SECRET_KEY"] == web["LANGFUSE_INIT_PROJECT_SECRET_KEY"]
    assert scorer["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert (DEPLOY / scorer["build"]["context"] / scorer["build"]["dockerfile"]).is_file()
    assert "./compose/settings.toml:/etc/trace-scorer/settings.toml:ro" in scorer["volumes"]
    assert scorer["ports"] == ["127.0.0.1:9477:9477"]
    assert scorer["depends_on"]["langfuse-web"]["condition"] == "service_healthy"


def test_trial_settings() -> None:
    path = DEPLOY / "compose" / "settings.toml"
    settings = load_example(path)
    assert settings.http.host == "0.0.0.0"
    assert {t.name for t in settings.targets} == {"trial-agent", "trial-bench"}


def test_trial_settings_with_filters() -> None:
    settings = load_example(DEPLOY / "compose" / "settings.toml")
    assert settings.targets[0].model_dump()["filter"]["trace_name"] == "trial-agent"


def test_no_real_looking_secrets_in_deploy() -> None:
    """Every key-looking value under deploy/ is a trial default or a placeholder."""
    allowed = {"pk-lf-trial-public", "sk-lf-trial-secret", "pk-lf-REPLACE_ME", "sk-lf-REPLACE_ME"}
    for path in DEPLOY.rglob("*"):
        if path.is_file() and path.suffix in {".yml", ".yaml", ".toml", ".env", ".json", ""}:
            for match in re.findall(r"\b(?:pk|sk)-lf-[A-Za-z0-9_\-]+", path.read_text(errors="replace")):
                assert match in allowed, f"{path.relative_to(ROOT)}: {match}"


# -- the distributed profile -----------------------------------------------------------------------------


def cli_accepts(argv: list[str], capsys: pytest.CaptureFixture[str]) -> bool:
    """Whether trace-scorer's command line takes these arguments (asked with --help: nothing runs)."""
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    capsys.readouterr()
    return exited.value.code == 0


def test_distributed_profile_leaves_the_trial_as_it_was(compose: dict[str, Any]) -> None:
    """`docker compose up` starts what it started before; the profile adds the workers and their steps."""
    services = compose["services"]
    assert {name for name, s in services.items() if "profiles" in s} == DISTRIBUTED
    for name in DISTRIBUTED:
        assert services[name]["profiles"] == ["distributed"]
    # What a profiled service depends on is in the profile or always started.
    for name in DISTRIBUTED:
        for dependency in services[name].get("depends_on", {}):
            assert services[dependency].get("profiles", ["distributed"]) == ["distributed"]


def test_distributed_workers_are_interchangeable(compose: dict[str, Any]) -> None:
    resolved = interpolate(compose)
    services = resolved["services"]
    worker = services["trace-scorer-worker"]
    assert worker["deploy"]["replicas"] >= 2
    # No state volume (the state is in PostgreSQL), only the settings file; no fixed host port, which a
    # second replica could not bind.
    assert worker["volumes"] == ["./compose/settings.toml:/etc/trace-scorer/settings.toml:ro"]
    for port in worker["ports"]:
        host_ip, host_port, container_port = port.split(":")
        assert host_ip == "127.0.0.1" and host_port == "" and container_port == "9477"
    # The same image and configuration as the single worker, plus the state's URL.
    single = services["trace-scorer"]
    assert worker["build"] == single["build"] and worker["image"] == single["image"]
    assert {k: v for k, v in worker["environment"].items() if k != "TRACE_SCORER_STATE__URL"} == single["environment"]
    # Database, then migration, then workers.
    assert worker["depends_on"]["trace-scorer-migrate"]["condition"] == "service_completed_successfully"
    migrate = services["trace-scorer-migrate"]
    assert migrate["depends_on"]["trace-scorer-database"]["condition"] == "service_completed_successfully"
    assert services["trace-scorer-database"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert migrate["environment"] == worker["environment"] and migrate["volumes"] == worker["volumes"]


def test_distributed_workers_load_their_settings_and_reach_their_database(compose: dict[str, Any]) -> None:
    """The settings file with the workers' environment, as `trace-scorer run` in the container loads it:
    a PostgreSQL state on Langfuse's server, in the database (and as the user) the one-shot creates."""
    resolved = interpolate(compose)
    services = resolved["services"]
    worker = services["trace-scorer-worker"]
    settings = load_settings(DEPLOY / "compose" / "settings.toml", environ=worker["environment"])
    assert settings.state.postgres_url is not None
    url = conninfo_to_dict(settings.state.postgres_url)
    assert url["host"] == "postgres" and url["host"] in services
    assert str(url["port"]) == "5432"
    created = services["trace-scorer-database"]["environment"]
    assert url["dbname"] == url["user"] == created["TRACE_SCORER_DB_NAME"]
    assert url["password"] == created["TRACE_SCORER_DB_PASSWORD"]
    assert url["dbname"] != "postgres"  # not Langfuse's database
    assert {t.name for t in settings.targets} == {"trial-agent", "trial-bench"}
    # `docker compose stop`: SIGTERM, then SIGKILL after stop_grace_period; the worker needs shutdown_grace.
    for name in ("trace-scorer", "trace-scorer-worker"):
        assert parse_duration(services[name]["stop_grace_period"]) > settings.worker.shutdown_grace, name


def test_distributed_steps_run_trace_scorer_commands(
    compose: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    services = compose["services"]
    migrate = services["trace-scorer-migrate"]
    assert migrate["entrypoint"] == ["trace-scorer", "state", "migrate"]
    assert cli_accepts(migrate["entrypoint"][1:] + migrate["command"], capsys)
    database = services["trace-scorer-database"]
    assert database["image"] == services["postgres"]["image"]  # the same psql as the server
    script = f"./compose/{CREATE_DATABASE.name}:/{CREATE_DATABASE.name}:ro"
    assert script in database["volumes"] and database["entrypoint"][-1] == f"/{CREATE_DATABASE.name}"


@pytest.fixture
def postgres_admin() -> Iterator[psycopg.Connection[Any]]:
    """A superuser connection to this machine's PostgreSQL. In CI (CI set) the server must be there: a
    missing server fails; on a developer's machine without one the test is skipped."""
    try:
        conn = psycopg.connect(POSTGRES, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL at 127.0.0.1:5432 is required in CI: {exc}")
        pytest.skip(f"no PostgreSQL at 127.0.0.1:5432: {exc}")
    with conn:
        yield conn


def create_state_database(name: str, password: str | None) -> subprocess.CompletedProcess[str]:
    """The one-shot service's command, as it runs in its container, against this machine's server."""
    psql = shutil.which("psql")
    if psql is None:
        if os.environ.get("CI"):
            pytest.fail("psql is required in CI (Debian package postgresql-client)")
        pytest.skip("psql not installed (Debian package postgresql-client)")
    environ = {
        "PATH": os.environ.get("PATH", ""),
        "PGHOST": "127.0.0.1",
        "PGUSER": "postgres",
        "TRACE_SCORER_DB_NAME": name,
    }
    if password is not None:
        environ["TRACE_SCORER_DB_PASSWORD"] = password
    return subprocess.run(
        [psql, "-X", "-q", "-f", str(CREATE_DATABASE)], env=environ, capture_output=True, text=True, timeout=60
    )


def test_create_state_database_on_postgres(postgres_admin: psycopg.Connection[Any]) -> None:
    """The script creates an ordinary user owning a database of its own, is safe to run at every start,
    applies a changed password, refuses to run without one — and the state migrates there as that user."""
    name = f"trace_scorer_test_{uuid.uuid4().hex[:10]}"
    try:
        first = create_state_database(name, "first-password")
        assert first.returncode == 0, first.stderr
        role = postgres_admin.execute(
            "SELECT rolsuper, rolcanlogin, rolpassword FROM pg_authid WHERE rolname = %s", (name,)
        ).fetchone()
        assert role is not None
        superuser, can_login, first_hash = role
        assert superuser is False and can_login is True and first_hash
        owner = postgres_admin.execute(
            "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s", (name,)
        ).fetchone()
        assert owner == (name,)
        # Other users (PUBLIC) may not connect to it.
        public = postgres_admin.execute("SELECT has_database_privilege('pg_read_all_data', %s, 'CONNECT')", (name,))
        assert public.fetchone() == (False,)

        again = create_state_database(name, "second-password")
        assert again.returncode == 0, again.stderr
        changed = postgres_admin.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", (name,)).fetchone()
        assert changed is not None and changed[0] != first_hash

        missing = create_state_database(name, None)
        assert missing.returncode != 0 and "TRACE_SCORER_DB_PASSWORD is not set" in missing.stderr

        # What `trace-scorer state migrate` does, as the new user: the state's schema in its database.
        store = open_state(StateSettings(url=f"postgresql://{name}:second-password@127.0.0.1:5432/{name}"))
        try:
            assert store.schema_version == SCHEMA_VERSION
        finally:
            store.close()
    finally:
        postgres_admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        postgres_admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))
