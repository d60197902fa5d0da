"""The official `openai` Python SDK's Responses API (`client.responses`) against `kvserve serve` on
SmolLM2-135M-Instruct, over the stateless POST /v1/responses.

A whole answer (message item, output_text, usage with the prefix cache's reads), a cut answer
("incomplete" with max_output_tokens), the SDK's stream helper (its events in the Responses order,
its final response equal to the whole one at temperature 0), `responses.parse` with a pydantic
model (the SDK validates the object itself), forced function calls and a tool round trip
(function_call and function_call_output items sent back), streamed function calls, logprobs, and
refusals as the SDK's own exceptions: the stateless fields, built-in tools, a bad key.
"""
import json

import openai
import pydantic
import pytest

from conftest import API_KEY

WEATHER = {"type": "function", "name": "get_weather", "description": "Get the weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}},
                          "required": ["city"], "additionalProperties": False},
           "strict": True}


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0, timeout=120)


def ask(server, **overrides):
    params = dict(model=server.model, max_output_tokens=48, temperature=0,
                  instructions="Answer briefly.", input="What is the capital of Japan?")
    params.update(overrides)
    return params


def test_create_answers_with_a_message_item_and_usage(client, server):
    response = client.responses.create(**ask(server))
    assert response.object == "response" and response.id.startswith("resp_")
    assert response.status == "completed" and response.error is None
    assert response.model == server.model
    assert [item.type for item in response.output] == ["message"]
    message = response.output[0]
    assert message.role == "assistant" and message.status == "completed"
    assert [part.type for part in message.content] == ["output_text"]
    assert "Tokyo" in response.output_text, response.output_text
    assert response.instructions == "Answer briefly." and response.store is False
    usage = response.usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    # The same prompt again: its prefix is read from the cache.
    again = client.responses.create(**ask(server))
    assert again.output_text == response.output_text
    assert again.usage.input_tokens_details.cached_tokens > 0


def test_input_items_and_developer_role_equal_the_string_form(client, server):
    whole = client.responses.create(**ask(server))
    items = client.responses.create(**ask(server, instructions=None, input=[
        {"role": "developer", "content": "Answer briefly."},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "What is the capital of Japan?"}]}]))
    assert items.output_text == whole.output_text


def test_max_output_tokens_cut_is_incomplete(client, server):
    response = client.responses.create(**ask(server, max_output_tokens=2))
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.usage.output_tokens == 2


def test_stream_equals_the_whole_answer(client, server):
    whole = client.responses.create(**ask(server))
    kinds = []
    with client.responses.stream(**ask(server)) as stream:
        for event in stream:
            kinds.append(event.type)
        final = stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert kinds.index("response.output_item.added") < kinds.index("response.output_text.delta")
    assert kinds.index("response.output_text.done") < kinds.index("response.output_item.done")
    assert final.output_text == whole.output_text
    assert final.status == "completed"
    assert final.usage.output_tokens == whole.usage.output_tokens


class City(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=30)
    country: str = pydantic.Field(max_length=30)
    population_millions: float


def test_parse_returns_a_valid_pydantic_object(client, server):
    """The SDK sends the model's strict schema as text.format and validates the answer itself."""
    for kwargs in ({"temperature": 0}, {"temperature": 0.9, "extra_body": {"seed": 3}}):
        response = client.responses.parse(
            model=server.model, max_output_tokens=120, text_format=City,
            input="Describe Tokyo as JSON.", **kwargs)
        assert response.status == "completed", response.output_text
        assert isinstance(response.output_parsed, City), response.output_text


def test_named_tool_choice_calls_the_function_and_the_round_trip_answers(client, server):
    response = client.responses.create(**ask(server, input="Is it cold in Oslo today?",
                                             tools=[WEATHER], parallel_tool_calls=False,
                                             tool_choice={"type": "function", "name": "get_weather"}))
    calls = [item for item in response.output if item.type == "function_call"]
    assert len(calls) == 1, response.output
    call = calls[0]
    assert call.name == "get_weather" and call.status == "completed"
    assert set(json.loads(call.arguments)) == {"city"}
    # The call and its output go back as input items; the model answers in prose.
    follow = client.responses.create(**ask(server, tools=[WEATHER], input=[
        {"role": "user", "content": "Is it cold in Oslo today?"},
        {"type": "function_call", "call_id": call.call_id, "name": call.name,
         "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "-3 C, snow"}]))
    assert follow.status == "completed"
    assert follow.output and follow.output[0].type in ("message", "function_call")


def test_streamed_function_call_equals_the_whole_one(client, server):
    params = ask(server, input="Is it cold in Oslo today?", tools=[WEATHER], tool_choice="required",
                 parallel_tool_calls=False)
    whole = client.responses.create(**params)
    kinds = []
    with client.responses.stream(**params) as stream:
        for event in stream:
            kinds.append(event.type)
        final = stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds
    assert "response.function_call_arguments.done" in kinds
    whole_calls = [(i.name, i.arguments) for i in whole.output if i.type == "function_call"]
    final_calls = [(i.name, i.arguments) for i in final.output if i.type == "function_call"]
    assert final_calls == whole_calls and len(whole_calls) == 1


def test_top_logprobs_come_with_the_output_text(client, server):
    response = client.responses.create(**ask(server, max_output_tokens=6, top_logprobs=2,
                                             include=["message.output_text.logprobs"]))
    logprobs = response.output[0].content[0].logprobs
    assert len(logprobs) == response.usage.output_tokens
    assert all(len(entry.top_logprobs) == 2 and entry.logprob <= 0 for entry in logprobs)
    assert "".join(entry.token for entry in logprobs) == response.output_text


@pytest.mark.parametrize("overrides, param", [
    ({"previous_response_id": "resp_123"}, "previous_response_id"),
    ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     "input[0].content[0].type"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
])
def test_refusals_are_bad_requests_naming_the_field(client, server, overrides, param):
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(**ask(server, **overrides))
    assert caught.value.body["param"] == param, caught.value.body


def test_wrong_key_is_an_authentication_error(server):
    bad = openai.OpenAI(base_url=server.base_url, api_key="wrong", max_retries=0, timeout=60)
    with pytest.raises(openai.AuthenticationError):
        bad.responses.create(**ask(server))
