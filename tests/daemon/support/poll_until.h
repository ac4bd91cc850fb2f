// Waiting for a condition in an integration test without a fixed sleep:
// check it often, give up at a bound far above the time it should take.
#pragma once

#include <chrono>
#include <functional>

namespace jitd::testing {

// Calls `done` every `interval` until it returns true (then true) or
// `timeout` passes (then false, after one last check).
bool PollUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout,
               std::chrono::milliseconds interval = std::chrono::milliseconds(10));

}  // namespace jitd::testing
