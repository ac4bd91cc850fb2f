// Cold requests: what a miss costs end to end through jitd, held against
// NVRTC called directly in this process for the same program, in one run:
//   - a cold request (client -> daemon -> worker -> cache publish -> client)
//     vs CompileInProcess of the job the production resolver makes for it,
//     alternating, medians;
//   - single flight: 64 clients asking for the same cold key at once vs one
//     cold request, with the daemon's compile counter;
//   - PCH: the CUB kernel's (norm.rmsnorm) second instantiation in a worker
//     that holds the PCH vs a cold compile without one.
// The daemon runs with one worker, so the PCH figure is about that worker.
//
//   build/tests/bench/bench_cold [--json FILE] [--rounds 15]
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_report.h"
#include "compiler/nvrtc_program.h"
#include "manifest/manifest.h"
#include "test_daemon.h"

namespace {

using jitd::bench::Figure;
using jitd::bench::Median;
using jitd::bench::OrDie;
using jitd::bench::Report;
using jitd::v1::GetKernelRequest;
using jitd::v1::GetKernelResponse;
using Clock = std::chrono::steady_clock;

constexpr int kSingleFlightClients = 64;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string Fixed(double v, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, v);
  return buffer;
}

struct Instance {
  std::string kernel;
  std::map<std::string, std::string> params;
};

class ColdBench {
 public:
  ColdBench(int rounds) : rounds_(rounds) {
    toolchain_ = OrDie(jitd::manifest::Toolchain::Detect(), "toolchain");
    tree_ = OrDie(jitd::manifest::KernelTree::Load(JITD_KERNELS_DIR), "kernels");
    resolver_ = OrDie(jitd::manifest::Resolver::Create(tree_, toolchain_, "sm_90"), "resolver");
    daemon_ = std::make_unique<jitd::testing::TestDaemon>(
        dir_, std::vector<std::string>{"--kernels", JITD_KERNELS_DIR, "--workers", "1", "--arch", "sm_90"});
    OrDie(daemon_->WaitUntilServing(), "jitd start");
    client_ = daemon_->Connect("", std::chrono::seconds(300));
  }

  // The n-th instantiation of `kernel` in the manifest.
  Instance Nth(const std::string& kernel, size_t n) const {
    const jitd::manifest::KernelDef* def = tree_->manifest().Find(kernel);
    if (def == nullptr) throw std::runtime_error("no kernel " + kernel);
    auto all = jitd::manifest::Manifest::Instantiations(*def);
    if (n >= all.size()) throw std::runtime_error(kernel + " has " + std::to_string(all.size()) + " instantiations");
    return {kernel, all[n]};
  }

  jitd::compiler::CompileJob JobFor(const Instance& i) const {
    return OrDie(resolver_->Resolve({i.kernel, i.params, "sm_90", {}}), "resolve " + i.kernel).job;
  }

  // NVRTC in this process, without PCH: the floor a cold request stands on.
  double DirectMs(const Instance& i) const {
    jitd::compiler::CompileJob job = JobFor(i);
    job.use_pch = false;
    const Clock::time_point start = Clock::now();
    OrDie(jitd::compiler::CompileInProcess(job, nullptr, nullptr), "NVRTC " + i.kernel);
    return MsSince(start);
  }

  GetKernelRequest Request(const Instance& i) const {
    GetKernelRequest request;
    request.set_kernel(i.kernel);
    for (const auto& [k, v] : i.params) (*request.mutable_params())[k] = v;
    request.set_arch("sm_90");
    return request;
  }

  // Drops `key` from the daemon's caches so that the next request compiles.
  void Evict(const std::string& key) {
    jitd::v1::EvictRequest request;
    request.add_keys(key);
    OrDie(client_->Evict(request), "evict");
  }

  // One request after evicting its key; must be answered by a compile.
  // `worker_ms`: the NVRTC time the worker reported for it.
  double ColdRequestMs(const Instance& i, std::string* key = nullptr, double* worker_ms = nullptr) {
    const GetKernelRequest request = Request(i);
    if (!key_of_.count(i.kernel + Params(i))) {
      key_of_[i.kernel + Params(i)] = OrDie(client_->GetKernel(request), "first " + i.kernel).key();
    }
    const std::string k = key_of_[i.kernel + Params(i)];
    Evict(k);
    const Clock::time_point start = Clock::now();
    GetKernelResponse r = OrDie(client_->GetKernel(request), "cold " + i.kernel);
    const double ms = MsSince(start);
    if (r.source() != GetKernelResponse::COMPILED) {
      throw std::runtime_error(i.kernel + ": an evicted key was answered from source " + std::to_string(r.source()));
    }
    if (key != nullptr) *key = k;
    if (worker_ms != nullptr) *worker_ms = r.compile_ms();
    return ms;
  }

