// The t5 architecture (T5 v1.0 and v1.1 / Flan-T5 encoder-decoders), as llama.cpp's t5 graph
// reads its GGUF files: enc.blk.N.* and dec.blk.N.* layers, relative position biases, a decoder
// with cross-attention over the encoder's output. The model is t5_model.h's, the Hugging Face
// class t5_hf.h's, the random-weight recipe t5_synth.h's.
#include "model/architecture.h"
#include "model/t5_hf.h"
#include "model/t5_model.h"
#include "model/t5_synth.h"

namespace kvserve {

KVSERVE_ARCHITECTURE(t5) {
  static const Architecture entry{
      .gguf_name = "t5", .load = &LoadT5, .hf_classes = T5HfClasses(), .synthetic = &T5Synthetic()};
  return entry;
}

}  // namespace kvserve
