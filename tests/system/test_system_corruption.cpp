// Damage to a cache directory while jitd is stopped, then requests to the
// restarted daemon: every kind of damage is detected, counted, never
// served, and repaired (the entry recompiled on demand; an unreadable index
// rebuilt from the blob files, which describe themselves).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>

#include "cache_seed.h"
#include "kernel_fixtures.h"
#include "test_daemon.h"

namespace jitd {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::KernelRequest;
using testing::SmallKernelsDir;
using testing::TempDir;
using testing::TestDaemon;

constexpr std::chrono::seconds kCallTimeout{60};

// The four trivial instantiations of the small kernels.
const std::vector<std::pair<std::string, std::map<std::string, std::string>>> kSpecs = {
    {"small.fill", {{"dtype", "fp32"}}},
    {"small.fill", {{"dtype", "fp64"}}},
    {"small.scale", {{"clamp", "off"}}},
    {"small.scale", {{"clamp", "on"}}}};

std::vector<std::string> DaemonArgs() { return {"--kernels", SmallKernelsDir().string(), "--hot-cache-bytes", "0"}; }

struct Good {
  std::string key;
  std::string cubin;
  fs::path blob;
};

// Compiles the four into a fresh cache with a real daemon, then stops it.
std::vector<Good> Populate(const TempDir& dir) {
  TestDaemon daemon(dir, DaemonArgs());
  if (!daemon.WaitUntilServing().ok()) throw std::runtime_error(daemon.process().Output());
  std::unique_ptr<Client> client = daemon.Connect("", kCallTimeout);
  std::vector<Good> good;
  for (const auto& [kernel, params] : kSpecs) {
    v1::GetKernelRequest request = KernelRequest(kernel, params);
    request.set_delivery(v1::GetKernelRequest::PATH);
    absl::StatusOr<v1::GetKernelResponse> path = client->GetKernel(request);
    absl::StatusOr<v1::GetKernelResponse> bytes = client->GetKernel(KernelRequest(kernel, params));
    if (!path.ok() || !bytes.ok()) throw std::runtime_error("populating the cache failed");
    good.push_back({bytes->key(), bytes->cubin(), path->blob_path()});
  }
  return good;
}

void Truncate(const fs::path& file, uintmax_t size) { fs::resize_file(file, size); }

void Overwrite(const fs::path& file, uintmax_t offset, size_t count) {
  std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
  stream.seekp(static_cast<std::streamoff>(offset));
  for (size_t i = 0; i < count; ++i) stream.put(static_cast<char>(0xA5 ^ (i & 0xff)));
  if (!stream) throw std::runtime_error("cannot overwrite " + file.string());
}

struct Damage {
  std::string name;
  std::function<void(const fs::path& cache, const std::vector<Good>&)> inflict;
  bool index_damage;  // the index is rebuilt from the blobs; else entry 0 is recompiled
};

std::vector<Damage> Damages() {
  return {
      {"a flipped byte in a blob", [](const fs::path&, const auto& g) { testing::FlipByte(g[0].blob); }, false},
      {"a blob cut to half", [](const fs::path&, const auto& g) { Truncate(g[0].blob, fs::file_size(g[0].blob) / 2); },
       false},
      {"a blob cut to nothing", [](const fs::path&, const auto& g) { Truncate(g[0].blob, 0); }, false},
      {"bytes appended to a blob",
       [](const fs::path&, const auto& g) { std::ofstream(g[0].blob, std::ios::app) << "trailing garbage"; }, false},
      {"a blob deleted under its row", [](const fs::path&, const auto& g) { fs::remove(g[0].blob); }, false},
      {"a blob replaced by another entry's",
       [](const fs::path&, const auto& g) {
         fs::copy_file(g[1].blob, g[0].blob, fs::copy_options::overwrite_existing);
       },
       false},
      {"the index's header overwritten",
       [](const fs::path& cache, const auto&) { Overwrite(cache / "index.sqlite", 0, 100); }, true},
      {"the index's pages overwritten",
       [](const fs::path& cache, const auto&) {
         const fs::path index = cache / "index.sqlite";
         Overwrite(index, 4096, static_cast<size_t>(std::max<uintmax_t>(fs::file_size(index), 8192) - 4096));
       },
       true},
      {"the index deleted",
       [](const fs::path& cache, const auto&) {
         for (const char* name : {"index.sqlite", "index.sqlite-wal", "index.sqlite-shm"}) fs::remove(cache / name);
       },
       true},
  };
}

TEST(Corruption, EveryDamageIsDetectedCountedNeverServedAndRepaired) {
  for (const Damage& damage : Damages()) {
    SCOPED_TRACE(damage.name);
    TempDir dir;
    const std::vector<Good> good = Populate(dir);
    damage.inflict(dir / "cache", good);

    TestDaemon daemon(dir, DaemonArgs());
    ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
    std::unique_ptr<Client> client = daemon.Connect("", kCallTimeout);
    for (size_t i = 0; i < kSpecs.size(); ++i) {
      absl::StatusOr<v1::GetKernelResponse> r = client->GetKernel(KernelRequest(kSpecs[i].first, kSpecs[i].second));
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->key(), good[i].key);
      EXPECT_EQ(r->cubin(), good[i].cubin) << "entry " << i << " was served wrong";  // never a damaged cubin
      if (damage.index_damage) {
        // Rebuilt from the blobs: every entry is still a disk hit.
        EXPECT_EQ(r->source(), v1::GetKernelResponse::DISK) << "entry " << i;
      } else {
        EXPECT_EQ(r->source(), i == 0 ? v1::GetKernelResponse::COMPILED : v1::GetKernelResponse::DISK) << "entry " << i;
      }
    }
    const v1::StatsResponse stats = daemon.Stats();
    if (damage.index_damage) {
      EXPECT_EQ(stats.entries(), kSpecs.size());
      if (damage.name != "the index deleted") {
        EXPECT_THAT(daemon.process().Output(), HasSubstr("rebuilt")) << "an unreadable index must be reported";
      }
    } else {
      EXPECT_GE(stats.corrupt(), 1u) << "the damaged entry was not counted";
      // Repaired: asked again, it is a disk hit with the right bytes.
      absl::StatusOr<v1::GetKernelResponse> again = client->GetKernel(KernelRequest(kSpecs[0].first, kSpecs[0].second));
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(again->source(), v1::GetKernelResponse::DISK);
      EXPECT_EQ(again->cubin(), good[0].cubin);
    }
  }
}

}  // namespace
}  // namespace jitd
