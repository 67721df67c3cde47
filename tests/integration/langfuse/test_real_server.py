"""What real Langfuse servers do that the API's description does not say (docs/langfuse.md;
standins/langfuse_profile.py): several roots per trace, filters a server ignores, flattened metadata,
422 on heavy reads — each read the way the worker needs it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import langfuse_factories as f
from tests.support.langfuse_client import MakeClient
from tests.support.langfuse_factories import at
from tests.support.langfuse_inprocess import InProcessLangfuse, MakeLangfuse
from trace_scorer.config.references import ReferenceSettings
from trace_scorer.config.settings import Settings
from trace_scorer.extract.model import Notes
from trace_scorer.extract.references import read_references
from trace_scorer.langfuse import ApiGeneration, LangfuseHTTPError, TimeWindow, TraceFilter, TraceRoot
from trace_scorer.langfuse.reads.filters import metadata_value
from trace_scorer.langfuse.reads.v4 import MIN_PAGE_SIZE, V4Reader
from trace_scorer.worker.service import reference_metadata_keys

OBS = ("GET", "/api/public/v2/observations")
WINDOW = TimeWindow(at(0), at(3600))


def root(trace: str, start: float, obs: str | None = None, **kw: Any) -> dict[str, Any]:
    kw.setdefault("end", at(start + 5))
    return f.observation(obs or f"{trace}-root", trace, at(start), root=True, type="AGENT", name="agent", **kw)


async def roots_of(client: Any, trace_filter: TraceFilter | None = None) -> list[TraceRoot]:
    return [r async for r in client.reads.list_trace_roots(WINDOW, trace_filter or TraceFilter())]


async def test_a_trace_with_several_root_rows_comes_once_as_its_earliest_root(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    """``isRootObservation`` is ``parent = '' OR is_app_root``: one trace can have several root rows.
    One TraceRoot per trace, the earliest, whatever the page boundaries."""
    v4.add_rows(
        root("t1", 100, "t1-main", end=at(160)),
        root("t1", 130, "t1-second", end=at(140)),  # a second parentless span, later
        root("t2", 200),
        root("t1", 100, "t1-also-at-100", end=at(150)),  # same start: the smaller id wins
    )
    for page_size in (1, 2, 1000):
        roots = await roots_of(make_client(ApiGeneration.V4, page_size=page_size))
        assert [(r.trace_id, r.observation_id) for r in roots] == [("t2", "t2-root"), ("t1", "t1-also-at-100")]


@pytest.mark.parametrize("version", ["3.110.0", "2.95.12"])
async def test_conditions_a_server_ignores_are_checked_on_our_side(
    make_langfuse: MakeLangfuse, make_client: MakeClient, version: str
) -> None:
    """v3 < 3.116.1 drops ``filter`` and 2.x ignores environment and metadata conditions: a trace that
    should be excluded must not be scored anyway."""
    legacy = make_langfuse(version)
    legacy.add_rows(
        root("keep", 10, environment="production", metadata={"tenant": "acme"}),
        root("judge", 20, environment="trace-scorer", metadata={"tenant": "acme"}),
        root("other-tenant", 30, environment="production", metadata={"tenant": "globex"}),
    )
    trace_filter = TraceFilter(exclude_environments=("trace-scorer",), metadata={"tenant": "acme"})
    roots = await roots_of(make_client(ApiGeneration.V3, version=version), trace_filter)
    assert [r.trace_id for r in roots] == ["keep"]
    assert len(legacy.calls_to("GET", "/api/public/traces")) == 1  # one page, filtered on our side


@pytest.mark.parametrize(
    "metadata",
    [
        {"release": {"channel": "beta"}},  # nested (as sent)
        {"release.channel": "beta"},  # flattened to dotted keys (v4)
        {"release": '{"channel": "beta"}'},  # nested as JSON text
    ],
)
def test_a_nested_metadata_filter_matches_every_shape_langfuse_returns(metadata: dict[str, Any]) -> None:
    assert metadata_value(metadata, "release.channel") == "beta"
    assert metadata_value(metadata, "release.other") is None


@pytest.mark.parametrize(
    "trace_metadata",
    [
        {"golden": {"answer": "Tokyo: 18 °C", "strict": True}},
        {"golden.answer": "Tokyo: 18 °C", "golden.strict": True},  # v4 observations: parsed leaves
        {"golden.answer": "Tokyo: 18 °C", "golden.strict": "true"},  # v4 experiments: string leaves
    ],
)
def test_references_read_nested_and_flattened_metadata_alike(trace_metadata: dict[str, Any]) -> None:
    settings = ReferenceSettings(
        expected=["$.trace.metadata.golden.answer"], tool_sequence_matters=["$.trace.metadata.golden.strict"]
    )
    notes = Notes()
    found, _ = read_references({"trace": {"metadata": trace_metadata}}, settings, notes)
    assert found == {"expected": "Tokyo: 18 °C", "tool_sequence_matters": True}
    assert not notes.as_list()


def test_expand_metadata_names_the_flattened_keys_too() -> None:
    settings = Settings.model_validate(
        {
            "targets": [
                {
                    "name": "agent",
                    "metrics": [{"metric": "rouge"}],
                    "references": {"expected": ["$.trace.metadata.golden.answer", "$.expectedOutput"]},
                }
            ]
        }
    )
    keys = reference_metadata_keys(settings)
    assert keys[:2] == ["golden", "golden.answer"] and len(keys) == len(set(keys))


async def test_a_read_too_heavy_for_langfuse_halves_the_page_and_goes_on(
    make_langfuse: MakeLangfuse, make_client: MakeClient
) -> None:
    """422 (ClickHouse memory/time limit) on a page: the same cursor again with half the rows, and the
    smaller size kept — never the same failing read again."""
    v4 = make_langfuse("4.60.0", heavy_read_limit=10)  # a read with I/O of more than 10 rows is too heavy
    v4.add_rows(*[root(f"t{n}", 100 + n) for n in range(10)])
    client = make_client(ApiGeneration.V4, page_size=40)
    roots = await roots_of(client)
    assert len(roots) == 10
    assert [c.status for c in v4.calls_to(*OBS)] == [422, 422, 200]
    limits = [c.request.url.params["limit"] for c in v4.calls_to(*OBS)]
    assert limits == ["40", "20", "10"]
    assert isinstance(client.reads, V4Reader) and client.reads.page_size == 10
    await roots_of(client)
    assert v4.calls_to(*OBS)[-1].request.url.params["limit"] == "10"


async def test_a_read_still_too_heavy_at_the_smallest_page_is_raised(
    make_langfuse: MakeLangfuse, make_client: MakeClient
) -> None:
    v4 = make_langfuse("4.60.0", heavy_read_limit=MIN_PAGE_SIZE - 1)
    with pytest.raises(LangfuseHTTPError, match="422"):
        await roots_of(make_client(ApiGeneration.V4, page_size=MIN_PAGE_SIZE * 2))
    assert {c.status for c in v4.calls_to(*OBS)} == {422}
