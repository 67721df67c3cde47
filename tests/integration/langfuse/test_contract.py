"""The contract itself: it must catch what breaks Langfuse's API, and every route the adapter uses must
have been exercised under it, on both API generations."""

from __future__ import annotations

import json
from typing import Any

import pytest

from standins.contract import OPERATIONS, Contract, ContractViolation, get_contract
from tests.support import langfuse_factories as f
from tests.support.langfuse_client import MakeClient
from tests.support.langfuse_factories import at
from tests.support.langfuse_inprocess import InProcessLangfuse
from trace_scorer.langfuse import (
    ApiGeneration,
    LangfuseError,
    ScoreConfigSpec,
    ScoreSubject,
    ScoreToPost,
    TimeWindow,
    TraceFilter,
)
from trace_scorer.langfuse.http import endpoints as ep

URL = "https://langfuse.test"


@pytest.fixture
def contract() -> Contract:
    return get_contract()


# --- the contract module ---------------------------------------------------------------------------


def test_every_operation_has_one_entry_and_a_model_for_each_answer() -> None:
    keys = [operation.key for operation in OPERATIONS]
    assert len(keys) == len(set(keys))
    for operation in OPERATIONS:
        assert operation.answers, operation.key
        assert all(model is not None for model in operation.answers.values()), operation.key


def test_nullable_fields_accept_null_and_types_are_exact(contract: Contract) -> None:
    run_item = {
        "id": "ri",
        "datasetRunId": "r",
        "datasetRunName": "n",
        "datasetItemId": "i",
        "traceId": "t",
        "observationId": None,
        "createdAt": "2026-10-01T00:00:00Z",
        "updatedAt": "2026-10-01T00:00:00Z",
    }
    page = {"data": [run_item], "meta": {"page": 1, "limit": 50, "totalItems": 1, "totalPages": 1}}
    contract.check_response("GET", "/api/public/dataset-run-items", 200, page)
    with pytest.raises(ContractViolation, match="traceId"):
        contract.check_response(
            "GET", "/api/public/dataset-run-items", 200, {**page, "data": [{**run_item, "traceId": 7}]}
        )


#: A score-create ingestion event that keeps the contract.
EVENT = {"id": "e", "type": "score-create", "timestamp": "2026-10-01T00:00:00Z", "body": {"name": "a", "value": 1}}


def test_a_valid_ingestion_event_and_repeated_list_parameters_pass(contract: Contract) -> None:
    contract.check_request("POST", URL + "/api/public/ingestion", {"batch": [EVENT]})
    contract.check_request("GET", URL + "/api/public/traces?tags=a&tags=b&environment=x&environment=y")


@pytest.mark.parametrize(
    ("method", "url", "body", "complaint"),
    [
        ("GET", "/api/public/v2/observation", None, "no such operation"),
        ("DELETE", "/api/public/v2/observations", None, "no such operation"),
        ("GET", "/api/public/v2/observations?limit=many", None, "integer"),
        ("GET", "/api/public/v2/observations?isRootObservation=yes", None, "boolean"),
        ("GET", "/api/public/v2/observations?fromStartTime=2026-10-01", None, "date-time"),
        ("GET", "/api/public/v2/observations?fromStartTime=2026-10-01T00:00:00", None, "date-time"),
        ("GET", "/api/public/v2/observations?orderBy=startTime", None, "not a parameter of the operation"),
        ("GET", "/api/public/v2/observations?limit=1&limit=2", None, "given 2 times"),
        ("GET", "/api/public/v2/observations?level=LOUD", None, "LOUD"),
        (
            "GET",
            "/api/public/v2/observations?filter=%5B%7B%22column%22%3A%22x%22%7D%5D",
            None,
            "needs a string",
        ),
        ("GET", "/api/public/experiments?datasetId=ds", None, "required query parameter 'fromStartTime'"),
        ("GET", "/api/public/dataset-run-items?datasetId=ds", None, "runName"),
        ("POST", "/api/public/scores", {"name": "a", "value": 1}, "non-empty JSON list"),
        ("POST", "/api/public/scores", [{"value": 1}], "name: Field required"),
        ("POST", "/api/public/scores", [{"name": "a", "value": {"x": 1}}], "value"),
        ("POST", "/api/public/ingestion", {"events": []}, "batch: Field required"),
        ("GET", "/api/public/health", {"unexpected": "body"}, "takes no body"),
        ("POST", "/api/public/scores", [{"name": "a", "value": 1, "traceId": 7}], "trace_id"),
        ("POST", "/api/public/scores", [{"name": "a", "value": "1", "timestamp": "2026-10-01T00:00:00"}], "date-time"),
        ("POST", "/api/public/score-configs", {"name": "a", "dataType": "NUMERIC", "minValue": "0"}, "min_value"),
        ("POST", "/api/public/score-configs", {"name": "a", "dataType": "PERCENT"}, "data_type"),
        ("POST", "/api/public/ingestion", {"batch": [{**EVENT, "body": {"name": "a"}}]}, "batch\\[0\\].body: .*value"),
        ("POST", "/api/public/ingestion", {"batch": [{**EVENT, "type": "score-made"}]}, "batch/0/type"),
        ("POST", "/api/public/ingestion", {"batch": [{**EVENT, "timestamp": "now"}]}, "batch/0/timestamp"),
        ("GET", "/api/public/dataset-run-items?datasetId=ds&runName=r&page=x", None, "integer"),
        ("GET", "/api/public/traces?tags=a&tags=b&userId=u&userId=v", None, "'userId' given 2 times"),
    ],
)
def test_requests_that_break_the_contract_are_caught(
    contract: Contract, method: str, url: str, body: object, complaint: str
) -> None:
    with pytest.raises(ContractViolation, match=complaint):
        contract.check_request(method, URL + url, body)