  uint64_t Compiles() { return daemon_->Stats().compiles(); }

  // All `clients` ask for `i` at once (each on its own channel, released
  // together); the wall time until the last answer.
  // `worker_ms`: the NVRTC time of the one compile; `spread_ms`: from the
  // first answer to the last.
  double SingleFlightMs(const Instance& i, int clients, double* worker_ms, double* spread_ms) {
    std::vector<std::unique_ptr<jitd::Client>> channels;
    for (int c = 0; c < clients; ++c) {
      channels.push_back(daemon_->Connect("", std::chrono::seconds(300)));
      OrDie(channels.back()->Stats(), "connect");  // the channel is up before the clock starts
    }
    std::string key;
    ColdRequestMs(i, &key);  // learns the key, and leaves it cached
    Evict(key);
    std::mutex mu;
    std::condition_variable cv;
    bool go = false;
    int ready = 0;
    std::vector<std::thread> threads;
    std::vector<absl::Status> results(clients);
    std::vector<double> compile_ms(clients, 0);
    std::vector<double> finish(clients, 0);
    const GetKernelRequest request = Request(i);
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&, c] {
        {
          std::unique_lock lock(mu);
          ++ready;
          cv.notify_all();
          cv.wait(lock, [&] { return go; });
        }
        const Clock::time_point sent = Clock::now();
        absl::StatusOr<GetKernelResponse> r = channels[c]->GetKernel(request);
        results[c] = r.status();
        finish[c] = MsSince(sent);
        if (r.ok()) compile_ms[c] = r->compile_ms();
      });
    }
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return ready == clients; });
    }
    const Clock::time_point start = Clock::now();
    {
      std::lock_guard lock(mu);
      go = true;
    }
    cv.notify_all();
    for (std::thread& t : threads) t.join();
    const double ms = MsSince(start);
    for (const absl::Status& s : results) OrDie(s, "single-flight request");
    *worker_ms = *std::max_element(compile_ms.begin(), compile_ms.end());
    std::sort(finish.begin(), finish.end());
    *spread_ms = finish.back() - finish.front();
    return ms;
  }

  int rounds() const { return rounds_; }

 private:
  static std::string Params(const Instance& i) {
    std::string s;
    for (const auto& [k, v] : i.params) s += "," + k + "=" + v;
    return s;
  }

  int rounds_;
  jitd::testing::TempDir dir_;
  jitd::manifest::Toolchain toolchain_;
  std::shared_ptr<const jitd::manifest::KernelTree> tree_;
  std::unique_ptr<jitd::manifest::Resolver> resolver_;
  std::unique_ptr<jitd::testing::TestDaemon> daemon_;
  std::unique_ptr<jitd::Client> client_;
  std::map<std::string, std::string> key_of_;
};

