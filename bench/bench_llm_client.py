"""Benchmark: CPU of the ``openai`` client per chat completion, over each HTTP transport it can use.

Why the providers send through aiohttp with the SDK's ``post`` (trace_scorer/providers/transport.py,
judge/chat.py): ``--requests`` chat completions, ``--concurrency`` in flight, against the OpenAI stand-in
(its own process, ``--latency`` a request), the same request each time (a judge prompt with a JSON schema);
this process's CPU (user + system) divided by the requests:

- ``httpx``: the legacy httpx client the providers used before (a pool sized to the concurrency);
- ``httpx2``: the SDK's default client;
- ``aiohttp``: the SDK's ``DefaultAioHttpClient`` with the typed ``chat.completions.create``;
- ``aiohttp+post``: the providers' own client (``pooled_http_client``), the body through ``client.post`` and the
  answer taken as parsed JSON (``cast_to=object``);
- ``provider``: the judge's whole call, ``Provider.complete`` (judge/chat.py: the client above plus the
  provider's slots, retry controller, request deadline and the answer read into a ``Completion``).

Run: ``PYTHONPATH=. python bench/bench_llm_client.py [--requests 2000] [--concurrency 32] [--latency 0.3]``
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import httpx2
import openai
from pydantic import BaseModel

from standins.faults import FaultConfig
from standins.handles import start_openai
from standins.openai_server import OpenAIOptions
from trace_scorer.config.judge import ProviderSettings
from trace_scorer.judge.chat import Provider
from trace_scorer.judge.structured import response_format
from trace_scorer.providers.retry import RetryPolicy
from trace_scorer.providers.transport import pooled_http_client

KINDS = ("httpx", "httpx2", "aiohttp", "aiohttp+post", "provider")


class Verdict(BaseModel):
    reasoning: str
    verdict: int


MESSAGES = [
    {"role": "system", "content": "You are a strict judge of assistant answers. " * 20},
    {"role": "user", "content": "User: book me a flight to Paris on Monday.\nAssistant: Booked AF123. " * 40},
]


def http_client(kind: str, url: str, concurrency: int) -> Any:
    if kind == "httpx":
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        return httpx.AsyncClient(limits=limits, timeout=60)
    limits2 = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    if kind == "httpx2":
        return openai.DefaultAsyncHttpxClient(limits=limits2, timeout=60)
    if kind == "aiohttp":
        return openai.DefaultAioHttpClient(limits=limits2, timeout=60)
    return pooled_http_client(ProviderSettings(name="bench", base_url=url, max_concurrency=concurrency))


async def cpu_per_request(kind: str, url: str, requests: int, concurrency: int) -> tuple[float, float]:
    """Milliseconds of this process's CPU a request, and the wall time, for ``requests`` of them."""
    if kind == "provider":
        return await _provider_cpu(url, requests, concurrency)
    http = http_client(kind, url, concurrency)
    client = openai.AsyncOpenAI(base_url=url, api_key="sk-bench", max_retries=0, http_client=http)
    fmt = response_format("json_schema", Verdict)
    body = {"model": "judge-a", "messages": MESSAGES, "temperature": 0.0, "max_tokens": 500, "response_format": fmt}
    slots = asyncio.Semaphore(concurrency)
    completions: Any = client.chat.completions  # the typed signature: the plain dicts of ``body`` suffice

    async def one() -> None:
        async with slots:
            if kind == "aiohttp+post":  # the answer's JSON as parsed, as judge/chat.py reads it
                data = await client.post("/chat/completions", body=body, cast_to=object)
                assert data["choices"][0]["message"]["content"]
            else:
                answer = await completions.create(**body)
                assert answer.choices[0].message.content

    try:
        await asyncio.gather(*(one() for _ in range(2 * concurrency)))  # connections open, code paths warm
        cpu, wall = time.process_time(), time.monotonic()
        await asyncio.gather(*(one() for _ in range(requests)))
        return 1000.0 * (time.process_time() - cpu) / requests, time.monotonic() - wall
    finally:
        await client.close()
        await http.aclose()


async def _provider_cpu(url: str, requests: int, concurrency: int) -> tuple[float, float]:
    """``cpu_per_request`` for the judge's ``Provider.complete``, its own slots bounding the requests in flight."""
    settings = ProviderSettings(name="bench", base_url=url, max_concurrency=concurrency, chat_models=["judge-a"])
    provider = Provider(settings, "sk-bench", RetryPolicy(), sleep=asyncio.sleep)

    async def one() -> None:
        completion = await provider.complete("judge-a", MESSAGES, schema=Verdict, temperature=0.0, max_tokens=500)
        assert completion.text

    try:
        await asyncio.gather(*(one() for _ in range(2 * concurrency)))
        cpu, wall = time.process_time(), time.monotonic()
        await asyncio.gather(*(one() for _ in range(requests)))
        return 1000.0 * (time.process_time() - cpu) / requests, time.monotonic() - wall
    finally:
        await provider.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.3, help="the stand-in's seconds a request")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    args = parser.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    rows = []
    with start_openai(OpenAIOptions(profile="openai", faults=FaultConfig(latency=args.latency)), mode="process") as llm:
        for kind in kinds:
            ms, wall = asyncio.run(cpu_per_request(kind, f"{llm.url}/v1", args.requests, args.concurrency))
            rows.append((kind, ms, wall))
    bound = args.requests * args.latency / args.concurrency
    print(f"\n{args.requests} chat completions, {args.concurrency} in flight, {args.latency * 1000:.0f} ms each\n")
    print("| client | CPU a request | wall (bound) |")
    print("|---|---|---|")
    for kind, ms, wall in rows:
        print(f"| {kind} | {ms:.2f} ms | {wall:.1f} s ({bound:.1f} s) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
