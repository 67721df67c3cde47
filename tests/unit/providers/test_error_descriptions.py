"""What the log and /readyz say of a failed provider request never carries a password of the base_url."""

from __future__ import annotations

import httpx2
import openai

from trace_scorer.providers.client import describe_error


def test_a_password_in_the_base_url_never_reaches_the_description() -> None:
    request = httpx2.Request("POST", "http://alice:s3cret@llm.internal:8000/v1/chat/completions")
    try:
        raise openai.APIConnectionError(request=request) from httpx2.ConnectError(
            "All connection attempts failed for http://alice:s3cret@llm.internal:8000/v1"
        )
    except openai.APIConnectionError as error:
        text = describe_error(error)
    assert "s3cret" not in text
    assert text.startswith("connection error: All connection attempts failed for http://")
    assert "llm.internal:8000" in text  # still says where it failed
