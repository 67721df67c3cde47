"""An OpenAI-compatible stand-in on 127.0.0.1: chat completions with structured output, and embeddings.

It models a real server by **profile** (:data:`PROFILES`; which server versions each follows:
docs/judges.md): the structured-output parameters it takes and the status it refuses the others with,
whether it runs one completion at a time (a request whose client gave up still runs to its end and holds
the queue), and whether an unknown model is served by the default model (its name echoed) or answered 404.
The default profile is llama-cpp-python's server, the harshest seen: tests that need another say so.
At temperature > 0 answers vary from request to request, as sampling does (votes differ).

- ``POST /v1/chat/completions``: the answer is JSON valid for the requested ``response_format``
  (``json_schema``: generated from the schema itself; ``json_object`` / none: the judge's answer format
  recognised from the prompt). Every choice — verdicts, booleans, list lengths, wording — is drawn from a
  generator seeded by a hash of the request (model, messages, response format), so the same request
  always gets the same answer and runs are repeatable. ``yes_rate`` sets how often a verdict is 1.
  Schema-specific knowledge: for ``TopicAnswer`` the reference topics are read from the prompt's
  ``REFERENCE TOPICS`` block, since the answer must list each exactly once.
- ``POST /v1/embeddings``: a unit vector per input, from a hash of the text (float or base64).
- ``GET /v1/models``.
- Token usage in every answer (~4 characters per token).
- Faults as the Langfuse stand-in: latency (fixed or uniform), 429 with ``Retry-After`` (and
  ``retry-after-ms``), 5xx, dropped connections; ``invalid_rate`` answers that are not valid JSON for the
  schema; ``reject_response_format`` answers 400 to ``response_format`` like an endpoint without
  structured output.
- Requests are checked (shape of messages, response_format, parameters) and answers validated with the
  ``openai`` package's own models; violations are answered 400 and recorded.

Run as a process: ``python -m standins.openai_server --port 0 --latency 0.3 [--rate-429 0.1]``; it
prints ``{"port", "url", "pid"}`` when it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import random
import re
import struct
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from standins.base import Routed, StandinApp
from standins.faults import FaultConfig, format_retry_after
from standins.http import Request, Response

ROUTES = {
    ("POST", "/v1/chat/completions"): "POST /v1/chat/completions",
    ("POST", "/v1/embeddings"): "POST /v1/embeddings",
    ("GET", "/v1/models"): "GET /v1/models",
}
ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
SCHEMA_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_TOPICS_BLOCK = re.compile(r"<<<BEGIN [^\n]*?TOPICS[^\n]* (\w+)>>>\n(.*?)\n<<<END [^\n]*? \1>>>", re.DOTALL)

SENTENCES = [
    "The agent used the tools it needed and reported the outcome to the user.",
    "The final answer addresses the user's request directly.",
    "The conversation stays on the subject the user raised.",
    "The agent confirmed the result with concrete details.",
    "Some of the user's request was left without a clear answer.",
    "The tool results support what the agent told the user.",
]
OFF_TOPICS = ["weather small talk", "sports results", "celebrity news", "cooking tips"]


@dataclass(frozen=True)
class ServerProfile:
    """What one real server does where servers differ (written from its docs and code)."""

    name: str
    #: The server and versions the profile follows.
    follows: str
    #: ``response_format.type`` values it takes; another is refused with ``format_error_status``.
    response_formats: frozenset[str]
    format_error_status: int
    #: Honours ``{"type": "json_object", "schema": …}`` (llama.cpp's servers) instead of ignoring the schema.
    json_object_schema: bool
    #: Top-level structured-output fields it enforces (vLLM's ``structured_outputs``).
    schema_fields: frozenset[str]
    #: A top-level field it does not know is refused (400) rather than ignored.
    rejects_unknown_fields: bool
    #: Honours a forced tool call (``tools`` + ``tool_choice`` naming a function).
    tools: bool
    #: Runs one completion at a time; the others wait, silently (no 429/503).
    one_at_a_time: bool
    #: An unknown model: served by the default model with its name echoed, or 404 with this message.
    unknown_model: Literal["default"] | str

    def format_error(self, kind: str) -> tuple[int, dict[str, Any]]:
        """The status and body with which the server refuses ``response_format.type == kind``."""
        if self.name == "llama_cpp":  # FastAPI's validation error, surfaced as a 500 by its error handler
            detail = (
                "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
                f"'msg': \"Input should be 'text' or 'json_object'\", 'input': '{kind}'}}]"
            )
            return 500, {"error": {"message": detail, "type": "internal_server_error", "param": None, "code": None}}
        message = f"Invalid value: '{kind}'. Supported values are: " + ", ".join(
            f"'{t}'" for t in sorted(self.response_formats)
        )
        error = {"message": message, "type": "invalid_request_error", "param": "response_format.type", "code": None}
        return self.format_error_status, {"error": error}


#: The profiles, by name. Sources: OpenAI's API reference (structured outputs, errors); llama-cpp-python
#: 0.3.36 ``llama_cpp/server/types.py`` + ``app.py`` (seen on the real server here); Ollama's
#: ``openai/openai.go`` and docs/openai.md (0.5+: ``json_schema``; unknown fields ignored; parallel 1 on
#: small machines); vLLM's OpenAI server docs and ``protocol.py`` (0.10–0.11: ``structured_outputs``).
PROFILES: dict[str, ServerProfile] = {
    "openai": ServerProfile(
        "openai", "OpenAI API, chat completions (2025)",
        frozenset({"text", "json_object", "json_schema"}), 400, json_object_schema=False,
        schema_fields=frozenset(), rejects_unknown_fields=True, tools=True, one_at_a_time=False,
        unknown_model="The model `{model}` does not exist or you do not have access to it.",
    ),
    "llama_cpp": ServerProfile(
        "llama_cpp", "llama-cpp-python[server] 0.3.36",
        frozenset({"text", "json_object"}), 500, json_object_schema=True,
        schema_fields=frozenset(), rejects_unknown_fields=False, tools=False, one_at_a_time=True,
        unknown_model="default",
    ),
    "ollama": ServerProfile(
        "ollama", "Ollama 0.5–0.12, /v1 (OpenAI compatibility)",
        frozenset({"text", "json_object", "json_schema"}), 400, json_object_schema=False,
        schema_fields=frozenset(), rejects_unknown_fields=False, tools=True, one_at_a_time=True,
        unknown_model='model "{model}" not found, try pulling it first',
    ),
    "vllm": ServerProfile(
        "vllm", "vLLM 0.10–0.11, OpenAI-compatible server",
        frozenset({"text", "json_object", "json_schema", "structural_tag"}), 400, json_object_schema=False,
        schema_fields=frozenset({"structured_outputs"}), rejects_unknown_fields=False, tools=True,
        one_at_a_time=False, unknown_model="The model `{model}` does not exist.",
    ),
}  # fmt: skip

#: Top-level fields of the chat request every profile knows (the rest are "unknown" to OpenAI).
KNOWN_FIELDS = frozenset(
    {"model", "messages", "temperature", "max_tokens", "max_completion_tokens", "n", "response_format",
     "tools", "tool_choice", "stream", "seed", "top_p", "stop", "user", "logprobs", "top_logprobs",
     "presence_penalty", "frequency_penalty", "parallel_tool_calls"}
)  # fmt: skip


@dataclass
class OpenAIOptions:
    faults: FaultConfig = field(default_factory=FaultConfig)
    #: The real server modelled (:data:`PROFILES`); llama.cpp's, the harshest, by default.
    profile: str = "llama_cpp"
    #: How often a verdict (or a boolean) is "yes".
    yes_rate: float = 0.7
    #: Share of answers that are not valid for the requested schema (the judge asks again).
    invalid_rate: float = 0.0
    #: Answer 400 to ``response_format`` (an endpoint without structured output), whatever the profile.
    reject_response_format: bool = False
    embedding_dim: int = 64
    #: When set, the models served; another is answered as the profile does (404, or the default model).
    models: list[str] | None = None
    #: When set, requests must carry ``Authorization: Bearer <api_key>``.
    api_key: str | None = None


def request_seed(body: dict[str, Any], draw: int = 0) -> str:
    """The hash answers are drawn from: model, messages, response format, and at temperature > 0 the
    server's draw count (sampling: the same request gets different answers)."""
    temperature = body.get("temperature")
    sampled = draw if isinstance(temperature, int | float) and temperature > 0 else 0
    canonical = json.dumps(
        {"model": body.get("model"), "messages": body.get("messages"), "format": body.get("response_format"),
         "draw": sampled},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _user_text(body: dict[str, Any]) -> str:
    parts = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [c.get("text", "") for c in content if isinstance(c, dict)]
    return "\n".join(parts)


def reference_topics(prompt: str) -> list[str] | None:
    match = _TOPICS_BLOCK.search(prompt)
    if not match:
        return None
    return [line[2:].strip() for line in match.group(2).splitlines() if line.startswith("- ")]


class Synthesizer:
    """A value valid for a JSON schema, every choice from ``rng``."""

    def __init__(self, root: dict[str, Any], rng: random.Random, yes_rate: float, prompt: str) -> None:
        self.root = root
        self.rng = rng
        self.yes_rate = yes_rate
        self.prompt = prompt

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            ref = schema["$ref"]
            if not ref.startswith("#/"):
                raise ValueError(f"unsupported $ref {ref}")
            node: Any = self.root
            for part in ref[2:].split("/"):
                node = node[part]
            schema = node
        return schema

    def described(self, name: str) -> str | None:
        """A goal or end state read from the rendered conversation (``[n] user: …`` lines), as a judge
        would describe them: distinct conversations get distinct descriptions."""
        if name not in ("user_goal", "end_state"):
            return None
        role = "user" if name == "user_goal" else "assistant"
        lines = re.findall(rf"^\[\d+\] {role}: (.+)$", self.prompt, re.MULTILINE)
        final = re.findall(r"^\[final answer\]: (.+)$", self.prompt, re.MULTILINE)
        if name == "end_state" and final:
            lines = final
        if not lines:
            return None
        chosen = str(lines[0] if name == "user_goal" else lines[-1])
        prefix = "The user wanted: " if name == "user_goal" else "By the end: "
        return prefix + chosen.strip()[:200]

    def value(self, schema: dict[str, Any], name: str = "") -> Any:
        schema = self.resolve(schema)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = [s for s in schema[key] if self.resolve(s).get("type") != "null"] or schema[key]
                return self.value(options[0], name)
        if "allOf" in schema:
            merged: dict[str, Any] = {}
            for part in schema["allOf"]:
                merged.update(self.resolve(part))
            return self.value(merged, name)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            options = list(schema["enum"])
            if name == "verdict" and sorted(options) == [0, 1]:
                return 1 if self.rng.random() < self.yes_rate else 0
            return self.rng.choice(options)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind == "object" or "properties" in schema:
            return {key: self.value(sub, key) for key, sub in (schema.get("properties") or {}).items()}
        if kind == "array":
            low = int(schema.get("minItems", 1))
            high = int(schema.get("maxItems", max(low, 3)))
            return [self.value(schema.get("items") or {}, name) for _ in range(self.rng.randint(low, max(low, high)))]
        if kind == "string":
            text = self.described(name) or self.rng.choice(SENTENCES)
            low = int(schema.get("minLength", 0))
            if len(text) < low:
                text = (text + " ") * (low // len(text) + 1)
            if "maxLength" in schema:
                text = text[: int(schema["maxLength"])]
            return text
        if kind == "integer":
            return self.rng.randint(int(schema.get("minimum", 0)), int(schema.get("maximum", 10)))
        if kind == "number":
            return round(self.rng.uniform(float(schema.get("minimum", 0.0)), float(schema.get("maximum", 1.0))), 3)
        if kind == "boolean":
            return self.rng.random() < self.yes_rate
        if kind == "null":
            return None
        return self.rng.choice(SENTENCES)


def _topic_answer(rng: random.Random, yes_rate: float, topics: list[str]) -> dict[str, Any]:
    picked = rng.sample(topics, k=rng.randint(1, len(topics))) if topics else []
    extracted = [{"topic": t, "on_topic": True} for t in picked]
    if not extracted or rng.random() > yes_rate:
        extracted.append({"topic": rng.choice(OFF_TOPICS), "on_topic": False})
    return {
        "topics": extracted,
        "reference_topics": [{"topic": t, "covered": rng.random() < yes_rate} for t in topics],
    }


#: The judge's answer formats, recognised from the prompt when no schema is sent (json_object / none).
_PROMPT_SCHEMAS: list[tuple[str, dict[str, Any]]] = [
    (
        '"user_goal"',
        {"type": "object", "properties": {"user_goal": {"type": "string"}, "end_state": {"type": "string"}}},
    ),
    (
        '"verdict"',
        {"type": "object", "properties": {"reasoning": {"type": "string"}, "verdict": {"enum": [0, 1]}}},
    ),
]


def enforced_schema(body: dict[str, Any], profile: ServerProfile) -> tuple[str, dict[str, Any]] | None:
    """(name, schema) when the request asks for a schema in a form ``profile`` enforces, else None."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema") or {}
        return str(spec.get("name", "")), spec.get("schema") or {}
    if fmt.get("type") == "json_object" and profile.json_object_schema and isinstance(fmt.get("schema"), dict):
        return "json_object_schema", fmt["schema"]
    outputs = body.get("structured_outputs")
    wanted = isinstance(outputs, dict) and isinstance(outputs.get("json"), dict)
    if "structured_outputs" in profile.schema_fields and wanted:
        return "structured_outputs", outputs["json"]
    choice = body.get("tool_choice")
    if profile.tools and isinstance(choice, dict) and body.get("tools"):
        for tool in body["tools"]:
            function = tool.get("function") or {}
            if function.get("name") == (choice.get("function") or {}).get("name"):
                return str(function["name"]), function.get("parameters") or {}
    return None


def synthesize(
    body: dict[str, Any], yes_rate: float, profile: ServerProfile | None = None, draw: int = 0
) -> tuple[str, str]:
    """(schema name or mode, the answer's JSON text) for a chat request."""
    rng = random.Random(request_seed(body, draw))
    prompt = _user_text(body)
    fmt = body.get("response_format") or {}
    topics = reference_topics(prompt)
    enforced = enforced_schema(body, profile or PROFILES["openai"])
    if enforced is not None:
        name, schema = enforced
        if name == "TopicAnswer" or (topics is not None and "reference_topics" in (schema.get("properties") or {})):
            return name, json.dumps(_topic_answer(rng, yes_rate, topics or []))
        return name, json.dumps(Synthesizer(schema, rng, yes_rate, prompt).value(schema), ensure_ascii=False)
    mode = str(fmt.get("type") or "none")
    if topics is not None and '"reference_topics"' in prompt:
        return mode, json.dumps(_topic_answer(rng, yes_rate, topics))
    for marker, schema in _PROMPT_SCHEMAS:
        if marker in prompt:
            return mode, json.dumps(Synthesizer(schema, rng, yes_rate, prompt).value(schema))
    return mode, json.dumps({"answer": rng.choice(SENTENCES)})


def embedding(text: str, dim: int) -> list[float]:
    values: list[float] = []
    counter = 0
    while len(values) < dim:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        values += [b / 127.5 - 1.0 for b in digest]
        counter += 1
    vector = values[:dim]
    norm = sum(v * v for v in vector) ** 0.5 or 1.0
    return [v / norm for v in vector]


def _decoded(value: Any) -> Any:
    if isinstance(value, str):
        raw = base64.b64decode(value)
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    return value


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


class OpenAIApp(StandinApp):
    name = "openai"

    def __init__(self, options: OpenAIOptions | None = None) -> None:
        self.options = options or OpenAIOptions()
        super().__init__(self.options.faults)
        self.by_schema: Counter[str] = Counter()
        self.by_model: Counter[str] = Counter()
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.embedded = 0
        self._slot: asyncio.Lock | None = None
        #: Requests queued behind the one running (a one-at-a-time profile), now and at most.
        self.waiting = 0
        self.most_waiting = 0
        #: Sampled answers drawn so far (at temperature > 0 each draw differs).
        self.draws = 0

    # --- routing -----------------------------------------------------------------------------

    def error_response(self, status: int, message: str, headers: dict[str, str] | None = None) -> Response:
        kind = {
            400: "invalid_request_error",
            401: "authentication_error",
            404: "not_found_error",
            429: "rate_limit_error",
        }
        error = {"message": message, "type": kind.get(status, "server_error"), "param": None, "code": None}
        return Response.json(status, {"error": error}, headers)

    def rate_limited(self, retry_after: float) -> Response:
        headers = {"Retry-After": format_retry_after(retry_after), "retry-after-ms": str(int(retry_after * 1000))}
        return self.error_response(429, "Rate limit reached for requests (stand-in)", headers)

    def route(self, request: Request) -> Routed:
        label = ROUTES.get((request.method, request.raw_path))
        if label is None:
            self.violation(f"{request.method} {request.raw_path}: no such route")
            return Routed(
                f"{request.method} {request.raw_path}",
                answer=self.error_response(404, f"Unknown route {request.raw_path}"),
            )
        if self.options.api_key and request.header("authorization") != f"Bearer {self.options.api_key}":
            return Routed(label, answer=self.error_response(401, "Incorrect API key provided"))
        if request.method == "POST":
            try:
                body = json.loads(request.body)
            except ValueError as error:
                self.violation(f"{label}: the body is not JSON: {error}")
                return Routed(label, answer=self.error_response(400, f"body is not JSON: {error}"))
            problem = self._check_request(label, body)
            if problem:
                self.violation(f"{label}: {problem}")
                return Routed(label, answer=self.error_response(400, problem))
            model = body.get("model")
            unknown = self.profile.unknown_model
            if self.options.models is not None and model not in self.options.models and unknown != "default":
                return Routed(label, answer=self.error_response(404, unknown.format(model=model)))
            if label.endswith("completions") and self.options.reject_response_format and body.get("response_format"):
                return Routed(
                    label,
                    answer=self.error_response(400, "response_format json_schema is not supported by this endpoint"),
                )
            if label.endswith("completions") and (refused := self._refused(body)) is not None:
                return Routed(label, answer=refused)
        return Routed(label, request.raw_path)

    @property
    def profile(self) -> ServerProfile:
        return PROFILES[self.options.profile]

    def _refused(self, body: dict[str, Any]) -> Response | None:
        """The profile's answer to structured-output parameters it does not take (None: it takes them)."""
        profile = self.profile
        if profile.rejects_unknown_fields:
            for name in sorted(set(body) - KNOWN_FIELDS):
                return self.error_response(400, f"Unrecognized request argument supplied: {name}")
        fmt = body.get("response_format")
        if isinstance(fmt, dict):
            if fmt.get("type") not in profile.response_formats:
                status, payload = profile.format_error(str(fmt.get("type")))
                return Response.json(status, payload)
            if profile.rejects_unknown_fields and set(fmt) - {"type", "json_schema"}:
                extra = sorted(set(fmt) - {"type", "json_schema"})[0]
                return self.error_response(400, f"Unrecognized request argument supplied: response_format.{extra}")
        return None

    async def handle(self, request: Request) -> Response:
        """A profile that runs one completion at a time queues the rest silently; a request whose client
        gave up still runs to its end (the HTTP server never cancels a handler) and holds the queue."""
        if not (self.profile.one_at_a_time and request.raw_path == "/v1/chat/completions"):
            return await super().handle(request)
        if self._slot is None:
            self._slot = asyncio.Lock()
        self.waiting += 1
        self.most_waiting = max(self.most_waiting, self.waiting)
        async with self._slot:
            self.waiting -= 1
            return await super().handle(request)

    @staticmethod
    def _check_request(label: str, body: Any) -> str | None:
        if not isinstance(body, dict):
            return "the body must be a JSON object"
        if not isinstance(body.get("model"), str) or not body["model"]:
            return "'model' must be a non-empty string"
        if label.endswith("embeddings"):
            value = body.get("input")
            if not (
                isinstance(value, str)
                or (isinstance(value, list) and value and all(isinstance(v, str | int) for v in value))
            ):
                return "'input' must be a string or a non-empty list"
            if body.get("encoding_format", "float") not in ("float", "base64"):
                return "'encoding_format' must be float or base64"
            return None
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return "'messages' must be a non-empty list"
        for index, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") not in ROLES:
                return f"messages[{index}]: a message needs a role in {sorted(ROLES)}"
            content = message.get("content")
            if content is not None and not isinstance(content, str | list):
                return f"messages[{index}].content must be a string or a list of parts"
        temperature = body.get("temperature")
        if temperature is not None and not (isinstance(temperature, int | float) and 0 <= temperature <= 2):
            return "'temperature' must be within [0, 2]"
        for key in ("max_tokens", "max_completion_tokens", "n"):
            value = body.get(key)
            if value is not None and not (isinstance(value, int) and value > 0):
                return f"'{key}' must be a positive integer"
        fmt = body.get("response_format")
        if fmt is not None:
            known = set().union(*(p.response_formats for p in PROFILES.values()))
            if not isinstance(fmt, dict) or fmt.get("type") not in known:
                return f"'response_format.type' must be one of {sorted(known)}"
            if fmt["type"] == "json_schema":
                spec = fmt.get("json_schema")
                if not isinstance(spec, dict) or not SCHEMA_NAME.match(str(spec.get("name", ""))):
                    return "'response_format.json_schema.name' must match ^[a-zA-Z0-9_-]{1,64}$"
                if not isinstance(spec.get("schema"), dict):
                    return "'response_format.json_schema.schema' must be an object"
        return None

    # --- answers -----------------------------------------------------------------------------

    async def serve(self, request: Request, routed: Routed) -> Response:
        if routed.label == "GET /v1/models":
            models = self.options.models or ["standin-judge"]
            payload = {
                "object": "list",
                "data": [{"id": m, "object": "model", "created": 0, "owned_by": "standin"} for m in models],
            }
            return Response.json(200, payload)
        body = json.loads(request.body)
        if routed.label.endswith("embeddings"):
            return self._embeddings(body)
        return self._chat(body)

    def _chat(self, body: dict[str, Any]) -> Response:
        self.draws += 1
        name, content = synthesize(body, self.options.yes_rate, self.profile, self.draws)
        seed = request_seed(body, self.draws)
        if self.options.invalid_rate and int(seed[:8], 16) / 0xFFFFFFFF < self.options.invalid_rate:
            content = content[: max(1, len(content) // 2)]  # cut: not valid JSON
        prompt_tokens = sum(_tokens(json.dumps(m.get("content"), ensure_ascii=False)) for m in body["messages"])
        completion_tokens = _tokens(content)
        self.by_schema[name] += 1
        self.by_model[body["model"]] += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
        finish = "stop"
        choice = body.get("tool_choice")
        if self.profile.tools and isinstance(choice, dict) and body.get("tools"):
            function = (choice.get("function") or {}).get("name", "")
            call = {"id": f"call_{seed[:12]}", "type": "function", "function": {"name": function, "arguments": content}}
            message = {"role": "assistant", "content": None, "refusal": None, "tool_calls": [call]}
            finish = "tool_calls"
        payload = {
            "id": f"chatcmpl-{seed[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": finish,
                    "logprobs": None,
                    "message": message,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        return self._checked(payload, "chat")

    def _embeddings(self, body: dict[str, Any]) -> Response:
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        base64_format = body.get("encoding_format") == "base64"
        data = []
        tokens = 0
        for index, text in enumerate(inputs):
            vector = embedding(str(text), self.options.embedding_dim)
            tokens += _tokens(str(text))
            encoded: Any = (
                base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode() if base64_format else vector
            )
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        self.embedded += len(inputs)
        self.by_model[body["model"]] += 1
        self.prompt_tokens += tokens
        payload = {
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        return self._checked(payload, "embeddings")

    def _checked(self, payload: dict[str, Any], kind: str) -> Response:
        """Validate the answer with the ``openai`` package's own model before sending it."""
        import pydantic
        from openai.types import CreateEmbeddingResponse
        from openai.types.chat import ChatCompletion

        model: Any = ChatCompletion if kind == "chat" else CreateEmbeddingResponse
        checked = payload
        if kind == "embeddings":  # base64 vectors are decoded by the client before its model sees them
            checked = {**payload, "data": [{**d, "embedding": _decoded(d["embedding"])} for d in payload["data"]]}
        try:
            model.model_validate(checked)
        except pydantic.ValidationError as error:
            self.violation(f"answer: {error}")
            return self.error_response(400, f"stand-in answer violates the openai models: {error}")
        return Response.json(200, payload)

    # --- control -----------------------------------------------------------------------------

    def extra_stats(self) -> dict[str, Any]:
        return {
            "by_schema": dict(self.by_schema),
            "by_model": dict(self.by_model),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "embedded": self.embedded,
            "most_waiting": self.most_waiting,
            "options": {k: v for k, v in self.options.__dict__.items() if k != "faults"},
        }

    def reset(self) -> None:
        super().reset()
        self.by_schema.clear()
        self.by_model.clear()
        self.prompt_tokens = self.completion_tokens = self.embedded = 0
        self.most_waiting = 0

    async def control(self, request: Request, name: str) -> Response | None:
        if request.method == "POST" and name == "options":
            body = request.json() or {}
            allowed = {
                "yes_rate", "invalid_rate", "reject_response_format", "embedding_dim", "models", "api_key", "profile"
            }  # fmt: skip
            unknown = set(body) - allowed
            if unknown:
                raise ValueError(f"unknown options {sorted(unknown)}; known: {sorted(allowed)}")
            for key, value in body.items():
                setattr(self.options, key, value)
            return Response.json(200, {k: v for k, v in self.options.__dict__.items() if k != "faults"})
        return None


# --- command line -------------------------------------------------------------------------------------


def options_to_argv(options: OpenAIOptions) -> list[str]:
    argv = [
        "--profile", options.profile,
        "--faults-json", json.dumps(options.faults.to_dict()),
        "--yes-rate", str(options.yes_rate),
        "--invalid-rate", str(options.invalid_rate),
        "--embedding-dim", str(options.embedding_dim),
    ]  # fmt: skip
    if options.reject_response_format:
        argv.append("--reject-response-format")
    if options.models:
        argv += ["--models", ",".join(options.models)]
    if options.api_key:
        argv += ["--api-key", options.api_key]
    return argv


def parse_args(argv: list[str] | None = None) -> tuple[int, OpenAIOptions]:
    parser = argparse.ArgumentParser(
        prog="python -m standins.openai_server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, help="seconds before each answer")
    parser.add_argument("--latency-max", type=float, help="with --latency: uniform in [latency, latency-max]")
    parser.add_argument("--rate-429", type=float)
    parser.add_argument("--retry-after", type=float)
    parser.add_argument("--rate-5xx", type=float)
    parser.add_argument("--rate-drop", type=float)
    parser.add_argument("--seed", type=int, help="seed of the fault draws")
    parser.add_argument("--faults-json", default="{}")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="llama_cpp", help="the real server modelled")
    parser.add_argument("--yes-rate", type=float, default=0.7)
    parser.add_argument("--invalid-rate", type=float, default=0.0)
    parser.add_argument("--reject-response-format", action="store_true")
    parser.add_argument("--embedding-dim", type=int, default=64)
    parser.add_argument("--models", help="comma-separated; others answer 404")
    parser.add_argument("--api-key")
    args = parser.parse_args(argv)
    faults = json.loads(args.faults_json)
    for flag in ("latency", "latency_max", "rate_429", "retry_after", "rate_5xx", "rate_drop", "seed"):
        if getattr(args, flag) is not None:
            faults[flag] = getattr(args, flag)
    options = OpenAIOptions(
        faults=FaultConfig.from_dict(faults),
        profile=args.profile,
        yes_rate=args.yes_rate,
        invalid_rate=args.invalid_rate,
        reject_response_format=args.reject_response_format,
        embedding_dim=args.embedding_dim,
        models=args.models.split(",") if args.models else None,
        api_key=args.api_key,
    )
    return args.port, options


def main(argv: list[str] | None = None) -> int:
    import os

    from standins.http import serve_forever

    port, options = parse_args(argv)
    app = OpenAIApp(options)

    def announce(bound: int) -> None:
        print(json.dumps({"port": bound, "url": f"http://127.0.0.1:{bound}", "pid": os.getpid()}), flush=True)

    serve_forever(app.handle, port=port, announce=announce)
    return 0


if __name__ == "__main__":
    sys.exit(main())
