// RemoteTier over a real redis-server: verified read-through (a corrupt or
// misfiled value is deleted and never served), shared compile failures,
// leases (exclusive, renewed while held, taken over once lapsed), and the
// circuit breaker (an outage costs a few failed calls, one log line, and
// ends by itself when the store is back).
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <thread>

#include "poll_until.h"
#include "redis_server.h"
#include "remote/remote.h"
#include "temp_dir.h"

namespace jitd::cache {
namespace {

using testing::RedisServer;
using testing::TempDir;
using namespace std::chrono_literals;

EntryMeta Meta(const std::string& key) {
  EntryMeta meta;
  meta.key = key;
  meta.kernel = "test.kernel";
  meta.params = "dtype=bf16";
  meta.arch = "sm_90";
  meta.nvrtc_version = "13.0";
  meta.symbols = {{"sglang::k<bf16>", "_ZN6sglang1kI6bf16EEvv"}};
  meta.created_unix_ms = 1;
  return meta;
}

const std::string kKey = std::string(64, 'a');
const std::string kOther = std::string(64, 'b');

class RemoteTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::HaveRedisServer()) << "no redis-server: run deploy/install-deps.sh";
    redis_ = std::make_unique<RedisServer>(dir_ / "redis");
  }
  std::unique_ptr<RemoteTier> Tier(RemoteTierOptions options = {}, RemoteOptions backend_options = {}) {
    auto url = ParseRemoteUrl(redis_->url());
    auto backend = OpenRedisBackend(*url, backend_options);
    EXPECT_TRUE(backend.ok());
    return std::make_unique<RemoteTier>(std::move(*backend), options);
  }
  TempDir dir_;
  std::unique_ptr<RedisServer> redis_;
};

TEST_F(RemoteTierTest, AStoredEntryIsFetchedVerifiedAndCounted) {
  auto tier = Tier();
  EXPECT_EQ(tier->Fetch(kKey).kind, RemoteFetch::Kind::kMiss);
  tier->Store(Meta(kKey), "cubin bytes");
  RemoteFetch got = tier->Fetch(kKey);
  ASSERT_EQ(got.kind, RemoteFetch::Kind::kHit);
  EXPECT_EQ(got.meta, Meta(kKey));
  EXPECT_EQ(got.cubin, "cubin bytes");
  auto s = tier->stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.stores, 1u);
  EXPECT_EQ(s.errors, 0u);
}

TEST_F(RemoteTierTest, ACorruptValueIsAMissAndIsDeleted) {
  auto tier = Tier();
  tier->Store(Meta(kKey), "cubin bytes");
  auto value = redis_->Command({"GET", "jitd:v1:blob:" + kKey});
  ASSERT_TRUE(value.ok());
  std::string damaged = value->str;
  damaged[damaged.size() / 2] ^= 0x01;  // one bit, inside the cubin
  ASSERT_TRUE(redis_->Command({"SET", "jitd:v1:blob:" + kKey, damaged}).ok());
  EXPECT_EQ(tier->Fetch(kKey).kind, RemoteFetch::Kind::kMiss);
  EXPECT_EQ(tier->stats().corrupt, 1u);
  EXPECT_EQ(redis_->Command({"EXISTS", "jitd:v1:blob:" + kKey})->integer, 0) << "the corrupt value stays";
  ASSERT_TRUE(redis_->Command({"SET", "jitd:v1:blob:" + kKey, "not a blob at all"}).ok());
  EXPECT_EQ(tier->Fetch(kKey).kind, RemoteFetch::Kind::kMiss);
  EXPECT_EQ(tier->stats().corrupt, 2u);
}

TEST_F(RemoteTierTest, AnIntactBlobUnderTheWrongKeyIsNotServed) {
  auto tier = Tier();
  tier->Store(Meta(kOther), "other cubin");
  auto value = redis_->Command({"GET", "jitd:v1:blob:" + kOther});
  ASSERT_TRUE(redis_->Command({"SET", "jitd:v1:blob:" + kKey, value->str}).ok());
  EXPECT_EQ(tier->Fetch(kKey).kind, RemoteFetch::Kind::kMiss);
  EXPECT_EQ(tier->stats().corrupt, 1u);
}

TEST_F(RemoteTierTest, ACompileFailureIsSharedUntilItExpires) {
  auto tier = Tier();
  // Long enough that a stalled test thread still reads it before it expires.
  tier->StoreFailure(kKey, "NVRTC: error: identifier \"x\" is undefined", 2s);
  RemoteFetch got = tier->Fetch(kKey);
  ASSERT_EQ(got.kind, RemoteFetch::Kind::kFailed);
  EXPECT_NE(got.failure.find("identifier"), std::string::npos);
  EXPECT_TRUE(testing::PollUntil([&] { return tier->Fetch(kKey).kind == RemoteFetch::Kind::kMiss; }, 10s));
}

