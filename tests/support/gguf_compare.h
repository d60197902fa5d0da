// Comparisons of a converted GGUF view (a Hugging Face folder's, kvserve convert's) with the file
// it should equal, for the conversion tests: logits bit for bit, every tensor byte for byte, an
// architecture's metadata keys by type and value.
#pragma once

#include <string>
#include <vector>

#include "io/gguf_reader.h"

namespace kvserve::testing {

// The same floats bit for bit; the message names the first difference.
void ExpectSameBits(const std::vector<float>& a, const std::vector<float>& b);

// Every tensor of `file` in `mine` with its shape, type and bytes, and no other tensor.
void ExpectSameTensors(const GgufFile& mine, const GgufFile& file);

// Every "<arch>." key of `file` in `mine` with the same type and value, but <arch>.vocab_size (the
// synthesizer's; converters write none) and `skipped` (keys, without the prefix, that `mine` may
// hold with another value or that `file` may lack); general.architecture is `arch`. Extra keys
// in `mine` fail unless in `skipped`.
void ExpectSameArchKeys(const GgufFile& mine, const GgufFile& file, const std::string& arch,
                        const std::vector<std::string>& skipped = {});

}  // namespace kvserve::testing
