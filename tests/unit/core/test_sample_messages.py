"""The sample's message validation: roles and content as given or normalised, refusals as before."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trace_scorer.sample import Message


@pytest.mark.parametrize(
    ("given", "role"),
    [
        ("user", "user"),
        ("tool", "tool"),
        ("human", "user"),
        ("ai", "assistant"),
        ("developer", "system"),
        ("Human", "user"),
        ("ASSISTANT", "assistant"),
        ("System", "system"),
    ],
)
def test_roles_and_their_aliases_in_any_case(given: str, role: str) -> None:
    assert Message(role=given).role == role


@pytest.mark.parametrize("given", ["robot", "", 3, None, ["user"]])
def test_an_unknown_role_is_refused_naming_the_roles(given: object) -> None:
    with pytest.raises(ValidationError) as caught:
        Message(role=given)
    (error,) = caught.value.errors()
    assert error["loc"] == ("role",)
    assert error["type"] == "literal_error"
    assert error["input"] == (given.lower() if isinstance(given, str) else given)


class Text(str):
    pass


@pytest.mark.parametrize(
    ("given", "content"),
    [
        ("plain", "plain"),
        (Text("a subclass"), "a subclass"),
        (None, ""),
        (["a", {"type": "text", "text": "b"}, {"content": "c"}, {"image": 1}], "a\nb\nc"),
        ({"k": "é"}, '{"k": "é"}'),
        (3, "3"),
    ],
)
def test_content_as_text(given: object, content: str) -> None:
    message = Message(role="user", content=given)
    assert message.content == content
    assert type(message.content) is str
