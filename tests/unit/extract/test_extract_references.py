"""Reference fields: the defaults, configured JSON paths, and what happens with unusable values."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trace_scorer.config import load_settings
from trace_scorer.config.common import ConfigError
from trace_scorer.config.references import ReferenceSettings, parse_path
from trace_scorer.extract import extract_sample
from trace_scorer.extract.model import Notes
from trace_scorer.extract.references import read_references, resolve


def test_path_syntax():
    assert parse_path("$") == ()
    assert parse_path("$.expectedOutput.answer") == ("expectedOutput", "answer")
    assert parse_path("$.trace.metadata['langfuse.topic'][0]") == ("trace", "metadata", "langfuse.topic", 0)
    assert parse_path('$.a["say \\"hi\\""][-1]') == ("a", 'say "hi"', -1)


@pytest.mark.parametrize("bad", ["expectedOutput.answer", "$.", "$..a", "$[x]", "$.a b", "$['open"])
def test_bad_paths_are_refused_with_the_reason(bad):
    with pytest.raises(ValueError, match="path"):
        parse_path(bad)


def test_bad_path_in_settings_is_a_config_error_naming_the_key(tmp_path):
    config = tmp_path / "settings.toml"
    config.write_text(
        '[[targets]]\nname = "t"\n[[targets.metrics]]\nmetric = "rouge"\n'
        '[targets.references]\nexpected = "expectedOutput.answer"\n'
    )
    with pytest.raises(ConfigError, match=r"targets\[0\]\.references\.expected"):
        load_settings(config, environ={})


def test_settings_accept_one_path_or_a_list(tmp_path):
    config = tmp_path / "settings.toml"
    config.write_text(
        '[[targets]]\nname = "t"\n[[targets.metrics]]\nmetric = "rouge"\n'
        '[targets.references]\nexpected = "$.expectedOutput.text"\nreference_topics = []\n'
    )
    references = load_settings(config, environ={}).targets[0].references
    assert references.expected == ["$.expectedOutput.text"]
    assert references.reference_topics == []
    assert references.reference == ["$.expectedOutput.goal", "$.expectedOutput.reference"]
    with pytest.raises(ValidationError):
        ReferenceSettings(unknown=["$.x"])  # type: ignore[call-arg]


def test_resolve_steps_into_json_strings():
    document = {"metadata": {"reference": '{"topics": ["a", "b"]}'}, "list": [1, 2, 3]}
    assert resolve(document, "$.metadata.reference.topics[1]") == "b"
    assert resolve(document, "$.list[-1]") == 3
    missing = resolve(document, "$.list[7]")
    assert missing is resolve(document, "$.nope")  # the same "not found" marker


def test_paths_find_flattened_keys_at_the_top_of_the_document():
    """A path whose first step is not a key of the document still finds a flattened key starting with
    it (v4 flattens nested metadata to dotted keys); a first step found nowhere finds nothing."""
    settings = ReferenceSettings(
        expected=["$.nowhere.answer", "$.expectedOutput.answer"],
        reference=['$["a.b"].c'],
        reference_topics=["$.trace.metadata.topics"],
    )
    document = {"expectedOutput.answer": "42", "a.b.c": "goal", "trace.metadata.topics": '["x"]'}
    found, sources = read_references(document, settings, Notes())
    assert found == {"expected": "42", "reference": "goal", "reference_topics": ["x"]}
    assert sources["expected"] == "$.expectedOutput.answer"
    whole = ReferenceSettings(expected=["$"], reference=[], reference_tool_calls=[], reference_topics=[])
    assert read_references({"x": 1}, whole, Notes())[0] == {}  # "$" is the document itself: not text


def test_defaults_string_expected_output(make_row):
    sample = extract_sample(
        [make_row("root", output="x")], item={"expectedOutput": "Paris", "traceId": "trace-1"}
    )
    assert sample.expected == "Paris"
    assert (
        sample.reference is None and sample.reference_tool_calls is None and sample.reference_topics is None
    )


def test_defaults_object_expected_output(make_row):
    item = {
        "traceId": "trace-1",
        "experimentId": "exp-1",
        "experimentItemId": "item-1",
        "id": "root-span-of-the-item",
        "expectedOutput": {
            "answer": "AF123 booked",
            "goal": "the user has a booking",
            "tool_calls": [
                {"name": "search", "arguments": '{"q": "Paris"}'},
                {"function": {"name": "book", "arguments": {"id": "AF123"}}},
                {"tool_name": "notify", "parameters": {"channel": "email"}},
            ],
            "tool_sequence_matters": "true",
        },
        "metadata": {"reference_topics": ["travel", "booking"]},
    }
    sample = extract_sample([make_row("root", output="x")], item=item)
    assert sample.expected == "AF123 booked"
    assert sample.reference == "the user has a booking"
    assert sample.reference_tool_calls is not None
    assert [(c.name, c.arguments) for c in sample.reference_tool_calls] == [
        ("search", {"q": "Paris"}),
        ("book", {"id": "AF123"}),
        ("notify", {"channel": "email"}),
    ]
    assert sample.reference_topics == ["travel", "booking"]
    assert sample.tool_sequence_matters is True
    assert sample.item_id == "item-1" and sample.run_id == "exp-1"
    assert not any("references" in note or "expectedOutput" in note for note in sample.notes)


def test_empty_reference_list_means_no_calls_expected(make_row):
    sample = extract_sample(
        [make_row("root", output="x")], item={"expectedOutput": {"answer": "hi", "tool_calls": []}}
    )
    assert sample.reference_tool_calls == []


def test_expected_output_as_json_string_is_an_object(make_row):
    item = {"expectedOutput": '{"answer": "42", "tool_calls": []}'}
    sample = extract_sample([make_row("root", output="x")], item=item)
    assert sample.expected == "42"
    assert sample.reference_tool_calls == []


def test_topics_from_v4_string_metadata_and_trace_metadata(make_row):
    item = {"expectedOutput": "x", "experimentItemMetadata": {"reference_topics": '["billing", "refunds"]'}}
    sample = extract_sample([make_row("root", output="x")], item=item)
    assert sample.reference_topics == ["billing", "refunds"]

    rows = [make_row("root", output="x", metadata={"reference_topics": "billing, refunds ,"})]
    assert extract_sample(rows).reference_topics == ["billing", "refunds"]


def test_configured_paths(make_row):
    references = ReferenceSettings(
        expected="$.expectedOutput.final.text",  # type: ignore[arg-type]
        reference=["$.metadata.goal", "$.trace.metadata.goal"],
        reference_topics="$.trace.metadata.topics",  # type: ignore[arg-type]
        reference_tool_calls="$.expectedOutput.steps",  # type: ignore[arg-type]
    )
    rows = [make_row("root", output="x", metadata={"goal": "refund issued", "topics": ["orders"]})]
    item = {
        "expectedOutput": {"final": {"text": "Refunded."}, "steps": [{"name": "refund", "args": {"id": 7}}]}
    }
    sample = extract_sample(rows, item=item, references=references)
    assert sample.expected == "Refunded."
    assert sample.reference == "refund issued"  # from the trace: the item's metadata has no goal
    assert sample.reference_topics == ["orders"]
    assert sample.reference_tool_calls is not None
    assert [(c.name, c.arguments) for c in sample.reference_tool_calls] == [("refund", {"id": 7})]


def test_turned_off_field_is_absent(make_row):
    references = ReferenceSettings(expected=[])
    sample = extract_sample(
        [make_row("root", output="x")], item={"expectedOutput": "Paris"}, references=references
    )
    assert sample.expected is None


def test_configured_path_of_the_wrong_kind_is_noted(make_row):
    references = ReferenceSettings(expected="$.expectedOutput")  # type: ignore[arg-type]
    sample = extract_sample(
        [make_row("root", output="x")], item={"expectedOutput": {"a": 1}}, references=references
    )
    assert sample.expected is None
    assert any(
        "references.expected: $.expectedOutput is an object, not text" in note for note in sample.notes
    )


def test_unreadable_reference_call_leaves_all_reference_calls_absent(make_row):
    item = {"expectedOutput": {"answer": "x", "tool_calls": [{"name": "a"}, {"arguments": {"no": "name"}}]}}
    sample = extract_sample([make_row("root", output="x")], item=item)
    assert sample.reference_tool_calls is None  # never scored against half a reference
    assert any("reference_tool_calls" in note and "entry 1" in note for note in sample.notes)


def test_object_expected_output_without_known_keys_is_explained(make_row):
    sample = extract_sample([make_row("root", output="x")], item={"expectedOutput": {"city": "Paris"}})
    assert sample.expected is None
    assert any("expectedOutput is an object without" in note and "city" in note for note in sample.notes)


def test_flag_from_trace_metadata(make_row):
    rows = [make_row("root", output="x", metadata={"final_answer_uses_tools": "false"})]
    assert extract_sample(rows).final_answer_uses_tools is False


def test_dataset_item_id_and_legacy_run_item(make_row):
    dataset_item = {"id": "item-17", "datasetId": "ds_1", "status": "ACTIVE", "expectedOutput": "x"}
    assert extract_sample([make_row("root", output="x")], item=dataset_item).item_id == "item-17"
    run_item = {"traceId": "trace-1", "datasetItemId": "item-3", "datasetRunId": "run-9", "id": "dri-1"}
    sample = extract_sample([make_row("root", output="x")], item=run_item)
    assert (sample.item_id, sample.run_id) == ("item-3", "run-9")
