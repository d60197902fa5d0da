#!/usr/bin/env python3
# A second opinion on the t5 reference cases: T5's forward in plain Python (float64, no numpy),
# written from Hugging Face's T5 (unscaled scores, relative position buckets with max_distance
# 128, bidirectional in the encoder; RMS norms; ReLU or gated tanh-GELU; the tied output not
# scaled, as llama.cpp runs it), over an F32 file `kvserve synth` made; it prints the largest
# |difference| from a case's encoder output, prefix logits and generated logits.
#   python3 t5_forward.py F.gguf tests/data/llama-reference/t5-tiny-f32
import struct, math, sys, json

def read_gguf(path):
    d = open(path, 'rb').read(); off = 0
    def u(fmt):
        nonlocal off
        v = struct.unpack_from('<' + fmt, d, off); off += struct.calcsize(fmt); return v[0]
    def s():
        n = u('Q'); nonlocal off; v = d[off:off+n].decode('utf-8', 'replace'); off += n; return v
    sizes = {0:'B',1:'b',2:'H',3:'h',4:'I',5:'i',6:'f',7:'?',10:'Q',11:'q',12:'d'}
    def val(t):
        if t == 8: return s()
        if t == 9:
            at = u('I'); n = u('Q'); return [val(at) for _ in range(n)]
        return u(sizes[t])
    assert d[:4] == b'GGUF'; off = 4
    u('I'); nt = u('Q'); nkv = u('Q')
    kv = {}
    for _ in range(nkv):
        k = s(); t = u('I'); kv[k] = val(t)
    infos = []
    for _ in range(nt):
        name = s(); nd = u('I'); dims = [u('Q') for _ in range(nd)]; t = u('I'); o = u('Q')
        infos.append((name, dims, t, o))
    align = kv.get('general.alignment', 32)
    base = (off + align - 1) // align * align
    tensors = {}
    for name, dims, t, o in infos:
        assert t == 0, name
        n = 1
        for x in dims: n *= x
        flat = struct.unpack_from('<%df' % n, d, base + o)
        if len(dims) == 1: tensors[name] = list(flat)
        else: tensors[name] = [list(flat[r*dims[0]:(r+1)*dims[0]]) for r in range(n // dims[0])]
    return kv, tensors

def matvec(W, x):  # W: rows of len(x) -> out len(W)
    return [sum(a*b for a, b in zip(row, x)) for row in W]

def rmsnorm(x, w, eps):
    r = 1.0 / math.sqrt(sum(v*v for v in x) / len(x) + eps)
    return [v * r * g for v, g in zip(x, w)]

def bucket(rel, n_buckets, bidirectional, max_distance=128):
    b = 0
    if bidirectional:
        n_buckets //= 2
        if rel > 0: b += n_buckets
        rel = abs(rel)
    else:
        rel = -min(rel, 0)
    max_exact = n_buckets // 2
    if rel < max_exact: return b + rel
    large = max_exact + math.log(rel / max_exact) / math.log(max_distance / max_exact) * (n_buckets - max_exact)
    return b + min(int(math.floor(large)), n_buckets - 1)

def gelu_tanh(x):
    return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))

def attention(q_rows, k_rows, v_rows, n_head, hd, bias):  # bias(h, i, j) or None; -inf masks
    out = []
    for i, q in enumerate(q_rows):
        o = []
        for h in range(n_head):
            sc = []
            for j, k in enumerate(k_rows):
                b = bias(h, i, j) if bias else 0.0
                if b == -math.inf: sc.append(-math.inf); continue
                sc.append(sum(q[h*hd+t] * k[h*hd+t] for t in range(hd)) + b)
            m = max(sc); e = [math.exp(x - m) if x != -math.inf else 0.0 for x in sc]; z = sum(e)
            for t in range(hd):
                o.append(sum(e[j] * v_rows[j][h*hd+t] for j in range(len(v_rows))) / z)
        out.append(o)
    return out

def ffn(T, p, x, gated):
    up = matvec(T[p + 'ffn_up.weight'], x)
    if gated:
        g = matvec(T[p + 'ffn_gate.weight'], x)
        hdn = [gelu_tanh(a) * b for a, b in zip(g, up)]
    else:
        hdn = [max(0.0, a) for a in up]
    return matvec(T[p + 'ffn_down.weight'], hdn)

