"""The providers send their requests with the SDK's ``post`` and a plain JSON body (cheaper than the typed
``create`` methods, see ``judge/chat.py``): the bytes on the wire must be what ``create`` sends — same
body, same key, same configured headers."""

from __future__ import annotations

import json
from typing import Any

import httpx
import httpx2
import openai
import pytest
from pydantic import BaseModel

from tests.support.clocks import SleepRecorder
from tests.support.embeddings import embeddings_response
from tests.support.judge import completion, verdict
from trace_scorer.config.judge import ProviderSettings
from trace_scorer.embeddings.remote import EmbeddingProvider
from trace_scorer.judge.chat import SDK_DEFAULT_OPTIONS, Provider, post_options
from trace_scorer.judge.structured import response_format
from trace_scorer.providers.client import open_client
from trace_scorer.providers.retry import RetryPolicy

SETTINGS = ProviderSettings(
    name="p",
    base_url="https://p.test/v1",
    chat_models=["m"],
    embedding_models=["e"],
    headers={"X-Title": "trace-scorer"},
)
KEY = "sk-test-0123456789"
MESSAGES = [{"role": "system", "content": "You judge."}, {"role": "user", "content": "Is it polite?"}]


class Verdict(BaseModel):
    reasoning: str
    verdict: int


class Recorder:
    """An httpx transport that keeps each request and answers with ``reply``."""

    def __init__(self, reply: httpx.Response) -> None:
        self.reply = reply
        self.requests: list[httpx.Request] = []

    def client(self) -> httpx.AsyncClient:
        def handle(request: httpx.Request) -> httpx.Response:
            self.requests.append(request)
            return self.reply

        return httpx.AsyncClient(transport=httpx.MockTransport(handle))


def wire(request: httpx.Request) -> dict[str, Any]:
    """What a server reads: method, URL, JSON body, and the headers that are not the SDK's own telemetry."""
    headers = {k: v for k, v in request.headers.items() if not k.startswith("x-stainless")}
    return {"method": request.method, "url": str(request.url), "body": json.loads(request.content), "headers": headers}


async def test_a_chat_completion_is_sent_as_create_sends_it(sleeps: SleepRecorder) -> None:
    ours, sdk = Recorder(completion(verdict(1))), Recorder(completion(verdict(1)))
    provider = Provider(SETTINGS, KEY, RetryPolicy(sleep=sleeps), sleep=sleeps, http_client=ours.client())
    _, client = open_client(SETTINGS, KEY, sdk.client())
    try:
        answer = await provider.complete("m", MESSAGES, schema=Verdict, temperature=0.0, max_tokens=300)
        completions: Any = client.chat.completions  # the SDK's typed signature: plain dicts suffice
        await completions.create(
            model="m",
            messages=MESSAGES,
            temperature=0.0,
            max_tokens=300,
            response_format=response_format(SETTINGS.structured_output, Verdict),
        )
    finally:
        await provider.aclose()
        await client.close()
    assert answer.text == verdict(1) and answer.usage.calls == 1
    (sent,), (expected,) = ours.requests, sdk.requests
    assert wire(sent) == wire(expected)
    assert wire(sent)["headers"]["authorization"] == f"Bearer {KEY}"
    assert wire(sent)["headers"]["x-title"] == "trace-scorer"
    assert wire(sent)["body"]["response_format"]["type"] == "json_schema"


async def test_an_embeddings_request_is_sent_as_create_sends_it(sleeps: SleepRecorder) -> None:
    vectors = [[0.6, 0.8], [1.0, 0.0]]
    ours, sdk = Recorder(embeddings_response(vectors, model="e")), Recorder(embeddings_response(vectors, model="e"))
    provider = EmbeddingProvider(SETTINGS, KEY, RetryPolicy(sleep=sleeps), sleep=sleeps, http_client=ours.client())
    _, client = open_client(SETTINGS, KEY, sdk.client())
    try:
        result = await provider.embed("e", ["a", "b"])
        await client.embeddings.create(model="e", input=["a", "b"], encoding_format="float")
    finally:
        await provider.aclose()
        await client.close()
    assert [list(v) for v in result.vectors] == [pytest.approx(v) for v in vectors]
    (sent,), (expected,) = ours.requests, sdk.requests
    assert wire(sent) == wire(expected)


