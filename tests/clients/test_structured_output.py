"""Structured output through the official `openai` Python SDK against `kvserve serve` on
SmolLM2-135M-Instruct: `chat.completions.parse` with a pydantic model (the SDK sends the model's
strict JSON Schema as response_format and parses the answer back into the model), `json_object`,
a GBNF `grammar` passed through `extra_body`, streaming under a schema, and refused schemas as
400s naming the field. Every answer is checked by the client's own parser, not by kvserve.
"""
import json
from typing import Literal

import openai
import pydantic
import pytest

from conftest import API_KEY, Server


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0, timeout=120)


class Pet(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=20)
    kind: Literal["cat", "dog", "fish"]


class Person(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=30)
    age: int = pydantic.Field(ge=0, le=120)
    pets: list[Pet] = pydantic.Field(max_length=3)


def test_parse_returns_a_valid_pydantic_object(client, server):
    """The SDK's parse helper validates the answer against the pydantic model itself: an invalid
    document would raise here. Greedy and two seeds, so that it is not one lucky answer."""
    for kwargs in ({"temperature": 0}, {"temperature": 0.9, "seed": 1}, {"temperature": 0.9, "seed": 2}):
        completion = client.chat.completions.parse(
            model=server.model, max_tokens=200, response_format=Person,
            messages=[{"role": "user", "content": "Invent a person who owns pets. Answer in JSON."}],
            **kwargs)
        choice = completion.choices[0]
        assert choice.finish_reason == "stop", choice.message.content
        person = choice.message.parsed
        assert isinstance(person, Person), choice.message.content
        assert 0 <= person.age <= 120 and len(person.pets) <= 3


def test_json_object_is_an_object(client, server):
    """Every answer that ends (not cut by max_tokens) is a JSON object; most of them end."""
    finished = 0
    for seed in (5, 6, 7):
        reply = client.chat.completions.create(
            model=server.model, max_tokens=160, temperature=0.7, seed=seed,
            response_format={"type": "json_object"},
            messages=[{"role": "user", "content": "Give the temperature in Paris as a small JSON object."}])
        choice = reply.choices[0]
        if choice.finish_reason == "stop":
            finished += 1
            assert isinstance(json.loads(choice.message.content), dict), choice.message.content
    assert finished >= 2


def test_gbnf_grammar_through_extra_body(client, server):
    reply = client.completions.create(
        model=server.model, prompt="Is water wet? Answer:", max_tokens=8, temperature=1.0, seed=3,
        extra_body={"grammar": 'root ::= " " ("yes" | "no") "."'})
    assert reply.choices[0].text in (" yes.", " no.")
    assert reply.choices[0].finish_reason == "stop"


def test_streamed_answer_under_a_schema_equals_the_whole_one(client, server):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                               "population": {"type": "integer", "minimum": 0}},
              "required": ["city", "population"], "additionalProperties": False}
    request = dict(model=server.model, max_tokens=80, temperature=0,
                   response_format={"type": "json_schema",
                                    "json_schema": {"name": "city", "schema": schema, "strict": True}},
                   messages=[{"role": "user", "content": "Name a large city and its population."}])
    whole = client.chat.completions.create(**request).choices[0].message.content
    streamed = "".join(chunk.choices[0].delta.content or ""
                       for chunk in client.chat.completions.create(stream=True, **request)
                       if chunk.choices)
    assert streamed == whole
    document = json.loads(whole)
    assert list(document) == ["city", "population"]  # the schema's order
    assert isinstance(document["population"], int) and document["population"] >= 0


@pytest.mark.parametrize("body,param", [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "integer", "multipleOf": 3}}}}, "response_format.json_schema.schema"),
    ({"response_format": {"type": "xml"}}, "response_format.type"),
    ({"grammar": "root ::= root \"a\" | \"b\""}, "grammar"),
    ({"grammar": "root ::= x"}, "grammar"),
])
def test_refused_grammars_are_bad_requests_naming_the_field(client, server, body, param):
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(model=server.model, max_tokens=8,
                                       messages=[{"role": "user", "content": "hi"}], extra_body=body)
    assert error.value.status_code == 400
    assert error.value.body["param"] == param, error.value.body


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 40},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "parameters": {"type": "object", "properties": {
        "timezone": {"type": "string", "maxLength": 40}}, "required": ["timezone"]}}}


