#!/usr/bin/env python3
"""Writes tests/data/llama_cpp_tokens.json: the ids llama.cpp's llama-tokenize gives for digit
runs and for special-token texts, on every vocabulary of ../shared/models that kvserve loads
(BERT's WordPiece is refused, so bert-bge is left out). vocab_test.cc checks kvserve against them.

The committed file was made with llama.cpp at commit 3f545becc (3f545beccee69d9975f466ec7e45fd9aacd8ba90),
one run per case:

  llama-tokenize -m FILE -p TEXT --ids --no-bos --no-escape --log-disable --no-parse-special
  llama-tokenize -m FILE -p TEXT --ids --no-bos --no-escape --log-disable

llama-tokenize parses special tokens unless told --no-parse-special (it has no --parse-special
flag; that one belongs to llama-imatrix). --no-escape passes TEXT through as it is (a newline in
TEXT is a real newline). Finished cases are kept in OUT.partial (JSON lines), so an interrupted
run resumes where it stopped.

  tests/data/make_llama_cpp_tokens.py --llama-tokenize /work/llama.cpp/build/bin/llama-tokenize
Standard library only; needs ../shared beside the checkout (or --shared).
"""
import argparse
import ast
import json
import os
import struct
import subprocess
import sys

BPE_VOCABS = [
    "vocab/ggml-vocab-llama-bpe.gguf", "vocab/ggml-vocab-qwen2.gguf",
    "vocab/ggml-vocab-deepseek-llm.gguf", "vocab/ggml-vocab-deepseek-coder.gguf",
    "vocab/ggml-vocab-falcon.gguf", "vocab/ggml-vocab-mpt.gguf",
    "vocab/ggml-vocab-starcoder.gguf", "vocab/ggml-vocab-refact.gguf",
    "vocab/ggml-vocab-gpt-neox.gguf", "ggml-vocab-gpt-2.gguf",
]
SPM_VOCABS = [
    "vocab/ggml-vocab-phi-3.gguf", "vocab/ggml-vocab-baichuan.gguf", "ggml-vocab-llama-spm.gguf",
]

# Digit runs: lengths 1..13, leading spaces and other whitespace, digits inside words, numbers
# with punctuation, and Unicode numbers (Arabic-Indic, superscripts, fractions, Roman numerals,
# full-width and Devanagari digits), which are \p{N} but not [0-9].
DIGITS = [
    "0", "7", "42", "123", "1234", "12345", "123456", "1234567", "1234567890123",
    " 1", " 42", " 99999", " 1000000", "  123", "\n42", "\t2026",
    "007", "3.14159", "2026-12-02", "1,234,567.89", "12:30:45", "(555) 123-4567",
    "$1000", "100%", "-5 +100", "v1.2.3", "abc123def", "x=42;", "a 1 b 22 c 333",
    "1st 2nd", "Call 911 now", "1000000000 tokens",
    "\u0663", "\u0661\u0662\u0663\u0664\u0665", " \u0663\u0664", "12\u0663",
    "\u00b2", "x\u00b2+y\u00b3", "\u00bd", "\u216b", "\uff11\uff12\uff13\uff14",
    "\u0968\u0966\u0968\u096c",
]

# Texts of control tokens of the common families, tried on every vocabulary (most are plain text
# in most vocabularies, and must stay so).
COMMON_SPECIALS = [
    "<s>", "</s>", "<unk>", "<pad>", "<|endoftext|>", "<|end|>", "<|user|>", "<|assistant|>",
    "<|system|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|end_of_text|>",
    "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|fim_prefix|>", "<fim_prefix>",
    "<tool_call>", "<EOT>", "<end_of_turn>",
]

# Chat-shaped texts: special tokens next to newlines and words.
CHATS = [
    "<|user|>\nHello<|end|>\n<|assistant|>\n",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<s>[INST] Hi [/INST]</s>",
]

# At most this many tokens of one type that comes in bulk (Llama 3's 250 reserved tokens,
# DeepSeek's 2,398 single-character user tokens, GPT-NeoX's runs of spaces, Phi-3's [PAD] fillers).
BULK_LIMIT = 3

TYPE_NAMES = {2: "unknown", 3: "control", 4: "user-defined"}


def read_gguf_tokens(path):
    """tokenizer.ggml.tokens and token_type of a GGUF file (no tensors needed)."""
    with open(path, "rb") as f:
        data = f.read()
    offset = 0

    def unpack(fmt):
        nonlocal offset
        value = struct.unpack_from("<" + fmt, data, offset)[0]
        offset += struct.calcsize("<" + fmt)
        return value

    def string():
        nonlocal offset
        n = unpack("Q")
        value = data[offset:offset + n].decode("utf-8", "replace")
        offset += n
        return value

    scalars = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
               12: "d"}

    def value(kind):
        if kind == 8:
            return string()
        if kind == 9:
            item = unpack("I")
            return [value(item) for _ in range(unpack("Q"))]
        return unpack(scalars[kind])

    if data[:4] != b"GGUF":
        sys.exit(f"{path}: not a GGUF file")
    offset = 4
    unpack("I")  # version
    unpack("Q")  # tensor count
    metadata = {}
    for _ in range(unpack("Q")):
        key = string()
        metadata[key] = value(unpack("I"))
    tokens = metadata["tokenizer.ggml.tokens"]
    return tokens, metadata.get("tokenizer.ggml.token_type", [1] * len(tokens))


