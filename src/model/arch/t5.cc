// The t5 architecture (T5 v1.0 and v1.1 / FLAN-T5, encoder-decoder): the model is t5_model.h's.
#include "model/architecture.h"
#include "model/t5_model.h"

namespace kvserve {

KVSERVE_ARCHITECTURE(t5) {
  static const Architecture entry{.gguf_name = "t5", .load = LoadT5};
  return entry;
}

}  // namespace kvserve