int Run(int rounds, const std::string& json) {
  ColdBench bench(rounds);
  Report report("bench_cold", "build/tests/bench/bench_cold --json FILE --rounds " + std::to_string(rounds));
  report.AddContext("machine", std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) +
                                   " CPUs; jitd --workers 1 --arch sm_90 on a Unix socket; NVRTC " +
                                   std::to_string(jitd::compiler::NvrtcVersion().major) + "." +
                                   std::to_string(jitd::compiler::NvrtcVersion().minor));
  report.AddContext("method", "medians of " + std::to_string(rounds) +
                                  " rounds, jitd and the baseline alternating; each cold request follows an "
                                  "Evict of its key");

  // Cold request vs NVRTC direct, for a small and a mid-size kernel.
  for (const Instance& i : {bench.Nth("diffusion.modulate_scale_shift", 0), bench.Nth("activation.silu_and_mul", 0)}) {
    bench.DirectMs(i);  // loads NVRTC's own state in this process
    bench.ColdRequestMs(i);
    std::vector<double> direct, cold, worker, overhead;
    for (int r = 0; r < rounds; ++r) {
      direct.push_back(bench.DirectMs(i));
      double worker_ms = 0;
      cold.push_back(bench.ColdRequestMs(i, nullptr, &worker_ms));
      worker.push_back(worker_ms);
      overhead.push_back(cold.back() - worker_ms);
    }
    report.Add({"cold request " + i.kernel, "ms", Median(cold), "NVRTC direct, same program", Median(direct),
                Figure::Target::kRatioAtMost, 1.05,
                "NVRTC in the worker " + Fixed(Median(worker), 1) +
                    " ms; the rest (request, queue, worker round "
                    "trip, publish, answer) " +
                    Fixed(Median(overhead), 1) + " ms"});
  }

  // Single flight.
  const Instance shared = bench.Nth("activation.silu_and_mul", 1);
  std::vector<double> one, many, one_worker, many_worker, spread;
  std::vector<uint64_t> extra;  // per round: compiles beyond the one 64 requests need
  for (int r = 0; r < std::max(3, rounds / 2); ++r) {
    double worker_ms = 0;
    one.push_back(bench.ColdRequestMs(shared, nullptr, &worker_ms));
    one_worker.push_back(worker_ms);
    const uint64_t before = bench.Compiles();
    double spread_ms = 0;
    many.push_back(bench.SingleFlightMs(shared, kSingleFlightClients, &worker_ms, &spread_ms));
    many_worker.push_back(worker_ms);
    spread.push_back(spread_ms);
    // SingleFlightMs compiles twice per round: once to learn the key (in
    // ColdRequestMs) and once for the 64 requests; anything more is extra.
    const uint64_t compiles = bench.Compiles() - before;
    extra.push_back(compiles > 2 ? compiles - 2 : 0);
  }
  const int sf_rounds = static_cast<int>(many.size());
  // The worst round, counted exactly: one extra compile in any round shows.
  const uint64_t per_round = 1 + *std::max_element(extra.begin(), extra.end());
  report.Add({std::to_string(kSingleFlightClients) + " identical cold requests", "ms", Median(many), "one cold request",
              Median(one), Figure::Target::kRatioAtMost, 1.1,
              "compiles per round of " + std::to_string(kSingleFlightClients) +
                  " requests: " + std::to_string(per_round) + " in the worst of " + std::to_string(sf_rounds) +
                  " rounds; NVRTC in the worker " + Fixed(Median(many_worker), 1) + " ms with 64 waiting, " +
                  Fixed(Median(one_worker), 1) + " ms with one; first to last of the 64 answers " +
                  Fixed(Median(spread), 1) + " ms"});
  report.Add({"compiles per 64 identical cold requests", "", static_cast<double>(per_round), "", 0,
              Figure::Target::kAtMost, 1, "the worst of " + std::to_string(sf_rounds) + " rounds"});

  // PCH: instantiation 0 makes the worker's PCH; instantiation 1 reuses it.
  const Instance first = bench.Nth("norm.rmsnorm", 0);
  const Instance second = bench.Nth("norm.rmsnorm", 1);
  bench.ColdRequestMs(first);
  std::vector<double> direct, reused;
  for (int r = 0; r < rounds; ++r) {
    direct.push_back(bench.DirectMs(second));
    reused.push_back(bench.ColdRequestMs(second));
  }
  report.Add({"rmsnorm 2nd instantiation, PCH", "ms", Median(reused), "cold, no PCH (NVRTC direct)", Median(direct),
              Figure::Target::kRatioAtMost, 1.0 / 3.0,
              Fixed(Median(direct) / Median(reused), 1) + "x faster; end to end through jitd, the worker holding "
                                                          "the PCH of instantiation 0"});
  report.PrintAndWrite(json);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json;
  int rounds = 15;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (value != nullptr && flag == "--json") {
      json = value;
    } else if (value != nullptr && flag == "--rounds" && std::atoi(value) > 0) {
      rounds = std::atoi(value);
    } else {
      std::fprintf(stderr, "usage: bench_cold [--json FILE] [--rounds N (positive, default 15)]\n");
      return 2;
    }
  }
  return jitd::bench::RunMain("bench_cold", [&] { return Run(rounds, json); });
}
