// The t5encoder architecture (llama.cpp's encoder-only T5, as T5 text encoders are shipped:
// token_embd, enc.blk.N.*, enc.output_norm): T5's encoder of t5_model.h without its decoder. It
// computes embeddings (`kvserve embed`, POST /v1/embeddings) and no text.
#include "model/architecture.h"
#include "model/t5_hf.h"
#include "model/t5_model.h"
#include "model/t5_synth.h"

namespace kvserve {

KVSERVE_ARCHITECTURE(t5encoder) {
  static const Architecture entry{.gguf_name = "t5encoder",
                                  .load = &LoadT5Encoder,
                                  .hf_classes = T5EncoderHfClasses(),
                                  .synthetic = &T5EncoderSynthetic()};
  return entry;
}

}  // namespace kvserve
