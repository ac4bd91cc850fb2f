// Warm-up of the whole shipped manifest: offline `jitd warm --all` with two
// workers vs one (fresh cache directories, alternating, medians), as
// shipped and with the PCH switched off (parallelism alone), and
// `jitctl warm --all` against a running daemon, on an empty cache and then
// on a full one.
//
//   build/tests/bench/bench_warmup [--json FILE] [--rounds 3] [--quick]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_report.h"
#include "test_daemon.h"

namespace {

namespace fs = std::filesystem;
using jitd::bench::Figure;
using jitd::bench::Median;
using jitd::bench::OrDie;
using jitd::bench::Report;

constexpr std::chrono::minutes kWarmTimeout{10};

// Milliseconds `jitd warm --all` takes with `workers` workers on an empty
// cache directory.
double OfflineWarmMs(const jitd::testing::TempDir& dir, const fs::path& kernels, int workers, int round) {
  const fs::path cache = dir / ("offline-" + std::to_string(workers) + "-" + std::to_string(round));
  jitd::testing::ProcessResult r =
      jitd::testing::RunProcess({jitd::testing::JitdBinary(), "warm", "--all", "--arch", "sm_90", "--kernels",
                                 kernels.string(), "--cache-dir", cache.string(), "--workers", std::to_string(workers)},
                                dir / "warm.log", kWarmTimeout);
  if (r.exit_code != 0) throw std::runtime_error("jitd warm failed:\n" + r.output);
  std::error_code ec;
  fs::remove_all(cache, ec);
  return static_cast<double>(r.elapsed.count());
}

int Run(int rounds, bool quick, const std::string& json) {
  jitd::testing::TempDir dir;
  Report report("bench_warmup", "build/tests/bench/bench_warmup --json FILE --rounds " + std::to_string(rounds));
  report.AddContext("machine", std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " CPUs");
  report.AddContext("manifest", "kernels/kernels.toml of the source tree, every instantiation, sm_90");

  // Answers the median with 2 workers.
  auto two_vs_one = [&](const std::string& name, const fs::path& kernels, int n, const std::string& note) {
    std::vector<double> one, two;
    for (int r = 0; r < n; ++r) {
      one.push_back(OfflineWarmMs(dir, kernels, 1, r));
      two.push_back(OfflineWarmMs(dir, kernels, 2, r));
      std::fprintf(stderr, "%s, round %d: 1 worker %.0f ms, 2 workers %.0f ms\n", name.c_str(), r + 1, one.back(),
                   two.back());
    }
    report.Add({name + ", 2 workers", "ms", Median(two), "1 worker", Median(one), Figure::Target::kRatioAtMost, 1 / 1.8,
                "speedup " + std::to_string(Median(one) / Median(two)).substr(0, 4) + "x (target >= 1.8x)" + note});
    return Median(two);
  };
  const double shipped_two =
      two_vs_one("jitd warm --all", JITD_KERNELS_DIR, rounds,
                 "; norm.rmsnorm's 12 instantiations share a PCH in 1 worker, and need one per worker in 2");
  // The same manifest with the PCH switched off: parallelism alone.
  if (!quick) {
    const fs::path no_pch = dir / "kernels-no-pch";
    fs::copy(JITD_KERNELS_DIR, no_pch, fs::copy_options::recursive);
    {
      std::ifstream in(no_pch / "kernels.toml");
      std::stringstream text;
      text << in.rdbuf();
      std::string manifest = text.str();
      for (size_t at = manifest.find("pch = true"); at != std::string::npos; at = manifest.find("pch = true", at)) {
        manifest.replace(at, 10, "pch = false");
      }
      std::ofstream(no_pch / "kernels.toml", std::ios::trunc) << manifest;
    }
    two_vs_one("jitd warm --all, PCH off", no_pch, std::max(1, rounds / 2), "");
  }

  jitd::testing::TestDaemon daemon(dir, {"--kernels", JITD_KERNELS_DIR, "--arch", "sm_90"});
  OrDie(daemon.WaitUntilServing(), "jitd start");
  jitd::testing::ProcessResult cold = daemon.Jitctl({"warm", "--all"}, kWarmTimeout);
  if (cold.exit_code != 0) throw std::runtime_error("jitctl warm failed:\n" + cold.output);
  std::vector<double> warm;
  for (int r = 0; r < rounds; ++r) {
    jitd::testing::ProcessResult again = daemon.Jitctl({"warm", "--all"}, kWarmTimeout);
    if (again.exit_code != 0) throw std::runtime_error("jitctl warm failed:\n" + again.output);
    warm.push_back(static_cast<double>(again.elapsed.count()));
  }
  const uint64_t compiles = daemon.Stats().compiles();
  report.Add({"jitctl warm --all, empty cache", "ms", static_cast<double>(cold.elapsed.count()),
              "jitd warm --all, 2 workers", shipped_two, Figure::Target::kNone, 0,
              "through the daemon (2 workers); compiles: " + std::to_string(compiles)});
  report.Add({"jitctl warm --all, all cached", "ms", Median(warm), "empty cache",
              static_cast<double>(cold.elapsed.count()), Figure::Target::kNone, 0,
              "a jitctl process start, the Warm stream, every key a hit"});
  report.PrintAndWrite(json);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json;
  int rounds = 3;
  bool quick = false;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (flag == "--quick") {
      quick = true;
      --i;
    } else if (value != nullptr && flag == "--json") {
      json = value;
    } else if (value != nullptr && flag == "--rounds" && std::atoi(value) > 0) {
      rounds = std::atoi(value);
    } else {
      std::fprintf(stderr,
                   "usage: bench_warmup [--json FILE] [--rounds N (positive, default 3)] [--quick]\n"
                   "  --quick: skip the PCH-off variant\n");
      return 2;
    }
  }
  return jitd::bench::RunMain("bench_warmup", [&] { return Run(rounds, quick, json); });
}
