"""The `llm` command-line tool (PyPI `llm`) against `kvserve serve` on SmolLM2-135M-Instruct.

llm is configured the way its documentation tells users to reach an OpenAI-compatible server:
an `extra-openai-models.yaml` in its user folder (LLM_USER_PATH, a fresh temporary folder) naming
the local server's /v1 as `api_base`, and the API key stored with `llm keys set`. It answers a
prompt, then a second turn of the same conversation (`llm -c`), which must send the first turn
back as history.
"""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import API_KEY

LLM = str(pathlib.Path(sys.executable).parent / "llm")


@pytest.fixture(scope="module")
def llm_env(server, tmp_path_factory):
    home = tmp_path_factory.mktemp("llm-user")
    (home / "extra-openai-models.yaml").write_text(
        f"- model_id: kvserve-smollm2\n"
        f"  model_name: {server.model}\n"
        f"  api_base: \"{server.base_url}\"\n"
        f"  api_key_name: kvserve\n")
    env = dict(os.environ, LLM_USER_PATH=str(home))
    env.pop("OPENAI_API_KEY", None)
    subprocess.run([LLM, "keys", "set", "kvserve", "--value", API_KEY], env=env, check=True,
                   timeout=60)
    return env


def llm(env, *args: str) -> str:
    done = subprocess.run([LLM, *args], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"llm {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_llm_lists_the_local_model(llm_env):
    assert "kvserve-smollm2" in llm(llm_env, "models", "list")


def test_llm_answers_a_prompt_and_a_second_turn(llm_env, server):
    first = llm(llm_env, "-m", "kvserve-smollm2", "-o", "temperature", "0", "-o", "max_tokens",
                "48", "What is the capital of Japan?")
    assert "Tokyo" in first, first
    second = llm(llm_env, "-c", "-o", "temperature", "0", "-o", "max_tokens", "32",
                 "And what is its population?")
    assert second.strip(), "the second turn got no answer"

    logs = json.loads(llm(llm_env, "logs", "--json", "-n", "2"))
    assert len(logs) == 2
    assert logs[0]["conversation_id"] == logs[1]["conversation_id"], logs
    turn1, turn2 = sorted(logs, key=lambda r: r["datetime_utc"])
    assert turn1["response"] == first.strip()
    # The second request carried the first question and answer: the server counted them.
    assert turn2["input_tokens"] > turn1["input_tokens"] + turn1["output_tokens"], (turn1, turn2)
