#include "commands/bundle_commands.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "commands/offline_commands.h"
#include "jitd/base/files.h"
#include "jitd/base/text.h"
#include "jitd/bundle.h"
#include "jitd/cache.h"
#include "security/signing_key.h"

namespace jitd::daemon {
namespace {

using text::Cat;

constexpr int kExitRefused = 1;
constexpr int kExitCannotRun = 2;

// Prints "jitd bundle VERB: MESSAGE" and gives `code` back.
int Fail(std::string_view verb, int code, std::string_view message) {
  std::fprintf(stderr, "jitd bundle %.*s: %.*s\n", static_cast<int>(verb.size()), verb.data(),
               static_cast<int>(message.size()), message.data());
  return code;
}
int Fail(std::string_view verb, int code, const absl::Status& status) {
  return Fail(verb, code, std::string(status.message()));
}

// The key of --signing-key-file, or empty without one; false after an
// error (printed).
bool SigningKey(const OfflineOptions& o, std::string_view verb, std::string* key) {
  if (o.signing_key_file.empty()) return true;
  absl::StatusOr<std::string> read = ReadSigningKeyFile(o.signing_key_file, "--signing-key-file");
  if (!read.ok()) {
    Fail(verb, kExitCannotRun, read.status());
    return false;
  }
  *key = *std::move(read);
  return true;
}

std::string Describe(const cache::Bundle& bundle) {
  return Cat(bundle.path().string(), ": ", bundle.size(), bundle.size() == 1 ? " entry, " : " entries, ",
             bundle.file_bytes(), " bytes, ", cache::BundleSealName(bundle.seal()), " (", bundle.seal_hex(), ")");
}

// Every entry of the cache directory `dir`, each read back verified, into
// the bundle `output`.
int BundleDirectory(const std::filesystem::path& dir, const std::filesystem::path& output, const std::string& key) {
  cache::CacheOptions options;
  options.dir = dir;
  absl::StatusOr<std::unique_ptr<cache::Cache>> opened = cache::Cache::Open(options);
  if (!opened.ok()) return Fail("create", kExitCannotRun, opened.status());
  absl::StatusOr<std::vector<cache::EntryInfo>> listed = (*opened)->List({});
  if (!listed.ok()) return Fail("create", kExitCannotRun, listed.status());
  std::vector<std::string> blobs;
  blobs.reserve(listed->size());
  for (const cache::EntryInfo& info : *listed) {
    // Read back verified (uncounted: bundling is not a use of the entry).
    absl::StatusOr<cache::Entry> entry = (*opened)->Lookup(info.key, cache::LookupCounting::kUncounted);
    if (!entry.ok()) {
      return Fail("create", kExitRefused,
                  Cat("entry ", info.key, " (", text::Instantiation(info.kernel, info.params, info.arch, info.options),
                      ") cannot be read: ", entry.status().message(),
                      "; nothing was written (`jitctl verify --repair` "
                      "or a fresh `jitd warm` mends the cache)"));
    }
    blobs.push_back(cache::EncodeBlob(entry->meta, entry->cubin));
  }
  if (absl::Status written = cache::WriteBundle(output, blobs, key); !written.ok()) {
    return Fail("create", kExitCannotRun, written);
  }
  absl::StatusOr<std::unique_ptr<cache::Bundle>> bundle = cache::Bundle::Open(output, key);
  if (!bundle.ok()) {
    return Fail("create", kExitRefused, Cat("the bundle just written does not verify: ", bundle.status().message()));
  }
  std::printf("wrote %s\n", Describe(**bundle).c_str());
  return 0;
}

// A directory of its own under $TMPDIR, removed with everything in it.
class ScratchDir {
 public:
  absl::Status Make() {
    std::string pattern = (std::filesystem::temp_directory_path() / "jitd-bundle-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) return files::ErrnoStatus(errno, "mkdtemp", pattern);
    path_ = pattern;
    return absl::OkStatus();
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace

int RunBundleCreate(const CommandLine& command_line) {
  const OfflineOptions& o = command_line.offline;
  std::string key;
  if (!SigningKey(o, "create", &key)) return kExitCannotRun;
  if (o.all || !o.manifest.empty()) {
    // Compiled into a directory of its own, so that the bundle holds
    // exactly the instantiations asked for, then bundled from there.
    ScratchDir scratch;
    if (absl::Status made = scratch.Make(); !made.ok()) return Fail("create", kExitCannotRun, made);
    CommandLine warm = command_line;
    warm.command = CommandLine::Command::kWarm;
    warm.offline.cache_dir = scratch.path();
    if (const int warmed = RunWarm(warm); warmed != 0) {
      return Fail("create", warmed, "not every instantiation was compiled (listed above); nothing was written");
    }
    return BundleDirectory(scratch.path(), o.output, key);
  }
  // An existing cache only: Open would make an empty one anywhere.
  if (!std::filesystem::is_directory(o.cache_dir) || !std::filesystem::exists(o.cache_dir / "index.sqlite")) {
    return Fail("create", kExitCannotRun,
                Cat(o.cache_dir.string(),
                    " is not a jitd cache directory (no index.sqlite): fill one with "
                    "`jitd warm --cache-dir DIR --all` first, or give --all or --manifest FILE to compile here"));
  }
  return BundleDirectory(o.cache_dir, o.output, key);
}

int RunBundleVerify(const CommandLine& command_line) {
  const OfflineOptions& o = command_line.offline;
  std::string key;
  if (!SigningKey(o, "verify", &key)) return kExitCannotRun;
  absl::StatusOr<std::unique_ptr<cache::Bundle>> bundle = cache::Bundle::Open(o.bundle_file, key);
  if (!bundle.ok()) {
    const bool absent = bundle.status().code() == absl::StatusCode::kNotFound;
    return Fail("verify", absent ? kExitCannotRun : kExitRefused, bundle.status());
  }
  std::printf("%s: every entry and the seal verify\n", Describe(**bundle).c_str());
  return 0;
}

}  // namespace jitd::daemon
