#include "model/t5_synth.h"

#include <string>

namespace kvserve {

namespace {

// The attention tensors of a self-attention (`kind` "attn") or cross-attention ("cross_attn")
// under prefix p; the relative position bias on layer 0's self-attention only.
void AddAttention(const SyntheticShape& s, const std::string& p, const std::string& kind, int layer,
                  SyntheticTensors& out) {
  const int64_t att = static_cast<int64_t>(s.n_heads) * s.HeadDim();
  out.Vector(p + kind + "_norm.weight", s.n_embd, SyntheticFill::kNearOne);
  if (kind == "attn" && layer == 0) {
    out.F32Matrix(p + "attn_rel_b.weight", s.n_heads, s.rel_buckets, SyntheticFill::kWide);
  }
  out.Matrix(p + kind + "_q.weight", s.n_embd, att);
  out.Matrix(p + kind + "_k.weight", s.n_embd, att);
  out.Matrix(p + kind + "_v.weight", s.n_embd, att);
  out.Matrix(p + kind + "_o.weight", att, s.n_embd);
}

void AddFeedForward(const SyntheticShape& s, const std::string& p, SyntheticTensors& out) {
  out.Vector(p + "ffn_norm.weight", s.n_embd, SyntheticFill::kNearOne);
  if (s.gated_ffn) out.Matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff);
  out.Matrix(p + "ffn_down.weight", s.n_ff, s.n_embd);
  out.Matrix(p + "ffn_up.weight", s.n_embd, s.n_ff);
}

int DecoderLayers(const SyntheticShape& s) {
  return s.n_decoder_layers > 0 ? s.n_decoder_layers : s.n_layers;
}

void AddEncoder(const SyntheticShape& s, SyntheticTensors& out) {
  for (int i = 0; i < s.n_layers; ++i) {
    const std::string p = "enc.blk." + std::to_string(i) + ".";
    AddAttention(s, p, "attn", i, out);
    AddFeedForward(s, p, out);
  }
  out.Vector("enc.output_norm.weight", s.n_embd, SyntheticFill::kNearOne);
}

void SynthT5EncoderTensors(const SyntheticShape& s, int64_t n_vocab, SyntheticTensors& out) {
  out.Matrix("token_embd.weight", s.n_embd, n_vocab);
  AddEncoder(s, out);
}

void SynthT5Tensors(const SyntheticShape& s, int64_t n_vocab, SyntheticTensors& out) {
  out.Matrix("token_embd.weight", s.n_embd, n_vocab);
  if (!s.tied_output) out.Matrix("output.weight", s.n_embd, n_vocab);
  AddEncoder(s, out);
  for (int i = 0; i < DecoderLayers(s); ++i) {
    const std::string p = "dec.blk." + std::to_string(i) + ".";
    AddAttention(s, p, "attn", i, out);
    AddAttention(s, p, "cross_attn", i, out);
    AddFeedForward(s, p, out);
  }
  out.Vector("dec.output_norm.weight", s.n_embd, SyntheticFill::kNearOne);
}

// T5Model.set_gguf_parameters's keys in its order: no head_count_kv (llama.cpp takes head_count),
// no rope keys, no vocab_size; the epsilon twice. T5EncoderModel's are the same without the
// decoder's (decoder_block_count, decoder_start_token_id).
void SynthT5Metadata(const SyntheticShape& s, int64_t /*n_vocab*/, GgufWriter& w) {
  const std::string a = s.arch + ".";
  const bool decoder = s.arch != "t5encoder";
  w.SetUint32(a + "context_length", s.n_ctx);
  w.SetUint32(a + "embedding_length", s.n_embd);
  w.SetUint32(a + "feed_forward_length", s.n_ff);
  w.SetUint32(a + "block_count", s.n_layers);
  if (decoder && s.n_decoder_layers > 0) w.SetUint32(a + "decoder_block_count", s.n_decoder_layers);
  w.SetUint32(a + "attention.head_count", s.n_heads);
  w.SetUint32(a + "attention.key_length", s.HeadDim());
  w.SetUint32(a + "attention.value_length", s.HeadDim());
  w.SetFloat32(a + "attention.layer_norm_epsilon", s.norm_eps);
  w.SetUint32(a + "attention.relative_buckets_count", s.rel_buckets);
  w.SetFloat32(a + "attention.layer_norm_rms_epsilon", s.norm_eps);
  if (decoder) w.SetUint32(a + "decoder_start_token_id", 0);
}

// Tests, T5 v1.1 (Flan-T5) style: 64 wide, 2 encoder and 2 decoder layers (decoder_block_count
// written, as Flan-T5's configs have num_decoder_layers), 4 heads of 32 (128, wider than n_embd,
// as t5-small's 8 x 64 = 512 is not d_model in every T5), 32 buckets, a gated-GELU feed-forward
// of 192, separate output. Rows are multiples of 32, so Q8_0 and Q4_0 quantize every matrix.
SyntheticShape TinyShape() {
  return {.arch = "t5",
          .n_embd = 64,
          .n_layers = 2,
          .n_heads = 4,
          .n_kv_heads = 4,
          .n_ff = 192,
          .n_ctx = 512,
          .norm_eps = 1e-6f,
          .head_dim = 32,
          .n_decoder_layers = 2,
          .rel_buckets = 32,
          .gated_ffn = true};
}

// Tests, T5 v1.0 style: t5-tiny's shape with a ReLU feed-forward, the output tied to token_embd
// and no decoder_block_count (t5-small's config.json has no num_decoder_layers).
SyntheticShape TinyV1Shape() {
  SyntheticShape s = TinyShape();
  s.n_decoder_layers = 0;
  s.gated_ffn = false;
  s.tied_output = true;
  return s;
}

// google-t5/t5-small and t5-base (config.json as remembered, not checked here): ReLU, tied,
// 32 buckets, n_positions 512, layer_norm_epsilon 1e-6, heads of 64; small 512 wide, 6 + 6
// layers, 8 heads, d_ff 2048; base 768 wide, 12 + 12 layers, 12 heads, d_ff 3072. Their 32128-token
// vocabulary is not among the shared files: the default llama SPM one gives 32000.
SyntheticShape T5Shape(int n_embd, int n_layers, int n_heads, int n_ff) {
  return {.arch = "t5",
          .n_embd = n_embd,
          .n_layers = n_layers,
          .n_heads = n_heads,
          .n_kv_heads = n_heads,
          .n_ff = n_ff,
          .n_ctx = 512,
          .norm_eps = 1e-6f,
          .tied_output = true,
          .head_dim = 64,
          .rel_buckets = 32};
}

// t5-tiny's encoder alone (gated GELU), as a t5encoder file.
SyntheticShape TinyEncoderShape() {
  SyntheticShape s = TinyShape();
  s.arch = "t5encoder";
  s.n_decoder_layers = 0;
  return s;
}

}  // namespace

const SyntheticRecipe& T5EncoderSynthetic() {
  static const SyntheticRecipe recipe{.vocab_file = "ggml-vocab-llama-spm.gguf",
                                      .grouped_kv = false,
                                      .rotary = false,
                                      .encoder_decoder = true,
                                      .tensors = &SynthT5EncoderTensors,
                                      .metadata = &SynthT5Metadata,
                                      .presets = {{"t5encoder-tiny", TinyEncoderShape()}}};
  return recipe;
}

const SyntheticRecipe& T5Synthetic() {
  static const SyntheticRecipe recipe{.vocab_file = "ggml-vocab-llama-spm.gguf",
                                      .grouped_kv = false,
                                      .rotary = false,
                                      .encoder_decoder = true,
                                      .tensors = &SynthT5Tensors,
                                      .metadata = &SynthT5Metadata,
                                      .presets = {{"t5-tiny", TinyShape()},
                                                  {"t5-tiny-v1", TinyV1Shape()},
                                                  {"t5-small", T5Shape(512, 6, 8, 2048)},
                                                  {"t5-base", T5Shape(768, 12, 12, 3072)}}};
  return recipe;
}

}  // namespace kvserve
