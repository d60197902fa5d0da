#!/usr/bin/env python3
"""Renders conversations.json with Gemma 4's real chat template
(../shared/models/chat-templates/google-gemma-4-31B-it.jinja) through Jinja2, as Hugging Face's
apply_chat_template does (trim_blocks, lstrip_blocks, bos_token "<bos>"), into jinja2.json:
{"prompts": {name: text}}. tests/gemma4_render_test.cc renders the same conversations with kvserve
(through the server's request parsing) and compares byte for byte; tests/clients/test_gemma4.py
runs this rendering live against `kvserve serve`.

The messages are OpenAI's chat format, turned into what the template reads the way llama.cpp hands
them to it: a call's "arguments" JSON text becomes the object it spells, "developer" is "system"
(as kvserve reads it), and a null "content" is left out. A conversation's "enable_thinking" is the
template's kwarg of that name.

  .venv/bin/python tests/data/gemma4/make_goldens.py          # rewrite jinja2.json
  .venv/bin/python tests/data/gemma4/make_goldens.py --check  # exit 1 when it is stale
"""
import json
import pathlib
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]
TEMPLATE = ROOT.parent / "shared/models/chat-templates/google-gemma-4-31B-it.jinja"


def environment() -> jinja2.Environment:
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    return env


def template_messages(messages: list) -> list:
    """OpenAI's messages as the template reads them (see the module's docstring)."""
    out = []
    for message in messages:
        message = dict(message)
        if message.get("role") == "developer":
            message["role"] = "system"
        if message.get("content", "") is None:
            del message["content"]
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


def render(conversation: dict, source: str | None = None, bos_token: str = "<bos>") -> str:
    source = source if source is not None else TEMPLATE.read_text(encoding="utf-8")
    kwargs = {"messages": template_messages(conversation["messages"]),
              "add_generation_prompt": conversation.get("add_generation_prompt", True),
              "bos_token": bos_token, "eos_token": "<eos>"}
    if conversation.get("tools"):
        kwargs["tools"] = conversation["tools"]
    if "enable_thinking" in conversation:
        kwargs["enable_thinking"] = conversation["enable_thinking"]
    return environment().from_string(source).render(**kwargs)


def main() -> int:
    conversations = json.loads((HERE / "conversations.json").read_text(encoding="utf-8"))
    prompts = {c["name"]: render(c) for c in conversations["conversations"]}
    text = json.dumps({"jinja2": jinja2.__version__, "prompts": prompts},
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
