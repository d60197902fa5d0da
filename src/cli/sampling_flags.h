// Flags that set sampling for the commands that generate (`run`, `chat`): --temp, --seed,
// --top-k, --top-p, --min-p, --repeat-penalty.
#pragma once

#include "cli/args.h"
#include "engine/sampler.h"
#include "util/status.h"

namespace kvserve {

FlagGroup SamplingFlags();
// Reads the flags; values are checked later by SamplingParams::Validate.
Result<SamplingParams> ReadSamplingParams(const Args& args);

}  // namespace kvserve