@pytest.mark.parametrize(
    ("method", "template", "status", "body", "complaint"),
    [
        ("GET", "/api/public/v2/observations", 200, {"data": [{"id": "o"}]}, "ObservationsV2Response"),
        ("GET", "/api/public/experiment-items", 200, {"data": [{"id": "i"}], "meta": {}}, "trace_id"),
        ("POST", "/api/public/scores", 200, {"message": "Accepted"}, "not an answer of this operation"),
        ("POST", "/api/public/scores", 207, {"accepted": 1}, "rejected"),
        (
            "GET",
            "/api/public/traces",
            200,
            {"data": [{"id": "t"}], "meta": {"page": 1, "limit": 1, "totalItems": 1, "totalPages": 1}},
            "timestamp",
        ),
        ("POST", "/api/public/ingestion", 200, {"successes": [], "errors": []}, "not an answer of this operation"),
        ("GET", "/api/public/health", 500, "Internal Server Error", "string 'message'"),
        (
            "GET",
            "/api/public/dataset-run-items",
            200,
            {"data": [], "meta": {"page": "1", "limit": 50, "totalItems": 0, "totalPages": 0}},
            "meta/page",
        ),
        (
            "GET",
            "/api/public/datasets/{datasetName}/runs",
            200,
            {
                "data": [
                    {
                        "id": "r",
                        "name": "n",
                        "description": None,
                        "metadata": None,
                        "datasetId": "d",
                        "datasetName": "ds",
                        "createdAt": "yesterday",
                        "updatedAt": "2026-10-01T00:00:00Z",
                    }
                ],
                "meta": {"page": 1, "limit": 50, "totalItems": 1, "totalPages": 1},
            },
            "data/0/createdAt",
        ),
        ("POST", "/api/public/scores", 200, {"id": "s"}, "not an answer of this operation"),
    ],
)
def test_answers_that_break_the_contract_are_caught(
    contract: Contract, method: str, template: str, status: int, body: object, complaint: str
) -> None:
    with pytest.raises(ContractViolation, match=complaint):
        contract.check_response(method, template, status, body)


def test_every_v4_endpoint_is_modelled_by_the_package_and_every_legacy_one_by_ours(
    contract: Contract,
) -> None:
    for endpoint in ep.ALL:
        operation = contract.routes.by_template(endpoint.method, endpoint.path)
        assert operation.package is not endpoint.legacy, endpoint


