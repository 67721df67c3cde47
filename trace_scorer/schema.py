"""The JSON Schema of the sample file format (docs/sample.schema.json), derived from the Sample model.

The model's own schema is stricter than what a file may say, so three spots are widened to what the
validators accept: ``arguments`` may be a JSON string, roles have aliases, content may be null or parts.
Run ``python -m trace_scorer.schema > docs/sample.schema.json`` after changing the Sample.
"""

from __future__ import annotations

import json
from typing import Any

from trace_scorer.sample import ROLE_ALIASES, Sample


def sample_file_schema() -> dict[str, Any]:
    schema = Sample.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "trace-scorer sample (one JSON object per line, or a JSON array of them)"
    definitions = schema["$defs"]
    definitions["ToolCall"]["properties"]["arguments"] = {
        "anyOf": [{"type": "object"}, {"type": "string", "description": "a JSON object, as a string"}],
        "description": "the call's arguments: an object, or a JSON string of one",
    }
    role = definitions["Message"]["properties"]["role"]
    role["enum"] = [*role["enum"], *ROLE_ALIASES]
    role.pop("type", None)
    definitions["Message"]["properties"]["content"] = {
        "anyOf": [{"type": "string"}, {"type": "null"}, {"type": "array", "description": "text parts"}],
        "default": "",
    }
    schema["properties"]["id"]["description"] = "defaults to trace_id, else FILE:LINE"
    schema["required"] = []
    return schema


if __name__ == "__main__":
    print(json.dumps(sample_file_schema(), indent=2, ensure_ascii=False))
