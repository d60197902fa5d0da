"""The official `openai` Python SDK against `kvserve serve` on SmolLM2-135M-Instruct.

Models, completions and chat, whole and streamed (the stream must equal the whole answer at
temperature 0), the SDK's stream helper, a tool-call round trip (tools offered, a call and its
result sent back; whole and streamed), n=3 (the prompt computed once), top_logprobs, and errors
as the SDK's own exception classes (400 naming the parameter, 401, 404). A real client that nobody here wrote; its version is pinned in
requirements/tools.txt.
"""
import json
import re
import urllib.request

import openai
import pytest

from conftest import API_KEY


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0, timeout=120)


def test_models_list_names_the_served_model(client, server):
    assert [m.id for m in client.models.list()] == [server.model]


def test_chat_answers_a_question(client, server):
    """SmolLM2-135M-Instruct knows the capital of Japan and ends its turn (<|im_end|>): the chat
    template and the end-of-turn token are right. (Asked for France's, this Q4_1 file answers
    "L'Étoile, la Marseillaise, ..." in llama.cpp too.)"""
    reply = client.chat.completions.create(
        model=server.model, temperature=0, max_tokens=48,
        messages=[{"role": "user", "content": "What is the capital of Japan?"}])
    choice = reply.choices[0]
    assert "Tokyo" in choice.message.content, choice.message.content
    assert "<|im_end|>" not in choice.message.content
    assert choice.finish_reason == "stop"


def test_completions_whole_and_streamed_agree(client, server):
    params = dict(model=server.model, prompt="The three primary colors are", max_tokens=16,
                  temperature=0)
    whole = client.completions.create(**params)
    assert whole.object == "text_completion"
    assert len(whole.choices) == 1
    assert whole.choices[0].text.strip(), whole
    assert whole.choices[0].finish_reason == "length"
    assert whole.usage.completion_tokens == 16

    text, finish = "", None
    for chunk in client.completions.create(**params, stream=True):
        for choice in chunk.choices:
            text += choice.text
            finish = choice.finish_reason or finish
    assert text == whole.choices[0].text
    assert finish == "length"


def test_chat_whole_and_streamed_with_usage_agree(client, server):
    params = dict(model=server.model, temperature=0, seed=7, max_completion_tokens=12,
                  messages=[{"role": "system", "content": "You are a helpful assistant."},
                            {"role": "user", "content": "Name a fruit that is yellow."}])
    whole = client.chat.completions.create(**params)
    assert whole.object == "chat.completion"
    message = whole.choices[0].message
    assert message.role == "assistant"
    assert message.content
    assert whole.usage.completion_tokens <= 12
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens

    content, role, usage = "", None, None
    for chunk in client.chat.completions.create(**params, stream=True,
                                                stream_options={"include_usage": True}):
        assert chunk.object == "chat.completion.chunk"
        for choice in chunk.choices:
            role = choice.delta.role or role
            content += choice.delta.content or ""
        usage = chunk.usage or usage
    assert role == "assistant"
    assert content == message.content
    assert usage is not None, "the last chunk carries usage"
    assert usage.completion_tokens == whole.usage.completion_tokens


def test_stream_helper_collects_the_final_message(client, server):
    """The SDK's stream helper assembles the events into the same message as the whole answer
    (it refuses a message cut by max_tokens, so the question is one the model finishes)."""
    params = dict(model=server.model, temperature=0, max_tokens=48,
                  messages=[{"role": "user", "content": "What is the capital of Japan?"}])
    whole = client.chat.completions.create(**params)
    with client.chat.completions.stream(**params) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.role == "assistant"
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.content == whole.choices[0].message.content


def test_bad_parameter_is_a_bad_request_naming_it(client, server):
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model=server.model, prompt="x", temperature=7)
    assert caught.value.status_code == 400
    assert caught.value.param == "temperature"


def test_unknown_model_is_not_found(client):
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 404


def test_wrong_key_is_an_authentication_error(server):
    stranger = openai.OpenAI(base_url=server.base_url, api_key="not-the-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        stranger.completions.create(model=server.model, prompt="x", max_tokens=1)
    assert caught.value.status_code == 401


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}


def check_message_shape(choice):
    """A chat choice of a request with tools, as the SDK parsed it: calls to offered functions
    with JSON object arguments (finish_reason tool_calls), or plain content."""
    message = choice.message
    assert message.role == "assistant"
    if message.tool_calls:
        assert choice.finish_reason == "tool_calls"
        for call in message.tool_calls:
            assert call.id.startswith("call_") and call.type == "function"
            assert call.function.name == "get_weather"
            assert isinstance(json.loads(call.function.arguments), dict)
    else:
        assert isinstance(message.content, str) and message.content
        assert choice.finish_reason in ("stop", "length")


