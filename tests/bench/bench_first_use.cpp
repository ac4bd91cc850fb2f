// First use of a cached kernel in a fresh process, without the GPU: the time
// from "I need kernel X" to its verified cubin bytes in memory, which is
// everything jitd adds before cuModuleLoadData. Each sample is a new process
// (this program re-executed with --child), as an inference server's first
// request is, so one-time costs (gRPC's start, the first connection) count.
//
//   build/tests/bench/bench_first_use [--json FILE] [--rounds 21]
//
// Against, in the same run and alternating with it:
//   floor   the same child reading the blob file whose path it was told and
//           checking its XXH3 checksum (what a same-host read costs at
//           least, with no daemon involved at all);
//   grpc    the same child making a gRPC channel to the daemon's socket and
//           one Health/Check round trip (what any gRPC client pays).
// Prints the figures (medians and p99 over --rounds processes per path).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "bench_report.h"
#include "jitd/base/files.h"
#include "jitd/cache.h"
#include "jitd/client.h"
#include "process.h"
#include "temp_dir.h"
#include "test_daemon.h"

namespace {

namespace fs = std::filesystem;
using jitd::bench::Figure;
using jitd::bench::Median;
using jitd::bench::OrDie;
using jitd::bench::Report;
using Clock = std::chrono::steady_clock;

double UsSince(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

const jitd::KernelSpec& Spec() {
  static const jitd::KernelSpec spec{
      .kernel = "diffusion.modulate_scale_shift", .params = {{"dtype", "bf16"}}, .arch = "sm_90"};
  return spec;
}

// --child MODE ENDPOINT: one measurement, printed as "phase ms" lines.
int Child(std::string_view mode, const std::string& endpoint) {
  const Clock::time_point start = Clock::now();
  jitd::ClientOptions options;
  options.endpoint = endpoint;
  if (mode == "jitd") {
    auto client = jitd::Client::Connect(options);
    if (!client.ok()) throw std::runtime_error(client.status().ToString());
    const Clock::time_point connected = Clock::now();
    auto binary = (*client)->GetKernelBinary(Spec());
    if (!binary.ok()) throw std::runtime_error(binary.status().ToString());
    const Clock::time_point got = Clock::now();
    std::printf("connect %.1f\nget %.1f\ntotal %.1f\n", UsSince(start, connected), UsSince(connected, got),
                UsSince(start, got));
    return 0;
  }
  if (mode == "grpc") {
    options.connect_timeout = std::chrono::milliseconds(0);
    auto client = jitd::Client::Connect(options);
    if (!client.ok()) throw std::runtime_error(client.status().ToString());
    auto serving = (*client)->IsServing();
    if (!serving.ok() || !*serving) throw std::runtime_error("not serving");
    std::printf("total %.1f\n", UsSince(start, Clock::now()));
    return 0;
  }
  if (mode.starts_with("floor:")) {
    // ENDPOINT is unused; the blob path follows "floor:".
    const std::string path(mode.substr(6));
    absl::StatusOr<std::string> bytes = jitd::files::ReadWholeFile(path);
    if (!bytes.ok()) throw std::runtime_error(bytes.status().ToString());
    jitd::cache::EntryMeta meta;
    std::string cubin;
    if (absl::Status s = jitd::cache::DecodeBlob(*bytes, &meta, &cubin); !s.ok()) {
      throw std::runtime_error(s.ToString());
    }
    std::printf("total %.1f\n", UsSince(start, Clock::now()));
    return 0;
  }
  throw std::runtime_error("unknown child mode");
}

constexpr std::chrono::seconds kChildTimeout{20};

std::map<std::string, double> RunChild(const std::string& self, const std::string& mode, const std::string& endpoint,
                                       const fs::path& log) {
  jitd::testing::ProcessResult r = jitd::testing::RunProcess({self, "--child", mode, endpoint}, log, kChildTimeout);
  if (r.exit_code != 0) throw std::runtime_error("child " + mode + " failed: " + r.output);
  std::map<std::string, double> phases;
  size_t at = 0;
  while (at < r.output.size()) {
    const size_t nl = r.output.find('\n', at);
    const std::string line = r.output.substr(at, nl - at);
    at = nl == std::string::npos ? r.output.size() : nl + 1;
    const size_t sp = line.find(' ');
    if (sp != std::string::npos) phases[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
  }
  return phases;
}

}  // namespace

int main(int argc, char** argv) {
  return jitd::bench::RunMain("bench_first_use", [&] {
    if (argc == 4 && std::string_view(argv[1]) == "--child") return Child(argv[2], argv[3]);
    std::string json;
    int rounds = 21;
    for (int i = 1; i < argc; ++i) {
      const std::string_view arg = argv[i];
      if (arg == "-h" || arg == "--help") {
        std::printf("usage: bench_first_use [--json FILE] [--rounds N]\n");
        return 0;
      }
      if (i + 1 >= argc) throw std::runtime_error(std::string(arg) + " needs a value");
      if (arg == "--json") {
        json = argv[++i];
      } else if (arg == "--rounds") {
        rounds = std::max(1, std::atoi(argv[++i]));
      } else {
        throw std::runtime_error("unknown argument " + std::string(arg));
      }
    }
    const std::string self = fs::read_symlink("/proc/self/exe").string();
    jitd::testing::TempDir dir;
    jitd::testing::TestDaemon daemon(dir);
    OrDie(daemon.WaitUntilServing(), "jitd start");
    // The kernel compiled once, so that every child's request is a cache hit.
    std::string blob_path;
    {
      jitd::ClientOptions options;
      options.endpoint = daemon.endpoint();
      const std::unique_ptr<jitd::Client> client = OrDie(jitd::Client::Connect(options), "connect");
      blob_path = OrDie(client->GetKernelBinary(Spec()), "first request")->blob_path;
      if (blob_path.empty()) throw std::runtime_error("the daemon did not answer with a path");
    }
    const fs::path log = dir.path() / "child.log";
    std::map<std::string, std::vector<double>> jitd_phases;
    std::vector<double> floor_ms;
    std::vector<double> grpc_ms;
    for (int round = 0; round < rounds; ++round) {
      for (const auto& [phase, ms] : RunChild(self, "jitd", daemon.endpoint(), log)) jitd_phases[phase].push_back(ms);
      floor_ms.push_back(RunChild(self, "floor:" + blob_path, "-", log).at("total"));
      grpc_ms.push_back(RunChild(self, "grpc", daemon.endpoint(), log).at("total"));
      std::fprintf(stderr, "\rround %d/%d", round + 1, rounds);
    }
    std::fprintf(stderr, "\n");
    Report report("bench_first_use",
                  "build/tests/bench/bench_first_use --json FILE --rounds " + std::to_string(rounds));
    report.AddContext("kernel", "diffusion.modulate_scale_shift{dtype=bf16}@sm_90, cached in the daemon's memory");
    report.AddContext("samples", std::to_string(rounds) + " fresh processes per path, alternating");
    const std::vector<double>& total = jitd_phases["total"];
    report.Add({"first use p50: Connect + GetKernelBinary", "us", Median(total), "a gRPC channel + one call",
                Median(grpc_ms), Figure::Target::kRatioAtMost, 0.5,
                "the local path; what every gRPC client pays is the baseline"});
    report.Add({"first use p99", "us", jitd::bench::Percentile(total, 0.99), "a gRPC channel + one call, p99",
                jitd::bench::Percentile(grpc_ms, 0.99), Figure::Target::kNone, 0, ""});
    report.Add({"first use p50: Connect", "us", Median(jitd_phases["connect"]), "", 0, Figure::Target::kNone, 0,
                "the socket token read, the local path's connection"});
    report.Add({"first use p50: GetKernelBinary", "us", Median(jitd_phases["get"]), "the blob read and verified alone",
                Median(floor_ms), Figure::Target::kNone, 0, "one local-path round trip + the same read"});
    report.PrintAndWrite(json);
    return 0;
  });
}
