#!/usr/bin/env python3
"""Writes what llama.cpp's llama-server answers on POST /apply-template for every conversation of
conversations.json, on the two real models: smollm2-135m.llama-server.json and
gemma3-270m.llama-server.json, as
{"llama_cpp_commit": ..., "templates": [{"llama_server_args": [...], "kvserve_template": NAME,
                                         "prompts": {conversation name: prompt}}, ...]}.
tests/real_model_chat_test.cc and tests/clients/test_apply_template.py check kvserve, run with
--chat-template NAME ("" for the file's own), against them.

llama-server runs on loopback, one run per template:

  llama-server -m MODEL --host 127.0.0.1 --port PORT -c 2048 -t 2 [ARGS]

SmolLM2 with its defaults (the Jinja template stored in the file). The Gemma 3 270M file stores no
template: llama-server then falls back to ChatML (kvserve --chat-template chatml; kvserve's own
fallback is "plain"), and with --no-jinja --chat-template gemma uses its built-in Gemma format
(kvserve --chat-template gemma).

The committed files were made with llama.cpp at commit 3f545becc
(3f545beccee69d9975f466ec7e45fd9aacd8ba90):

  tests/data/real-models/apply-template/make_expected.py --llama-server /work/llama.cpp/build/bin/llama-server
Standard library only; the models come from scripts/get-model.sh.
"""
import argparse
import json
import os
import socket
import subprocess
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", "..", ".."))
# model -> [(llama-server arguments, the kvserve --chat-template that must render the same)]
TEMPLATES = {
    "smollm2-135m": [([], "")],
    "gemma3-270m": [([], "chatml"), (["--no-jinja", "--chat-template", "gemma"], "gemma")],
}
LLAMA_CPP_COMMIT = "3f545beccee69d9975f466ec7e45fd9aacd8ba90"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def wait_ready(url, server):
    for _ in range(600):
        if server.poll() is not None:
            raise SystemExit(f"llama-server exited with {server.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("llama-server did not become ready")


def render_all(llama_server, model_path, server_args, conversations):
    """{name: prompt} from one llama-server run."""
    port = free_port()
    server = subprocess.Popen([llama_server, "-m", model_path, "--host", "127.0.0.1", "--port",
                               str(port), "-c", "2048", "-t", "2", *server_args],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, server)
        return {c["name"]: post(url + "/apply-template", {"messages": c["messages"]})["prompt"]
                for c in conversations}
    finally:
        server.terminate()
        server.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llama-server", required=True)
    args = parser.parse_args()
    with open(os.path.join(HERE, "conversations.json"), encoding="utf-8") as f:
        conversations = json.load(f)["conversations"]
    for model, templates in TEMPLATES.items():
        path = subprocess.run([os.path.join(ROOT, "scripts", "get-model.sh"), model], check=True,
                              capture_output=True, text=True).stdout.strip()
        result = {"llama_cpp_commit": LLAMA_CPP_COMMIT, "templates": []}
        for server_args, kvserve_template in templates:
            prompts = render_all(args.llama_server, path, server_args, conversations)
            result["templates"].append({"llama_server_args": server_args,
                                        "kvserve_template": kvserve_template, "prompts": prompts})
        with open(os.path.join(HERE, f"{model}.llama-server.json"), "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1, ensure_ascii=False)
            f.write("\n")
        print(f"{model}: {len(templates)} template(s), {len(conversations)} conversations")


if __name__ == "__main__":
    main()