def test_tool_call_round_trip(client, server):
    """Tools offered, then the call and its result sent back as the SDK's own message types.
    SmolLM2-135M answers this question in prose at temperature 0 (checked: it does not call the
    tool), so the first answer is asserted on its shape only; the round trip's second request
    (an assistant turn with tool_calls and a tool result) must be accepted and answered."""
    params = dict(model=server.model, temperature=0, seed=11, max_tokens=48,
                  tools=[WEATHER_TOOL], tool_choice="auto", parallel_tool_calls=True)
    first = client.chat.completions.create(
        **params, messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    check_message_shape(first.choices[0])

    call = {"id": "call_0", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}
    second = client.chat.completions.create(**params, messages=[
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": json.dumps({"temp_c": 21})},
    ])
    check_message_shape(second.choices[0])
    assert second.usage.prompt_tokens > first.usage.prompt_tokens


def test_tool_request_streamed_equals_whole(client, server):
    params = dict(model=server.model, temperature=0, seed=11, max_tokens=32, tools=[WEATHER_TOOL],
                  messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    whole = client.chat.completions.create(**params)
    content, calls, finish = "", {}, None
    for chunk in client.chat.completions.create(**params, stream=True):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for part in choice.delta.tool_calls or []:
                entry = calls.setdefault(part.index, {"name": "", "arguments": ""})
                entry["name"] += (part.function.name or "") if part.function else ""
                entry["arguments"] += (part.function.arguments or "") if part.function else ""
            finish = choice.finish_reason or finish
    message = whole.choices[0].message
    assert content == (message.content or "")
    assert [c["name"] for c in calls.values()] == [c.function.name for c in message.tool_calls or []]
    assert finish == whole.choices[0].finish_reason


def test_tool_choice_naming_an_unknown_function_is_a_bad_request(client, server):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=server.model, max_tokens=1, tools=[WEATHER_TOOL],
            tool_choice={"type": "function", "function": {"name": "get_time"}},
            messages=[{"role": "user", "content": "x"}])
    assert caught.value.param == "tool_choice"
    assert "get_time" in caught.value.message


def prompt_tokens_computed(server) -> float:
    """kvserve:prompt_tokens_total from /metrics: prompt tokens the engine has computed."""
    root = server.base_url.removesuffix("/v1")
    with urllib.request.urlopen(root + "/metrics", timeout=30) as response:
        text = response.read().decode()
    match = re.search(r"^kvserve:prompt_tokens_total (\S+)$", text, re.M)
    assert match, "no kvserve:prompt_tokens_total in /metrics"
    return float(match.group(1))


def test_n_choices_share_one_prompt(client, server):
    """n=3: three choices indexed 0..2, the prompt counted once in usage and computed once (the
    siblings wait for its blocks and share them; each recomputes at most the last, partial 16-token
    block), and with a seed choice j is the one-choice answer with seed + j."""
    params = dict(model=server.model, temperature=0.9, max_tokens=10,
                  messages=[{"role": "system", "content": "You are a poet who writes about "
                                                          "rivers, mountains, stones, forests, "
                                                          "winter light and the open sea. Your "
                                                          "lines are plain and quiet. Answer in "
                                                          "one short line."},
                            {"role": "user", "content": "Write one line about a river at dawn."}])
    before = prompt_tokens_computed(server)
    reply = client.chat.completions.create(**params, n=3, seed=21)
    computed = prompt_tokens_computed(server) - before
    assert [c.index for c in reply.choices] == [0, 1, 2]
    prompt = reply.usage.prompt_tokens
    assert prompt > 48, "the prompt must span several blocks for the sharing to show"
    assert computed <= prompt + 2 * 16, (computed, prompt)
    singles = [client.chat.completions.create(**params, seed=21 + j) for j in range(3)]
    assert singles[0].usage.prompt_tokens == prompt
    assert [c.message.content for c in reply.choices] == [s.choices[0].message.content
                                                          for s in singles]
    assert reply.usage.completion_tokens == sum(s.usage.completion_tokens for s in singles)
    assert len({c.message.content for c in reply.choices}) > 1, "three seeds, one answer"


def test_chat_top_logprobs_describe_the_chosen_tokens(client, server):
    """logprobs with top_logprobs=3 at temperature 0: one entry per generated token, whose tokens
    spell the content; each lists three alternatives, most likely first, and the greedy choice is
    the first of them."""
    reply = client.chat.completions.create(
        model=server.model, temperature=0, max_tokens=8, logprobs=True, top_logprobs=3,
        messages=[{"role": "user", "content": "What is the capital of Japan?"}])
    choice = reply.choices[0]
    entries = choice.logprobs.content
    assert len(entries) == reply.usage.completion_tokens
    assert "".join(e.token for e in entries) == choice.message.content
    for e in entries:
        assert len(e.top_logprobs) == 3
        ranked = [t.logprob for t in e.top_logprobs]
        assert ranked == sorted(ranked, reverse=True)
        assert e.top_logprobs[0].token == e.token
        assert e.logprob == pytest.approx(e.top_logprobs[0].logprob)
        assert e.logprob <= 0
