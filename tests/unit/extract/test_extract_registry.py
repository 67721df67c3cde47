"""The format registry: every format module gives one :class:`Format` listed in ``FORMATS``, and no
two formats claim the same type or key (the merged lookups would silently keep only one of them)."""

from __future__ import annotations

import importlib
import pkgutil
from collections import Counter
from collections.abc import Iterable

import trace_scorer.extract.formats as formats_package
from trace_scorer.extract import messages
from trace_scorer.extract.formats import FORMATS, Format
from trace_scorer.extract.formats.base import Unpacked
from trace_scorer.extract.model import Notes


def _format_objects(module_name: str) -> list[Format]:
    module = importlib.import_module(f"{formats_package.__name__}.{module_name}")
    return [value for value in vars(module).values() if Format in type(value).__mro__]


def test_every_format_module_gives_one_format_and_it_is_listed():
    modules = [m.name for m in pkgutil.iter_modules(formats_package.__path__) if m.name != "base"]
    assert sorted(modules) == ["aisdk", "anthropic", "gemini", "langchain", "openai", "otel"]
    for name in modules:
        found = _format_objects(name)
        assert len(found) == 1, f"formats/{name}.py should define exactly one Format object"
        assert found[0] in FORMATS, f"formats/{name}.py: add its format to FORMATS"
    assert len({f.name for f in FORMATS}) == len(FORMATS) == len(modules)


def _claimed_twice(keys: Iterable[str]) -> list[str]:
    return [key for key, count in Counter(keys).items() if count > 1]


def test_no_two_formats_claim_the_same_type_or_key():
    tables = {
        "roles": [k for f in FORMATS for k in f.roles],
        "message_types": [k for f in FORMATS for k in f.message_types],
        "item_types": [k for f in FORMATS for k in f.item_types],
        "blocks": [k for f in FORMATS for k in f.blocks],
        "keyed_parts": [k for f in FORMATS for k in f.keyed_parts],
        "text, skipped and handled blocks": [
            *["text"],
            *(k for f in FORMATS for k in f.text_blocks),
            *(k for f in FORMATS for k in f.skipped_blocks),
            *(k for f in FORMATS for k in f.blocks),
        ],
        "common roles": [*("system", "user", "assistant", "tool", "ipython"), *(k for f in FORMATS for k in f.roles)],
    }
    for table, keys in tables.items():
        assert _claimed_twice(keys) == [], table


def test_the_merged_lookups_hold_every_format_table():
    tables = messages.tables_of(FORMATS)
    assert tables.roles["human"] == "user" and tables.roles["model"] == "assistant"
    assert tables.roles["developer"] == "system"
    assert {"tool_use", "tool_call", "tool-call"} <= tables.block_handlers.keys()
    assert list(tables.keyed_parts) == ["functionCall", "function_call", "functionResponse", "function_response"]
    assert {"image", "input_image", "thinking", "blob", "media"} <= tables.ignored_blocks
    assert "inlineData" in tables.media_keys
    assert {"tool_calls", "toolCalls", "function_call", "additional_kwargs", "invalid_tool_calls"} == (
        tables.call_keys
    )


class _Echo(Format):
    """A made-up format: ``{"echo": [...]}`` holds messages, ``speaker`` is a role."""

    name = "echo"
    roles = {"speaker": "assistant"}  # noqa: RUF012 (a test's throwaway format)

    def unpack(self, container):  # type: ignore[no-untyped-def]
        return Unpacked(container["echo"], system="echoed") if "echo" in container else None


def test_a_new_format_is_one_object_in_the_list(monkeypatch):
    """What docs/formats.md promises: a format is read once it is in the formats asked (FORMATS, then
    the plug-ins': the tables are merged on first use)."""
    monkeypatch.setattr(messages, "_tables", lambda: messages.tables_of((*FORMATS, _Echo())))
    found = messages.MessageReader(Notes()).read({"echo": [{"role": "speaker", "content": "hi"}]}, "output", "w")
    assert found is not None
    assert [(m.role, m.content) for m in found] == [("system", "echoed"), ("assistant", "hi")]


def test_only_formats_with_their_own_envelopes_and_calls_are_asked_for_them():
    """Formats keeping Format's defaults (which change nothing and find nothing) are not asked per
    message; a plug-in's own method is, after the built-in formats'."""
    tables = messages.tables_of((*FORMATS, _Echo()))
    assert [f.name for f in tables.unpackers] == [f.name for f in FORMATS if "unpack" in type(f).__dict__] + ["echo"]
    assert [f.name for f in tables.unwrappers] == [f.name for f in FORMATS if "unwrap" in type(f).__dict__]
    assert "echo" not in [f.name for f in tables.call_readers]
