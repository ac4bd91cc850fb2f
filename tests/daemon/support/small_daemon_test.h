// A gtest fixture: a jitd serving the small fixture kernels from the test's
// TempDir, which a test may restart with flags of its own, and a client of
// it. Header-only: jitd_test_support itself does not link gtest.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "jitd/client.h"
#include "kernel_fixtures.h"
#include "test_daemon.h"

namespace jitd::testing {

// A compile of the CUB kernel takes about a second alone and several on a
// loaded two-core machine; calls that wait for one get this long.
inline constexpr std::chrono::seconds kCompileCallTimeout{120};

class SmallDaemonTest : public ::testing::Test {
 protected:
  // (Re)starts the daemon: --kernels SmallKernelsDir(), then `extra`, with
  // two workers unless `extra` names --workers; client_ is a client of it.
  void Start(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--kernels", SmallKernelsDir().string()};
    args.insert(args.end(), extra.begin(), extra.end());
    if (std::find(extra.begin(), extra.end(), "--workers") == extra.end()) args.insert(args.end(), {"--workers", "2"});
    client_.reset();
    daemon_.reset();  // a restart: the old one lets go of the socket and the cache first
    daemon_ = std::make_unique<TestDaemon>(dir_, args);
    ASSERT_TRUE(daemon_->WaitUntilServing().ok()) << daemon_->process().Output();
    client_ = daemon_->Connect("", kCompileCallTimeout);
  }

  // Stops the daemon as an operator would (SIGTERM); it must exit cleanly.
  void Stop() {
    client_.reset();
    daemon_->process().Signal(SIGTERM);
    ASSERT_EQ(daemon_->process().WaitForExit(kProcessTimeout), 0) << daemon_->process().Output();
    daemon_.reset();
  }

  TempDir dir_;
  std::unique_ptr<TestDaemon> daemon_;
  std::unique_ptr<Client> client_;
};

}  // namespace jitd::testing
