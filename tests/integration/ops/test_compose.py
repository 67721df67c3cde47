"""deploy/docker-compose.yml: valid against the Compose specification's JSON schema (the copy that
check-jsonschema ships, vendored from compose-spec/compose-spec), before and after variable
interpolation, and wired so that trace-scorer reaches the Langfuse it sits next to.

No Docker engine here: `docker compose up` itself is untested (docs/deploy.md says so).
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import jsonschema
import pytest
import yaml

from tests.support.settings_examples import ROOT, load_example

DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
_VARIABLE = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


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


