"""Every unit test: providers send through httpx, which respx mocks (unit tests open no sockets;
tests/support/providers.py says why)."""

from __future__ import annotations

import pytest

from tests.support.providers import send_through_httpx


@pytest.fixture(autouse=True)
def _providers_send_through_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    send_through_httpx(monkeypatch)
