// Uses jitd::client as an outside program would: the headers compile, the
// library links (alone, or with jitd::client_fallback when
// JITD_CONSUMER_WITH_FALLBACK), and calls behave on a host without a daemon
// or a CUDA driver.
#include <iostream>
#include <string>

#include "jitd/client.h"
#ifdef JITD_CONSUMER_WITH_FALLBACK
#include "jitd/client_fallback.h"
#endif

int main() {
  jitd::ClientOptions options;
  options.endpoint = "unix:/nonexistent/jitd-consumer.sock";
  auto client = jitd::Client::Connect(options);
  const bool unavailable = client.status().code() == absl::StatusCode::kUnavailable;
  const bool sized = jitd::ParseByteSize("10G").value_or(0) == (uint64_t{10} << 30);

  options.fallback_cache_dir = "/nonexistent/jitd-consumer-cache";
  bool fallback = false;
#ifdef JITD_CONSUMER_WITH_FALLBACK
  // With a fallback directory the client connects anyway, and a kernel
  // request reaches the fallback (not warmed here: it says so).
  options.open_fallback = jitd::OpenFallbackCache;
  auto with_fallback = jitd::Client::Connect(options);
  if (with_fallback.ok()) {
    auto binary = (*with_fallback)->GetKernelBinary({.kernel = "norm.rms", .arch = "sm_90"});
    fallback = binary.status().code() == absl::StatusCode::kUnavailable &&
               std::string(binary.status().message()).find("has this directory been warmed") != std::string::npos;
  }
#else
  // Without the fallback component, a fallback directory is refused and the
  // error says what to link.
  auto refused = jitd::Client::Connect(options);
  fallback = refused.status().code() == absl::StatusCode::kFailedPrecondition &&
             std::string(refused.status().message()).find("jitd::client_fallback") != std::string::npos;
#endif

  // The CUDA driver is opened at run time: without one the program still
  // runs, and only loading fails, naming libcuda.so.1.
  const absl::Status driver = jitd::CudaDriverStatus();
  const bool driver_ok = driver.ok() || (driver.code() == absl::StatusCode::kFailedPrecondition &&
                                         std::string(driver.message()).find("libcuda.so.1") != std::string::npos);

  const bool ok = unavailable && sized && fallback && driver_ok;
  std::cout << (ok ? "consumer ok" : "consumer FAILED") << " (driver: " << driver << ")\n";
  return ok ? 0 : 1;
}