TEST_F(RemoteTierTest, ALeaseIsExclusiveUntilReleased) {
  auto a = Tier();
  auto b = Tier();
  EXPECT_EQ(a->AcquireLease(kKey), LeaseResult::kAcquired);
  EXPECT_EQ(b->AcquireLease(kKey), LeaseResult::kHeld);
  EXPECT_EQ(b->AcquireLease(kOther), LeaseResult::kAcquired) << "leases are per key";
  a->ReleaseLease(kKey);
  EXPECT_EQ(b->AcquireLease(kKey), LeaseResult::kAcquired);
  EXPECT_EQ(b->stats().leases_busy, 1u);
}

TEST_F(RemoteTierTest, AHeldLeaseIsRenewedPastItsTtl) {
  RemoteTierOptions options;
  // Renewed every 333 ms: a renewal thread stalled by a loaded machine for
  // less than 600 ms still keeps it.
  options.lease_ttl = 1000ms;
  auto a = Tier(options);
  auto b = Tier(options);
  ASSERT_EQ(a->AcquireLease(kKey), LeaseResult::kAcquired);
  // Far past one TTL: only renewal keeps it.
  auto until = std::chrono::steady_clock::now() + 3000ms;
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(b->AcquireLease(kKey), LeaseResult::kHeld);
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(a->stats().leases_lost, 0u);
}

TEST_F(RemoteTierTest, ALeaseWhoseHolderDiedLapsesAndIsTakenOver) {
  // A holder killed mid-compile: its lease is in the store, nobody renews it.
  ASSERT_TRUE(redis_->Command({"SET", "jitd:v1:lease:" + kKey, "dead-host:1:0", "PX", "300"}).ok());
  auto tier = Tier();
  EXPECT_EQ(tier->AcquireLease(kKey), LeaseResult::kHeld);
  EXPECT_TRUE(testing::PollUntil([&] { return tier->AcquireLease(kKey) == LeaseResult::kAcquired; }, 10s, 20ms));
}

TEST_F(RemoteTierTest, DestroyingTheTierReleasesItsLeases) {
  auto a = Tier();
  ASSERT_EQ(a->AcquireLease(kKey), LeaseResult::kAcquired);
  a.reset();
  EXPECT_EQ(Tier()->AcquireLease(kKey), LeaseResult::kAcquired);
}

TEST_F(RemoteTierTest, AnOutageOpensTheCircuitLogsOnceAndClosesWhenTheStoreIsBack) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256);
  auto logger = std::make_shared<spdlog::logger>("test", sink);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(logger);

  RemoteTierOptions options;
  options.breaker_failures = 3;
  options.breaker_min_open = 200ms;
  options.breaker_max_open = 400ms;
  auto tier = Tier(options);
  tier->Store(Meta(kKey), "cubin");
  redis_->Kill();
  for (int i = 0; i < 50; ++i) EXPECT_EQ(tier->Fetch(kKey).kind, RemoteFetch::Kind::kUnavailable);
  auto s = tier->stats();
  EXPECT_TRUE(s.circuit_open);
  EXPECT_EQ(s.episodes, 1u);
  EXPECT_LE(s.errors, 4u) << "after breaker_failures the store is no longer asked";
  EXPECT_GE(s.skipped, 45u);
  EXPECT_EQ(tier->AcquireLease(kKey), LeaseResult::kUnavailable);

  redis_->Restart();
  EXPECT_TRUE(testing::PollUntil([&] { return tier->Fetch(kKey).kind == RemoteFetch::Kind::kMiss; }, 10s, 20ms))
      << "the circuit closes by itself once a probe succeeds";
  EXPECT_FALSE(tier->stats().circuit_open);

  spdlog::set_default_logger(previous);
  int warnings = 0, recoveries = 0;
  for (const std::string& line : sink->last_formatted()) {
    if (line.find("is unavailable") != std::string::npos) ++warnings;
    if (line.find("is back after") != std::string::npos) ++recoveries;
  }
  EXPECT_EQ(warnings, 1) << "one line per outage, not one per request";
  EXPECT_EQ(recoveries, 1);
}

