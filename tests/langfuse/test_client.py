"""Start-up: health, project, the API-generation probe, credentials."""

from __future__ import annotations

import pytest

from tests.langfuse import factories as f
from tests.langfuse.conftest import MakeClient, make_settings
from tests.langfuse.fake import FakeLangfuse, V3Server, V4Server
from trace_scorer.config.common import ConfigError
from trace_scorer.langfuse import ApiGeneration, LangfuseClient, LangfuseError
from trace_scorer.langfuse.reads_v3 import V3Reader
from trace_scorer.langfuse.reads_v4 import V4Reader


async def test_connect_on_v4_server_reports_version_project_and_v4(
    v4: V4Server, fake: FakeLangfuse, make_client: MakeClient
) -> None:
    client = make_client()
    info = await client.connect()
    assert (info.server_version, info.project_id, info.generation) == ("4.60.0", "proj-1", ApiGeneration.V4)
    assert isinstance(client.reads, V4Reader)
    probed = [c.template for c in fake.calls]
    assert probed == [
        "/api/public/health",
        "/api/public/projects",
        "/api/public/v2/observations",
        "/api/public/experiments",
    ]


async def test_connect_on_v3_server_falls_back_to_legacy_on_404(
    v3: V3Server, fake: FakeLangfuse, make_client: MakeClient
) -> None:
    client = make_client()
    info = await client.connect()
    assert (info.server_version, info.generation) == ("3.120.0", ApiGeneration.V3)
    assert isinstance(client.reads, V3Reader)
    # One probe answered 404: no retries on it.
    assert [c.status for c in fake.calls_to("GET", "/api/public/v2/observations")] == [404]


async def test_server_with_observations_but_no_experiments_is_treated_as_legacy(
    v4: V4Server, fake: FakeLangfuse, make_client: MakeClient
) -> None:
    fake.on("GET", "/api/public/experiments", f.error("no such route", 404))
    info = await make_client().connect()
    assert info.generation is ApiGeneration.V3


async def test_configured_generation_skips_the_probe(
    v3: V3Server, fake: FakeLangfuse, make_client: MakeClient
) -> None:
    info = await make_client(api_generation="v3").connect()
    assert info.generation is ApiGeneration.V3
    assert not fake.calls_to("GET", "/api/public/v2/observations")


async def test_reads_before_connect_are_refused(make_client: MakeClient) -> None:
    client = make_client()
    with pytest.raises(LangfuseError, match="connect"):
        _ = client.reads


def test_missing_credentials_name_the_variables() -> None:
    with pytest.raises(ConfigError, match="LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY"):
        LangfuseClient(make_settings(secret_key=None))
