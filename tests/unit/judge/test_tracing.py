"""Judge calls recorded in Langfuse over OpenTelemetry, checked against a loopback OTLP/HTTP receiver."""

from __future__ import annotations

import base64
import gzip
import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.support.clocks import SleepRecorder
from tests.support.judge import ScriptedLLM, booking_sample, make_metric, provider, verdict
from trace_scorer.config.settings import Settings
from trace_scorer.judge import build_judge
from trace_scorer.metrics.aspect_critic import AspectCritic
from trace_scorer.metrics.base import Score

OTEL_PATH = "/api/public/otel/v1/traces"


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


class OtlpReceiver:
    """Collects the spans POSTed to Langfuse's OTLP endpoint, with the request headers."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.paths.append(self.path)
                receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                request = ExportTraceServiceRequest.FromString(body)
                for resource_spans in request.resource_spans:
                    resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                    for scope_spans in resource_spans.scope_spans:
                        for span in scope_spans.spans:
                            receiver.spans.append(
                                {
                                    "name": span.name,
                                    "trace_id": span.trace_id.hex(),
                                    "span_id": span.span_id.hex(),
                                    "parent_id": span.parent_span_id.hex(),
                                    "attributes": {a.key: _value(a.value) for a in span.attributes},
                                    "resource": resource,
                                }
                            )
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def by_type(self, observation_type: str) -> list[dict[str, Any]]:
        return [s for s in self.spans if s["attributes"].get("langfuse.observation.type") == observation_type]


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    otlp = OtlpReceiver()
    otlp.thread.start()
    yield otlp
    otlp.server.shutdown()
    otlp.server.server_close()


def traced_settings(receiver: OtlpReceiver, public_key: str, **judge: Any) -> Settings:
    return Settings(
        langfuse={"base_url": receiver.url, "public_key": public_key, "secret_key": "sk-lf-test"},
        providers=[provider("p", "a", "b", prices={"a": {"input": 1.0, "output": 2.0}})],
        judge=judge,
    )


async def test_judge_calls_arrive_as_generations(
    llm: ScriptedLLM, receiver: OtlpReceiver, sleeps: SleepRecorder
) -> None:
    llm.on("a", '{"reasoning": "x", "verdict": "maybe"}', verdict(1, "says Monday"))
    llm.on("b", verdict(0, "no date"))
    # Langfuse keeps one exporter per public key per process: a fresh key per test
    public_key = f"pk-lf-{uuid.uuid4().hex}"
    judge = build_judge(
        traced_settings(receiver, public_key), tracing_default=True, environ={"P_KEY": "k"}, sleep=sleeps
    )
    assert judge is not None
    metric = make_metric(AspectCritic, judge, "has_date", definition="Contains a date")

    outcome = await metric.score(booking_sample(trace_id="scored-trace-1"), {})
    await judge.aclose()  # flushes the spans

    assert isinstance(outcome, Score) and outcome.value == 0.5
    assert receiver.paths and set(receiver.paths) == {OTEL_PATH}
    auth = base64.b64decode(receiver.headers[0]["authorization"].removeprefix("Basic ")).decode()
    assert auth == f"{public_key}:sk-lf-test"

    (root,) = receiver.by_type("evaluator")
    generations = receiver.by_type("generation")
    assert len(generations) == 3  # a: invalid then valid, b: one
    trace_id = outcome.details["judge_trace_id"]
    assert root["trace_id"] == trace_id and root["name"] == "has_date"
    assert json.loads(root["attributes"]["langfuse.observation.metadata.scored_trace_id"]) == "scored-trace-1"
    assert json.loads(root["attributes"]["langfuse.observation.output"]) == {
        "value": 0.5,
        "comment": outcome.comment,
    }
    for span in [root, *generations]:
        assert span["attributes"]["langfuse.environment"] == "trace-scorer"
        assert span["trace_id"] == trace_id
    for generation in generations:
        attributes = generation["attributes"]
        assert generation["parent_id"] == root["span_id"]
        assert json.loads(attributes["langfuse.observation.usage_details"]) == {"input": 100, "output": 20}
        prompt = json.loads(attributes["langfuse.observation.input"])
        assert prompt[0]["role"] == "system" and "Contains a date" in prompt[1]["content"]
        assert json.loads(attributes["langfuse.observation.model.parameters"])["temperature"] == 0.0
    models = sorted(g["attributes"]["langfuse.observation.model.name"] for g in generations)
    assert models == ["a", "a", "b"]
    outputs = sorted(g["attributes"]["langfuse.observation.output"] for g in generations)
    assert outputs == sorted(
        ['{"reasoning": "x", "verdict": "maybe"}', verdict(1, "says Monday"), verdict(0, "no date")]
    )
    invalid = [g for g in generations if "langfuse.observation.metadata.invalid" in g["attributes"]]
    assert len(invalid) == 1 and "verdict" in invalid[0]["attributes"]["langfuse.observation.metadata.invalid"]
    priced = [g for g in generations if g["attributes"]["langfuse.observation.model.name"] == "a"]
    for generation in priced:
        cost = json.loads(generation["attributes"]["langfuse.observation.cost_details"])
        assert cost["total"] == pytest.approx((100 * 1.0 + 20 * 2.0) / 1e6)
    assert not any("langfuse.observation.cost_details" in g["attributes"] for g in generations if g not in priced)


async def test_failed_calls_are_recorded_as_errors(
    llm: ScriptedLLM, receiver: OtlpReceiver, sleeps: SleepRecorder
) -> None:
    from tests.support.judge import error

    llm.on("a", error(401, "invalid key"))
    llm.on("b", error(401, "invalid key"))
    judge = build_judge(
        traced_settings(receiver, f"pk-lf-{uuid.uuid4().hex}", tracing=True),
        environ={"P_KEY": "k"},
        sleep=sleeps,
    )
    assert judge is not None
    outcome = await make_metric(AspectCritic, judge, definition="x").score(booking_sample(), {})
    await judge.aclose()
    (root,) = receiver.by_type("evaluator")
    assert outcome.details["judge_trace_id"] == root["trace_id"]
    assert "all 2 judge models failed" in json.loads(root["attributes"]["langfuse.observation.output"])["failed"]
    generations = receiver.by_type("generation")
    assert len(generations) == 2
    for generation in generations:
        assert generation["attributes"]["langfuse.observation.level"] == "ERROR"
        assert "HTTP 401" in generation["attributes"]["langfuse.observation.status_message"]


async def test_tracing_off_by_default_offline(llm: ScriptedLLM, receiver: OtlpReceiver) -> None:
    llm.on("a", verdict(1))
    llm.on("b", verdict(1))
    judge = build_judge(traced_settings(receiver, f"pk-lf-{uuid.uuid4().hex}"), environ={"P_KEY": "k"})
    assert judge is not None
    outcome = await make_metric(AspectCritic, judge, definition="x").score(booking_sample(), {})
    await judge.aclose()
    assert isinstance(outcome, Score) and "judge_trace_id" not in outcome.details
    assert receiver.spans == []


async def test_a_categorical_judge_trace_shows_the_category(
    llm: ScriptedLLM, receiver: OtlpReceiver, sleeps: SleepRecorder
) -> None:
    from trace_scorer.metrics.llm_judge import LLMJudge
    from trace_scorer.sample import Sample

    llm.on("a", json.dumps({"reasoning": "kind words", "score": "warm"}))
    llm.on("b", json.dumps({"reasoning": "polite", "score": "warm"}))
    public_key = f"pk-lf-{uuid.uuid4().hex}"
    judge = build_judge(
        traced_settings(receiver, public_key), tracing_default=True, environ={"P_KEY": "k"}, sleep=sleeps
    )
    assert judge is not None
    metric = make_metric(
        LLMJudge,
        judge,
        "tone",
        prompt="{{output}}",
        output={"data_type": "CATEGORICAL", "categories": ["cold", "warm"]},
    )
    sample = Sample(id="s", trace_id="scored-trace-2", variables={"$.trace.output": "Thanks so much!"})
    outcome = await metric.score(sample, {})
    await judge.aclose()

    assert isinstance(outcome, Score) and (outcome.label, outcome.value) == ("warm", 1.0)
    (root,) = receiver.by_type("evaluator")
    assert json.loads(root["attributes"]["langfuse.observation.output"]) == {
        "value": "warm",
        "comment": outcome.comment,
    }
    assert len(receiver.by_type("generation")) == 2
