"""Gemma 4's prompts from `kvserve serve --chat-template gemma4` (SmolLM2, whose weights do not
matter here) against Jinja2 over the real template (tests/data/gemma4/make_goldens.py's
rendering): every conversation of tests/data/gemma4/conversations.json, byte for byte, through
POST /apply-template. The server writes the model's BOS text where the template writes bos_token
(as /apply-template shows it: without it when the tokenizer adds BOS itself), and renders with
thinking off unless the request's chat_template_kwargs say {"enable_thinking": true}; both are
compared.

A forced tool_choice is a 400 naming tool_choice (no grammar for Gemma's call syntax), and a chat
completion with tools runs through Gemma 4's output parser.
"""
import json
import sys
import urllib.error
import urllib.request

import pytest

from conftest import API_KEY, ROOT, Server

sys.path.insert(0, str(ROOT / "tests/data/gemma4"))
import make_goldens  # noqa: E402

CONVERSATIONS = json.loads((ROOT / "tests/data/gemma4/conversations.json").read_text("utf-8"))


@pytest.fixture(scope="module")
def server():
    running = Server(["--chat-template", "gemma4"])
    yield running
    status = running.stop()
    assert status == 0, f"kvserve serve exited with {status}:\n{running.log()}"


def post(server, path, body):
    url = server.base_url.removesuffix("/v1") + path
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def kvserve_prompt(server, conversation):
    body = {"messages": conversation["messages"]}
    if "tools" in conversation:
        body["tools"] = conversation["tools"]
    if conversation.get("enable_thinking"):
        body["chat_template_kwargs"] = {"enable_thinking": True, "unused_variable": 1}
    status, answer = post(server, "/apply-template", body)
    assert status == 200, answer
    return answer["prompt"]


@pytest.fixture(scope="module")
def bos_text(server):
    prompt = kvserve_prompt(server, {"messages": [{"role": "user", "content": "Hi"}]})
    assert "<|turn>user\nHi<turn|>\n" in prompt, prompt
    return prompt.split("<|turn>", 1)[0]


@pytest.mark.parametrize("conversation", CONVERSATIONS["conversations"], ids=lambda c: c["name"])
def test_renders_as_jinja2(server, bos_text, conversation):
    # As /apply-template renders: with the cue, thinking off.
    conversation = dict(conversation, add_generation_prompt=True, enable_thinking=False)
    assert kvserve_prompt(server, conversation) == make_goldens.render(conversation,
                                                                       bos_token=bos_text)


@pytest.mark.parametrize("conversation", CONVERSATIONS["conversations"], ids=lambda c: c["name"])
def test_renders_with_thinking_as_jinja2(server, bos_text, conversation):
    # chat_template_kwargs {"enable_thinking": true}: <|think|> in the system turn, an open cue.
    conversation = dict(conversation, add_generation_prompt=True, enable_thinking=True)
    assert kvserve_prompt(server, conversation) == make_goldens.render(conversation,
                                                                       bos_token=bos_text)


def test_template_kwargs_of_a_wrong_type_are_named(server):
    for kwargs, param in (([1], "chat_template_kwargs"),
                          ({"enable_thinking": "yes"}, "chat_template_kwargs.enable_thinking")):
        status, answer = post(server, "/v1/chat/completions",
                              {"model": server.model, "max_tokens": 2, "chat_template_kwargs": kwargs,
                               "messages": [{"role": "user", "content": "Hi"}]})
        assert status == 400, answer
        assert answer["error"]["param"] == param, answer


def test_forced_tool_choice_is_refused(server):
    conversation = next(c for c in CONVERSATIONS["conversations"] if c["name"] == "tools_offered")
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        status, answer = post(server, "/v1/chat/completions",
                              {"model": server.model, "messages": conversation["messages"],
                               "tools": conversation["tools"], "tool_choice": choice,
                               "max_tokens": 4})
        assert status == 400, answer
        assert answer["error"]["param"] == "tool_choice", answer
        assert "gemma4" in answer["error"]["message"], answer


def test_chat_with_tools_answers(server):
    conversation = next(c for c in CONVERSATIONS["conversations"] if c["name"] == "tools_offered")
    status, answer = post(server, "/v1/chat/completions",
                          {"model": server.model, "messages": conversation["messages"],
                           "tools": conversation["tools"], "max_tokens": 8, "temperature": 0})
    assert status == 200, answer
    choice = answer["choices"][0]
    assert choice["finish_reason"] in ("stop", "length", "tool_calls"), choice
    assert choice["message"]["role"] == "assistant", choice
