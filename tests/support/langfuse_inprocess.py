"""The Langfuse stand-in answering the tests' requests in-process: one model of Langfuse for every test.

:class:`InProcessLangfuse` mounts :class:`standins.langfuse_server.LangfuseApp` — the server the
end-to-end tests and the benchmarks run on loopback, with the behaviour of a given Langfuse version
(windows, filters, paging, field groups, score upserts, the contract on every request and answer) —
on a respx router, through :mod:`standins.inprocess`: no socket, no thread, the test's fake clock. A
test states the data the server holds (``add_rows``, ``add_experiment_item``, …) and reads what it
stores (``scores``). Beyond a server it adds only what a test needs: its own answer for a route
(``on``), faults ahead of the normal answers (``fail_next``: the stand-in's scripted faults), and a
record of the calls with the fake clock's time (``calls``).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import respx

from standins.base import Routed
from standins.contract import ContractViolation
from standins.faults import ScriptedFault
from standins.generate import Scenario
from standins.http import Request, Response
from standins.inprocess import answer
from standins.langfuse_server import LangfuseApp, LangfuseOptions
from tests.support import langfuse_factories as f
from tests.support.clocks import FakeClock
from tests.support.langfuse_client import BASE_URL, PUBLIC, SECRET
from tests.support.langfuse_factories import Reply

#: A server holding only what a test gives it.
NO_DATA = Scenario(traces=0, datasets=())


class Timeout:
    """Fault: no answer comes (the client's read timeout)."""


class Disconnect:
    """Fault: the connection is closed before an answer."""


Fault = Reply | Timeout | Disconnect
#: A test's own answer for a route: the stand-in's request (after routing, auth, the contract and the
#: faults) and its path parameters → the answer.
Handler = Callable[[Request, dict[str, str]], Reply | Awaitable[Reply]]


@dataclass
class Call:
    method: str
    #: The operation's path template (the raw path when the contract has no such operation).
    template: str
    request: httpx.Request
    #: The HTTP status, or "timeout" / "connection_error".
    status: int | str
    #: The fake clock's monotonic time when the request arrived.
    at: float


class _TestApp(LangfuseApp):
    """The stand-in, with a test's own answers for some routes."""

    def __init__(self, options: LangfuseOptions) -> None:
        super().__init__(options)
        self.overrides: dict[tuple[str, str], Handler] = {}

    async def serve(self, request: Request, routed: Routed) -> Response:
        handler = self.overrides.get((request.method, routed.template))
        if handler is None:
            return await super().serve(request, routed)
        reply = handler(request, routed.params or {})
        if inspect.isawaitable(reply):
            reply = await reply
        if reply.unchecked is not None:
            return Response.json(reply.status, reply.json, reply.headers)
        return self.checked_answer(request.method, routed.template, reply.status, reply.json, reply.headers)


class InProcessLangfuse:
    """A Langfuse server of ``version`` at :data:`BASE_URL` (keys :data:`PUBLIC` / :data:`SECRET`)."""

    def __init__(self, router: respx.MockRouter, clock: FakeClock, version: str = "4.60.0", **options: Any) -> None:
        options.setdefault("scenario", NO_DATA)
        self.app = _TestApp(
            LangfuseOptions(version=version, public_key=PUBLIC, secret_key=SECRET, clock=clock.now, **options)
        )
        self.clock = clock
        self.calls: list[Call] = []
        router.route(url__startswith=BASE_URL).mock(side_effect=self._dispatch)

    @property
    def version(self) -> str:
        return str(self.app.options.version)

    # --- what a test adds to a server ----------------------------------------------------------

    def on(self, method: str, template: str, handler: Handler | Reply) -> None:
        """Answer ``method template`` with ``handler`` (or always this reply) instead of the stand-in."""
        if isinstance(handler, Reply):
            reply = handler
            self.app.overrides[(method, template)] = lambda request, params: reply
        else:
            self.app.overrides[(method, template)] = handler

    def fail_next(self, method: str, template: str, *faults: Fault) -> None:
        """The next requests to ``method template`` get these answers or faults, one each, in order."""
        route = f"{method} {template}"
        scripted = []
        for fault in faults:
            if isinstance(fault, Timeout):
                scripted.append(ScriptedFault("timeout", route=route))
            elif isinstance(fault, Disconnect):
                scripted.append(ScriptedFault("reset", route=route))
            else:
                scripted.append(
                    ScriptedFault("answer", route=route, status=fault.status, body=fault.json, headers=fault.headers)
                )
        self.app.faults.add_script(scripted)

    async def standin_answer(self, request: Request) -> Reply:
        """The stand-in's own answer to ``request`` (for a handler that changes or delays it)."""
        operation = self.app.contract.operation(request.method, request.raw_path)
        routed = Routed(f"{operation.method} {operation.path}", operation.path, dict(operation.path_params))
        response = await LangfuseApp.serve(self.app, request, routed)
        return Reply(response.status, json.loads(response.body), response.headers, unchecked="the stand-in's")

    def calls_to(self, method: str, template: str) -> list[Call]:
        return [c for c in self.calls if (c.method, c.template) == (method, template)]

    async def _dispatch(self, request: httpx.Request) -> httpx.Response:
        path = request.url.raw_path.decode().split("?", 1)[0]
        try:
            template = self.app.contract.operation(request.method, path).path
        except ContractViolation:
            template = path
        call = Call(request.method, template, request, "?", self.clock.monotonic())
        self.calls.append(call)
        try:
            response = await answer(self.app, request)
        except httpx.TimeoutException:
            call.status = "timeout"
            raise
        except httpx.TransportError:
            call.status = "connection_error"
            raise
        call.status = response.status_code
        return response

    # --- the data the server holds -------------------------------------------------------------

    def add_rows(self, *rows: dict[str, Any]) -> None:
        """v4 observation rows (:func:`langfuse_factories.observation`), of any traces; rows with one id are
        un-merged copies of one observation. A v3 server serves them as legacy traces."""
        self.app.corpus.add_rows(list(rows))

    def replace_trace(self, rows: list[dict[str, Any]]) -> None:
        """A trace's rows as they are now (e.g. it ended since)."""
        self.app.corpus.add_trace(rows)

    def add_dataset(self, dataset_id: str, name: str) -> None:
        self.app.corpus.add_dataset(f.dataset(dataset_id, name))

    def add_dataset_item(self, item: dict[str, Any]) -> None:
        self.app.corpus.add_dataset_item(item)

    def add_experiment(self, experiment: dict[str, Any]) -> None:
        self.app.corpus.add_experiment(experiment)

    def add_experiment_item(self, row: dict[str, Any]) -> None:
        self.app.corpus.add_experiment_item(row)

    def add_dataset_run(self, run: dict[str, Any]) -> None:
        """A v3 dataset run (:func:`langfuse_factories.v3_dataset_run`)."""
        self.app.corpus.add_dataset_run(run)

    def add_dataset_run_item(self, item: dict[str, Any]) -> None:
        self.app.corpus.add_dataset_run_item(item)

    def add_annotation(self, score: dict[str, Any], timestamp: str | None = None) -> None:
        """A person's score given in the UI (source ANNOTATION): ``LangfuseApp.add_annotation``."""
        self.app.add_annotation(score, timestamp)

    def add_queue(
        self, queue_id: str, name: str, traces: tuple[str, ...] = (), observations: tuple[str, ...] = ()
    ) -> None:
        """An annotation queue made in the UI, holding these traces and observations."""
        self.app.add_queue(queue_id, name, traces=traces, observations=observations)

    @property
    def queue_items(self) -> dict[str, list[dict[str, Any]]]:
        """Each queue's items, in the order they were added."""
        return {queue_id: list(queue["items"]) for queue_id, queue in self.app.queues.items()}

    def add_score_config(self, config: dict[str, Any]) -> None:
        """A score config present before the test (:func:`langfuse_factories.score_config`)."""
        self.app.add_config(config)

    @property
    def configs(self) -> list[dict[str, Any]]:
        return self.app.configs

    def reject_scores_when(self, rule: Callable[[dict[str, Any]], str | tuple[int, str] | None]) -> None:
        """Scores the server refuses: ``rule(score)`` → a message (status 400), (status, message), or None."""

        def refuse(score: Any) -> tuple[int, str] | None:
            refused = rule(score)
            return (400, refused) if isinstance(refused, str) else refused

        self.app.reject_score = refuse

    # --- what the server stored and was sent ---------------------------------------------------

    @property
    def scores(self) -> dict[str, dict[str, Any]]:
        """Stored scores by id (each id's newest row, as Langfuse's reads answer), with their timestamp."""
        return {str(s.body["id"]): {**s.body, "timestamp": s.timestamp} for s in self.app.store.latest_by_id()}

    def clear_scores(self) -> None:
        self.app.store.clear()

    @property
    def score_posts(self) -> list[list[dict[str, Any]]]:
        """The bodies of the ``POST /scores`` requests the server took (202 or 207)."""
        taken = [c for c in self.calls_to("POST", "/api/public/scores") if c.status in (202, 207)]
        return [json.loads(c.request.content) for c in taken]

    @property
    def events(self) -> list[dict[str, Any]]:
        """The events of the ``POST /ingestion`` requests the server took (207)."""
        posts = [c for c in self.calls_to("POST", "/api/public/ingestion") if c.status == 207]
        return [event for c in posts for event in json.loads(c.request.content)["batch"]]

    def problems(self) -> list[str]:
        """Contract violations and requests the stand-in does not serve: a test expects none."""
        return [*self.app.violations, *self.app.unsupported]


MakeLangfuse = Callable[..., InProcessLangfuse]
