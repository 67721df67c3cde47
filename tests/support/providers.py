"""The seam the unit tests mock providers through: the providers' HTTP client swapped for an httpx one.

Production sends through aiohttp (``trace_scorer.providers.transport``), which respx cannot see; unit tests
script their endpoint with respx (or an ``httpx.MockTransport``), so only the bytes on the wire take another
path: the openai client, the retries, the limits and the deadlines above it are the production ones. The
aiohttp path itself is tested over loopback against the OpenAI stand-in (``tests/integration/providers``).
"""

from __future__ import annotations

import httpx
import pytest

from trace_scorer.config.judge import ProviderSettings
from trace_scorer.providers import transport


def send_through_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    """Providers built from now on (in this test) send through a plain ``httpx.AsyncClient``."""

    def httpx_client(settings: ProviderSettings) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=settings.timeout)

    monkeypatch.setattr(transport, "pooled_http_client", httpx_client)