def special_texts(path):
    """The vocabulary's control, user-defined and unknown token texts (bulk kinds capped), then
    the common texts it lacks."""
    tokens, types = read_gguf_tokens(path)
    texts, bulk = [], {}
    for text, kind in zip(tokens, types):
        if kind not in TYPE_NAMES or text in texts:
            continue
        shape = "reserved" if "reserved_special_token" in text else (
            "pad" if text.startswith("[PAD") else (
                "spaces" if text.strip() == "" else ("char" if len(text) == 1 else None)))
        if shape is not None:
            bulk[shape] = bulk.get(shape, 0) + 1
            if bulk[shape] > BULK_LIMIT:
                continue
        texts.append(text)
    return texts + [t for t in COMMON_SPECIALS if t not in texts]


def llama_tokenize(binary, vocab_path, text, parse_special):
    command = [binary, "-m", vocab_path, "-p", text, "--ids", "--no-bos", "--no-escape",
               "--log-disable"] + ([] if parse_special else ["--no-parse-special"])
    result = subprocess.run(command, capture_output=True, check=True)
    lines = [line for line in result.stdout.decode().splitlines() if line.startswith("[")]
    if len(lines) != 1:
        sys.exit(f"unexpected output of {command}: {result.stdout!r}")
    return ast.literal_eval(lines[0])


def write_cases(cases, path):
    """Grouped by vocabulary, one line per text: "digits" holds [text, ids] (without special-token
    parsing), "special" holds [text, ids without, ids with special-token parsing]."""
    vocabs = {}
    for c in cases:
        group = vocabs.setdefault(c["vocab"], {"digits": [], "special": {}})
        if c["kind"] == "digits":
            group["digits"].append([c["text"], c["ids"]])
        else:
            entry = group["special"].setdefault(c["text"], [c["text"], None, None])
            entry[2 if c["parse_special"] else 1] = c["ids"]
    line = lambda value: json.dumps(value, ensure_ascii=False)
    with open(path, "w", encoding="utf-8") as out:
        out.write('{\n"source": "llama.cpp 3f545becc: llama-tokenize -m FILE -p TEXT --ids --no-bos '
                  '--no-escape --log-disable, and --no-parse-special for the ids without '
                  'special-token parsing; written by tests/data/make_llama_cpp_tokens.py",\n')
        out.write('"vocabs": {\n')
        blocks = []
        for vocab, group in vocabs.items():
            digits = ",\n".join(line(entry) for entry in group["digits"])
            special = ",\n".join(line(entry) for entry in group["special"].values())
            blocks.append(f'{line(vocab)}: {{\n"digits": [\n{digits}\n],\n'
                          f'"special": [\n{special}\n]\n}}')
        out.write(",\n".join(blocks))
        out.write("\n}\n}\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llama-tokenize", required=True)
    parser.add_argument("--shared", default=os.path.join(here, "..", "..", "..", "shared"))
    parser.add_argument("--out", default=os.path.join(here, "llama_cpp_tokens.json"))
    args = parser.parse_args()
    models = os.path.join(args.shared, "models")

    plan = []  # (kind, vocab, text, parse_special)
    for vocab in BPE_VOCABS + SPM_VOCABS:
        plan += [("digits", vocab, text, False) for text in DIGITS]
    for vocab in BPE_VOCABS + SPM_VOCABS:
        texts = special_texts(os.path.join(models, vocab))
        inputs = [shape for t in texts for shape in (t, "Hi " + t + " there\n")] + CHATS
        for parse_special in (False, True):
            plan += [("special", vocab, text, parse_special) for text in inputs]

    partial = args.out + ".partial"
    done = {}
    if os.path.exists(partial):
        with open(partial, encoding="utf-8") as f:
            for line in f:
                c = json.loads(line)
                done[(c["kind"], c["vocab"], c["text"], c["parse_special"])] = c
    cases = []
    with open(partial, "a", encoding="utf-8") as progress:
        for i, key in enumerate(plan):
            if key not in done:
                kind, vocab, text, parse_special = key
                ids = llama_tokenize(args.llama_tokenize, os.path.join(models, vocab), text,
                                     parse_special)
                done[key] = {"kind": kind, "vocab": vocab, "parse_special": parse_special,
                             "text": text, "ids": ids}
                progress.write(json.dumps(done[key], ensure_ascii=False) + "\n")
                progress.flush()
            cases.append(done[key])
            if i % 100 == 0:
                print(f"{i}/{len(plan)}", file=sys.stderr)

    write_cases(cases, args.out)
    os.remove(partial)
    print(f"{len(cases)} cases -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