def main(path, case):
    kv, T = read_gguf(path)
    ref = json.load(open(case + '.json'))
    n_embd = kv['t5.embedding_length']; n_head = kv['t5.attention.head_count']
    hd = kv['t5.attention.key_length']; nb = kv['t5.attention.relative_buckets_count']
    eps = kv['t5.attention.layer_norm_rms_epsilon']
    n_enc = kv['t5.block_count']; n_dec = kv.get('t5.decoder_block_count', n_enc)
    E = T['token_embd.weight']; out_w = T.get('output.weight', E)
    gated = 'enc.blk.0.ffn_gate.weight' in T
    enc_tok = ref['encoder_tokens']
    x = [list(E[t]) for t in enc_tok]
    relb = T['enc.blk.0.attn_rel_b.weight']  # rows: buckets, each n_head
    for l in range(n_enc):
        p = 'enc.blk.%d.' % l
        xn = [rmsnorm(r, T[p + 'attn_norm.weight'], eps) for r in x]
        q = [matvec(T[p + 'attn_q.weight'], r) for r in xn]
        k = [matvec(T[p + 'attn_k.weight'], r) for r in xn]
        v = [matvec(T[p + 'attn_v.weight'], r) for r in xn]
        a = attention(q, k, v, n_head, hd, lambda h, i, j: relb[bucket(j - i, nb, True)][h])
        x = [[s + t for s, t in zip(r, matvec(T[p + 'attn_o.weight'], o))] for r, o in zip(x, a)]
        x = [[s + t for s, t in zip(r, ffn(T, p, rmsnorm(r, T[p + 'ffn_norm.weight'], eps), gated))] for r in x]
    enc = [rmsnorm(r, T['enc.output_norm.weight'], eps) for r in x]
    dec_tok = ref['decoder_prompt_tokens'] + ref['greedy_tokens']
    y = [list(E[t]) for t in dec_tok]
    relb_d = T['dec.blk.0.attn_rel_b.weight']
    for l in range(n_dec):
        p = 'dec.blk.%d.' % l
        yn = [rmsnorm(r, T[p + 'attn_norm.weight'], eps) for r in y]
        q = [matvec(T[p + 'attn_q.weight'], r) for r in yn]
        k = [matvec(T[p + 'attn_k.weight'], r) for r in yn]
        v = [matvec(T[p + 'attn_v.weight'], r) for r in yn]
        a = attention(q, k, v, n_head, hd,
                      lambda h, i, j: -math.inf if j > i else relb_d[bucket(j - i, nb, False)][h])
        y = [[s + t for s, t in zip(r, matvec(T[p + 'attn_o.weight'], o))] for r, o in zip(y, a)]
        yn = [rmsnorm(r, T[p + 'cross_attn_norm.weight'], eps) for r in y]
        q = [matvec(T[p + 'cross_attn_q.weight'], r) for r in yn]
        k = [matvec(T[p + 'cross_attn_k.weight'], r) for r in enc]
        v = [matvec(T[p + 'cross_attn_v.weight'], r) for r in enc]
        a = attention(q, k, v, n_head, hd, None)
        y = [[s + t for s, t in zip(r, matvec(T[p + 'cross_attn_o.weight'], o))] for r, o in zip(y, a)]
        y = [[s + t for s, t in zip(r, ffn(T, p, rmsnorm(r, T[p + 'ffn_norm.weight'], eps), gated))] for r in y]
    logits = [matvec(out_w, rmsnorm(r, T['dec.output_norm.weight'], eps)) for r in y]
    def load(p):
        d = open(p, 'rb').read(); return struct.unpack('<%df' % (len(d) // 4), d)
    V = len(E)
    ref_enc = load(case + '.enc.f32'); ref_lg = load(case + '.logits.f32'); ref_gen = load(case + '.gen.logits.f32')
    de = max(abs(enc[i][c] - ref_enc[i*n_embd + c]) for i in range(len(enc)) for c in range(n_embd))
    npf = len(ref['decoder_prompt_tokens'])
    dp = max(abs(logits[i][c] - ref_lg[i*V + c]) for i in range(npf) for c in range(V))
    dg = max(abs(logits[npf + i][c] - ref_gen[i*V + c]) for i in range(len(ref['greedy_tokens'])) for c in range(V))
    print('%s: max |diff| enc %.2e prompt logits %.2e gen logits %.2e' % (case, de, dp, dg))

main(sys.argv[1], sys.argv[2])
