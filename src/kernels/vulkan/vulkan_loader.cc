#include "kernels/vulkan/vulkan_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

namespace kvserve {

#define KVSERVE_DEFINE_VULKAN_FUNCTION(name) PFN_##name name = nullptr;
KVSERVE_VULKAN_FUNCTIONS(KVSERVE_DEFINE_VULKAN_FUNCTION)
#undef KVSERVE_DEFINE_VULKAN_FUNCTION

namespace {

// The loader stays open for the process's life: the function pointers point into it.
Status OpenAndLoad() {
  const char* path = std::getenv("KVSERVE_VULKAN_LOADER");
  const std::string kLoader = path != nullptr && *path != '\0' ? path : "libvulkan.so.1";
  void* library = dlopen(kLoader.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return Status::Unavailable(std::string("the Vulkan loader ") + kLoader +
                               " could not be opened (install libvulkan1 and a Vulkan driver, "
                               "e.g. mesa-vulkan-drivers): " +
                               (why != nullptr ? why : "unknown error"));
  }
  std::string missing;
#define KVSERVE_LOAD_VULKAN_FUNCTION(name)                    \
  name = reinterpret_cast<PFN_##name>(dlsym(library, #name)); \
  if (name == nullptr) missing += std::string(missing.empty() ? "" : ", ") + #name;
  KVSERVE_VULKAN_FUNCTIONS(KVSERVE_LOAD_VULKAN_FUNCTION)
#undef KVSERVE_LOAD_VULKAN_FUNCTION
  if (!missing.empty()) {
    return Status::Unavailable(std::string("the Vulkan loader ") + kLoader + " lacks " + missing +
                               " (a Vulkan 1.1 loader is needed)");
  }
  return Status::Ok();
}

}  // namespace

Status LoadVulkan() {
  static std::once_flag once;
  static Status result;
  std::call_once(once, [] { result = OpenAndLoad(); });
  return result;
}

}  // namespace kvserve
