// Uses jitd::client as an outside program would: the headers compile, the
// library links (with jitd::cache, for the read-only fallback), and calls
// behave on a host without a daemon or a CUDA driver.
#include <iostream>
#include <string>

#include "jitd/client.h"

int main() {
  jitd::ClientOptions options;
  options.endpoint = "unix:/nonexistent/jitd-consumer.sock";
  auto client = jitd::Client::Connect(options);
  const bool unavailable = client.status().code() == absl::StatusCode::kUnavailable;
  const bool sized = jitd::ParseByteSize("10G").value_or(0) == (uint64_t{10} << 30);

  // With a fallback directory the client connects anyway, and a kernel
  // request reaches the fallback (not warmed here: it says so).
  options.fallback_cache_dir = "/nonexistent/jitd-consumer-cache";
  auto with_fallback = jitd::Client::Connect(options);
  bool fallback = false;
  if (with_fallback.ok()) {
    auto binary = (*with_fallback)->GetKernelBinary({.kernel = "norm.rms", .arch = "sm_90"});
    fallback = binary.status().code() == absl::StatusCode::kUnavailable &&
               std::string(binary.status().message()).find("fallback cache") != std::string::npos;
  }

  // The CUDA driver is opened at run time: without one the program still
  // runs, and only loading fails, naming libcuda.so.1.
  const absl::Status driver = jitd::CudaDriverStatus();
  const bool driver_ok = driver.ok() || (driver.code() == absl::StatusCode::kFailedPrecondition &&
                                         std::string(driver.message()).find("libcuda.so.1") != std::string::npos);

  const bool ok = unavailable && sized && fallback && driver_ok;
  std::cout << (ok ? "consumer ok" : "consumer FAILED") << " (driver: " << driver << ")\n";
  return ok ? 0 : 1;
}
