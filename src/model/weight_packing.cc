#include "model/weight_packing.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "kernels/cpu/packed_weights.h"
#include "kernels/quantize.h"

namespace kvserve {

size_t PackWeights(const KernelTable& kernels, const GgufFile& file, ModelWeights& weights) {
  std::vector<WeightMatrix*> matrices = {&weights.output};
  for (LayerWeights& l : weights.layers) {
    for (WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wqkv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      matrices.push_back(m);
    }
  }
  std::erase_if(matrices, [&](const WeightMatrix* m) {
    return m->data == nullptr || m->packed != nullptr || !HasPackedLayout(m->type) ||
           PackedMatmulFor(kernels, m->type) == nullptr;
  });
  size_t total = 0;
  for (const WeightMatrix* m : matrices) total += PackedMatrixBytes(m->type, m->n_out, m->n_in);
  if (total == 0) return 0;
  uint8_t* storage = static_cast<uint8_t*>(std::aligned_alloc(64, total));
  if (storage == nullptr) return 0;  // not enough memory: keep computing on the stored layout
  weights.packed_storage.reset(storage, std::free);
  uint8_t* const base = storage;  // writable; WeightMatrix::packed is a read-only view into it
  for (WeightMatrix* m : matrices) {
    m->packed = storage;
    storage += PackedMatrixBytes(m->type, m->n_out, m->n_in);
  }
  // Loading is mostly page faults on the mapping: a few threads, each taking whole matrices.
  std::atomic<size_t> next{0};
  auto pack_some = [&] {
    for (size_t i = next++; i < matrices.size(); i = next++) {
      WeightMatrix* m = matrices[i];
      const int64_t groups = (m->n_out + kPackRows - 1) / kPackRows;
      PackGroups(m->type, m->data, RowBytes(m->type, m->n_in), m->n_out, m->n_in, 0, groups,
                 base + (m->packed - base));
      file.ReleasePages(m->data, m->row_bytes * static_cast<size_t>(m->n_out));
    }
  };
  const size_t n_threads =
      std::min<size_t>({std::max(1u, std::thread::hardware_concurrency()), 8, matrices.size()});
  std::vector<std::thread> threads;
  for (size_t t = 1; t < n_threads; ++t) threads.emplace_back(pack_some);
  pack_some();
  for (std::thread& t : threads) t.join();
  return total;
}

}  // namespace kvserve
