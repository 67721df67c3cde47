"""The providers' HTTP client (transport.py): an answer's body read whole, as httpx2's ``send`` would have
read it; a request built as the SDK's client builds it."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator

import httpx2
import openai
import pytest

from trace_scorer.config.judge import ProviderSettings
from trace_scorer.providers.transport import _ConnectionErrorsNamed, pooled_http_client


class _Chunks(httpx2.AsyncByteStream):
    """A streamed body in pieces, remembering whether it was closed; ``fail`` raises after the first."""

    def __init__(self, chunks: list[bytes], fail: Exception | None = None) -> None:
        self.chunks, self.fail, self.closed = chunks, fail, False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for i, chunk in enumerate(self.chunks):
            if i and self.fail is not None:
                raise self.fail
            yield chunk

    async def aclose(self) -> None:
        self.closed = True


class _Inner(httpx2.AsyncBaseTransport):
    def __init__(self, stream: _Chunks, headers: dict[str, str]) -> None:
        self.stream, self.headers = stream, headers

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers=self.headers, stream=self.stream, request=request)


async def test_a_streamed_compressed_answer_arrives_decoded_and_its_stream_closed() -> None:
    body = b'{"choices": [{"message": {"content": "ok"}}], "pad": "' + b"x" * 2000 + b'"}'
    packed = gzip.compress(body)
    stream = _Chunks([packed[:100], packed[100:]])
    headers = {"content-type": "application/json", "content-encoding": "gzip", "x-request-id": "r1"}
    transport = _ConnectionErrorsNamed(_Inner(stream, headers))
    async with httpx2.AsyncClient(transport=transport) as client:
        response = await client.post("http://p.test/v1/chat/completions", content=b"{}")
    assert response.content == body and response.json()["choices"][0]["message"]["content"] == "ok"
    assert response.headers["x-request-id"] == "r1" and response.headers["content-encoding"] == "gzip"
    assert stream.closed and response.is_closed


async def test_an_error_mid_body_is_raised_as_the_stream_raised_it_and_the_stream_closed() -> None:
    stream = _Chunks([b'{"a":', b"1}"], fail=httpx2.ReadError("payload cut"))
    transport = _ConnectionErrorsNamed(_Inner(stream, {"content-type": "application/json"}))
    async with httpx2.AsyncClient(transport=transport) as client:
        with pytest.raises(httpx2.ReadError, match="payload cut"):
            await client.post("http://p.test/v1/chat/completions", content=b"{}")
    assert stream.closed


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/v1/chat/completions", "chat/completions?x=1"])
def test_a_request_is_built_as_the_sdks_client_builds_it(url: str) -> None:
    """The providers' client parses a URL once; the request it builds is the one the SDK's client builds."""
    ours = pooled_http_client(ProviderSettings(name="p", base_url="http://127.0.0.1:1/v1"))
    sdk = openai.DefaultAioHttpClient(base_url="http://127.0.0.1:9/v1/")
    ours.base_url = sdk.base_url
    headers = [("authorization", "Bearer k"), ("content-type", "application/json")]
    for _ in range(2):  # parsed, then from the parsed URLs
        built = ours.build_request("POST", url, headers=headers, content=b"{}", params={"a": "b"}, timeout=7.0)
        expected = sdk.build_request("POST", url, headers=headers, content=b"{}", params={"a": "b"}, timeout=7.0)
        assert (str(built.url), built.headers.multi_items()) == (str(expected.url), expected.headers.multi_items())
        assert (built.content, built.extensions) == (expected.content, expected.extensions)


@pytest.mark.parametrize(
    ("cookie", "body", "extra"),
    [
        (False, b'{"a":1}', ()),
        (True, b'{"a":1}', ()),  # a client's cookie: httpx2 builds it
        (False, b"", ()),  # no body: httpx2 places a zero length after the host
        (False, b'{"a":1}', (("content-length", "7"),)),  # a header Request places itself: httpx2 builds it
        (False, b'{"a":1}', (("host", "other.test"),)),
    ],
)
def test_a_plain_request_is_built_as_the_sdks_client_builds_it(
    cookie: bool, body: bytes, extra: tuple[tuple[str, str], ...]
) -> None:
    """The SDK's plain call (absolute URL, no query, no files; a header list) takes the headers placed once;
    the request is the one httpx2's client builds, again and again, and wherever httpx2 must build it."""
    ours = pooled_http_client(ProviderSettings(name="p", base_url="http://127.0.0.1:1/v1"))
    sdk = openai.DefaultAioHttpClient()
    if cookie:
        ours.cookies.set("session", "s1", domain="127.0.0.1")
        sdk.cookies.set("session", "s1", domain="127.0.0.1")
    url = "http://127.0.0.1:8080/v1/chat/completions"
    headers = [("authorization", "Bearer k"), ("accept", "application/json"), ("user-agent", "AsyncOpenAI/Python")]
    for retry in ("0", "0", "1"):
        sent = [*headers, ("x-stainless-retry-count", retry), ("x-extra", "a"), ("x-extra", "b"), *extra]
        args = {"headers": sent, "content": body, "files": None, "params": None, "timeout": httpx2.Timeout(7.0)}
        built = ours.build_request("POST", url, **args)
        expected = sdk.build_request("POST", url, **args)
        assert built.headers.raw == expected.headers.raw and (built.method, str(built.url)) == ("POST", url)
        assert (built.content, built.extensions) == (expected.content, expected.extensions)
        assert type(built.stream) is type(expected.stream) and b"".join(built.stream) == body
        assert built.headers.encoding == expected.headers.encoding
        given = ours.build_request("POST", httpx2.URL(url), **args)  # a parsed URL: the same request
        assert (given.headers.raw, given.content, given.extensions) == (
            expected.headers.raw,
            expected.content,
            expected.extensions,
        )
        sent.append(("x-late", "c"))  # the caller's list changed afterwards: the request did not
        assert built.headers.raw == expected.headers.raw
