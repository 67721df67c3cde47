"""The OpenAI-compatible embeddings transport against a respx-mocked ``POST /v1/embeddings``: batching and
order, the cache and in-flight sharing, retries (Retry-After, 5xx, 4xx), split batches, usage and cost."""

from __future__ import annotations

import asyncio
import math

import pytest

from tests.support.clocks import SleepRecorder
from tests.support.embeddings import EmbedderFactory, EmbeddingsAPI, embeddings_response, error, provider, vector_of
from trace_scorer.embeddings import EmbeddingError


def close_to(actual: list[float], expected: list[float]) -> bool:
    return len(actual) == len(expected) and all(
        math.isclose(a, b, abs_tol=1e-6) for a, b in zip(actual, expected, strict=True)
    )


# --- the request, batching and order --------------------------------------------------------


async def test_request_has_the_openai_shape(api: EmbeddingsAPI, make_embedder: EmbedderFactory) -> None:
    embedder = await make_embedder(provider("p", "text-embedding-3-small"))
    [vector] = await embedder.embed(["It is 18 °C in Tokyo."])
    assert close_to(vector, vector_of("It is 18 °C in Tokyo."))
    assert api.urls == ["https://p.test/v1/embeddings"]
    assert api.requests == [
        {"model": "text-embedding-3-small", "input": ["It is 18 °C in Tokyo."], "encoding_format": "float"}
    ]
    assert api.headers[0]["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize(
    ("count", "batch_size", "requests"), [(10, 4, 3), (8, 4, 2), (1, 4, 1), (5, 1, 5), (64, 64, 1)]
)
async def test_n_texts_take_ceil_n_over_batch_requests_in_order(
    api: EmbeddingsAPI, make_embedder: EmbedderFactory, count: int, batch_size: int, requests: int
) -> None:
    embedder = await make_embedder(provider("p", "e"), batch_size=batch_size)
    texts = [f"answer number {i}" for i in range(count)]
    vectors = await embedder.embed(texts)
    assert len(api.requests) == requests == math.ceil(count / batch_size)
    # Each text sent once, in consecutive batches (the batches run concurrently: they may arrive in any order).
    chunks = [texts[i : i + batch_size] for i in range(0, count, batch_size)]
    assert sorted(map(tuple, api.inputs)) == sorted(map(tuple, chunks))
    assert all(len(batch) <= batch_size for batch in api.inputs)
    assert all(close_to(v, vector_of(t)) for v, t in zip(vectors, texts, strict=True))


