"""Score configs as real servers keep them: listed newest first, names not unique, 2.x ranges exclusive."""

from __future__ import annotations

import asyncio
import json

import structlog

from standins.http import Request
from tests.support import langfuse_factories as f
from tests.support.langfuse_client import SECRET, MakeClient
from tests.support.langfuse_factories import Reply, at
from tests.support.langfuse_inprocess import InProcessLangfuse, MakeLangfuse
from trace_scorer.langfuse import ApiGeneration, ScoreConfigSpec, ScoreSubject, ScoreToPost
from trace_scorer.langfuse.server.capabilities import ServerCapabilities
from trace_scorer.langfuse.types import ScoreConfig

CREATE = ("POST", "/api/public/score-configs")


async def test_the_oldest_active_config_of_a_name_is_used_whatever_the_list_order(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    """Finding 9: names are not unique and Langfuse lists newest first; the choice must not depend on it."""
    older = f.score_config("cfg-b", "accuracy", min_value=0, max_value=1, created=at(10))
    newer = f.score_config("cfg-a", "accuracy", min_value=0, max_value=100, created=at(20))
    archived = f.score_config("cfg-0", "accuracy", archived=True, created=at(1))
    for configs in ([older, newer, archived], [newer, archived, older]):
        v4.configs.clear()
        for config in configs:
            v4.add_score_config(config)
        client = make_client()
        chosen = await client.score_configs.ensure([ScoreConfigSpec("accuracy")])
        assert chosen["accuracy"].id == "cfg-b"
    same_time = f.score_config("cfg-c", "accuracy", created=at(10))
    v4.add_score_config(same_time)
    chosen = await make_client().score_configs.ensure([ScoreConfigSpec("accuracy")])
    assert chosen["accuracy"].id == "cfg-b"  # same createdAt: the smaller id


async def test_replicas_creating_a_config_together_converge_on_one(
    make_langfuse: MakeLangfuse, make_client: MakeClient
) -> None:
    """Finding 9: no unique name; two replicas may both create, then both must use the same config."""
    replicas = ("pk-lf-replica-1", "pk-lf-replica-2")  # one project, an API key each
    v4 = make_langfuse(more_keys=tuple((replica, SECRET) for replica in replicas))
    listed_before: set[str] = set()

    async def racing(request: Request, params: dict[str, str]) -> Reply:
        # Each replica's first list happens before the other one created anything.
        replica = request.header("x-langfuse-public-key")
        if replica not in listed_before:
            listed_before.add(replica)
            return Reply(200, f.score_configs_page([]))
        return await v4.standin_answer(request)

    v4.on("GET", "/api/public/score-configs", racing)
    first, second = (make_client(public_key=replica) for replica in replicas)
    spec = [ScoreConfigSpec("accuracy")]
    a, b = await asyncio.gather(first.score_configs.ensure(spec), second.score_configs.ensure(spec))
    assert len(v4.calls_to(*CREATE)) == 2 and len(v4.configs) == 2  # both created one (the race) ...
    assert a["accuracy"].id == b["accuracy"].id == "cfg-1"  # ... and both use the oldest


async def test_config_lists_are_read_for_the_fields_needed(v4: InProcessLangfuse, make_client: MakeClient) -> None:
    """Finding 13 / 2.x: an answer without fields the package's models require is not a failure."""
    config = {
        "id": "cfg-1",
        "name": "accuracy",
        "dataType": "NUMERIC",
        "isArchived": False,
        "minValue": 0,
        "maxValue": 1,
        "createdAt": f.iso(at(0)),
    }  # no projectId, updatedAt, categories, description
    page = {"data": [config], "meta": {"page": 1, "limit": 100, "totalItems": 1, "totalPages": 1}}
    v4.on("GET", "/api/public/score-configs", Reply(200, page, unchecked="an older server's shape"))
    chosen = await make_client().score_configs.ensure([ScoreConfigSpec("accuracy")])
    assert chosen["accuracy"].id == "cfg-1" and not v4.calls_to(*CREATE)


async def test_on_langfuse_2_numeric_configs_are_created_without_a_range(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    """2.x ranges are exclusive (a 0..1 config rejects 0 and 1): create NUMERIC configs without one."""
    client = make_client()
    client.score_configs.capabilities = ServerCapabilities.from_version("2.95.12")
    with structlog.testing.capture_logs() as logs:
        await client.score_configs.ensure([ScoreConfigSpec("accuracy")])
        again = await client.score_configs.ensure([ScoreConfigSpec("accuracy")])
    body = json.loads(v4.calls_to(*CREATE)[0].request.content)
    assert body == {"name": "accuracy", "dataType": "NUMERIC"}
    assert (again["accuracy"].min_value, again["accuracy"].max_value) == (None, None)
    assert len(v4.calls_to(*CREATE)) == 1
    assert not [e for e in logs if e["event"] == "langfuse.score_config.range_differs"]

    other = make_client()  # 3.x and later: bounds inclusive, the range is set
    await other.score_configs.ensure([ScoreConfigSpec("rouge")])
    body = json.loads(v4.calls_to(*CREATE)[1].request.content)
    assert (body["minValue"], body["maxValue"]) == (0.0, 1.0)


async def test_on_2x_a_value_on_a_range_bound_is_posted_unlinked_not_lost(
    make_langfuse: MakeLangfuse, make_client: MakeClient
) -> None:
    """2.x rejects a value equal to an existing config's min or max: such a score goes without
    ``configId`` (stored, not lost); values inside the range keep their config."""
    v2 = make_langfuse("2.95.12")
    v2.add_score_config(f.score_config("cfg-1", "accuracy", min_value=0.0, max_value=1.0))
    client = make_client(ApiGeneration.V3, version="2.95.12")
    client.configs["accuracy"] = ScoreConfig("cfg-1", "accuracy", "NUMERIC", 0.0, 1.0)
    scores = [ScoreToPost(ScoreSubject.trace(f"t{v}"), "accuracy", v, at(0)) for v in (0.0, 0.5, 1.0)]
    report = await client.post_scores(scores)
    assert len(report.accepted) == 3 and len(v2.scores) == 3
    events = json.loads(v2.calls_to("POST", "/api/public/ingestion")[0].request.content)["batch"]
    assert [e["body"].get("configId") for e in events] == [None, "cfg-1", None]
