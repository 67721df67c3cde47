"""Start-up: health, project, the API-generation probe, credentials."""

from __future__ import annotations

import pytest

from standins.formats import PROJECT_ID
from tests.support import langfuse_factories as f
from tests.support.langfuse_client import MakeClient, make_settings
from tests.support.langfuse_inprocess import InProcessLangfuse, MakeLangfuse
from trace_scorer.config.common import ConfigError
from trace_scorer.langfuse import ApiGeneration, LangfuseClient, LangfuseError, ScorePosting
from trace_scorer.langfuse.reads.v3 import V3Reader
from trace_scorer.langfuse.reads.v4 import V4Reader


async def test_connect_on_v4_server_reports_version_project_and_v4(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    client = make_client()
    info = await client.connect()
    assert (info.server_version, info.project_id, info.generation) == ("4.60.0", PROJECT_ID, ApiGeneration.V4)
    assert isinstance(client.reads, V4Reader)
    probed = [c.template for c in v4.calls]
    assert probed == [
        "/api/public/health",
        "/api/public/projects",
        "/api/public/v2/observations",
        "/api/public/experiments",
    ]


async def test_v3_version_means_legacy_without_probing(v3: InProcessLangfuse, make_client: MakeClient) -> None:
    client = make_client()
    info = await client.connect()
    assert (info.server_version, info.generation, info.generation_source) == ("3.120.0", ApiGeneration.V3, "version")
    assert info.score_posting is ScorePosting.INGESTION
    assert isinstance(client.reads, V3Reader)
    assert not v3.calls_to("GET", "/api/public/v2/observations")


@pytest.mark.parametrize(("version", "status"), [("3.120.0", 404), ("3.150.0", 501)])
async def test_unknown_version_is_probed_and_404_or_501_mean_legacy(
    make_langfuse: MakeLangfuse, make_client: MakeClient, version: str, status: int
) -> None:
    """v3.143–3.158 answer /v2/observations with 501 (NotImplementedError); others 404."""
    v3 = make_langfuse(version)
    v3.on("GET", "/api/public/health", f.Reply(200, {"version": "unknown", "status": "OK"}))  # a custom build
    info = await make_client().connect()
    assert (info.generation, info.generation_source) == (ApiGeneration.V3, "probed")
    # Answered at once: no retries on it.
    assert [c.status for c in v3.calls_to("GET", "/api/public/v2/observations")] == [status]


async def test_server_with_observations_but_no_experiments_is_treated_as_legacy(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    v4.on("GET", "/api/public/experiments", f.error("no such route", 404))
    info = await make_client().connect()
    assert info.generation is ApiGeneration.V3


@pytest.mark.parametrize(
    ("version", "posting"),
    [("4.16.0", ScorePosting.INGESTION), ("4.58.2", ScorePosting.INGESTION), ("4.59.0", ScorePosting.SCORES_BATCH)],
)
async def test_score_posting_follows_the_server_version(
    make_langfuse: MakeLangfuse, make_client: MakeClient, version: str, posting: ScorePosting
) -> None:
    """POST /scores takes a list only from 4.59 on; older v4 servers take one object and drop its
    timestamp, so scores go through ingestion events there."""
    make_langfuse(version)
    info = await make_client().connect()
    assert (info.generation, info.score_posting) == (ApiGeneration.V4, posting)


async def test_score_posting_can_be_forced(v4: InProcessLangfuse, make_client: MakeClient) -> None:
    info = await make_client(score_posting="ingestion").connect()
    assert info.score_posting is ScorePosting.INGESTION


async def test_forced_v3_on_a_server_without_legacy_reads_is_a_configuration_error(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    """4.x in events_only mode answers the legacy routes 404: forcing v3 there is the user's mistake."""
    with pytest.raises(ConfigError, match=r"api_generation: 'v3'.*4\.60\.0.*events_only"):
        await make_client(api_generation="v3").connect()


async def test_forced_v4_on_a_legacy_server_is_a_configuration_error(
    v3: InProcessLangfuse, make_client: MakeClient
) -> None:
    with pytest.raises(ConfigError, match=r"api_generation: 'v4'.*3\.120\.0"):
        await make_client(api_generation="v4").connect()


async def test_configured_generation_is_checked_and_used(v3: InProcessLangfuse, make_client: MakeClient) -> None:
    info = await make_client(api_generation="v3").connect()
    assert (info.generation, info.generation_source) == (ApiGeneration.V3, "configured")
    assert not v3.calls_to("GET", "/api/public/v2/observations")
    assert len(v3.calls_to("GET", "/api/public/traces")) == 1


async def test_an_old_server_answer_without_newer_fields_is_read(
    make_langfuse: MakeLangfuse, make_client: MakeClient
) -> None:
    """2.95 sends projects without ``organization``/``metadata``, which the package's v5 models require."""
    make_langfuse("2.95.12")
    client = make_client()
    info = await client.connect()
    assert (info.project_id, info.generation) == (PROJECT_ID, ApiGeneration.V3)
    assert client.capabilities.is_v2 and not client.capabilities.run_scores


async def test_reads_before_connect_are_refused(make_client: MakeClient) -> None:
    client = make_client()
    with pytest.raises(LangfuseError, match="connect"):
        _ = client.reads


def test_missing_credentials_name_the_variables() -> None:
    with pytest.raises(ConfigError, match="LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY"):
        LangfuseClient(make_settings(secret_key=None))
