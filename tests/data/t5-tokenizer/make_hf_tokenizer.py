#!/usr/bin/env python3
"""Writes hf-nfkc/: the tokenizer.json and tokenizer_config.json that transformers saves for the
nfkc vocabulary of vocab-nfkc.json (sentencepiece's spiece.model, retrained by make_vocab.py's own
functions: the same pieces, scores and charsmap, checked), loaded as a T5 tokenizer with 4 extra
ids. tests/t5_tokenizer_test.cc reads the folder with kvserve and checks it against llama.cpp's
ids for the GGUF file of vocab-nfkc.json.

Needs, in a throwaway venv (never the build):
    python3 -m venv /tmp/hf-venv
    /tmp/hf-venv/bin/pip install --only-binary=:all: transformers==5.25.0 tokenizers==0.23.3 \
        sentencepiece==0.2.3 protobuf==7.36.2
    /tmp/hf-venv/bin/python tests/data/t5-tokenizer/make_hf_tokenizer.py
"""
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_vocab  # noqa: E402
from transformers import T5Tokenizer  # noqa: E402


def main():
    out = os.path.join(HERE, "hf-nfkc")
    with tempfile.TemporaryDirectory() as tmp:
        text = make_vocab.training_text()
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            f.write(text)
        rules = os.path.join(tmp, "rules.tsv")
        make_vocab.write_rules(make_vocab.character_set(text), rules)
        proto = make_vocab.train(os.path.join(tmp, "nfkc"), corpus,
                                 normalization_rule_tsv=rules, pad_id=0, eos_id=1, unk_id=2,
                                 bos_id=-1, user_defined_symbols=["<sep>"])
        ref = json.load(open(os.path.join(HERE, "vocab-nfkc.json"), encoding="utf-8"))
        assert [p.piece for p in proto.pieces] == ref["tokens"][:len(proto.pieces)]
        assert proto.normalizer_spec.precompiled_charsmap.hex() == ref["precompiled_charsmap_hex"]
        source = os.path.join(tmp, "source")
        os.makedirs(source)
        shutil.copy(os.path.join(tmp, "nfkc.model"), os.path.join(source, "spiece.model"))
        with open(os.path.join(source, "tokenizer_config.json"), "w") as f:
            json.dump({"extra_ids": 4, "tokenizer_class": "T5Tokenizer", "eos_token": "</s>",
                       "unk_token": "<unk>", "pad_token": "<pad>"}, f)
        saved = os.path.join(tmp, "saved")
        T5Tokenizer.from_pretrained(source).save_pretrained(saved)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            with open(os.path.join(saved, name), encoding="utf-8") as f:
                content = json.load(f)
            with open(os.path.join(out, name), "w", encoding="utf-8") as f:
                json.dump(content, f, ensure_ascii=False, separators=(",", ":"))
                f.write("\n")


if __name__ == "__main__":
    main()
