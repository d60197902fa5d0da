"""gpt-oss's harmony prompts from `kvserve serve --chat-template gpt-oss` (SmolLM2, whose weights do
not matter here) against two outside renderers, side by side, with today's date:

- Jinja2 over the real template (tests/data/harmony/make_goldens.py's rendering): every
  conversation of tests/data/harmony/conversations.json, byte for byte, through POST
  /apply-template (with the conversation's reasoning_effort);
- OpenAI's openai-harmony package (its token ids decoded to text), with the o200k_base.tiktoken
  vocabulary that scripts/get-o200k.sh rebuilds from a PyPI wheel (sha256-checked). The template
  and openai-harmony differ in three places, all the template's choices, which are applied to
  kvserve's text before comparing: a call's header ends "commentary json" in the template and
  "commentary <|constrain|>json" in openai-harmony, and the template quotes a tool result with
  tojson where openai-harmony writes the text as it is; a developer message without tools ends
  its instructions with "\n\n" in the template, not in openai-harmony. Conversations whose tool
  schemas openai-harmony writes otherwise are listed in NOT_AS_HARMONY with the reason.

A reasoning_effort outside low|medium|high is a 400 naming the field.
"""
import datetime
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from conftest import API_KEY, ROOT, Server

sys.path.insert(0, str(ROOT / "tests/data/harmony"))
import make_goldens  # noqa: E402

CONVERSATIONS = json.loads((ROOT / "tests/data/harmony/conversations.json").read_text("utf-8"))
# Where openai-harmony's TypeScript differs from the template's (the template's Jinja whitespace).
NOT_AS_HARMONY = {
    "schema_types": "nested objects and oneOf: the template prints its own source indentation",
    "tools_offered": "an enum's default: the template writes ', // default: celsius,', "
                     "openai-harmony ' // default: celsius'",
    "tools_without_system": "a tool with empty properties: the template writes '() => any', "
                            "openai-harmony '(_: {\\n}) => any'",
}


@pytest.fixture(scope="module")
def server():
    running = Server(["--chat-template", "gpt-oss"])
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
    for key in ("tools", "reasoning_effort"):
        if key in conversation:
            body[key] = conversation[key]
    status, answer = post(server, "/apply-template", body)
    assert status == 200, answer
    return answer["prompt"]


def today():
    return datetime.date.today().strftime("%Y-%m-%d")


@pytest.mark.parametrize("conversation", CONVERSATIONS["conversations"], ids=lambda c: c["name"])
def test_renders_as_jinja2(server, conversation):
    conversation = dict(conversation, add_generation_prompt=True)  # as /apply-template does
    date = today()
    prompt = kvserve_prompt(server, conversation)
    if date != today():  # midnight passed between the two
        prompt = kvserve_prompt(server, conversation)
    assert prompt == make_goldens.render(conversation, date=today())


# openai-harmony -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def harmony():
    folder = subprocess.run([str(ROOT / "scripts/get-o200k.sh")], check=True, capture_output=True,
                            text=True).stdout.strip()
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = folder
    import openai_harmony
    return openai_harmony


