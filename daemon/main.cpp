// jitd: parse the command line, then serve until SIGTERM or SIGINT,
// re-reading the kernels on SIGHUP.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <iostream>

#include "absl/strings/str_format.h"
#include "app/compile_stack.h"
#include "app/server.h"
#include "commands/bundle_commands.h"
#include "commands/offline_commands.h"
#include "compiler/compile_worker.h"
#include "compiler/toolkit_watch.h"
#include "config/command_line.h"
#include "config/config_file.h"
#include "jitd/revision.h"
#include "manifest/manifest.h"
#include "system/daemon_signals.h"

namespace {

using jitd::daemon::CommandLine;

constexpr int kExitFailure = 1;
// Calls in flight get this long to finish at shutdown. A call may be
// waiting on a compile of several seconds (a CUB kernel on a busy host), so
// this is generous, yet inside Kubernetes' default 30 s termination grace
// and systemd's 90 s stop timeout. Idle connections do not hold shutdown up:
// only calls in flight count.
constexpr std::chrono::seconds kDrainDeadline{25};

// --version: what a bug report needs to name this build and what it
// compiles with.
std::string VersionText() {
  return absl::StrFormat(
      "jitd %s (git %s)\nNVRTC %s (loaded now); built against the CUDA %d.%d toolkit; compiles with the headers of "
      "--cuda-include (default %s)",
      JITD_VERSION, JITD_GIT_REVISION, jitd::manifest::NvrtcVersion(), JITD_CUDA_VERSION / 1000,
      (JITD_CUDA_VERSION % 1000) / 10, jitd::compiler::kDefaultCudaInclude);
}

int Serve(const CommandLine& command_line) {
  jitd::daemon::ConfigLayer file;
  if (command_line.config_file.has_value()) {
    absl::StatusOr<jitd::daemon::ConfigLayer> read = jitd::daemon::ReadConfigFile(*command_line.config_file);
    if (!read.ok()) {
      spdlog::error("{}", std::string(read.status().message()));
      return kExitFailure;
    }
    file = *std::move(read);
  }
  const jitd::daemon::DaemonConfig config = jitd::daemon::ResolveConfig(file, command_line.flags);
  std::vector<std::string> trees;
  for (const jitd::daemon::KernelTreeSource& tree : config.kernels) {
    trees.push_back(tree.name.empty() ? tree.dir.string() : tree.name + "=" + tree.dir.string());
  }
  spdlog::info("jitd {} starting: listen {}, kernels {}, cache {}, budget {}, {} worker{}, arch {}", JITD_VERSION,
               fmt::join(config.listen, " "), fmt::join(trees, " "), config.cache_dir.string(),
               config.max_cache_bytes == 0
                   ? std::string("unbounded")
                   : absl::StrFormat("%.1f GiB (%d bytes)", static_cast<double>(config.max_cache_bytes) / (1 << 30),
                                     config.max_cache_bytes),
               config.workers, config.workers == 1 ? "" : "s", config.arch);

  absl::StatusOr<std::unique_ptr<jitd::daemon::Server>> server = jitd::daemon::Server::Start(config);
  if (!server.ok()) {
    spdlog::error("{}", std::string(server.status().message()));
    return kExitFailure;
  }
  if (const std::string refused = (*server)->RefusedTrees(); refused.empty()) {
    spdlog::info("jitd ready: serving on {}; {}", fmt::join((*server)->addresses(), " "), (*server)->DescribeKernels());
  } else {
    // Degraded: the other trees are served; a probe sees the refused ones
    // (health service jitd.tree.NAME, the jitd_kernel_tree_serving metric).
    spdlog::warn("jitd ready, degraded: serving on {}; {}; {}", fmt::join((*server)->addresses(), " "),
                 (*server)->DescribeKernels(), refused);
  }

  int signal = 0;
  while ((signal = jitd::daemon::DaemonSignals::Wait()) == SIGHUP) {
    if (absl::Status reloaded = (*server)->ReloadKernels(); !reloaded.ok()) {
      spdlog::error("kernel reload failed: {}", std::string(reloaded.message()));
    }
  }
  spdlog::info(
      "received {}; draining (up to {} s)",
      (*server)->listener_deaf() ? "SIGTERM from the listener probe" : (signal == SIGTERM ? "SIGTERM" : "SIGINT"),
      kDrainDeadline.count());
  if (absl::Status stopped = (*server)->Shutdown(kDrainDeadline); !stopped.ok()) {
    spdlog::error("cache flush at shutdown failed: {}", std::string(stopped.message()));
    return kExitFailure;
  }
  const bool deaf = (*server)->listener_deaf();
  server->reset();
  spdlog::info("jitd stopped");
  return deaf ? jitd::daemon::kExitListenerDeaf : 0;
}

}  // namespace

int main(int argc, char** argv) {
  // `jitd worker ...`: a compile worker the daemon started (not in --help).
  if (argc > 1 && argv[1] == jitd::daemon::kWorkerCommand) return jitd::compiler::CompileWorkerMain(argc - 1, argv + 1);
  // Before anything starts a thread: every thread inherits the mask.
  jitd::daemon::DaemonSignals::Block();
  spdlog::set_default_logger(spdlog::stderr_color_mt("jitd"));

  std::variant<CommandLine, int> parsed = jitd::daemon::ParseCommandLine(argc, argv, VersionText());
  if (const int* exit_code = std::get_if<int>(&parsed)) return *exit_code;
  const CommandLine& command_line = std::get<CommandLine>(parsed);
  if (command_line.command != CommandLine::Command::kServe) jitd::daemon::DaemonSignals::Unblock();
  switch (command_line.command) {
    case CommandLine::Command::kLint:
      return jitd::daemon::RunLint(command_line);
    case CommandLine::Command::kWarm:
      return jitd::daemon::RunWarm(command_line);
    case CommandLine::Command::kBundleCreate:
      return jitd::daemon::RunBundleCreate(command_line);
    case CommandLine::Command::kBundleVerify:
      return jitd::daemon::RunBundleVerify(command_line);
    case CommandLine::Command::kServe:
      break;
  }
  return Serve(command_line);
}
