"""Sessions on the stand-in, as real servers serve them (behaviour reference §7): chat sessions across
traces, ``GET /sessions/{id}`` on 2.95 and a 404 on 4.x ``events_only``, v4 observations filtered by
``sessionId``, session scores accepted on 4.16 (ingestion and ``POST /scores``) and read back through
``/v3/scores?sessionId=``, refused on 2.95 (``traceId`` required). Plain httpx: these hold whatever the
adapter does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from standins.generate import Corpus
from tests.support.langfuse_client import MakeClient
from tests.support.standin_fixtures import StartLangfuse
from tests.support.standins import END, small_scenario

END_TIME = datetime.fromisoformat(END)


def http(lf: Any) -> httpx.Client:
    return httpx.Client(base_url=lf.url, auth=(lf.public_key, lf.secret_key), timeout=10)


def z(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def scenario() -> Any:
    return small_scenario(traces=24, session_turns=4, duplicate_rate=0.0, datasets=())


def score(session_id: str, name: str = "latency", **extra: Any) -> dict[str, Any]:
    return {"id": f"s-{session_id}-{name}", "sessionId": session_id, "name": name, "value": 1.5, **extra}


def test_generated_chat_sessions_group_consecutive_turns() -> None:
    sessions = Corpus(scenario()).expected_sessions()
    assert len(sessions) == 6 and all(len(traces) == 4 for traces in sessions.values())


def test_2_95_serves_a_session_with_its_traces_and_4_16_answers_404(start_lf: StartLangfuse) -> None:
    sessions = Corpus(scenario()).expected_sessions()
    session_id, trace_ids = next(iter(sessions.items()))
    old = start_lf(version="2.95.12", scenario=scenario())
    with http(old) as client:
        answer = client.get(f"/api/public/sessions/{session_id}")
        assert answer.status_code == 200, answer.text
        assert [t["id"] for t in answer.json()["traces"]] == trace_ids
        assert client.get("/api/public/sessions/no-such-session").status_code == 404
    new = start_lf(version="4.16.0", scenario=scenario())
    with http(new) as client:
        answer = client.get(f"/api/public/sessions/{session_id}")
        assert answer.status_code == 404 and "events_only" in answer.text


def test_v4_observations_filter_on_session_id(start_lf: StartLangfuse) -> None:
    sessions = Corpus(scenario()).expected_sessions()
    session_id, trace_ids = next(iter(sessions.items()))
    lf = start_lf(version="4.16.0", scenario=scenario())
    window = {"fromStartTime": z(END_TIME - timedelta(days=1)), "toStartTime": z(END_TIME + timedelta(hours=1))}
    with http(lf) as client:
        answer = client.get(
            "/api/public/v2/observations",
            params={**window, "sessionId": session_id, "isRootObservation": "true", "fields": "core,basic"},
        )
        assert answer.status_code == 200, answer.text
        rows = answer.json()["data"]
    assert sorted({r["traceId"] for r in rows}) == sorted(trace_ids)
    assert {r["sessionId"] for r in rows} == {session_id}


def test_4_16_takes_session_scores_and_reads_them_back_by_session(start_lf: StartLangfuse) -> None:
    lf = start_lf(version="4.16.0", scenario=scenario())
    at = z(END_TIME)
    with http(lf) as client:
        event = {"id": "e1", "type": "score-create", "timestamp": at, "body": score("chat-a")}
        answer = client.post("/api/public/ingestion", json={"batch": [event]})
        assert answer.status_code == 207 and answer.json()["successes"], answer.text
        answer = client.post("/api/public/scores", json={**score("chat-b"), "timestamp": at})
        assert answer.status_code == 200, answer.text
        read = client.get("/api/public/v3/scores", params={"sessionId": "chat-a"})
        assert read.status_code == 200, read.text
        assert [s["id"] for s in read.json()["data"]] == ["s-chat-a-latency"]


def test_2_95_refuses_a_score_without_trace_id_per_event(start_lf: StartLangfuse) -> None:
    lf = start_lf(version="2.95.12", scenario=scenario())
    at = z(END_TIME)
    trace_id = next(iter(Corpus(scenario()).expected_sessions().values()))[0]
    with http(lf) as client:
        batch = [
            {"id": "e1", "type": "score-create", "timestamp": at, "body": score("chat-a")},
            {
                "id": "e2",
                "type": "score-create",
                "timestamp": at,
                "body": {**score("x"), "sessionId": None, "traceId": trace_id},
            },
        ]
        answer = client.post("/api/public/ingestion", json={"batch": batch})
        assert answer.status_code == 207, answer.text
        body = answer.json()
        assert [e["id"] for e in body["errors"]] == ["e1"] and body["errors"][0]["status"] == 400
        assert "traceId" in str(body["errors"][0])
        assert [s["id"] for s in body["successes"]] == ["e2"]


@pytest.mark.parametrize("version", ["4.16.0", "2.95.12"])
async def test_check_tries_the_session_listing_and_finds_it_served(
    start_lf: StartLangfuse, client_for: MakeClient, version: str
) -> None:
    from trace_scorer.config.settings import Settings
    from trace_scorer.config.targets import TargetSettings
    from trace_scorer.worker.commands import target_problems

    lf = start_lf(version=version, scenario=scenario())
    client = client_for(lf)
    await client.connect()
    target = TargetSettings.model_validate({"name": "chats", "scope": "session", "metrics": [{"metric": "latency"}]})
    settings = Settings.model_validate({"targets": [target.model_dump()]})
    before = lf.count("GET /api/public/v2/observations") + lf.count("GET /api/public/traces")
    assert await target_problems(client, target, settings, END_TIME) == []
    after = lf.count("GET /api/public/v2/observations") + lf.count("GET /api/public/traces")
    assert after - before == 2  # the window's traces, then a session's


def test_a_generated_turn_resends_the_earlier_turns_and_a_session_sample_reads_each_once() -> None:
    import json

    from standins.langfuse_query import project
    from trace_scorer.extract import extract_session
    from trace_scorer.langfuse.reads.v4 import BODY_FIELDS

    chat = small_scenario(traces=8, session_turns=4, duplicate_rate=0.0, datasets=(), formats=("openai_chat",))
    corpus = Corpus(chat)
    session_id, trace_ids = next(iter(corpus.expected_sessions().items()))
    rendered = []
    for trace_id in trace_ids:
        header = corpus.find(trace_id)
        assert header is not None
        rendered.append(corpus.render(header))
    questions = [r.task.question for r in rendered if r.task is not None]
    assert len(questions) == 4
    # The third turn's first generation sends the first two turns (question and answer) after the system prompt.
    third = next(json.loads(row.row["input"]) for row in rendered[2].records if row.row["type"] == "GENERATION")
    users = [m["content"] for m in third["messages"] if m["role"] == "user"]
    assert users == questions[:3]

    rows = [project(record.row, BODY_FIELDS) for r in rendered for record in r.records]
    sample = extract_session(rows, session_id=session_id)
    assert sample.messages is not None
    assert [m.content for m in sample.messages if m.role == "user"] == questions
    last = rendered[-1].task
    assert last is not None and sample.response == (last.answer or "")


def test_2_95_lists_sessions_by_creation_and_4_16_answers_404(start_lf: StartLangfuse) -> None:
    sessions = Corpus(scenario()).expected_sessions()
    old = start_lf(version="2.95.12", scenario=scenario())
    window = {"fromTimestamp": z(END_TIME - timedelta(days=1)), "toTimestamp": z(END_TIME + timedelta(hours=1))}
    with http(old) as client:
        answer = client.get("/api/public/sessions", params={**window, "limit": 4})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["meta"]["totalItems"] == len(sessions) and body["meta"]["totalPages"] == 2
        second = client.get("/api/public/sessions", params={**window, "limit": 4, "page": 2}).json()
        listed = [s["id"] for s in body["data"] + second["data"]]
        assert listed == list(reversed(list(sessions)))  # newest first
    new = start_lf(version="4.16.0", scenario=scenario())
    with http(new) as client:
        answer = client.get("/api/public/sessions", params=window)
        assert answer.status_code == 404 and "events_only" in answer.text
