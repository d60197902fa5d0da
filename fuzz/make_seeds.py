#!/usr/bin/env python3
"""Writes crafted GGUF seed files for gguf_fuzz into the folder given as argv[1]: tiny but
complete llama and gpt2 models (every tensor the loader wants, in F32/F16/BF16/Q8_0/Q4_0; one
llama with a tied output), a file with one key of every value type, a version-2 file, a file with
a non-default alignment and a file holding the harness's absent-key probe name."""
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
# ggml type id -> (block elements, block bytes)
TYPES = {0: (1, 4), 1: (1, 2), 30: (1, 2), 8: (32, 34), 2: (32, 18)}


def string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def value(vtype, v):
    if vtype == STR:
        return string(v)
    if vtype == ARR:
        etype, items = v
        out = struct.pack("<IQ", etype, len(items))
        return out + b"".join(value(etype, x) for x in items)
    return struct.pack(SCALAR[vtype], v)


def gguf(kvs, tensors, version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, type_id, dims)] filled with a byte pattern."""
    out = struct.pack("<IIQQ", 0x46554747, version, len(tensors), len(kvs))
    for key, vtype, v in kvs:
        out += string(key) + struct.pack("<I", vtype) + value(vtype, v)
    datas, offset = [], 0
    for name, type_id, dims in tensors:
        n = 1
        for d in dims:
            n *= d
        block_elements, block_bytes = TYPES[type_id]
        size = n // block_elements * block_bytes
        datas.append(bytes((i * 7 + 3) % 64 for i in range(size)))
        out += string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", type_id, offset)
        offset += (size + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    for data in datas:
        out += data + b"\0" * (-len(data) % alignment)
    return out


def llama(matrix_type, tied=False):
    e, ff, vocab, kv = 32, 64, 8, 16
    kvs = [("general.architecture", STR, "llama"), ("general.name", STR, "tiny"),
           ("llama.embedding_length", U32, e), ("llama.block_count", U32, 1),
           ("llama.attention.head_count", U32, 4), ("llama.attention.head_count_kv", U32, 2),
           ("llama.feed_forward_length", U32, ff), ("llama.context_length", U32, 16),
           ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
           ("llama.rope.freq_base", F32, 10000.0), ("llama.rope.dimension_count", U32, 8),
           ("tokenizer.ggml.tokens", ARR, (STR, ["<s>", "</s>", "a", "b", "c", "d", "e", "f"])),
           ("tokenizer.ggml.scores", ARR, (F32, [0.0] * vocab))]
    m = matrix_type
    tensors = [("token_embd.weight", m, [e, vocab]), ("output_norm.weight", 0, [e])]
    if not tied:  # without output.weight the embedding is the output matrix too
        tensors.append(("output.weight", m, [e, vocab]))
    tensors += [("blk.0.attn_norm.weight", 0, [e]),
                ("blk.0.attn_q.weight", m, [e, e]), ("blk.0.attn_k.weight", m, [e, kv]),
                ("blk.0.attn_v.weight", m, [e, kv]), ("blk.0.attn_output.weight", m, [e, e]),
                ("blk.0.ffn_norm.weight", 0, [e]), ("blk.0.ffn_gate.weight", m, [e, ff]),
                ("blk.0.ffn_up.weight", m, [e, ff]), ("blk.0.ffn_down.weight", m, [ff, e])]
    return gguf(kvs, tensors)


def gpt2():
    e, ff, vocab, ctx = 32, 64, 8, 16
    kvs = [("general.architecture", STR, "gpt2"), ("gpt2.embedding_length", U32, e),
           ("gpt2.block_count", U32, 1), ("gpt2.attention.head_count", U32, 2),
           ("gpt2.feed_forward_length", U32, ff), ("gpt2.context_length", U32, ctx),
           ("gpt2.attention.layer_norm_epsilon", F32, 1e-5)]
    tensors = [("token_embd.weight", 1, [e, vocab]), ("position_embd.weight", 0, [e, ctx]),
               ("output_norm.weight", 0, [e]), ("output_norm.bias", 0, [e])]
    p = "blk.0."
    tensors += [(p + "attn_norm.weight", 0, [e]), (p + "attn_norm.bias", 0, [e]),
                (p + "attn_qkv.weight", 8, [e, 3 * e]), (p + "attn_qkv.bias", 0, [3 * e]),
                (p + "attn_output.weight", 2, [e, e]), (p + "attn_output.bias", 0, [e]),
                (p + "ffn_norm.weight", 0, [e]), (p + "ffn_norm.bias", 0, [e]),
                (p + "ffn_up.weight", 30, [e, ff]), (p + "ffn_up.bias", 0, [ff]),
                (p + "ffn_down.weight", 0, [ff, e]), (p + "ffn_down.bias", 0, [e])]
    return gguf(kvs, tensors)


def all_value_types():
    kvs = [("u8", U8, 1), ("i8", I8, -1), ("u16", U16, 2), ("i16", I16, -2), ("u32", U32, 3),
           ("i32", I32, -3), ("f32", F32, 0.5), ("bool", BOOL, True), ("str", STR, "text"),
           ("u64", U64, 4), ("i64", I64, -4), ("f64", F64, 0.25),
           ("arr.str", ARR, (STR, ["a", "", "bc"])), ("arr.f32", ARR, (F32, [1.0, 2.0])),
           ("arr.i32", ARR, (I32, [1, -1])), ("arr.u8", ARR, (U8, [1, 2, 3])),
           ("arr.f64", ARR, (F64, [0.5])), ("arr.i64", ARR, (I64, [-5])),
           ("arr.bool", ARR, (BOOL, [True, False])), ("arr.empty", ARR, (U16, []))]
    return gguf(kvs, [("t", 0, [4, 2]), ("q", 8, [32]), ("h", 1, [3, 1, 1, 2])])


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seeds = {"llama-f32.gguf": llama(0), "llama-q8_0.gguf": llama(8), "llama-q4_0.gguf": llama(2),
             "llama-f16.gguf": llama(1), "gpt2-mixed.gguf": gpt2(),
             # A packed tied embedding: its rows are read back from the packed copy.
             "llama-q8_0-tied.gguf": llama(8, tied=True),
             "value-types.gguf": all_value_types(),
             "v2.gguf": gguf([("general.architecture", STR, "llama")], [("t", 0, [8])], version=2),
             "align64.gguf": gguf([("general.alignment", U32, 64)], [("a", 0, [3]), ("b", 1, [5])],
                                  alignment=64),
             # The harness probes KEY + "\x01missing" as an absent key; a file may hold it too
             # (CI's fuzzer once built one).
             "probe-key.gguf": gguf([("llama.block_count", U32, 1),
                                     ("llama.block_count\x01missing", U32, 2)], [])}
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
