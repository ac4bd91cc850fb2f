#include "test_daemon.h"

#include <signal.h>

#include <stdexcept>

#include "jitd/base/text.h"
#include "poll_until.h"

namespace jitd::testing {
namespace {

// One health poll; short, so that a daemon that exits is noticed quickly.
constexpr std::chrono::milliseconds kPollTimeout{250};

}  // namespace

std::vector<std::string> TestDaemon::DefaultArgs(const TempDir& dir) {
  return {JitdBinary(),  "serve",
          "--listen",    "unix:" + (dir / "jitd.sock").string(),
          "--cache-dir", (dir / "cache").string()};
}

TestDaemon::TestDaemon(const TempDir& dir, const std::vector<std::string>& extra_args,
                       const std::map<std::string, std::string>& env, const std::vector<std::string>& launcher)
    : dir_(dir.path()), socket_path_(dir / "jitd.sock"), cache_dir_(dir / "cache") {
  std::vector<std::string> args = launcher;
  const std::vector<std::string> defaults = DefaultArgs(dir);
  args.insert(args.end(), defaults.begin(), defaults.end());
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  process_ = std::make_unique<Process>(args, dir / "jitd.log", env);
}

TestDaemon::~TestDaemon() {
  if (process_->Exited()) return;
  process_->Signal(SIGTERM);
  process_->WaitForExit(kProcessTimeout);  // then ~Process kills what is left
}

absl::Status TestDaemon::WaitUntilServing() {
  std::unique_ptr<Client> client = Connect();
  const auto deadline = std::chrono::steady_clock::now() + kProcessTimeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (process_->Exited()) {
      return absl::FailedPreconditionError(text::Cat("jitd exited before serving; its output:\n", process_->Output()));
    }
    if (client->WaitUntilServing(kPollTimeout).ok()) return absl::OkStatus();
  }
  return absl::DeadlineExceededError(
      text::Cat("jitd was not serving after ", kProcessTimeout.count(), " s; its output:\n", process_->Output()));
}

absl::Status TestDaemon::WaitUntilLoggedReady() {
  if (PollUntil([&] { return process_->Output().find("jitd ready") != std::string::npos || process_->Exited(); },
                kProcessTimeout) &&
      process_->Output().find("jitd ready") != std::string::npos) {
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError(text::Cat("jitd logged no ready line; its output:\n", process_->Output()));
}

std::unique_ptr<Client> TestDaemon::Connect(const std::string& admin_token,
                                            std::chrono::milliseconds call_timeout) const {
  ClientOptions options;
  options.endpoint = endpoint();
  options.connect_timeout = std::chrono::milliseconds(0);  // connect on first call
  options.call_timeout = call_timeout;
  options.admin_token = admin_token;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  if (!client.ok()) throw std::runtime_error(std::string(client.status().message()));
  return *std::move(client);
}

v1::StatsResponse TestDaemon::Stats() const {
  absl::StatusOr<v1::StatsResponse> stats = Connect()->Stats();
  if (!stats.ok()) throw std::runtime_error(std::string(stats.status().message()));
  return *std::move(stats);
}

ProcessResult TestDaemon::Jitctl(const std::vector<std::string>& args, std::chrono::milliseconds timeout) const {
  std::vector<std::string> argv = {JitctlBinary(), "--endpoint", endpoint()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, dir_ / "jitctl.log", timeout);
}

}  // namespace jitd::testing