async def test_vectors_are_matched_by_index_not_by_position(api: EmbeddingsAPI, make_embedder: EmbedderFactory) -> None:
    api.script.append(embeddings_response([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]], indexes=[2, 0, 1]))
    embedder = await make_embedder(provider("p", "e"))
    assert await embedder.embed(["a", "b", "c"]) == [[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]


async def test_a_wrong_number_of_vectors_is_an_error(api: EmbeddingsAPI, make_embedder: EmbedderFactory) -> None:
    api.script.append(embeddings_response([[1.0, 0.0]]))
    embedder = await make_embedder(provider("p", "e"))
    with pytest.raises(EmbeddingError, match="1 vectors for 2 texts"):
        await embedder.embed(["a", "b"])


async def test_empty_texts_are_refused_before_any_request(api: EmbeddingsAPI, make_embedder: EmbedderFactory) -> None:
    embedder = await make_embedder(provider("p", "e"))
    with pytest.raises(ValueError, match="empty"):
        await embedder.embed(["fine", "  "])
    with pytest.raises(TypeError):
        await embedder.embed("one string")  # a str is a Sequence[str]: refused at run time
    assert api.requests == []


# --- cache and in-flight sharing --------------------------------------------------------------


async def test_a_text_is_embedded_once(api: EmbeddingsAPI, make_embedder: EmbedderFactory) -> None:
    embedder = await make_embedder(provider("p", "e"))
    first = await embedder.embed(["expected", "response 1", "expected"])
    second = await embedder.embed(["response 2", "expected"])
    assert api.inputs == [["expected", "response 1"], ["response 2"]]
    assert first[0] == first[2] == second[1]
    assert embedder.select().stats() == {"texts_embedded": 3, "cache_hits": 2, "requests": 2, "tokens": 5}


async def test_concurrent_asks_share_one_request(api: EmbeddingsAPI, make_embedder: EmbedderFactory) -> None:
    """Samples scored at once ask for their texts separately; they go out together, each text once."""
    embedder = await make_embedder(provider("p", "e"), batch_size=64)
    asks = [["expected", f"response {i}"] for i in range(20)]
    results = await asyncio.gather(*(embedder.embed(ask) for ask in asks))
    assert len(api.requests) == 1
    assert sorted(api.inputs[0]) == sorted({t for ask in asks for t in ask})
    assert all(close_to(r[0], vector_of("expected")) for r in results)


async def test_the_cache_is_bounded_least_recently_used_first(
    api: EmbeddingsAPI, make_embedder: EmbedderFactory
) -> None:
    embedder = await make_embedder(provider("p", "e"), cache_size=2)
    for text in ("a", "b", "a", "c"):  # "a" was used after "b": "b" is the one to go
        await embedder.embed([text])
    await embedder.embed(["a"])
    await embedder.embed(["b"])
    assert api.inputs == [["a"], ["b"], ["c"], ["b"]]


async def test_cache_size_zero_still_sends_a_text_once_per_request(
    api: EmbeddingsAPI, make_embedder: EmbedderFactory
) -> None:
    embedder = await make_embedder(provider("p", "e"), cache_size=0)
    await embedder.embed(["x", "x"])
    await embedder.embed(["x"])
    assert api.inputs == [["x"], ["x"]]


# --- retries and failures ----------------------------------------------------------------------


async def test_429_waits_what_retry_after_says(
    api: EmbeddingsAPI, make_embedder: EmbedderFactory, sleeps: SleepRecorder
) -> None:
    api.script += [error(429, "slow down", {"Retry-After": "7"}), error(429, "slow", {"retry-after-ms": "1500"})]
    embedder = await make_embedder(provider("p", "e"))
    [vector] = await embedder.embed(["t"])
    assert close_to(vector, vector_of("t"))
    assert len(api.requests) == 3
    assert sleeps.waits == [7.0, 1.5]  # virtual: the test takes no time


async def test_5xx_backs_off_then_succeeds(
    api: EmbeddingsAPI, make_embedder: EmbedderFactory, sleeps: SleepRecorder
) -> None:
    api.script += [error(503), error(500)]
    embedder = await make_embedder(provider("p", "e"))
    await embedder.embed(["t"])
    assert len(api.requests) == 3
    for wait, base in zip(sleeps.waits, (2, 4), strict=True):
        assert base <= wait <= base + 1


async def test_retry_settings_come_from_the_embeddings_section(
    api: EmbeddingsAPI, make_embedder: EmbedderFactory, sleeps: SleepRecorder
) -> None:
    api.script += [error(503)] * 10
    embedder = await make_embedder(provider("p", "e"), retry_attempts=3, retry_initial_wait=1)
    with pytest.raises(EmbeddingError, match=r"p/e: HTTP 503.*after 3 attempts"):
        await embedder.embed(["t"])
    assert len(api.requests) == 3 and [int(w) for w in sleeps.waits] == [1, 2]


async def test_client_errors_are_not_retried_and_failures_not_cached(
    api: EmbeddingsAPI, make_embedder: EmbedderFactory, sleeps: SleepRecorder
) -> None:
    api.script.append(error(401, "invalid api key"))
    embedder = await make_embedder(provider("p", "e"))
    with pytest.raises(EmbeddingError, match="HTTP 401") as caught:
        await embedder.embed(["t"])
    assert caught.value.model == "p/e" and sleeps.waits == []
    assert await embedder.embed(["t"])  # asked again: sent again, and answered this time
    assert api.inputs == [["t"], ["t"]]


async def test_a_refused_text_fails_alone(api: EmbeddingsAPI, make_embedder: EmbedderFactory) -> None:
    """An endpoint refuses a whole batch for one text over the model's limit: the batch is split until
    the text is alone, so the other samples in that batch still get their vectors."""
    api.refuse = {"far too long"}
    embedder = await make_embedder(provider("p", "e"), batch_size=8)
    texts = ["a", "b", "far too long", "d", "e"]
    results = await asyncio.gather(*(embedder.embed([t]) for t in texts), return_exceptions=True)
    failed = [t for t, r in zip(texts, results, strict=True) if isinstance(r, BaseException)]
    assert failed == ["far too long"]
    assert isinstance(results[2], EmbeddingError) and "HTTP 400" in str(results[2])
    assert all(close_to(r[0], vector_of(t)) for t, r in zip(texts, results, strict=True) if isinstance(r, list))
    assert api.inputs[0] == texts and ["far too long"] in api.inputs


# --- usage --------------------------------------------------------------------------------------


async def test_tokens_and_cost_are_recorded(api: EmbeddingsAPI, make_embedder: EmbedderFactory) -> None:
    api.script.append(embeddings_response([[1.0], [1.0]], prompt_tokens=1_000))
    priced = provider("p", "e", prices={"e": {"input": 0.02, "output": 0.0}})
    embedder = await make_embedder(priced)
    await embedder.embed(["a", "b"])
    usage = embedder.select().usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.calls) == (1_000, 0, 1)
    assert usage.cost == pytest.approx(0.00002)
    assert embedder.select().stats()["cost_usd"] == pytest.approx(0.00002)


