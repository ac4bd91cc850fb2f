// first_use: one fresh process's time from "I need kernel X" to a launchable
// function handle, for tests/gpu/first_use.py (GPU host only).
//
//   first_use --endpoint EP --kernel K [-p k=v]... [--option O]...
//             [--mode daemon|nvrtc] [--kernels DIR] [--arch A]
//
// CUDA is initialised before the clock starts (the driver opened, cuInit,
// device 0's primary context retained and current, one allocation made), as
// first_use.py's CuPy probe does, so the figure is what jitd or NVRTC adds
// to a process that already uses the GPU. Then, timed:
//   daemon  jitd::Client::Connect(EP) (phase connect), GetKernelBinary(spec)
//           (get_binary: the daemon answers from its cache or compiles; the
//           client reads and verifies the blob), Module::Load (module_load:
//           cuModuleLoadData), GetFunction(the module's one name expression)
//           (get_function): GetKernel(spec) in its two halves.
//   nvrtc   what the process pays doing it alone: the kernels tree read and
//           resolved (jitd_manifest's KernelTree and Resolver, no snapshot),
//           CompileInProcess (NVRTC here, no precompiled header), then
//           Module::Load and GetFunction. Toolchain::Detect, which only
//           fingerprints the toolkit's headers for jitd's cache keys (about
//           30 MB read), runs before the clock: a program calling NVRTC
//           directly would not pay it.
//
// Prints one JSON line on stdout:
//   {"ms": TOTAL, "mode": ..., "kernel": ..., "arch": ..., "phases_ms": {...},
//    "cuda_init_ms": ..., "setup_ms": ..., "source": ...}
// ("source" in daemon mode: MEMORY, DISK or COMPILED as the daemon answered).
// Exit status: 0 success, 1 an error (the message on stderr), 2 usage.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/nvrtc_program.h"
#include "cuda_driver.h"
#include "jitd/base/text.h"
#include "jitd/client.h"
#include "jitd/cuda_module.h"
#include "manifest/manifest.h"

namespace jitd::gpu {
namespace {

using text::Cat;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kUsage =
    "usage: first_use --endpoint EP --kernel K [-p k=v]... [--option O]... [--mode daemon|nvrtc] [--kernels DIR] "
    "[--arch A]\n";

struct Args {
  std::string endpoint;
  std::string kernel;
  std::map<std::string, std::string> params;
  std::vector<std::string> options;
  std::string mode = "daemon";
  std::string kernels_dir;
  std::string arch;
};

// Hand-parsed: every flag takes the next argument verbatim (or the text
// after "=" in --flag=value), so an NVRTC option such as "-DNAME=1" after
// --option is a value, never a flag.
absl::StatusOr<Args> ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") return absl::InvalidArgumentError("");
    std::string flag(arg);
    std::string value;
    if (const size_t eq = arg.find('='); arg.substr(0, 2) == "--" && eq != std::string_view::npos) {
      flag = std::string(arg.substr(0, eq));
      value = std::string(arg.substr(eq + 1));
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError(Cat(flag, " needs a value"));
    }
    if (flag == "--endpoint") {
      a.endpoint = value;
    } else if (flag == "--kernel") {
      a.kernel = value;
    } else if (flag == "-p" || flag == "--param") {
      const size_t eq = value.find('=');
      if (eq == std::string::npos || eq == 0) return absl::InvalidArgumentError(Cat(flag, " wants K=V, got ", value));
      a.params[value.substr(0, eq)] = value.substr(eq + 1);
    } else if (flag == "--option") {
      a.options.push_back(value);
    } else if (flag == "--mode") {
      a.mode = value;
    } else if (flag == "--kernels") {
      a.kernels_dir = value;
    } else if (flag == "--arch") {
      a.arch = value;
    } else {
      return absl::InvalidArgumentError(Cat("unknown argument ", flag));
    }
  }
  if (a.kernel.empty()) return absl::InvalidArgumentError("--kernel is required");
  if (a.mode != "daemon" && a.mode != "nvrtc") {
    return absl::InvalidArgumentError(Cat("--mode is daemon or nvrtc, not ", a.mode));
  }
  if (a.mode == "nvrtc" && a.kernels_dir.empty()) return absl::InvalidArgumentError("--mode nvrtc needs --kernels DIR");
  return a;
}

