#!/usr/bin/env python3
"""Writes the ids llama.cpp's llama-tokenize gives for every file of this corpus, on the two real
models: smollm2-135m.llama-cpp.json and gemma3-270m.llama-cpp.json, as
{"llama_cpp_commit": ..., "model_sha256": ..., "files": {"path": [ids]}}.
tests/tokenizer_corpus_test.cc checks kvserve against them.

One run per file and model, the file's bytes as they are, no BOS, special tokens not parsed
(control-token texts in the corpus stay text):

  llama-tokenize -m MODEL -f FILE --ids --no-bos --no-escape --log-disable --no-parse-special

The committed files were made with llama.cpp at commit 3f545becc
(3f545beccee69d9975f466ec7e45fd9aacd8ba90):

  tests/data/tokenizer-corpus/make_expected.py --llama-tokenize /work/llama.cpp/build/bin/llama-tokenize
Standard library only; the models come from scripts/get-model.sh.
"""
import argparse
import ast
import hashlib
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
MODELS = ["smollm2-135m", "gemma3-270m"]
LLAMA_CPP_COMMIT = "3f545beccee69d9975f466ec7e45fd9aacd8ba90"


def corpus_files():
    """Every text of the corpus, relative to HERE, except this folder's own tooling."""
    skip = {"README.md", "make_expected.py", "make_synthetic.py", "make_o200k_pattern_expected.py"}
    files = []
    for folder, _, names in os.walk(HERE):
        for name in names:
            rel = os.path.relpath(os.path.join(folder, name), HERE)
            if name in skip or name.endswith(".json"):
                continue
            files.append(rel)
    return sorted(files)


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llama-tokenize", required=True)
    args = parser.parse_args()
    files = corpus_files()
    for model in MODELS:
        path = subprocess.run([os.path.join(ROOT, "scripts", "get-model.sh"), model], check=True,
                              capture_output=True, text=True).stdout.strip()
        result = {"llama_cpp_commit": LLAMA_CPP_COMMIT, "model_sha256": sha256(path), "files": {}}
        for rel in files:
            out = subprocess.run([args.llama_tokenize, "-m", path, "-f", os.path.join(HERE, rel),
                                  "--ids", "--no-bos", "--no-escape", "--log-disable",
                                  "--no-parse-special"],
                                 check=True, capture_output=True, text=True).stdout
            ids = ast.literal_eval(out.strip().splitlines()[-1])
            result["files"][rel] = ids
            print(f"{model} {rel}: {len(ids)} tokens", flush=True)
        with open(os.path.join(HERE, f"{model}.llama-cpp.json"), "w") as f:
            # One file per line keeps diffs readable.
            f.write("{\n")
            f.write(f' "llama_cpp_commit": "{LLAMA_CPP_COMMIT}",\n')
            f.write(f' "model_sha256": "{result["model_sha256"]}",\n')
            f.write(' "files": {\n')
            items = list(result["files"].items())
            for i, (rel, ids) in enumerate(items):
                sep = "," if i + 1 < len(items) else ""
                f.write(f'  {json.dumps(rel)}: {json.dumps(ids, separators=(",", ":"))}{sep}\n')
            f.write(" }\n}\n")


if __name__ == "__main__":
    main()