async def test_an_answer_only_the_standard_library_decodes_is_read_as_before(sleeps: SleepRecorder) -> None:
    """The answer is decoded by orjson; JSON it refuses (a NaN) is decoded as the SDK decoded it, not lost."""
    payload = json.loads(completion(verdict(1)).content)
    payload["usage"] = {"prompt_tokens": 12, "completion_tokens": 7, "cost": float("nan")}
    reply = httpx.Response(200, content=json.dumps(payload), headers={"content-type": "application/json"})
    recorder = Recorder(reply)
    provider = Provider(SETTINGS, KEY, RetryPolicy(sleep=sleeps), sleep=sleeps, http_client=recorder.client())
    try:
        answer = await provider.complete("m", MESSAGES, schema=Verdict, temperature=0.0, max_tokens=300)
    finally:
        await provider.aclose()
    assert answer.text == verdict(1)
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens, answer.attempts) == (12, 7, 1)


async def test_a_retried_call_counts_its_attempts(sleeps: SleepRecorder) -> None:
    """The retry controller is made only when a first attempt fails; the attempts are counted as before."""
    replies = [httpx.Response(503, json={"error": {"message": "busy"}}), completion(verdict(1))]

    def handle(request: httpx.Request) -> httpx.Response:
        return replies.pop(0)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    provider = Provider(SETTINGS, KEY, RetryPolicy(sleep=sleeps), sleep=sleeps, http_client=client)
    try:
        answer = await provider.complete("m", MESSAGES, schema=Verdict, temperature=0.0, max_tokens=300)
    finally:
        await provider.aclose()
    assert (answer.text, answer.attempts, replies) == (verdict(1), 2, [])


def test_the_options_given_to_post_are_the_sdks_own_defaults() -> None:
    """``SDK_DEFAULT_OPTIONS`` stands for leaving the options out: an SDK whose defaults moved fails here."""
    from openai._models import FinalRequestOptions

    for name, given in SDK_DEFAULT_OPTIONS.items():
        default = FinalRequestOptions.model_fields[name].get_default(call_default_factory=True)
        assert type(given) is type(default), name
        if not isinstance(default, openai.NotGiven):
            assert given == default, name


@pytest.mark.parametrize("options", [SDK_DEFAULT_OPTIONS, post_options()], ids=["defaults", "with a key"])
async def test_a_call_with_the_options_given_sends_what_it_sends_without_them(options: openai.RequestOptions) -> None:
    """Every header (the SDK's own included) and the body, as ``post`` sends them with no options: the
    idempotency key the providers give each request is not sent, as the SDK's own is not."""
    given, left_out = Recorder(completion(verdict(1))), Recorder(completion(verdict(1)))
    _, with_options = open_client(SETTINGS, KEY, given.client())
    _, without = open_client(SETTINGS, KEY, left_out.client())
    try:
        await with_options.post("chat/completions", content=b'{"model":"m"}', cast_to=httpx2.Response, options=options)
        await without.post("chat/completions", content=b'{"model":"m"}', cast_to=httpx2.Response)
    finally:
        await with_options.close()
        await without.close()
    (sent,), (expected,) = given.requests, left_out.requests
    assert (sent.method, sent.url, sent.content) == (expected.method, expected.url, expected.content)
    assert sent.headers.multi_items() == expected.headers.multi_items()


def test_each_request_gets_its_own_idempotency_key() -> None:
    """Given instead of the SDK's ``uuid4`` per call: as unique, one per request."""
    keys = [post_options()["idempotency_key"] for _ in range(1000)]
    assert len(set(keys)) == 1000 and all(k.startswith("trace-scorer-") for k in keys)
    assert {k: v for k, v in post_options().items() if k != "idempotency_key"} == SDK_DEFAULT_OPTIONS


@pytest.mark.parametrize(
    "url",
    [
        "https://p.test/v1/chat/completions",
        "http://127.0.0.1:8080/v1/chat/completions?api-version=2024-06-01",
        "https://user:pa%20ss@Bücher.example/v1/x%2Fy/../z#f",
        "chat/completions",
        "/chat/completions?x=1",
        "",
    ],
)
def test_a_url_is_prepared_as_the_sdk_prepares_it(url: str) -> None:
    """The providers' client parses an absolute URL once; each URL it prepares is the SDK's own, again and
    again, and a relative one follows the base URL as the SDK's does."""
    _, client = open_client(SETTINGS, KEY, httpx.AsyncClient())
    for base in ("https://p.test/v1/", "https://p.test/v1/", "http://other.test:81/api/"):
        client.base_url = base
        ours, expected = client._prepare_url(url), openai.AsyncOpenAI._prepare_url(client, url)
        assert ours == expected and type(ours) is type(expected)
        assert (str(ours), ours.raw_path, ours.query, ours.fragment) == (
            str(expected),
            expected.raw_path,
            expected.query,
            expected.fragment,
        )


