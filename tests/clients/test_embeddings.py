"""The official `openai` Python SDK's embeddings API against `kvserve serve` on a t5encoder file
(`kvserve synth --preset t5encoder-tiny`, random weights: only the arithmetic is checked here).

The SDK asks for base64 unless told otherwise and decodes it; its vectors must be the floats that
encoding_format="float" gives and that `kvserve embed` prints, one per input in order, of length 1.
A decoder-only model's server (SmolLM2) refuses with a BadRequestError naming the model kind.
"""
import json
import math
import os
import subprocess
import urllib.request

import openai
import pytest

from conftest import API_KEY, ROOT, Server

BINARY = os.environ.get("KVSERVE_BINARY", str(ROOT / "build/kvserve"))


@pytest.fixture(scope="module")
def encoder_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("t5encoder") / "t5encoder-tiny.gguf"
    subprocess.run([BINARY, "synth", "--preset", "t5encoder-tiny", "--vocab",
                    str(ROOT.parent / "shared/models/stories260K.gguf"), "-o", str(path)],
                   check=True, capture_output=True)
    return str(path)


@pytest.fixture(scope="module")
def encoder_server(encoder_file):
    running = Server([], model_file=encoder_file)
    yield running
    status = running.stop()
    assert status == 0, f"kvserve serve exited with {status}:\n{running.log()}"


def sdk(server):
    return openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0, timeout=120)


TEXTS = ["Once upon a time", "Lily and Ben played in the park", "a"]


def test_sdk_vectors_equal_float_format_and_the_cli(encoder_server, encoder_file):
    client = sdk(encoder_server)
    default = client.embeddings.create(model=encoder_server.model, input=TEXTS)
    floats = client.embeddings.create(model=encoder_server.model, input=TEXTS,
                                      encoding_format="float")
    assert [d.index for d in default.data] == [0, 1, 2]
    assert [d.embedding for d in default.data] == [d.embedding for d in floats.data]
    for d in default.data:
        assert len(d.embedding) == 64
        assert math.isclose(math.sqrt(sum(x * x for x in d.embedding)), 1.0, rel_tol=1e-6)
    assert default.usage.prompt_tokens == default.usage.total_tokens > len(TEXTS)
    printed = subprocess.run([BINARY, "embed", "-m", encoder_file, "-t", "2", "-p",
                              "\n".join(TEXTS), "--output-format", "json"],
                             check=True, capture_output=True, text=True).stdout
    cli = json.loads(printed)
    assert [d["embedding"] for d in cli["data"]] == [d.embedding for d in default.data]


def test_token_arrays_are_inputs_too(encoder_server):
    client = sdk(encoder_server)
    request = urllib.request.Request(
        encoder_server.base_url.removesuffix("/v1") + "/tokenize",
        data=json.dumps({"content": TEXTS[0], "add_special": True}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        tokens = json.loads(response.read())["tokens"]
    by_text = client.embeddings.create(model=encoder_server.model, input=TEXTS[0])
    by_tokens = client.embeddings.create(model=encoder_server.model, input=tokens)
    assert by_tokens.data[0].embedding == by_text.data[0].embedding


def test_refusals_are_bad_requests_naming_the_field(encoder_server):
    client = sdk(encoder_server)
    with pytest.raises(openai.BadRequestError) as error:
        client.embeddings.create(model=encoder_server.model, input="a", dimensions=16)
    assert error.value.body["param"] == "dimensions"
    with pytest.raises(openai.BadRequestError) as error:
        client.completions.create(model=encoder_server.model, prompt="Once", max_tokens=4)
    assert "t5encoder" in error.value.message


def test_decoder_only_model_refuses_embeddings(server):
    client = sdk(server)
    with pytest.raises(openai.BadRequestError) as error:
        client.embeddings.create(model=server.model, input="Once upon a time")
    assert "computes no embeddings" in error.value.message
