#!/usr/bin/env python3
"""Writes synthetic.txt: the strings tokenizers get wrong, written out with a fixed seed.

Digits of every length (alone, after a space, in prices, dates, versions and hex), runs of
spaces, tabs and newlines (CRLF too), contractions in both cases, control-token texts of many
vocabularies written as plain text, JSON, URLs, repeated characters, combining marks,
zero-width joiners and no-break spaces. Run: python3 make_synthetic.py > synthetic.txt
"""
import json
import random

rng = random.Random(20261203)
out = []

# Digits: every length 1-24, alone, after a space, in sequences.
for n in range(1, 25):
    digits = "".join(rng.choice("0123456789") for _ in range(n))
    out.append(f"{digits} | {digits}| x{digits}y | -{digits}.{digits[::-1]} | ({digits})")
for _ in range(120):
    a, b, c = rng.randrange(10**6), rng.randrange(10**3), rng.randrange(10**9)
    out.append(f"v{a % 20}.{b}.{c % 1000} on {1990 + a % 40}-{1 + b % 12:02d}-{1 + c % 28:02d} "
               f"costs ${a:,}.{b % 100:02d} or {c:_} units; 0x{c:08x} 0b{b:b} {a / 7:.6f} "
               f"{a:e} 1e-{b % 30} {c % 100}%")

# Whitespace: runs of spaces, tabs, newlines, CRLF, NBSP and other spaces.
spaces = [" ", "  ", "   ", "    ", "        ", "\t", "\t\t", " \t ", "\u00a0", "\u2009",
          "\u3000", "\u200b"]
for _ in range(200):
    words = [rng.choice(["cache", "block", "KV", "token", "Gemma", "SmolLM", "a", "I"])
             for _ in range(rng.randrange(2, 8))]
    line = ""
    for w in words:
        line += w + rng.choice(spaces)
    out.append(line + rng.choice(["", " ", "  ", "\t"]))
    if rng.random() < 0.2:
        out.append(rng.choice(["", "\n", "\n\n", "\r", " \n"]))
out.append("line one\r\nline two\r\n\r\nline four\r\n")

# Contractions and case.
for phrase in ["it's", "IT'S", "we're", "WE'RE", "they've", "I'm", "I'M", "you'll", "YOU'LL",
               "she'd", "SHE'D", "don't", "DON'T", "o'clock", "rock 'n' roll", "'quoted'",
               "the dogs' bowls", "James's", "’curly’s", "l'homme", "dell'anno"]:
    out.append(f"{phrase} {phrase.upper()} {phrase.capitalize()} ({phrase}) '{phrase}'")

# Control-token texts of many vocabularies, as plain text.
markers = ["<s>", "</s>", "<unk>", "<pad>", "<|endoftext|>", "<|im_start|>", "<|im_end|>",
           "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<|eot_id|>",
           "<|start_header_id|>", "<|end_header_id|>", "[INST]", "[/INST]", "<<SYS>>",
           "<|user|>", "<|assistant|>", "<|end|>", "<|fim_prefix|>", "<fim_suffix>", "<mask>",
           "<think>", "</think>", "<tool_call>", "<|channel|>", "<image_soft_token>"]
for _ in range(80):
    parts = [rng.choice(markers) if rng.random() < 0.4 else rng.choice(["Hi", " there", "\n",
             "user", "model", " ", "42", "x"]) for _ in range(rng.randrange(3, 9))]
    out.append("".join(parts))

# JSON documents and URLs.
for i in range(60):
    doc = {"id": i, "name": rng.choice(["Ada", "Grace", "Linus", "Jürgen", "李雷", "Ольга"]),
           "score": round(rng.random() * 100, 3), "tags": rng.sample(["a", "bb", "ccc", "kv",
           "gpu", "cpu"], 3), "ok": rng.random() < 0.5, "nested": {"depth": [1, [2, [3]]]}}
    out.append(json.dumps(doc, ensure_ascii=rng.random() < 0.5,
                          indent=rng.choice([None, 2, 4])))
for i in range(60):
    out.append(f"https://example.org/path/{rng.randrange(10**6)}/file_{i}.tar.gz?q=a+b&n={i}"
               f"#frag-{i}  mailto:user{i}@example.com  ~/src/kv_cache/block_{i:03d}.cc:{i * 7}")

# Repeats, long words, combining marks, joiners.
for ch in ["a", "=", "-", "_", "*", "#", "!", "?", ".", "…", "é", "ß", "日", "😀", " "]:
    out.append(ch * rng.randrange(3, 70))
out.append("Pneumonoultramicroscopicsilicovolcanoconiosis Donaudampfschifffahrtsgesellschaft"
           "skapitän antidisestablishmentarianism")
out.append("e\u0301 a\u0308 n\u0303 o\u0302\u0323 Z\u0351\u0360\u034b\u0312a\u0351l\u0351g\u0351o "
           "क्\u200dष ক্\u200dষ \u200c\u200d \ufeffbom \u00ad soft\u00adhyphen")
for _ in range(100):
    word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
                              "+/=") for _ in range(rng.randrange(8, 60)))
    out.append(word)

print("\n".join(out))
