"""Property: extraction never raises on arbitrary JSON rows, and always returns a valid Sample.

The rows are drawn from JSON values shaped like the real thing (known keys, message-like payloads,
ids that collide and point at each other, JSON-encoded strings) so the readers are reached, not just
the first type check. Runs ≥ 1,000 examples when CI is set (profile ``extract-ci``).
"""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trace_scorer.config.references import ReferenceSettings
from trace_scorer.extract import extract_sample, samples_from_rows
from trace_scorer.extract.extractor import _Extraction
from trace_scorer.extract.model import Notes
from trace_scorer.sample import Sample

settings.register_profile(
    "extract-ci", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("extract-dev", max_examples=150, deadline=None)
PROFILE = settings.get_profile("extract-ci" if os.environ.get("CI") else "extract-dev")

KEYS = [
    "role", "content", "type", "tool_calls", "function", "name", "arguments", "args", "input", "id",
    "call_id", "tool_call_id", "parts", "messages", "choices", "message", "output", "additional_kwargs",
    "invalid_tool_calls", "text", "tool_use_id", "response", "result", "toolCallId", "toolName",
    "lc", "kwargs", "system", "instructions", "object", "function_call", "tools", "parameters",
]  # fmt: skip
WORDS = [
    "user", "assistant", "system", "tool", "human", "ai", "function", "developer", "model", "text",
    "tool_use", "tool_result", "tool_call", "tool_call_response", "tool-call", "tool-result",
    "function_call", "function_call_output", "message", "response", "constructor", "reasoning",
    "web_search_call", "mcp_call", "output_text", "image_url", "c1", "c2", "f", "{", '{"a": 1}', "",
]  # fmt: skip
IDS = ["a", "b", "c", "d"]
TYPES = ["GENERATION", "TOOL", "SPAN", "AGENT", "generation", "tool"]
TIMES = ["2026-03-01T10:00:00Z", "2026-03-01T10:00:01.5+02:00", "2026-03-01 10:00:02", "yesterday", ""]

scalars = (
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | st.sampled_from(WORDS)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
message_like = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS), inner | st.sampled_from(WORDS), max_size=6)
    ),
    max_leaves=25,
)
call_like = st.fixed_dictionaries(
    {"name": st.sampled_from(["f", "g"]) | scalars},
    optional={
        "id": st.sampled_from(["c1", "c2"]) | scalars,
        "args": json_values,
        "arguments": st.sampled_from(['{"x": 1}', '{"x": ', "{'x': 1}"]) | json_values,
        "type": st.sampled_from(["tool_call", "function", "tool_use", "function_call"]),
        "function": st.fixed_dictionaries({"name": st.sampled_from(["f", "g"]), "arguments": scalars}),
    },
)
nearly_messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system", "ai", "bogus"]) | scalars},
    optional={
        "content": st.text(max_size=6) | st.lists(message_like | call_like, max_size=3) | json_values,
        "tool_calls": st.lists(call_like, max_size=3) | json_values,
        "tool_call_id": st.sampled_from(["c1", "c2"]) | scalars,
        "parts": st.lists(message_like | call_like, max_size=3),
    },
)
conversations = st.lists(nearly_messages | message_like, max_size=6)
payloads = (
    message_like
    | json_values
    | conversations
    | nearly_messages
    | st.fixed_dictionaries({"messages": conversations, "tools": json_values})
    | (message_like | conversations).map(lambda v: json.dumps(v, allow_nan=True))
)
metadata = st.dictionaries(st.sampled_from(["tool_call_id", "attributes", "reference_topics"]), json_values)
rows = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "id": st.sampled_from(IDS) | json_values,
            "traceId": st.sampled_from(["t1", "t2"]) | json_values,
            "parentObservationId": st.none() | st.sampled_from(IDS),
            "type": st.sampled_from(TYPES) | json_values,
            "name": st.sampled_from(["f", "OpenAI-generation", ""]) | json_values,
            "startTime": st.sampled_from(TIMES) | json_values,
            "endTime": st.none() | st.sampled_from(TIMES),
            "updatedAt": st.sampled_from(TIMES) | json_values,
            "isRootObservation": st.booleans() | json_values,
            "level": st.sampled_from(["DEFAULT", "ERROR"]) | json_values,
            "statusMessage": st.none() | st.text(max_size=10),
            "environment": st.none() | st.text(max_size=6) | json_values,
            "input": payloads,
            "output": payloads,
            "metadata": json_values | metadata | json_values.map(json.dumps),
        },
    )
    | json_values,
    max_size=8,
)  # fmt: skip
ITEM_KEYS = [
    "expectedOutput",
    "metadata",
    "experimentItemId",
    "experimentId",
    "traceId",
    "output",
    "datasetId",
    "id",
]
items = st.none() | st.dictionaries(
    st.sampled_from(ITEM_KEYS),
    message_like | json_values | st.sampled_from(['{"answer": "x", "tool_calls": [{"name": "f"}]}', "[1"]),
)
CUSTOM = ReferenceSettings(
    expected=["$.expectedOutput[0]", "$.trace.output.content"],
    reference_topics=["$.trace.metadata.reference_topics", "$.metadata"],
    reference_tool_calls=["$.expectedOutput", "$.trace.input"],
)


@settings(PROFILE)
@given(rows=rows, item=items, custom=st.booleans())
def test_extraction_never_raises_on_arbitrary_rows(rows: list[Any], item: Any, custom: bool) -> None:
    references = CUSTOM if custom else ReferenceSettings()
    # The inner extraction, without extract_sample's last-resort guard: a bug here must surface.
    sample = _Extraction(Notes(), references).run(rows, item, None)
    assert isinstance(sample, Sample)
    assert Sample.model_validate(sample.model_dump()) == sample  # the result is itself valid
    assert not any(note.startswith("extraction failed") for note in sample.notes)
    assert len(sample.notes) <= 21


@settings(PROFILE)
@given(value=json_values | rows)
def test_public_functions_accept_any_json(value: Any) -> None:
    assert isinstance(extract_sample(value), Sample)  # type: ignore[arg-type]
    if isinstance(value, list):
        assert all(isinstance(s, Sample) for s in samples_from_rows(value))
