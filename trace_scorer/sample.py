"""The Sample: one trace, as every metric sees it (docs/metrics.md "The sample").

Absent is not empty: a field the trace does not provide is ``None``; an empty list means
"the reference says: nothing". Metrics whose required fields are ``None`` are skipped.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Role = Literal["system", "user", "assistant", "tool"]

#: Accepted aliases for message roles (LangChain / ragas naming).
ROLE_ALIASES: dict[str, Role] = {"human": "user", "ai": "assistant", "developer": "system"}

#: A role text already lower-case (the roles, their aliases) → the role: one look-up for what extraction
#: gives (a role a message), the lowering only for the rest.
_ROLE_OF: dict[str, str] = {**{role: role for role in ("system", "user", "assistant", "tool")}, **ROLE_ALIASES}


def parse_arguments(value: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict: objects as they are, JSON strings parsed.

    ``None`` and ``""`` mean "no arguments". Anything else that is not a JSON object is an error,
    because comparing a non-object against keyword arguments would silently score 0.
    """
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments are not valid JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value


class ToolCall(BaseModel):
    """A call the agent made (or should have made): ``{name, arguments, id?, result?}``."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    result: Any = None
    #: Why its execution failed, when it did (None: it did not, or nobody recorded it).
    error: str | None = None

    @field_validator("arguments", mode="before")
    @classmethod
    def _parse_arguments(cls, value: Any) -> dict[str, Any]:
        # an object as it is without a second call: this runs for every call of every sample (bench_offline)
        return value if type(value) is dict else parse_arguments(value)


class ToolSpec(BaseModel):
    """A tool a generation declared to the model: its name and its arguments' JSON Schema as given
    (not validated here: a broken schema is the ``tool_call_validity`` metric's finding)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    parameters: Any = None
    description: str | None = None


class Message(BaseModel):
    """One conversation message with OpenAI roles; ``human``/``ai`` accepted as aliases."""

    model_config = ConfigDict(extra="forbid")

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None

    @field_validator("role", mode="before")
    @classmethod
    def _alias_role(cls, value: Any) -> Any:
        # this and _content_text run for every message of every sample: the common case first, in one step
        if type(value) is str and (role := _ROLE_OF.get(value)) is not None:
            return role
        if isinstance(value, str):
            lowered = value.lower()
            return ROLE_ALIASES.get(lowered, lowered)
        return value

    @field_validator("content", mode="before")
    @classmethod
    def _content_text(cls, value: Any) -> str:
        return value if type(value) is str else content_text(value)


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type (for error messages)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def content_text(value: Any) -> str:
    """Message content as text: strings as they are, lists of text parts joined, None as ``""``."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for part in value:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                text = part.get("text", part.get("content"))
                if isinstance(text, str):
                    texts.append(text)
        return "\n".join(texts)
    return json.dumps(value, ensure_ascii=False, default=str)


class Sample(BaseModel):
    """One trace to score. Field meanings: docs/metrics.md "The sample"."""

    model_config = ConfigDict(extra="forbid")

    id: str
    messages: list[Message] | None = None
    response: str | None = None
    tool_calls: list[ToolCall] | None = None
    expected: str | None = None
    reference: str | None = None
    reference_tool_calls: list[ToolCall] | None = None
    reference_topics: list[str] | None = None
    #: Per-item flags (docs/metrics.md "tool_correctness"): None means "not said".
    tool_sequence_matters: bool | None = None
    final_answer_uses_tools: bool | None = None
    #: Grouping keys: the question (dataset item) and the run (experiment) this attempt belongs to.
    item_id: str | None = None
    run_id: str | None = None
    trace_id: str | None = None
    observation_id: str | None = None
    start_time: datetime | None = None
    environment: str | None = None
    #: Trace facts, read from the observations (docs/metrics.md "The sample"): the tools declared to
    #: the model, the last generation's finish reason, latency in seconds, total tokens and cost (USD).
    tools: list[ToolSpec] | None = None
    finish_reason: str | None = None
    latency: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    total_tokens: int | None = Field(default=None, ge=0)
    total_cost: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: Values for judge-prompt variables (``llm_judge``): JSON path → the value found there, for the
    #: paths the settings map variables to (extract/variables.py); a path that found nothing is absent.
    variables: dict[str, Any] = Field(default_factory=dict)
    #: What extraction could not read (shown by ``score``, logged by the worker).
    notes: list[str] = Field(default_factory=list)

    @field_validator("response", "expected", "reference", mode="before")
    @classmethod
    def _text_or_none(cls, value: Any) -> Any:
        """Text or null, as the published schema says: a number, boolean, object or array is refused
        (scoring its JSON form as the answer would give a number that means nothing)."""
        if value is None or isinstance(value, str):
            return value
        raise ValueError(f"must be a string or null, not {json_type(value)}")

    def user_text(self) -> str:
        """All user messages' text, joined (used e.g. to find salient tokens)."""
        return "\n".join(m.content for m in self.messages or () if m.role == "user")
