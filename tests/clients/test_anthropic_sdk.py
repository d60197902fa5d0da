"""The official `anthropic` Python SDK against `kvserve serve` on SmolLM2-135M-Instruct, over
POST /v1/messages (Anthropic's Messages API).

A whole answer (text block, stop_reason, usage with the prefix cache's reads), a stop sequence
("stop_sequence" and the string), the SDK's stream
helper (its final message equals the whole answer at temperature 0, its events come in Anthropic's
order), a tool-use round trip (tools offered, an assistant tool_use block and the user's
tool_result sent back), tool_choice forms accepted, and errors as the SDK's own exception classes
(400 naming the field, 401). The key goes as `x-api-key`, as the SDK sends it.
"""
import anthropic
import pytest

from conftest import API_KEY

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Get the current weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]},
}


@pytest.fixture(scope="module")
def client(server):
    return anthropic.Anthropic(base_url=server.base_url.removesuffix("/v1"), api_key=API_KEY,
                               max_retries=0, timeout=120)


def ask(server, **overrides):
    # anthropic 2.x has no temperature argument any more; the API field still exists.
    params = dict(model=server.model, max_tokens=48, extra_body={"temperature": 0},
                  system="Answer briefly.",
                  messages=[{"role": "user", "content": "What is the capital of Japan?"}])
    params.update(overrides)
    return params


def test_create_answers_with_a_text_block_and_usage(client, server):
    message = client.messages.create(**ask(server))
    assert message.type == "message" and message.role == "assistant"
    assert message.id.startswith("msg_")
    assert message.model == server.model
    assert [block.type for block in message.content] == ["text"]
    assert "Tokyo" in message.content[0].text, message.content[0].text
    assert message.stop_reason == "end_turn"
    assert message.stop_sequence is None
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    assert message.usage.cache_creation_input_tokens == 0
    # The same prompt again: its prefix is read from the cache and no longer counts as input.
    again = client.messages.create(**ask(server))
    assert again.content[0].text == message.content[0].text
    assert again.usage.cache_read_input_tokens > 0
    total = message.usage.input_tokens + message.usage.cache_read_input_tokens
    assert again.usage.input_tokens + again.usage.cache_read_input_tokens == total


def test_max_tokens_cut_reports_max_tokens(client, server):
    message = client.messages.create(**ask(server, max_tokens=2))
    assert message.stop_reason == "max_tokens"
    assert message.usage.output_tokens == 2


def test_stop_sequence_is_reported(client, server):
    text = client.messages.create(**ask(server)).content[0].text
    stop = "Tokyo"
    assert stop in text, text
    message = client.messages.create(**ask(server, stop_sequences=["never seen", stop]))
    assert message.stop_reason == "stop_sequence"
    assert message.stop_sequence == stop
    assert message.content[0].text == text[:text.index(stop)]


def test_stream_equals_the_whole_answer(client, server):
    whole = client.messages.create(**ask(server))
    kinds = []
    with client.messages.stream(**ask(server)) as stream:
        for event in stream:
            kinds.append(event.type)
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "content_block_start" in kinds and "content_block_stop" in kinds
    assert kinds.index("message_delta") > kinds.index("content_block_stop")
    assert [block.type for block in final.content] == ["text"]
    assert final.content[0].text == whole.content[0].text
    assert final.stop_reason == whole.stop_reason == "end_turn"
    assert final.usage.output_tokens == whole.usage.output_tokens


def test_tool_use_round_trip_is_accepted_and_answered(client, server):
    messages = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_01", "name": "get_weather",
             "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "Sunny, 21 C"}]},
    ]
    for choice in ({"type": "auto"}, {"type": "any"}, {"type": "tool", "name": "get_weather"},
                   {"type": "none"}):
        message = client.messages.create(**ask(server, tools=[WEATHER_TOOL], tool_choice=choice,
                                               messages=messages, max_tokens=32))
        assert message.stop_reason in ("end_turn", "max_tokens", "tool_use"), choice
        assert message.content, choice
        for block in message.content:
            assert block.type in ("text", "tool_use"), block
            if block.type == "tool_use":  # the shape holds whether or not a call was forced
                assert block.id.startswith("toolu_") and block.name == "get_weather"
                assert isinstance(block.input, dict)
                assert message.stop_reason == "tool_use"


def test_bad_request_is_a_bad_request_error_naming_the_field(client, server):
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(**ask(server, extra_body={"temperature": "hot"}))
    assert caught.value.status_code == 400
    body = caught.value.body
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert "temperature" in body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(**ask(server, messages=[
            {"role": "user", "content": [{"type": "tool_use", "id": "x", "name": "f",
                                          "input": {}}]}]))
    assert "messages[0].content[0].type" in caught.value.body["error"]["message"]


def test_wrong_key_is_an_authentication_error(server):
    bad = anthropic.Anthropic(base_url=server.base_url.removesuffix("/v1"), api_key="wrong",
                              max_retries=0, timeout=60)
    with pytest.raises(anthropic.AuthenticationError) as caught:
        bad.messages.create(**ask(server))
    assert caught.value.body["error"]["type"] == "authentication_error"
