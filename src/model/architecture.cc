#include "model/architecture.h"

namespace kvserve {

const Architecture* FindArchitecture(std::string_view gguf_name) {
  for (const Architecture* arch : Architectures()) {
    if (gguf_name == arch->gguf_name) return arch;
  }
  return nullptr;
}

HfClassEntry FindHfClass(std::string_view architecture, std::string_view model_type) {
  for (const Architecture* arch : Architectures()) {
    for (const HfClass& hf : arch->hf_classes) {
      if (architecture.empty() ? model_type == hf.model_type : architecture == hf.architecture) {
        return {.architecture = arch, .hf_class = &hf};
      }
    }
  }
  return {};
}

std::string SupportedHfClasses() {
  std::string names;
  for (const Architecture* arch : Architectures()) {
    for (const HfClass& hf : arch->hf_classes) {
      names += std::string(names.empty() ? "" : ", ") + hf.architecture;
    }
  }
  return names;
}

std::string SupportedArchitectures() {
  std::string names;
  for (const Architecture* arch : Architectures()) {
    names += (names.empty() ? "" : ", ") + std::string(arch->gguf_name);
  }
  return names;
}

}  // namespace kvserve
