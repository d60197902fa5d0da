"""POST /apply-template of `kvserve serve` on SmolLM2-135M-Instruct against llama-server's.

Every conversation of tests/data/real-models/apply-template/conversations.json must come back as
the prompt llama.cpp's llama-server (3f545becc) gave for it, byte for byte
(smollm2-135m.llama-server.json, written by make_expected.py there); a request without messages is
a 400 that names the field, and one without the API key a 401.
"""
import json
import pathlib
import urllib.error
import urllib.request

import pytest

from conftest import API_KEY, ROOT

DATA = ROOT / "tests/data/real-models/apply-template"


def post(server, body, key=API_KEY):
    url = server.base_url.removesuffix("/v1") + "/apply-template"
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


CONVERSATIONS = json.loads((DATA / "conversations.json").read_text(encoding="utf-8"))
EXPECTED = json.loads((DATA / "smollm2-135m.llama-server.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("conversation", CONVERSATIONS["conversations"], ids=lambda c: c["name"])
def test_renders_as_llama_server(server, conversation):
    status, body = post(server, {"messages": conversation["messages"]})
    assert status == 200, body
    [template] = EXPECTED["templates"]  # SmolLM2: the template stored in the file
    assert template["kvserve_template"] == ""
    assert body["prompt"] == template["prompts"][conversation["name"]]


def test_missing_messages_is_a_400_naming_the_field(server):
    status, body = post(server, {"prompt": "hi"})
    assert status == 400
    assert body["error"]["param"] == "messages"


def test_needs_the_api_key(server):
    status, _ = post(server, {"messages": [{"role": "user", "content": "hi"}]}, key=None)
    assert status == 401