async def test_an_endpoint_without_usage_leaves_cost_unknown(
    api: EmbeddingsAPI, make_embedder: EmbedderFactory
) -> None:
    api.script.append(embeddings_response([[1.0]], prompt_tokens=None))
    embedder = await make_embedder(provider("p", "e"))
    await embedder.embed(["a"])
    assert embedder.select().usage.cost is None and embedder.select().usage.calls == 1


# --- limits and shutdown ------------------------------------------------------------------------


async def test_concurrency_bound_is_kept(api: EmbeddingsAPI, make_embedder: EmbedderFactory) -> None:
    embedder = await make_embedder(provider("p", "e", max_concurrency=1), batch_size=1)
    vectors = await embedder.embed([f"t{i}" for i in range(6)])
    assert len(vectors) == 6 and len(api.requests) == 6


async def test_a_closed_embedder_refuses_work(api: EmbeddingsAPI, make_embedder: EmbedderFactory) -> None:
    embedder = await make_embedder(provider("p", "e"))
    selected = embedder.select()
    await embedder.aclose()
    await embedder.aclose()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        await selected.embed(["t"])
    with pytest.raises(RuntimeError, match="closed"):
        await embedder.embed(["t"])
    assert api.requests == []


async def test_stats_per_model(api: EmbeddingsAPI, make_embedder: EmbedderFactory) -> None:
    embedder = await make_embedder(provider("p", "small", "large"))
    await embedder.embed(["a b", "a b"])
    await embedder.select("p/large").embed(["c"])
    assert embedder.stats() == {
        "p/small": {"texts_embedded": 1, "cache_hits": 1, "requests": 1, "tokens": 2},
        "p/large": {"texts_embedded": 1, "cache_hits": 0, "requests": 1, "tokens": 1},
    }


async def test_retries_are_told_to_the_owner_for_the_metrics(
    api: EmbeddingsAPI, make_embedder: EmbedderFactory, sleeps: SleepRecorder
) -> None:
    """The worker exports provider retries (``trace_scorer_judge_retries_total``): every retried embedding
    request reaches ``on_retry`` with the model, the status and the wait."""
    api.script += [error(503), error(429, "slow down", {"Retry-After": "7"})]
    embedder = await make_embedder(provider("p", "e"))
    told: list[tuple[str, str, float]] = []
    embedder.on_retry = lambda model, status, wait: told.append((model, status, wait))
    await embedder.embed(["hello"])
    assert [(model, status) for model, status, _ in told] == [("p/e", "503"), ("p/e", "429")]
    assert told[1][2] == 7.0 and sleeps.waits == [told[0][2], 7.0]


# --- per-token answers (llama-cpp-python's server) ------------------------------------------------


async def test_per_token_vectors_are_mean_pooled_per_input(api: EmbeddingsAPI, make_embedder: EmbedderFactory) -> None:
    # llama-cpp-python's server answers, for a model without pooling, a list of vectors per input
    api.script.append(embeddings_response([[[1.0, 0.0], [0.0, 1.0]], [[2.0, 2.0]]], prompt_tokens=3))  # type: ignore[list-item]
    embedder = await make_embedder(provider("p", "e"))
    assert await embedder.embed(["two tokens", "one"]) == [[0.5, 0.5], [2.0, 2.0]]
    assert embedder.stats()["p/e"]["requests"] == 1


async def test_an_unusable_answer_is_an_error_and_its_request_still_counts(
    api: EmbeddingsAPI, make_embedder: EmbedderFactory
) -> None:
    api.script.append(embeddings_response([[1.0, 0.0], [1.0, 0.0, 0.0]], prompt_tokens=7))
    embedder = await make_embedder(provider("p", "e"))
    with pytest.raises(EmbeddingError, match="different lengths"):
        await embedder.embed(["a", "b"])
    stats = embedder.stats()["p/e"]
    assert stats["requests"] == 1 and stats["tokens"] == 7
