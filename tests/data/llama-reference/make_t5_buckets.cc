// Writes llama.cpp's T5 relative position buckets (llama_relative_position_bucket, exported by
// libllama though not in llama.h) for key - query distances -600 .. 600, as flat JSON, for
// tests/t5_test.cc. Build against a llama.cpp build beside the project:
//   c++ -std=c++17 -O2 make_t5_buckets.cc -L<llama.cpp>/build/bin -lllama \
//       -Wl,-rpath,<llama.cpp>/build/bin -o make_t5_buckets
//   ./make_t5_buckets > t5-buckets.json
#include <cstdint>
#include <cstdio>
#include <initializer_list>

int32_t llama_relative_position_bucket(int32_t x, int32_t y, uint64_t n_buckets,
                                       bool bidirectional);

int main() {
  constexpr int kMax = 600;
  std::printf("{\"min_distance\": %d", -kMax);
  for (int n_buckets : {32, 64}) {
    for (bool bidirectional : {true, false}) {
      std::printf(",\n \"buckets_%d_%s\": [", n_buckets, bidirectional ? "bi" : "uni");
      for (int d = -kMax; d <= kMax; ++d) {
        std::printf("%s%d", d == -kMax ? "" : ",",
                    llama_relative_position_bucket(d, 0, n_buckets, bidirectional));
      }
      std::printf("]");
    }
  }
  std::printf("}\n");
  return 0;
}
