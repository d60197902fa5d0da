#!/usr/bin/env python3
"""Trains the two small SentencePiece unigram vocabularies of tests/t5_tokenizer_test.cc and
writes them as vocab-nfkc.json and vocab-identity.json (the tokenizer.ggml.* keys that llama.cpp's
T5 converter, conversion/t5.py, would write for them; the test turns them into GGUF files).

Needs sentencepiece (0.2.3 was used) and protobuf (7.36.2) in a throwaway venv, never the build:
    python3 -m venv /tmp/spm-venv
    /tmp/spm-venv/bin/pip install --only-binary=:all: sentencepiece==0.2.3 protobuf==7.36.2
    /tmp/spm-venv/bin/python tests/data/t5-tokenizer/make_vocab.py

Training text: the committed tokenizer corpus (multilingual.md, the three licences,
cjkencodings.txt, synthetic.txt). Both trainings run on one thread.

- nfkc: T5's layout (<pad> 0, </s> 1, <unk> 2, no BOS), a prefix space and extra whitespace
  removed as T5's spiece.model has them, and a precompiled charsmap compiled by sentencepiece from
  the nmt_nfkc rules (sentencepiece's own, decompiled) whose source characters all lie in a set S:
  the characters of inputs.json and of the training text (of the combining marks U+0300..U+036F
  only U+0301 and U+0308), ASCII, Latin-1, Latin Extended-A/B, general punctuation, super- and
  subscripts, number forms, enclosed alphanumerics, CJK symbols, CJK compatibility, the
  ligatures U+FB00.., full-width ASCII U+FF00..U+FF5F and U+FFE0..U+FFEE. For any text over S
  this normalizes exactly as nmt_nfkc does, with a 13 KB charsmap instead of 240 KB. One
  user-defined symbol <sep>; then, as the converter does for a config vocab_size beyond the
  model's, [PADn] unused tokens (score -10000) and T5's <extra_id_N> user-defined tokens from
  added_tokens.json (score -1000), counting down from the last id.
- identity: no charsmap (normalization rule identity), no prefix space, extra whitespace kept,
  byte fallback pieces <0x00>..<0xFF> (llama.cpp's unigram encoder never produces them; they
  decode to their byte), <unk> 0, <s> 1, </s> 2, add_bos_token true and add_eos_token false.
"""
import json
import os
import struct
import sys
import tempfile

os.environ["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"
import sentencepiece as spm  # noqa: E402
from sentencepiece import sentencepiece_model_pb2 as model_pb2  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "tokenizer-corpus")
TRAINING_FILES = ["multilingual.md", "licenses/GPL-3", "licenses/Apache-2.0", "licenses/MPL-2.0",
                  "python/cjkencodings.txt", "synthetic.txt"]
RANGES = [(0x0000, 0x0250), (0x0301, 0x0302), (0x0308, 0x0309), (0x2000, 0x20A0),
          (0x2150, 0x2190), (0x2460, 0x2500), (0x3000, 0x3040), (0x3300, 0x3400),
          (0xFB00, 0xFB50), (0xFF00, 0xFF60), (0xFFE0, 0xFFEF)]
N_PAD = 8         # [PADn] tokens the converter adds (config vocab_size beyond the model)
N_EXTRA_IDS = 4   # <extra_id_0> is the last id, as in T5


def read_text(path):
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def training_text():
    return "".join(read_text(os.path.join(CORPUS, name)) for name in TRAINING_FILES)


def character_set(text):
    chars = {c for c in map(ord, text) if not 0x300 <= c < 0x370}
    for begin, end in RANGES:
        chars.update(range(begin, end))
    for case in json.load(open(os.path.join(HERE, "inputs.json"), encoding="utf-8")):
        chars.update(map(ord, case.get("text", "")))
    return chars


