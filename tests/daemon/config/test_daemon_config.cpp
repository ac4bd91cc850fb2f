// ResolveConfig and the value checks: defaults, layering, what is rejected.
#include <gtest/gtest.h>

#include "config/config.h"
#include "jitd/client.h"
#include "scoped_env.h"

namespace jitd::daemon {
namespace {

using testing::ScopedEnv;

TEST(DaemonConfig, DefaultsListenOnTheClientsDefaultEndpointNeverTcp) {
  const DaemonConfig config = ResolveConfig({}, {});
  ASSERT_EQ(config.listen.size(), 1u);
  EXPECT_EQ(config.listen[0], DefaultEndpoint());
  EXPECT_TRUE(config.listen[0].starts_with("unix:"));
  EXPECT_EQ(config.max_cache_bytes, kDefaultMaxCacheBytes);
  EXPECT_EQ(config.arch, kDefaultArch);
  EXPECT_GE(config.workers, 1u);
  EXPECT_TRUE(config.remote.empty());
  EXPECT_TRUE(config.admin_token_file.empty());
  EXPECT_EQ(config.max_queue, kDefaultMaxQueue);
  EXPECT_EQ(config.hot_cache_bytes, kDefaultHotCacheBytes);
  EXPECT_EQ(config.negative_ttl, kDefaultNegativeTtl);
  EXPECT_FALSE(config.log_hits);
  EXPECT_TRUE(config.local_path);
  EXPECT_FALSE(config.allow_guard_findings);
}

TEST(DaemonConfig, ServingSettingsLayerLikeTheOthers) {
  ConfigLayer file;
  file.max_queue = 10;
  file.hot_cache_bytes = 1 << 20;
  file.log_hits = true;
  file.allow_guard_findings = true;
  file.local_path = true;
  ConfigLayer flags;
  flags.max_queue = 20;
  flags.local_path = false;
  flags.negative_ttl = std::chrono::seconds(0);
  flags.allow_guard_findings = false;
  const DaemonConfig config = ResolveConfig(file, flags);
  EXPECT_EQ(config.max_queue, 20u);
  EXPECT_EQ(config.hot_cache_bytes, 1u << 20);
  EXPECT_EQ(config.negative_ttl, std::chrono::seconds(0));
  EXPECT_TRUE(config.log_hits);
  EXPECT_FALSE(config.allow_guard_findings);
  EXPECT_FALSE(config.local_path);
}

TEST(DaemonConfig, DefaultCacheDirHonoursXdgCacheHome) {
  const ScopedEnv cache_home("XDG_CACHE_HOME", "/srv/cache-home");
  EXPECT_EQ(DefaultCacheDir(), std::filesystem::path("/srv/cache-home/jitd"));
}

TEST(DaemonConfig, DefaultCacheDirFallsBackToHomeDotCache) {
  const ScopedEnv cache_home("XDG_CACHE_HOME", nullptr);
  const ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(DefaultCacheDir(), std::filesystem::path("/home/someone/.cache/jitd"));
}

TEST(DaemonConfig, FlagsOverrideTheFileAndTheFileOverridesDefaults) {
  ConfigLayer file;
  file.cache_dir = "/from/file";
  file.workers = 3;
  file.arch = "sm_100a";
  ConfigLayer flags;
  flags.cache_dir = "/from/flag";
  const DaemonConfig config = ResolveConfig(file, flags);
  EXPECT_EQ(config.cache_dir, std::filesystem::path("/from/flag"));
  EXPECT_EQ(config.workers, 3u);
  EXPECT_EQ(config.arch, "sm_100a");
}

TEST(DaemonConfig, ListenFromFlagsReplacesListenFromFileRatherThanAdding) {
  ConfigLayer file;
  file.listen = std::vector<std::string>{"unix:/a.sock", "127.0.0.1:7070"};
  ConfigLayer flags;
  flags.listen = std::vector<std::string>{"unix:/b.sock"};
  EXPECT_EQ(ResolveConfig(file, flags).listen, std::vector<std::string>{"unix:/b.sock"});
}

TEST(DaemonConfig, ArchAcceptsRealArchitecturesOnly) {
  for (const char* good : {"sm_80", "sm_90", "sm_90a", "sm_100a", "sm_120f"}) {
    EXPECT_TRUE(CheckArch(good).ok()) << good;
  }
  for (const char* bad : {"", "sm90", "sm_9", "compute_90", "sm_90x", "SM_90"}) {
    EXPECT_EQ(CheckArch(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(DaemonConfig, RemoteAcceptsRedisAndUnixUrlsOnly) {
  EXPECT_TRUE(CheckRemoteUrl("redis://cache.internal:6379/0").ok());
  EXPECT_TRUE(CheckRemoteUrl("redis://10.0.0.1:6379").ok());
  EXPECT_TRUE(CheckRemoteUrl("unix:///run/redis.sock").ok());
  EXPECT_FALSE(CheckRemoteUrl("http://cache:80").ok());
  EXPECT_FALSE(CheckRemoteUrl("redis://no-port").ok());
  EXPECT_FALSE(CheckRemoteUrl("unix://").ok());
}

TEST(DaemonConfig, MetricsListenMustBeTcp) {
  EXPECT_TRUE(CheckMetricsListen("127.0.0.1:9464").ok());
  EXPECT_FALSE(CheckMetricsListen("unix:/tmp/metrics.sock").ok());
  EXPECT_FALSE(CheckMetricsListen("9464").ok());
}

TEST(DaemonConfig, WorkersMustBePositiveAndBounded) {
  EXPECT_TRUE(CheckWorkers(1).ok());
  EXPECT_TRUE(CheckWorkers(64).ok());
  EXPECT_FALSE(CheckWorkers(0).ok());
  EXPECT_FALSE(CheckWorkers(-4).ok());
  EXPECT_FALSE(CheckWorkers(100000).ok());
}

TEST(DaemonConfig, MaxQueueMustBePositiveAndBounded) {
  EXPECT_TRUE(CheckMaxQueue(1).ok());
  EXPECT_TRUE(CheckMaxQueue(256).ok());
  EXPECT_FALSE(CheckMaxQueue(0).ok());
  EXPECT_FALSE(CheckMaxQueue(-1).ok());
  EXPECT_FALSE(CheckMaxQueue(int64_t{1} << 40).ok());
}

TEST(DaemonConfig, NegativeTtlIsZeroToADay) {
  EXPECT_TRUE(CheckNegativeTtl(0).ok());  // off
  EXPECT_TRUE(CheckNegativeTtl(86400).ok());
  EXPECT_FALSE(CheckNegativeTtl(-1).ok());
  EXPECT_FALSE(CheckNegativeTtl(86401).ok());
}

}  // namespace
}  // namespace jitd::daemon
