"""Langfuse's evaluators read from the stand-in: managed and project ones, versions, paging, output data
types, and servers without the API (a start-up error naming the key)."""

from __future__ import annotations

import re

import pytest

from standins.langfuse_evaluators import MANAGED
from tests.support.langfuse_client import MakeClient
from tests.support.langfuse_inprocess import MakeLangfuse
from trace_scorer.config.common import ConfigError
from trace_scorer.langfuse import ApiGeneration, ServerCapabilities
from trace_scorer.langfuse.server.evaluators import EvaluatorsUnavailable, list_rules, load_evaluators

KEY = "targets[0].metrics[0].evaluator"

TONE = {
    "name": "Tone",
    "prompt": "Classify the tone of {{answer}}",
    "outputDefinition": {
        "dataType": "CATEGORICAL",
        "score": {
            "description": "the tone",
            "categories": ["friendly", "neutral", "rude"],
            "shouldAllowMultipleMatches": False,
        },
        "reasoning": {"description": "why"},
    },
    "mapping": [{"variable": "answer", "source": "output", "jsonPath": "$.text"}],
}


async def test_managed_and_project_evaluators_with_their_latest_version(
    make_langfuse: MakeLangfuse, make_client: MakeClient
) -> None:
    helpful_v1 = {
        "name": "Helpfulness",
        "prompt": "Old {{query}}",
        "outputDefinition": {"dataType": "BOOLEAN", "score": {"description": "s"}, "reasoning": {"description": "r"}},
    }
    helpful_v2 = {**helpful_v1, "prompt": "Is {{query}} answered by {{generation}}?"}
    langfuse = make_langfuse("4.16.0", evaluators=(TONE, helpful_v1, helpful_v2))
    client = make_client(ApiGeneration.V4, "4.16.0")
    loaded = await load_evaluators(
        client.transport, client.capabilities, {"Tone": KEY, "Helpfulness": KEY, "Toxicity": KEY}
    )
    tone = loaded["Tone"]
    assert tone.output.data_type == "CATEGORICAL"
    assert tone.output.categories == ("friendly", "neutral", "rude")
    assert tone.variables == ("answer",) and tone.default_paths == {"answer": ("$.trace.output.text",)}
    helpful = loaded["Helpfulness"]  # the project's own wins over the managed one of the same name
    assert (helpful.source, helpful.version, helpful.output.data_type) == ("langfuse:project", 2, "BOOLEAN")
    assert helpful.prompt == "Is {{query}} answered by {{generation}}?"
    toxicity = loaded["Toxicity"]
    assert (toxicity.source, toxicity.version, toxicity.output.data_type) == ("langfuse:managed", 1, "NUMERIC")
    assert toxicity.variables == ("query", "generation")
    assert (toxicity.output.min_value, toxicity.output.max_value) == (None, None)
    listed = [c for c in langfuse.calls if c.template == "/api/public/unstable/evaluators"]
    assert len(listed) == 1


async def test_every_page_is_read(
    make_langfuse: MakeLangfuse, make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("trace_scorer.langfuse.server.evaluators.PAGE_LIMIT", 5)
    langfuse = make_langfuse("4.16.0")
    client = make_client(ApiGeneration.V4, "4.16.0")
    last = MANAGED[-1]["name"]
    loaded = await load_evaluators(client.transport, client.capabilities, {last: KEY})
    assert loaded[last].name == last
    pages = [c for c in langfuse.calls if c.template == "/api/public/unstable/evaluators"]
    assert len(pages) == 5  # 22 evaluators, 5 a page


async def test_an_unknown_name_is_an_error_naming_the_key(make_langfuse: MakeLangfuse, make_client: MakeClient) -> None:
    make_langfuse("4.16.0")
    client = make_client(ApiGeneration.V4, "4.16.0")
    with pytest.raises(
        ConfigError, match=r"targets\[0\]\.metrics\[0\]\.evaluator: Langfuse has no evaluator named 'Helpfulnes'"
    ):
        await load_evaluators(client.transport, client.capabilities, {"Helpfulnes": KEY})


@pytest.mark.parametrize("version", ["2.95.12", "3.120.0"])
async def test_a_server_without_the_api_is_refused_by_its_version(
    version: str, make_langfuse: MakeLangfuse, make_client: MakeClient
) -> None:
    langfuse = make_langfuse(version)
    client = make_client(ApiGeneration.V3, version)
    with pytest.raises(EvaluatorsUnavailable, match=re.escape(f"{KEY}: Langfuse {version} has no")):
        await load_evaluators(client.transport, client.capabilities, {"Helpfulness": KEY})
    assert not [c for c in langfuse.calls if "unstable" in c.template]


async def test_an_unknown_version_is_asked_and_its_404_read_as_absent(
    make_langfuse: MakeLangfuse, make_client: MakeClient
) -> None:
    make_langfuse("3.120.0")
    client = make_client(ApiGeneration.V3, "3.120.0")
    unknown = ServerCapabilities(None)
    with pytest.raises(EvaluatorsUnavailable, match="does not serve /api/public/unstable/evaluation-rules"):
        await list_rules(client.transport, unknown, "import-evaluators")