double MsSince(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

// A context current on this thread and the driver fully awake, as in any
// process that already uses the GPU.
absl::Status InitialiseCuda() {
  if (absl::Status s = CudaDriverStatus(); !s.ok()) return s;
  if (absl::Status s = MakePrimaryContextCurrent(); !s.ok()) return s;
  absl::StatusOr<DeviceBuffer> warm = DeviceBuffer::Allocate(1);
  if (!warm.ok()) return warm.status();
  return Synchronize();
}

struct Timed {
  double total_ms = 0;
  std::vector<std::pair<std::string, double>> phases;  // in order
  std::string source;
};

absl::StatusOr<Timed> DaemonPath(const Args& a, const std::string& arch) {
  Timed t;
  const Clock::time_point start = Clock::now();
  ClientOptions options;
  options.endpoint = a.endpoint;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  if (!client.ok()) return client.status();
  const Clock::time_point connected = Clock::now();
  const KernelSpec spec{.kernel = a.kernel, .params = a.params, .arch = arch, .options = a.options};
  // GetKernel(spec) in its two halves, timed apart: the cubin (jitd's part:
  // the request, the blob read and verified) and cuModuleLoadData (the
  // driver's).
  absl::StatusOr<std::shared_ptr<const KernelBinary>> binary = (*client)->GetKernelBinary(spec);
  if (!binary.ok()) return binary.status();
  const Clock::time_point got = Clock::now();
  absl::StatusOr<std::unique_ptr<Module>> module = Module::Load((*binary)->cubin, (*binary)->symbols, (*binary)->key);
  if (!module.ok()) return module.status();
  const Clock::time_point loaded = Clock::now();
  if ((*module)->symbols().size() != 1) {
    return absl::InternalError(Cat(a.kernel, ": ", (*module)->symbols().size(), " entry points, expected one"));
  }
  absl::StatusOr<Function> function = (*module)->GetFunction((*module)->symbols()[0].name_expression);
  if (!function.ok()) return function.status();
  const Clock::time_point done = Clock::now();
  t.total_ms = MsSince(start, done);
  t.phases = {{"connect", MsSince(start, connected)},
              {"get_binary", MsSince(connected, got)},
              {"module_load", MsSince(got, loaded)},
              {"get_function", MsSince(loaded, done)}};
  t.source = v1::GetKernelResponse::Source_Name((*binary)->source);
  return t;
}

absl::StatusOr<Timed> NvrtcPath(const Args& a, const std::string& arch, const manifest::Toolchain& toolchain) {
  Timed t;
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::shared_ptr<const manifest::KernelTree>> tree = manifest::KernelTree::Load(a.kernels_dir);
  if (!tree.ok()) return tree.status();
  absl::StatusOr<std::unique_ptr<manifest::Resolver>> resolver =
      manifest::Resolver::Create(*std::move(tree), toolchain, arch);
  if (!resolver.ok()) return resolver.status();
  absl::StatusOr<manifest::ResolvedKernel> resolved =
      (*resolver)->Resolve({.kernel = a.kernel, .params = a.params, .arch = arch, .options = a.options});
  if (!resolved.ok()) return resolved.status();
  const Clock::time_point resolved_at = Clock::now();
  absl::StatusOr<compiler::CompileResult> compiled = compiler::CompileInProcess(resolved->job, nullptr, nullptr);
  if (!compiled.ok()) return compiled.status();
  const Clock::time_point compiled_at = Clock::now();
  std::vector<KernelSymbol> symbols;
  for (const auto& [expression, lowered] : compiled->lowered_names) symbols.push_back({expression, lowered});
  if (symbols.size() != 1)
    return absl::InternalError(Cat(a.kernel, ": ", symbols.size(), " entry points, expected one"));
  const std::string expression = symbols[0].name_expression;
  absl::StatusOr<std::unique_ptr<Module>> module = Module::Load(compiled->cubin, std::move(symbols), resolved->key);
  if (!module.ok()) return module.status();
  const Clock::time_point loaded = Clock::now();
  absl::StatusOr<Function> function = (*module)->GetFunction(expression);
  if (!function.ok()) return function.status();
  const Clock::time_point done = Clock::now();
  t.total_ms = MsSince(start, done);
  t.phases = {{"resolve", MsSince(start, resolved_at)},
              {"compile", MsSince(resolved_at, compiled_at)},
              {"load", MsSince(compiled_at, loaded)},
              {"get_function", MsSince(loaded, done)}};
  return t;
}

// Kernel names, params and arch are manifest words; the only characters
// that could need escaping in them are quotes and backslashes.
std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

int Run(int argc, char** argv) {
  absl::StatusOr<Args> args = ParseArgs(argc, argv);
  if (!args.ok()) {
    if (!args.status().message().empty()) std::cerr << "first_use: " << args.status().message() << "\n";
    std::cerr << kUsage;
    return 2;
  }
  const Clock::time_point init_start = Clock::now();
  if (absl::Status s = InitialiseCuda(); !s.ok()) {
    std::cerr << "first_use: CUDA initialisation failed: " << s << "\n";
    return 1;
  }
  std::string arch = args->arch;
  if (arch.empty()) {
    absl::StatusOr<std::string> device_arch = CurrentDeviceArch();
    if (!device_arch.ok()) {
      std::cerr << "first_use: " << device_arch.status() << "\n";
      return 1;
    }
    arch = *device_arch;
  }
  const double cuda_init_ms = MsSince(init_start, Clock::now());

  double setup_ms = 0;
  absl::StatusOr<Timed> timed;
  if (args->mode == "daemon") {
    timed = DaemonPath(*args, arch);
  } else {
    const Clock::time_point setup_start = Clock::now();
    absl::StatusOr<manifest::Toolchain> toolchain = manifest::Toolchain::Detect();
    setup_ms = MsSince(setup_start, Clock::now());
    timed = toolchain.ok() ? NvrtcPath(*args, arch, *toolchain) : absl::StatusOr<Timed>(toolchain.status());
  }
  if (!timed.ok()) {
    std::cerr << "first_use: " << args->kernel << " (" << args->mode << "): " << timed.status() << "\n";
    return 1;
  }
  std::string phases;
  for (const auto& [name, ms] : timed->phases) {
    phases += Cat(phases.empty() ? "" : ", ", JsonString(name), ": ", ms);
  }
  std::cout << Cat("{\"ms\": ", timed->total_ms, ", \"mode\": ", JsonString(args->mode),
                   ", \"kernel\": ", JsonString(args->kernel), ", \"arch\": ", JsonString(arch), ", \"phases_ms\": {",
                   phases, "}, \"cuda_init_ms\": ", cuda_init_ms, ", \"setup_ms\": ", setup_ms,
                   ", \"source\": ", JsonString(timed->source), "}")
            << std::endl;
  return 0;
}

}  // namespace
}  // namespace jitd::gpu

int main(int argc, char** argv) { return jitd::gpu::Run(argc, argv); }