def write_rules(chars, path):
    normalizer = spm.SentencePieceNormalizer(rule_name="nmt_nfkc", add_dummy_prefix=False,
                                             escape_whitespaces=False,
                                             remove_extra_whitespaces=False)
    rules = [(s, t) for s, t in normalizer.Decompile() if all(ord(c) in chars for c in s)]
    with open(path, "w", encoding="utf-8") as f:
        for source, target in rules:
            f.write(" ".join("%X" % ord(c) for c in source) + "\t" +
                    " ".join("%X" % ord(c) for c in target) + "\n")
    return len(rules)


def train(prefix, corpus_path, **options):
    spm.SentencePieceTrainer.train(input=corpus_path, model_prefix=prefix, model_type="unigram",
                                   vocab_size=1000, character_coverage=0.98, num_threads=1,
                                   minloglevel=2,
                                   **options)
    proto = model_pb2.ModelProto()
    with open(prefix + ".model", "rb") as f:
        proto.ParseFromString(f.read())
    return proto


def short_float32(x):
    """The shortest decimal that reads back as the same float32 (keeps the JSON small)."""
    as_float32 = struct.unpack("<f", struct.pack("<f", x))[0]
    for digits in range(1, 10):
        text = "%.*g" % (digits, as_float32)
        if struct.unpack("<f", struct.pack("<f", float(text)))[0] == as_float32:
            return float(text)
    return as_float32


def token_lists(proto):
    """conversion/t5.py's set_vocab: texts, scores and types (1 normal ... 6 byte)."""
    type_of = {1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6}  # sentencepiece piece type -> gguf type
    tokens = [p.piece for p in proto.pieces]
    scores = [short_float32(p.score) for p in proto.pieces]
    types = [type_of[p.type] for p in proto.pieces]
    return tokens, scores, types


def vocab_json(proto, keys, extra_ids=0, pads=0):
    tokens, scores, types = token_lists(proto)
    n = len(tokens) + pads + extra_ids
    for i in range(len(tokens), n):
        tokens.append("[PAD%d]" % i)
        scores.append(-10000.0)
        types.append(5)
    for k in range(extra_ids):
        tokens[n - 1 - k] = "<extra_id_%d>" % k
        scores[n - 1 - k] = -1000.0
        types[n - 1 - k] = 4
    spec = proto.normalizer_spec
    out = {"sentencepiece": spm.__version__, "normalizer": spec.name,
           "add_dummy_prefix": spec.add_dummy_prefix,
           "remove_extra_whitespaces": spec.remove_extra_whitespaces, "keys": keys,
           "tokens": tokens, "scores": scores, "types": types}
    if spec.precompiled_charsmap:
        out["precompiled_charsmap_hex"] = spec.precompiled_charsmap.hex()
    return out


def dump(obj, name):
    with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


def main():
    text = training_text()
    with tempfile.TemporaryDirectory() as tmp:
        corpus_path = os.path.join(tmp, "corpus.txt")
        with open(corpus_path, "w", encoding="utf-8") as f:
            f.write(text)
        rules_path = os.path.join(tmp, "rules.tsv")
        n_rules = write_rules(character_set(text), rules_path)
        nfkc = train(os.path.join(tmp, "nfkc"), corpus_path, normalization_rule_tsv=rules_path,
                     pad_id=0, eos_id=1, unk_id=2, bos_id=-1, user_defined_symbols=["<sep>"])
        identity = train(os.path.join(tmp, "identity"), corpus_path,
                         normalization_rule_name="identity", add_dummy_prefix=False,
                         remove_extra_whitespaces=False, byte_fallback=True, unk_id=0, bos_id=1,
                         eos_id=2, pad_id=-1)
    dump(vocab_json(nfkc, {"eos_token_id": 1, "unknown_token_id": 2, "padding_token_id": 0},
                    extra_ids=N_EXTRA_IDS, pads=N_PAD), "vocab-nfkc.json")
    dump(vocab_json(identity, {"bos_token_id": 1, "eos_token_id": 2, "unknown_token_id": 0,
                               "add_bos_token": True, "add_eos_token": False}),
         "vocab-identity.json")
    print("nmt_nfkc rules kept: %d; sentencepiece %s" % (n_rules, spm.__version__),
          file=sys.stderr)


if __name__ == "__main__":
    main()
