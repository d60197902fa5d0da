#!/usr/bin/env python3
"""Renders conversations.json with gpt-oss's real chat template through Jinja2, as Hugging Face's
apply_chat_template does (trim_blocks, lstrip_blocks, tojson = json.dumps(ensure_ascii=False)),
into jinja2.json: {"date": ..., "prompts": {name: text}}. tests/harmony_render_test.cc renders
the same conversations with kvserve (through the server's request parsing) and compares byte for
byte; tests/clients/test_harmony.py runs this rendering live against `kvserve serve`.

The messages are OpenAI's chat format, turned into what the template reads the way llama.cpp and
vLLM hand them to it: a call's "arguments" JSON text becomes the object it spells, an
assistant's "reasoning_content" becomes "thinking", and a null "content" is left out. strftime_now gives the pinned DATE.

  .venv/bin/python tests/data/harmony/make_goldens.py          # rewrite jinja2.json
  .venv/bin/python tests/data/harmony/make_goldens.py --check  # exit 1 when it is stale
"""
import datetime
import json
import pathlib
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]
TEMPLATE = ROOT.parent / "shared/models/chat-templates/openai-gpt-oss-120b.jinja"
DATE = "2025-08-05"


def environment(date: str) -> jinja2.Environment:
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.strptime(date, "%Y-%m-%d").strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def template_messages(messages: list) -> list:
    """OpenAI's messages as the template reads them (see the module's docstring)."""
    out = []
    for message in messages:
        message = dict(message)
        if message.get("role") == "developer":
            message["role"] = "system"
        if message.get("content", "") is None:  # the template's `in` checks fail on None
            del message["content"]
        if "reasoning_content" in message:
            message["thinking"] = message.pop("reasoning_content")
        if "tool_calls" in message:
            calls = []
            for call in message["tool_calls"]:
                call = json.loads(json.dumps(call))
                arguments = call["function"].get("arguments")
                if isinstance(arguments, str):
                    call["function"]["arguments"] = json.loads(arguments)
                calls.append(call)
            message["tool_calls"] = calls
        out.append(message)
    return out


def render(conversation: dict, date: str = DATE, source: str | None = None) -> str:
    source = source if source is not None else TEMPLATE.read_text(encoding="utf-8")
    kwargs = {"messages": template_messages(conversation["messages"]),
              "add_generation_prompt": conversation.get("add_generation_prompt", True)}
    if conversation.get("tools"):
        kwargs["tools"] = conversation["tools"]
    if "reasoning_effort" in conversation:
        kwargs["reasoning_effort"] = conversation["reasoning_effort"]
    return environment(date).from_string(source).render(**kwargs)


def main() -> int:
    conversations = json.loads((HERE / "conversations.json").read_text(encoding="utf-8"))
    prompts = {c["name"]: render(c) for c in conversations["conversations"]}
    text = json.dumps({"jinja2": jinja2.__version__, "date": DATE, "prompts": prompts},
                      ensure_ascii=False, indent=1) + "\n"
    target = HERE / "jinja2.json"
    if "--check" in sys.argv[1:]:
        if target.read_text(encoding="utf-8") != text:
            print(f"{target} is stale: run {sys.argv[0]}", file=sys.stderr)
            return 1
        return 0
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target} ({len(prompts)} prompts, Jinja2 {jinja2.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
