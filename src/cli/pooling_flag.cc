#include "cli/pooling_flag.h"

namespace kvserve {

FlagGroup PoolingFlag() {
  return {"embeddings",
          {{.name = "--pooling",
            .value_name = "NAME",
            .default_text = "the file's pooling_type, else mean",
            .help = "none (a vector per token), mean, cls (first token) or last"}}};
}

Result<Pooling> ReadPooling(const Args& args, const Model& model) {
  if (args.Has("--pooling")) return ParsePooling(*args.Get("--pooling"), "flag --pooling");
  return FilePooling(model);
}

}  // namespace kvserve