def harmony_messages(oh, conversation, date):
    """The conversation as openai-harmony's messages, analysis where the template keeps it."""
    messages = conversation["messages"]
    system = oh.SystemContent.new().with_conversation_start_date(date)
    effort = conversation.get("reasoning_effort", "medium")
    system = system.with_reasoning_effort(oh.ReasoningEffort(effort.capitalize()))
    out = [oh.Message.from_role_and_content(oh.Role.SYSTEM, system)]
    instructions = None
    if messages[0]["role"] in ("system", "developer"):
        instructions, messages = messages[0]["content"], messages[1:]
    tools = [oh.ToolDescription.new(t["function"]["name"], t["function"].get("description", ""),
                                    parameters=t["function"].get("parameters"))
             for t in conversation.get("tools", [])]
    if instructions or tools:
        developer = oh.DeveloperContent.new()
        if instructions:
            developer = developer.with_instructions(instructions)
        if tools:
            developer = developer.with_function_tools(tools)
        out.append(oh.Message.from_role_and_content(oh.Role.DEVELOPER, developer))
    last_call = None
    for i, m in enumerate(messages):
        if m["role"] == "user":
            out.append(oh.Message.from_role_and_content(oh.Role.USER, m["content"]))
        elif m["role"] == "assistant" and m.get("tool_calls"):
            later_final = any(n["role"] == "assistant" and not n.get("tool_calls")
                              for n in messages[i + 1:])
            analysis = m.get("content") or m.get("reasoning_content")
            if analysis and not later_final:
                out.append(oh.Message.from_role_and_content(oh.Role.ASSISTANT, analysis)
                           .with_channel("analysis"))
            call = m["tool_calls"][0]["function"]
            last_call = call["name"]
            arguments = json.dumps(json.loads(call["arguments"]), ensure_ascii=False)
            out.append(oh.Message.from_role_and_content(oh.Role.ASSISTANT, arguments)
                       .with_channel("commentary").with_recipient("functions." + last_call)
                       .with_content_type("<|constrain|>json"))
        elif m["role"] == "assistant":
            out.append(oh.Message.from_role_and_content(oh.Role.ASSISTANT, m["content"])
                       .with_channel("final"))
        elif m["role"] == "tool":
            author = oh.Author.new(oh.Role.TOOL, "functions." + last_call)
            out.append(oh.Message.from_author_and_content(author, m["content"])
                       .with_channel("commentary").with_recipient("assistant"))
    return out


def as_harmony_writes_it(prompt):
    """kvserve's (the template's) text with openai-harmony's two different choices."""
    prompt = re.sub(r"(<\|start\|>assistant to=functions\.[^<]*<\|channel\|>commentary) json"
                    r"<\|message\|>", r"\1 <|constrain|>json<|message|>", prompt)

    prompt = re.sub(r"(<\|start\|>developer<\|message\|># Instructions\n\n(?:(?!<\|end\|>).)*?)"
                    r"\n\n<\|end\|>", r"\1<|end|>", prompt, flags=re.S)

    def unquote(match):
        return match.group(1) + json.loads(match.group(2)) + "<|end|>"

    return re.sub(r'( to=assistant<\|channel\|>commentary<\|message\|>)("(?:[^"\\]|\\.)*")<\|end\|>',
                  unquote, prompt)


@pytest.mark.parametrize("conversation", [c for c in CONVERSATIONS["conversations"]
                                          if c["name"] not in NOT_AS_HARMONY],
                         ids=lambda c: c["name"])
def test_renders_as_openai_harmony(server, harmony, conversation):
    oh = harmony
    encoding = oh.load_harmony_encoding(oh.HarmonyEncodingName.HARMONY_GPT_OSS)
    date = today()
    messages = harmony_messages(oh, conversation, date)
    config = oh.RenderConversationConfig(auto_drop_analysis=False)
    tokens = encoding.render_conversation_for_completion(oh.Conversation.from_messages(messages),
                                                         oh.Role.ASSISTANT, config)
    expected = encoding.decode_utf8(tokens)
    prompt = kvserve_prompt(server, conversation)
    if date != today():
        pytest.skip("midnight passed during the test")
    assert as_harmony_writes_it(prompt) == expected


def test_reasoning_effort_outside_the_three_levels_is_a_400(server):
    for path in ("/v1/chat/completions", "/apply-template"):
        status, body = post(server, path, {"messages": [{"role": "user", "content": "hi"}],
                                           "reasoning_effort": "extreme", "max_tokens": 1})
        assert status == 400, body
        assert body["error"]["param"] == "reasoning_effort"
        assert "'reasoning_effort' must be \"low\", \"medium\" or \"high\", got \"extreme\"" \
            in body["error"]["message"]
    status, body = post(server, "/apply-template",
                        {"messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "low"})
    assert status == 200 and "\nReasoning: low\n" in body["prompt"]
