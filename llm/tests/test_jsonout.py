"""Getting one JSON object out of a model's answer."""

import pytest

from llm.jsonout import JsonAnswerError, extract_json, parse_answer, validate

SCHEMA = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"score": 1}', {"score": 1}),
        (
            'Sure! Here it is: {"score": 0.5, "reason": "a {brace} in a string"} Hope that helps.',
            {"score": 0.5, "reason": "a {brace} in a string"},
        ),
        ('```json\n{"a": {"b": [1, 2]}}\n```', {"a": {"b": [1, 2]}}),
        ('```\n{"a": 1}\n```', {"a": 1}),
        ('<think>The answer could be {"score": 0} but</think>\n{"score": 1}', {"score": 1}),
        ('<THINKING>{"x": 1}</THINKING>{"y": 2}', {"y": 2}),
        ('{not json} then {"ok": true}', {"ok": True}),
        ('{"quote": "she said \\"}\\" loudly"}', {"quote": 'she said "}" loudly'}),
        ('prose {"first": 1} more {"second": 2}', {"first": 1}),
    ],
)
def test_extract_json(text, expected):
    assert extract_json(text) == expected


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "empty"),
        ("I think the score is 1.", "no JSON object"),
        ('<think>{"score": 1}', "no JSON object"),  # an unclosed reasoning block hides everything after it
        ("[1, 2, 3]", "no JSON object"),
        ('{"score": 1', "no JSON object"),
    ],
)
def test_no_object(text, problem):
    with pytest.raises(JsonAnswerError, match=problem):
        extract_json(text)


def test_validation_names_the_path_and_counts_the_rest():
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
        "required": ["items", "total"],
    }
    with pytest.raises(JsonAnswerError) as caught:
        validate({"items": [1, "two", "three"]}, schema)
    message = str(caught.value)
    assert "'total' is a required property" in message and "2 more problems" in message


def test_parse_answer_validates_only_with_a_schema():
    assert parse_answer('{"anything": 1}', None) == {"anything": 1}
    with pytest.raises(JsonAnswerError, match="at score: 'high' is not of type 'number'"):
        parse_answer('{"score": "high"}', SCHEMA)
