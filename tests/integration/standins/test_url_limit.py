"""The stand-in's request size limit (``LangfuseOptions.url_limit``): by default Node's (the server itself:
request line and headers within 16 KiB, else 431); ``nginx`` for a proxy in front (a request line within
8 KiB, else 414); ``none``."""

from __future__ import annotations

import httpx
import pytest

from tests.support.langfuse_client import BASE_URL, PUBLIC, SECRET
from tests.support.langfuse_inprocess import MakeLangfuse

PATH = "/api/public/v2/observations"


async def status_for(query_bytes: int) -> int:
    """The status of a ``GET /v2/observations`` whose request line is about ``query_bytes`` long."""
    async with httpx.AsyncClient(base_url=BASE_URL, auth=(PUBLIC, SECRET)) as client:
        answer = await client.get(PATH, params={"fields": "core", "name": "x" * query_bytes})
        return answer.status_code


@pytest.mark.parametrize(
    ("limit", "short", "long", "longer"),
    [(None, 200, 200, 431), ("node", 200, 200, 431), ("nginx", 200, 414, 414), ("none", 200, 200, 200)],
)
async def test_a_request_too_long_for_the_server_or_its_proxy_is_refused(
    make_langfuse: MakeLangfuse, limit: str | None, short: int, long: int, longer: int
) -> None:
    make_langfuse(**({"url_limit": limit} if limit else {}))
    assert await status_for(7 * 1024) == short
    assert await status_for(9 * 1024) == long  # over nginx's 8 KiB request line
    assert await status_for(17 * 1024) == longer  # over Node's 16 KiB of request line and headers
