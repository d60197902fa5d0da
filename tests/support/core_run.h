// Runs requests to their end on an EngineCore driven step by step, as the engine tests do when
// they look at the core's pool between steps.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "engine/engine_core.h"
#include "support/stream_output.h"

namespace kvserve::testing {

// Adds `requests` to `core` and steps it until nothing is left, checking the block invariants
// after every step (the first broken one fails the test and stops the run); returns what each
// request's stream delivered, in order.
inline std::vector<StreamOutput> RunCoreChecked(EngineCore& core,
                                                const std::vector<Request>& requests) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const Request& r : requests) {
    streams.push_back(std::make_shared<RequestStream>());
    core.Add(r, streams.back());
  }
  while (core.Step()) {
    const Status invariants = core.CheckBlockInvariants();
    EXPECT_TRUE(invariants.ok()) << invariants.message();
    if (!invariants.ok()) break;
  }
  std::vector<StreamOutput> outputs;
  for (const auto& stream : streams) {
    outputs.push_back(CollectStream(*stream, std::chrono::milliseconds(0)));
  }
  return outputs;
}

}  // namespace kvserve::testing