def test_a_url_the_sdk_refuses_is_refused_alike() -> None:
    _, client = open_client(SETTINGS, KEY, httpx.AsyncClient())
    for _ in range(2):
        with pytest.raises(httpx2.InvalidURL) as ours:
            client._prepare_url("http://[::1")
        with pytest.raises(httpx2.InvalidURL) as expected:
            openai.AsyncOpenAI._prepare_url(client, "http://[::1")
        assert str(ours.value) == str(expected.value)


async def test_the_providers_client_sends_what_the_sdks_own_client_sends() -> None:
    """Every header in order (the User-Agent names the client's class) and the body: the providers' client
    is the SDK's but for how often it parses a URL."""
    ours, library = Recorder(completion(verdict(1))), Recorder(completion(verdict(1)))
    _, client = open_client(SETTINGS, KEY, ours.client())
    sdk = openai.AsyncOpenAI(
        base_url=SETTINGS.base_url,
        api_key=KEY,
        timeout=SETTINGS.timeout,
        max_retries=0,
        http_client=library.client(),  # type: ignore[arg-type]
        default_headers=SETTINGS.headers,
    )
    url = "https://p.test/v1/chat/completions"
    own: openai.RequestOptions = {"headers": {"X-Extra": "1", "x-stainless-retry-count": "7"}, "timeout": 3.0}
    try:
        for sender in (client, sdk):
            for _ in range(2):  # the providers' client builds the headers once, then copies them
                await sender.post(url, content=b'{"model":"m"}', cast_to=httpx2.Response, options=SDK_DEFAULT_OPTIONS)
                await sender.post("chat/completions", content=b'{"model":"m"}', cast_to=httpx2.Response)
                await sender.post(url, content=b"{}", cast_to=httpx2.Response, options=own)
                await sender.post(url, content=b"{}", cast_to=httpx2.Response, options={"timeout": 7})
    finally:
        await client.close()
        await sdk.close()
    assert len(ours.requests) == len(library.requests) == 8
    for sent, expected in zip(ours.requests, library.requests, strict=True):
        assert (sent.method, sent.url, sent.content) == (expected.method, expected.url, expected.content)
        assert sent.headers.raw == expected.headers.raw


@pytest.mark.parametrize("retries_taken", [0, 1, 2])
@pytest.mark.parametrize(
    "options",
    [
        SDK_DEFAULT_OPTIONS,
        {"timeout": 2.5},
        {"timeout": None},
        {"timeout": httpx2.Timeout(4.0, read=9.0)},
        {"headers": {"X-Extra": "1"}},
        {"headers": {"x-stainless-read-timeout": openai.Omit()}},
        {"security": {"bearer_auth": True}},
    ],
)
async def test_request_headers_are_the_sdks_own(options: openai.RequestOptions, retries_taken: int) -> None:
    """The providers' client keeps each distinct set of headers the SDK built: every one, asked for again
    (built or kept), is what the SDK's own method builds, and a change the SDK makes to one request's
    headers stays with that request."""
    from openai._models import FinalRequestOptions

    _, client = open_client(SETTINGS, KEY, httpx.AsyncClient())
    request = FinalRequestOptions.construct(method="post", url="https://p.test/v1/x", **options)
    expected = openai.AsyncOpenAI._build_headers(client, request, retries_taken=retries_taken).raw
    first = client._build_headers(request, retries_taken=retries_taken)
    assert first.raw == expected
    first["X-Changed-By-The-SDK"] = "1"
    del first["Accept"]
    for _ in range(2):
        assert client._build_headers(request, retries_taken=retries_taken).raw == expected
    client.api_key = "sk-other"  # another key: other headers
    assert client._build_headers(request, retries_taken=retries_taken).raw == (
        openai.AsyncOpenAI._build_headers(client, request, retries_taken=retries_taken).raw
    )