TEST_F(RemoteTierTest, AFullStoreDoesNotOpenTheCircuitForReads) {
  auto tier = Tier();
  tier->Store(Meta(kOther), "stored before the store filled up");
  ASSERT_TRUE(redis_->Command({"CONFIG", "SET", "maxmemory", "1"}).ok());
  ASSERT_TRUE(redis_->Command({"CONFIG", "SET", "maxmemory-policy", "noeviction"}).ok());
  for (int i = 0; i < 10; ++i) tier->Store(Meta(kKey), std::string(4096, 'x'));
  auto s = tier->stats();
  EXPECT_FALSE(s.circuit_open);
  EXPECT_EQ(s.errors, 10u);
  EXPECT_EQ(tier->Fetch(kOther).kind, RemoteFetch::Kind::kHit) << "reads go on while writes are refused";
}

TEST_F(RemoteTierTest, WithASigningKeyOnlyValuesSignedWithItAreServed) {
  RemoteTierOptions keyed;
  keyed.signing_key = "fleet secret of 32 bytes, really";
  auto signer = Tier(keyed);
  signer->Store(Meta(kKey), "signed cubin");
  RemoteFetch got = Tier(keyed)->Fetch(kKey);
  ASSERT_EQ(got.kind, RemoteFetch::Kind::kHit);
  EXPECT_EQ(got.cubin, "signed cubin");

  // Written by someone without the key (an intact, well-formed blob).
  Tier()->Store(Meta(kOther), "injected cubin");
  auto reader = Tier(keyed);
  EXPECT_EQ(reader->Fetch(kOther).kind, RemoteFetch::Kind::kMiss);
  EXPECT_EQ(reader->stats().unsigned_values, 1u);
  // Refused, not deleted: it may be another fleet's or one not signing
  // yet; this fleet's write-back replaces it.
  EXPECT_EQ(redis_->Command({"EXISTS", "jitd:v1:blob:" + kOther})->integer, 1);

  // Not read again for a while (each read may be up to the value cap):
  // the key is a miss without a round trip.
  EXPECT_EQ(reader->Fetch(kOther).kind, RemoteFetch::Kind::kMiss);
  EXPECT_EQ(reader->stats().unsigned_values, 1u);
  EXPECT_EQ(reader->stats().not_reread, 1u);

  // Signed with another key, or signed for another key (each seen by a
  // reader of its own: the first refusal would hide the second).
  RemoteTierOptions other_key;
  other_key.signing_key = "another fleet's secret, 32 bytes";
  Tier(other_key)->Store(Meta(kOther), "other fleet's cubin");
  auto second = Tier(keyed);
  EXPECT_EQ(second->Fetch(kOther).kind, RemoteFetch::Kind::kMiss);
  EXPECT_EQ(second->stats().unsigned_values, 1u);
  auto moved = redis_->Command({"GET", "jitd:v1:blob:" + kKey});
  ASSERT_TRUE(redis_->Command({"SET", "jitd:v1:blob:" + kOther, moved->str}).ok());
  auto third = Tier(keyed);
  EXPECT_EQ(third->Fetch(kOther).kind, RemoteFetch::Kind::kMiss);
  EXPECT_EQ(third->stats().unsigned_values, 1u);

  // Failure markers too: an unsigned one is ignored, a signed one shared.
  ASSERT_TRUE(redis_->Command({"DEL", "jitd:v1:blob:" + kOther}).ok());
  ASSERT_TRUE(redis_->Command({"SET", "jitd:v1:fail:" + kOther, "forged failure"}).ok());
  auto fourth = Tier(keyed);
  EXPECT_EQ(fourth->Fetch(kOther).kind, RemoteFetch::Kind::kMiss);
  signer->StoreFailure(kOther, "real failure", 10000ms);
  RemoteFetch failed = fourth->Fetch(kOther);
  ASSERT_EQ(failed.kind, RemoteFetch::Kind::kFailed);
  EXPECT_EQ(failed.failure, "real failure");
}

TEST_F(RemoteTierTest, ADaemonWithoutAKeyReadsSignedValuesByTheirChecksum) {
  // A rollout: some daemons sign, some do not yet. Neither deletes the
  // other's values, and the unsigned side still verifies the checksum.
  RemoteTierOptions keyed;
  keyed.signing_key = "fleet secret of 32 bytes, really";
  Tier(keyed)->Store(Meta(kKey), "signed cubin");
  auto plain = Tier();
  RemoteFetch got = plain->Fetch(kKey);
  ASSERT_EQ(got.kind, RemoteFetch::Kind::kHit);
  EXPECT_EQ(got.cubin, "signed cubin");
  EXPECT_EQ(plain->stats().corrupt, 0u);
}

