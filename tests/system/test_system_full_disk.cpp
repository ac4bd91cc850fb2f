// A cache on a filesystem that fills up (a tmpfs of 1.5 MiB this test
// mounts; it needs root and skips without it): every request is still
// answered, the cubin served from memory when it cannot be stored; the
// failure is logged once per episode and counted in Stats; eviction makes
// room and storing works again; nothing half-written is ever served, and
// no temporary file is left behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>

#include "kernel_fixtures.h"
#include "test_daemon.h"

namespace jitd {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::TestDaemon;

constexpr int kKernels = 12;
constexpr size_t kChunkBytes = 8192;
constexpr int kChunks = 25;  // ~200 KiB of cubin per kernel

// prefix followed by n ("k7"). (GCC 12 warns falsely about "k" + to_string.)
std::string Numbered(const char* prefix, int n) {
  std::string out = prefix;
  out += std::to_string(n);
  return out;
}

// kKernels kernels, full.b0 to full.b<kKernels-1>, each with a cubin of
// kChunks x 8 KiB of bytes generated at compile time from seeds of its own
// (so every kernel's cubin differs).
void WriteTree(const fs::path& dir) {
  fs::create_directories(dir);
  std::string manifest = "schema = 1\n[defaults]\noptions = [\"-std=c++17\"]\n";
  for (int k = 0; k < kKernels; ++k) {
    const std::string name = Numbered("b", k);
    std::ofstream(dir / (name + ".cu")) << testing::BlobKernelSource("sglang::full", "blob", kChunkBytes, kChunks,
                                                                     static_cast<uint64_t>(k) * 1000 + 1);
    manifest += "[[kernel]]\nname = \"full." + name + "\"\nsource = \"" + name +
                ".cu\"\ndescription = \"200 KiB of cubin\"\nname_expressions = [\"sglang::full::blob\"]\n";
  }
  std::ofstream(dir / "kernels.toml") << manifest;
}

// A tmpfs mounted for the test's lifetime.
class SmallFilesystem {
 public:
  explicit SmallFilesystem(const fs::path& at) : at_(at) {
    fs::create_directories(at_);
    mounted_ = ::mount("jitd-test", at_.c_str(), "tmpfs", 0, "size=1536k,mode=0755") == 0;
    error_ = mounted_ ? 0 : errno;
  }
  ~SmallFilesystem() {
    if (mounted_) ::umount2(at_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  int error() const { return error_; }

 private:
  fs::path at_;
  bool mounted_ = false;
  int error_ = 0;
};

v1::GetKernelRequest Request(int k, v1::GetKernelRequest::Mode mode = v1::GetKernelRequest::COMPILE) {
  v1::GetKernelRequest request;
  request.set_kernel(Numbered("full.b", k));
  request.set_mode(mode);
  return request;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(FullDisk, RequestsAreAnsweredTheEpisodeIsLoggedOnceAndEvictionMakesRoom) {
  TempDir dir;
  SmallFilesystem small(dir / "small");
  if (!small.mounted()) {
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(small.error())
                 << "); this test needs root or CAP_SYS_ADMIN";
  }
  const fs::path kernels = dir / "kernels";
  WriteTree(kernels);
  const fs::path cache = dir / "small" / "cache";
  const std::vector<std::string> args = {
      "--kernels", kernels.string(),    "--cache-dir", cache.string(), "--hot-cache-bytes",
      "0",         "--max-cache-bytes", "1G",          "--workers",    "2"};
  // TestDaemon's own --cache-dir comes first; this one, later, must win:
  // start it by hand instead.
  std::vector<std::string> argv = TestDaemon::DefaultArgs(dir);
  argv.resize(argv.size() - 2);  // drop --cache-dir DIR/cache
  argv.insert(argv.end(), args.begin(), args.end());
  std::map<std::string, std::string> first_cubins;
  {
    testing::Process daemon(argv, dir / "jitd.log");
    ClientOptions options;
    options.endpoint = "unix:" + (dir / "jitd.sock").string();
    options.connect_timeout = std::chrono::milliseconds(0);  // the daemon is still starting
    options.call_timeout = std::chrono::seconds(120);
    auto client = Client::Connect(options);
    ASSERT_TRUE(client.ok());
    ASSERT_TRUE((*client)->WaitUntilServing(testing::kProcessTimeout).ok()) << daemon.Output();
    client = Client::Connect(options);  // now that the daemon's admin token is there to read
    ASSERT_TRUE(client.ok());

    for (int k = 0; k < kKernels; ++k) {
      absl::StatusOr<v1::GetKernelResponse> r = (*client)->GetKernel(Request(k));
      ASSERT_TRUE(r.ok()) << "kernel " << k << " was not answered: " << r.status() << "\n" << daemon.Output();
      EXPECT_GT(r->cubin().size(), static_cast<size_t>(kChunks) * kChunkBytes);
      first_cubins[r->key()] = r->cubin();
    }
    absl::StatusOr<v1::StatsResponse> stats = (*client)->Stats();
    ASSERT_TRUE(stats.ok());
    std::printf("12 kernels of ~200 KiB on a 1.5 MiB filesystem: %s stored, %s answered from memory\n",
                std::to_string(stats->entries()).c_str(), std::to_string(stats->store_failures()).c_str());
    EXPECT_GT(stats->store_failures(), 0u) << "1.5 MiB cannot hold 12 x 200 KiB: the disk never filled";
    EXPECT_LT(stats->entries(), static_cast<uint64_t>(kKernels));
    const std::string log = daemon.Output();
    EXPECT_EQ(Count(log, "could not store it"), 1u) << "the episode must be logged once:\n" << log;
    EXPECT_THAT(log, HasSubstr("store_failures"));
    size_t temp_files = 0;
    for (const auto& e : fs::directory_iterator(cache / "tmp")) temp_files += e.is_regular_file();
    EXPECT_EQ(temp_files, 0u) << "a failed write left its temp file";

    // Eviction makes room: with everything evicted, what failed is stored.
    v1::EvictRequest evict;
    evict.set_kernel_glob("full.*");
    ASSERT_TRUE((*client)->Evict(evict).ok());
    absl::StatusOr<v1::GetKernelResponse> again = (*client)->GetKernel(Request(kKernels - 1));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->source(), v1::GetKernelResponse::COMPILED);
    absl::StatusOr<v1::StatsResponse> after = (*client)->Stats();
    ASSERT_TRUE(after.ok());
    EXPECT_EQ(after->entries(), 1u) << "storing did not work again after eviction made room";
    EXPECT_THAT(daemon.Output(), HasSubstr("storing compiled kernels works again"));
    daemon.Signal(SIGTERM);
    ASSERT_TRUE(daemon.WaitForExit(testing::kProcessTimeout).has_value());
  }
  // Restarted: whatever the cache holds is whole and verified.
  testing::Process daemon(argv, dir / "jitd2.log");
  ClientOptions options;
  options.endpoint = "unix:" + (dir / "jitd.sock").string();
  options.connect_timeout = std::chrono::milliseconds(0);
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->WaitUntilServing(testing::kProcessTimeout).ok()) << daemon.Output();
  size_t hits = 0;
  for (int k = 0; k < kKernels; ++k) {
    absl::StatusOr<v1::GetKernelResponse> r = (*client)->GetKernel(Request(k, v1::GetKernelRequest::CACHED_ONLY));
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
      continue;
    }
    ++hits;
    EXPECT_EQ(r->cubin(), first_cubins[r->key()]) << "kernel " << k;
  }
  EXPECT_EQ(hits, 1u);
}

}  // namespace
}  // namespace jitd