def test_tool_choice_required_always_calls_with_valid_arguments(client, server):
    """SmolLM2-135M answers this in prose when the choice is "auto" (test_openai_sdk.py); with
    "required" the grammar makes every answer calls whose arguments match the schema."""
    for seed in (1, 2, 3):
        reply = client.chat.completions.create(
            model=server.model, max_tokens=120, temperature=0.8, seed=seed, parallel_tool_calls=False,
            tools=[WEATHER, TIME], tool_choice="required",
            messages=[{"role": "user", "content": "Is it cold in Oslo today?"}])
        choice = reply.choices[0]
        assert choice.finish_reason == "tool_calls", choice.message
        assert len(choice.message.tool_calls) == 1
        call = choice.message.tool_calls[0]
        arguments = json.loads(call.function.arguments)
        if call.function.name == "get_weather":
            assert set(arguments) == {"city", "unit"} and arguments["unit"] in ("celsius", "fahrenheit")
        else:
            assert call.function.name == "get_time" and set(arguments) == {"timezone"}


def test_named_tool_choice_calls_that_function(client, server):
    reply = client.chat.completions.create(
        model=server.model, max_tokens=80, temperature=0, tools=[WEATHER, TIME],
        tool_choice={"type": "function", "function": {"name": "get_time"}}, parallel_tool_calls=False,
        messages=[{"role": "user", "content": "Is it cold in Oslo today?"}])
    calls = reply.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["get_time"]
    assert set(json.loads(calls[0].function.arguments)) == {"timezone"}


def test_forced_tool_choice_with_response_format_is_a_bad_request(client, server):
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(
            model=server.model, max_tokens=8, tools=[WEATHER], tool_choice="required",
            response_format={"type": "json_object"},
            messages=[{"role": "user", "content": "hi"}])
    assert error.value.body["param"] == "tool_choice"


@pytest.mark.parametrize("template", ["qwen3.5", "qwen3-coder"])
def test_forced_calls_in_qwen_xml_syntax(template):
    """The same forced choices on a server whose chat template writes Qwen 3.5's or Qwen3-Coder's
    XML calls (`--chat-template`): the grammar makes SmolLM2 write <function=...> blocks, the
    parser turns them back into JSON arguments (strings kept as strings, enums respected), and
    Qwen 3.5's reasoning block (its cue opens <think>) stays out of the content."""
    qwen = Server(["--chat-template", template])
    try:
        qwen_client = openai.OpenAI(base_url=qwen.base_url, api_key=API_KEY, max_retries=0,
                                    timeout=120)
        for seed in (1, 2):
            reply = qwen_client.chat.completions.create(
                model=qwen.model, max_tokens=120, temperature=0.8, seed=seed, tools=[WEATHER, TIME],
                tool_choice="required", parallel_tool_calls=False,
                messages=[{"role": "user", "content": "Is it cold in Oslo today?"}])
            choice = reply.choices[0]
            assert choice.finish_reason == "tool_calls", choice.message
            assert len(choice.message.tool_calls) == 1
            assert "<function=" not in (choice.message.content or "")
            call = choice.message.tool_calls[0]
            arguments = json.loads(call.function.arguments)
            if call.function.name == "get_weather":
                assert set(arguments) == {"city", "unit"}
                assert isinstance(arguments["city"], str)
                assert arguments["unit"] in ("celsius", "fahrenheit")
            else:
                assert call.function.name == "get_time" and set(arguments) == {"timezone"}
                assert isinstance(arguments["timezone"], str)
        named = qwen_client.chat.completions.create(
            model=qwen.model, max_tokens=80, temperature=0, tools=[WEATHER, TIME],
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
            messages=[{"role": "user", "content": "Is it cold in Oslo today?"}])
        assert [c.function.name for c in named.choices[0].message.tool_calls] == ["get_weather"]
    finally:
        status = qwen.stop()
        assert status == 0, f"kvserve serve exited with {status}:\n{qwen.log()}"