async def test_the_stand_in_refuses_an_answer_outside_the_contract(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    v4.on("GET", "/api/public/projects", f.Reply(200, {"data": [{"id": "p"}]}))  # no name, no organization
    with pytest.raises(LangfuseError, match="violates the contract"):
        await make_client().connect()
    (violation,) = v4.app.violations
    assert violation.startswith("answer: GET /api/public/projects")
    v4.app.violations.clear()  # seen: the test's point, not a failure


# --- every route the adapter uses, on both generations -------------------------------------------


#: A root every condition of :data:`FILTER` matches.
MATCHING: dict[str, Any] = {"tags": ["a"], "metadata": {"k": "v"}, "trace_name": "agent", "user_id": "u"}
FILTER = TraceFilter(
    environments=("production",),
    exclude_environments=("dev",),
    tags=("a",),
    metadata={"k": "v"},
    trace_name="agent",
    user_id="u",
)


async def _exercise(
    langfuse: InProcessLangfuse, make_client: MakeClient, generation: ApiGeneration, endpoints: tuple[ep.Endpoint, ...]
) -> None:
    """Every read and write the adapter offers (the worker's whole surface), after connecting: exactly
    ``endpoints`` are used, each request kept the contract and was answered."""
    client = make_client()
    info = await client.connect()
    assert info.generation is generation
    window = TimeWindow(at(0), at(3600))
    reads = client.reads
    roots = [r async for r in reads.list_trace_roots(window, FILTER)]
    roots += [r async for r in reads.list_trace_roots(window, TraceFilter())]
    assert roots, "the fixture data must produce roots"
    _ = [t async for t in reads.fetch_traces(roots)]
    _ = [t async for t in reads.fetch_traces(roots[:1])]
    dataset = await reads.get_dataset("bench")
    for experiment in [e async for e in reads.list_experiments([dataset], since=at(0))]:
        _ = [i async for i in reads.list_experiment_items(experiment, since=at(0))]
    await client.ensure_score_configs([ScoreConfigSpec("accuracy"), ScoreConfigSpec("fresh")])
    report = await client.post_scores(
        [
            ScoreToPost(ScoreSubject.trace(roots[0].trace_id), "accuracy", 0.5, roots[0].start_time),
            ScoreToPost(ScoreSubject.run("exp-1"), "fresh", 1.0, at(0), metadata={"config_hash": "abc"}),
        ]
    )
    assert len(report.accepted) == 2, report
    assert {(c.method, c.template) for c in langfuse.calls} == {(e.method, e.path) for e in endpoints}
    assert not langfuse.problems()
    # Every request sent was validated and answered: the stand-in checks each before answering.
    assert all(isinstance(c.status, int) and c.status < 400 for c in langfuse.calls)


async def test_every_v4_route_keeps_the_contract(v4: InProcessLangfuse, make_client: MakeClient) -> None:
    v4.add_rows(
        f.observation("r1", "t1", at(10), end=at(20), root=True, **MATCHING),
        f.observation("o1", "t1", at(11), end=at(12), parent="r1", type="TOOL"),
        f.observation("r2", "t2", at(30), end=at(40), root=True),
        f.observation("r3", "t3", at(50), end=at(55), root=True),
    )
    v4.add_dataset("ds-1", "bench")
    v4.add_dataset_item(f.dataset_item("item-2", "ds-1", "bench", expected_output="x"))
    v4.add_experiment(f.experiment("exp-1", "run", "ds-1", at(0)))
    v4.add_experiment_item(f.experiment_item("root-1", "t1", "exp-1", "run", "item-1", at(10), expected_output="y"))
    v4.add_experiment_item(f.experiment_item("root-2", "t2", "exp-1", "run", "item-2", at(30)))  # joined
    v4.add_score_config(f.score_config("cfg-1", "accuracy"))
    await _exercise(v4, make_client, ApiGeneration.V4, ep.COMMON + ep.V4_ONLY)


async def test_every_v3_route_keeps_the_contract(v3: InProcessLangfuse, make_client: MakeClient) -> None:
    v3.add_rows(
        f.observation("r1", "t1", at(10), end=at(20), **MATCHING),
        f.observation("o1", "t1", at(11), end=at(12), parent="r1", type="TOOL"),
        f.observation("r2", "t2", at(30), end=at(31)),
        f.observation("r3", "t3", at(50), end=at(55)),  # three traces in a batch: read with one bulk listing
    )
    v3.add_dataset("ds-1", "bench")
    v3.add_dataset_item(f.dataset_item("item-1", "ds-1", "bench", expected_output="x"))
    run = f.v3_dataset_run("exp-1", "run", "ds-1", "bench", at(5))
    v3.add_dataset_run(run)
    v3.add_dataset_run_item(f.v3_dataset_run_item("ri-1", run, "item-1", "t1", at(10)))
    v3.add_score_config(f.score_config("cfg-1", "accuracy"))
    # A 3.x version means legacy: no v4 endpoint is touched.
    await _exercise(v3, make_client, ApiGeneration.V3, ep.COMMON + ep.V3_ONLY)
    events = json.loads(v3.calls_to("POST", "/api/public/ingestion")[0].request.content)["batch"]
    assert {e["body"]["name"] for e in events} == {"accuracy", "fresh"}


def test_factories_refuse_payloads_the_contract_rejects() -> None:
    with pytest.raises(ContractViolation):
        f.observations_page([{"id": "o", "traceId": "t"}])  # no startTime/projectId/type
    with pytest.raises(ContractViolation):
        f.v3_dataset_runs_page([{"id": "r"}])
