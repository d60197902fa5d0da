#!/usr/bin/env python3
"""Writes o200k-pattern.tiktoken.json: the ids tiktoken gives for every file of this corpus when it
splits with o200k_base's pattern (GPT-4o's, and gpt-oss's o200k_harmony's) and merges with the ranks
of ../shared/models/vocab/ggml-vocab-llama-bpe.gguf (Llama 3's tiktoken ranks: id = rank for the
128,000 ordinary tokens). The o200k vocabulary itself is not on this machine; its pattern is what
kvserve's "gpt-4o" pre-tokenizer implements, and tiktoken runs the original pattern (llama.cpp
rewrites its case classes with ASCII lookaheads). tests/tokenizer_corpus_test.cc encodes the corpus
with that vocabulary, tokenizer.ggml.pre set to gpt-4o, and compares.

Format: {"tiktoken": version, "vocab_sha256": ..., "pattern": ..., "files": {"path": [ids]}}.
Needs tiktoken and gguf from PyPI (a throwaway venv: pip install --only-binary=:all: tiktoken==0.14.0
gguf); the committed file was made with tiktoken 0.14.0:

  python3 tests/data/tokenizer-corpus/make_o200k_pattern_expected.py
"""
import hashlib
import json
import os
import sys

import gguf
import tiktoken

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_expected import corpus_files  # noqa: E402  (the same files, the same order)

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "..", "..", "..", "..", "shared")
VOCAB = os.path.join(SHARED, "models", "vocab", "ggml-vocab-llama-bpe.gguf")

# tiktoken's o200k_base pat_str.
O200K_PATTERN = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])


def gpt2_unicode_to_bytes():
    """The inverse of GPT-2's bytes_to_unicode table."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
                 list(range(ord("®"), ord("ÿ") + 1)))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def llama3_ranks():
    reader = gguf.GGUFReader(VOCAB)
    field = reader.fields["tokenizer.ggml.tokens"]
    types = reader.fields["tokenizer.ggml.token_type"]
    to_byte = gpt2_unicode_to_bytes()
    ranks = {}
    for i, index in enumerate(field.data):
        if int(types.parts[types.data[i]][0]) != 1:  # NORMAL tokens only
            continue
        text = bytes(field.parts[index]).decode("utf-8")
        ranks[bytes(to_byte[ch] for ch in text)] = i
    return ranks


def main():
    enc = tiktoken.Encoding("llama3-ranks-o200k-pattern", pat_str=O200K_PATTERN,
                            mergeable_ranks=llama3_ranks(), special_tokens={})
    with open(VOCAB, "rb") as f:
        vocab_sha = hashlib.sha256(f.read()).hexdigest()
    out = {"tiktoken": tiktoken.__version__, "vocab_sha256": vocab_sha, "pattern": O200K_PATTERN,
           "files": {}}
    for rel in corpus_files():
        with open(os.path.join(HERE, rel), encoding="utf-8", newline="") as f:
            text = f.read()
        out["files"][rel] = enc.encode_ordinary(text)
    with open(os.path.join(HERE, "o200k-pattern.tiktoken.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