TEST_F(RemoteTierTest, WithoutAKeyAModuleIsNeverServedWhoeverWroteIt) {
  // A module kernel's shared object (an x86-64 ELF) is code: a reader with
  // no key cannot tell who wrote it, so it is refused on every read path
  // (this is the one every read goes through), signed or not.
  std::string module(64, '\0');
  module.replace(0, 4,
                 "\x7f"
                 "ELF");
  module[18] = 62;
  RemoteTierOptions keyed;
  keyed.signing_key = "fleet secret of 32 bytes, really";
  Tier(keyed)->Store(Meta(kKey), module);
  Tier()->Store(Meta(kOther), module);
  auto plain = Tier();
  EXPECT_EQ(plain->Fetch(kKey).kind, RemoteFetch::Kind::kMiss);
  EXPECT_EQ(plain->Fetch(kOther).kind, RemoteFetch::Kind::kMiss);
  EXPECT_EQ(plain->stats().unsigned_modules, 2u);
  EXPECT_EQ(plain->stats().hits, 0u);
  // Left in the store, and not read again a while.
  EXPECT_EQ(redis_->Command({"EXISTS", "jitd:v1:blob:" + kKey})->integer, 1);
  EXPECT_EQ(plain->Fetch(kKey).kind, RemoteFetch::Kind::kMiss);
  EXPECT_EQ(plain->stats().unsigned_modules, 2u);
  EXPECT_EQ(plain->stats().not_reread, 1u);
  // With the key, the signed one is served.
  RemoteFetch signed_module = Tier(keyed)->Fetch(kKey);
  ASSERT_EQ(signed_module.kind, RemoteFetch::Kind::kHit);
  EXPECT_EQ(signed_module.cubin, module);
}

TEST_F(RemoteTierTest, ALeaseThisOwnerAlreadyHoldsIsAcquired) {
  // What a SET NX repeated after a lost reply finds: the lease it took.
  RemoteTierOptions options;
  options.owner = "this-host:1:00";
  ASSERT_TRUE(redis_->Command({"SET", "jitd:v1:lease:" + kKey, "this-host:1:00", "PX", "10000"}).ok());
  auto tier = Tier(options);
  EXPECT_EQ(tier->AcquireLease(kKey), LeaseResult::kAcquired);
  tier->ReleaseLease(kKey);
  EXPECT_EQ(redis_->Command({"EXISTS", "jitd:v1:lease:" + kKey})->integer, 0);
}

TEST_F(RemoteTierTest, AValueLargerThanTheLimitIsRefusedUnreadAndNotReadAgain) {
  ASSERT_TRUE(redis_->Command({"SET", "jitd:v1:blob:" + kKey, std::string(4 << 20, 'x')}).ok());
  RemoteOptions small;
  small.max_reply_bytes = 64 << 10;
  auto tier = Tier({}, small);
  // A miss, not an outage: the store answered, the value is what is wrong.
  EXPECT_EQ(tier->Fetch(kKey).kind, RemoteFetch::Kind::kMiss);
  auto s = tier->stats();
  EXPECT_EQ(s.oversized, 1u);
  EXPECT_EQ(s.errors, 0u);
  EXPECT_FALSE(s.circuit_open);
  // Asked again (every request for the key, every poll of a lease wait):
  // answered without a round trip, so the 4 MiB are not read again.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(tier->Fetch(kKey).kind, RemoteFetch::Kind::kMiss);
  s = tier->stats();
  EXPECT_EQ(s.oversized, 1u);
  EXPECT_EQ(s.not_reread, 5u);
  // Other keys are read as before.
  tier->Store(Meta(kOther), "cubin bytes");
  EXPECT_EQ(tier->Fetch(kOther).kind, RemoteFetch::Kind::kHit);
}

TEST_F(RemoteTierTest, ARefusedKeyIsReadAgainOnceItsTimeIsUp) {
  ASSERT_TRUE(redis_->Command({"SET", "jitd:v1:blob:" + kKey, std::string(256 << 10, 'x')}).ok());
  RemoteOptions small;
  small.max_reply_bytes = 64 << 10;
  RemoteTierOptions options;
  options.refuse_for = 50ms;
  auto tier = Tier(options, small);
  EXPECT_EQ(tier->Fetch(kKey).kind, RemoteFetch::Kind::kMiss);
  tier->Store(Meta(kKey), "cubin bytes");  // this daemon's write-back replaces it
  EXPECT_EQ(tier->Fetch(kKey).kind, RemoteFetch::Kind::kMiss) << "still refused";
  EXPECT_TRUE(testing::PollUntil([&] { return tier->Fetch(kKey).kind == RemoteFetch::Kind::kHit; }, 5s));
}

}  // namespace
}  // namespace jitd::cache
