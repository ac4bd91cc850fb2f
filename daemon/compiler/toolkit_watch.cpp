#include "toolkit_watch.h"

#include <dlfcn.h>
#include <link.h>
#include <nvrtc.h>
#include <openssl/evp.h>

#include <string_view>
#include <thread>
#include <utility>

#include "jitd/cache.h"
#include "spdlog/spdlog.h"

namespace jitd::compiler {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string Sha256Hex(std::string_view text) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned size = 0;
  EVP_Digest(text.data(), text.size(), out, &size, EVP_sha256(), nullptr);
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned i = 0; i < size; ++i) {
    hex.push_back(kDigits[out[i] >> 4]);
    hex.push_back(kDigits[out[i] & 15]);
  }
  return hex;
}

int FindLoadedBuiltins(struct dl_phdr_info* info, size_t /*size*/, void* data) {
  const std::string_view name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  if (fs::path(name).filename().string().starts_with("libnvrtc-builtins")) {
    *static_cast<std::string*>(data) = std::string(name);
    return 1;
  }
  return 0;
}

}  // namespace

absl::StatusOr<std::vector<fs::path>> NvrtcLibraryFiles() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) == 0 || info.dli_fname == nullptr) {
    return absl::NotFoundError("cannot tell which file libnvrtc was loaded from (dladdr of nvrtcVersion failed)");
  }
  const fs::path nvrtc = info.dli_fname;
  std::string loaded_builtins;
  dl_iterate_phdr(&FindLoadedBuiltins, &loaded_builtins);
  fs::path builtins = loaded_builtins;
  if (builtins.empty()) {
    // Not loaded yet: the name libnvrtc asks for, beside it
    // (libnvrtc.so.13 -> libnvrtc-builtins.so.13.0, and the .alt variant).
    int major = 0, minor = 0;
    if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return absl::InternalError("nvrtcVersion failed");
    const bool alt = nvrtc.filename().string().find(".alt.") != std::string::npos;
    builtins = nvrtc.parent_path() / ("libnvrtc-builtins" + std::string(alt ? ".alt" : "") + ".so." +
                                      std::to_string(major) + "." + std::to_string(minor));
  }
  std::error_code ec;
  for (const fs::path& p : {nvrtc, builtins}) {
    if (!fs::is_regular_file(p, ec)) {
      return absl::NotFoundError("NVRTC library " + p.string() + " not found (the compile workers load it)");
    }
  }
  return std::vector<fs::path>{nvrtc, builtins};
}

absl::StatusOr<ToolkitIdentity> ToolkitIdentity::Compute(const fs::path& include_dir, const fs::path& memo_dir) {
  ToolkitIdentity id;
  id.include_dir = include_dir;
  std::error_code ec;
  if (!fs::is_regular_file(include_dir / "cuda_fp16.h", ec)) {
    return absl::FailedPreconditionError("CUDA toolkit headers not found under " + include_dir.string() +
                                         " (NVRTC needs cuda_fp16.h and cccl/; --cuda-include chooses the directory)");
  }
  absl::StatusOr<std::string> headers =
      memo_dir.empty() ? cache::TreeFingerprint(include_dir)
                       : cache::MemoizedTreeFingerprint(include_dir, memo_dir / kToolkitHeadersMemo);
  if (!headers.ok()) return headers.status();
  id.headers_fingerprint = *headers;
  absl::StatusOr<std::vector<fs::path>> libraries = NvrtcLibraryFiles();
  if (!libraries.ok()) return libraries.status();
  absl::StatusOr<std::string> nvrtc = memo_dir.empty()
                                          ? cache::FilesFingerprint(*libraries)
                                          : cache::MemoizedFilesFingerprint(*libraries, memo_dir / kNvrtcLibrariesMemo);
  if (!nvrtc.ok()) return nvrtc.status();
  id.nvrtc_library_fingerprint = *nvrtc;
  for (const fs::path& p : *libraries) id.nvrtc_libraries.push_back(fs::weakly_canonical(p, ec));
  id.fingerprint =
      Sha256Hex("jitd-toolkit 1\nheaders " + id.headers_fingerprint + "\nnvrtc " + id.nvrtc_library_fingerprint + "\n");
  return id;
}

std::string ToolkitIdentity::Describe() const {
  std::string libraries;
  for (const fs::path& p : nvrtc_libraries) {
    if (!libraries.empty()) libraries += '+';
    libraries += p.filename().string();
  }
  return "headers " + include_dir.string() + " " + headers_fingerprint.substr(0, 12) + ", nvrtc " + libraries + " " +
         nvrtc_library_fingerprint.substr(0, 12);
}

absl::StatusOr<std::shared_ptr<ToolkitWatch>> ToolkitWatch::Start(Options options) {
  std::shared_ptr<ToolkitWatch> watch(new ToolkitWatch(std::move(options)));
  std::lock_guard lock(watch->mu_);
  if (absl::Status s = watch->Fingerprint(); !s.ok()) return s;
  watch->last_ = Observation{watch->epoch_, watch->identity_.fingerprint};
  return watch;
}

absl::StatusOr<std::string> ToolkitWatch::Metadata(bool* recent) const {
  bool headers_recent = false, libraries_recent = false;
  absl::StatusOr<std::string> headers =
      cache::TreeMetadataDigest(options_.include_dir, options_.settle, &headers_recent);
  if (!headers.ok()) return headers.status();
  absl::StatusOr<std::vector<fs::path>> libraries = NvrtcLibraryFiles();
  if (!libraries.ok()) return libraries.status();
  absl::StatusOr<std::string> nvrtc = cache::FilesMetadataDigest(*libraries, options_.settle, &libraries_recent);
  if (!nvrtc.ok()) return nvrtc.status();
  if (recent != nullptr) *recent = headers_recent || libraries_recent;
  return *headers + ":" + *nvrtc;
}

absl::Status ToolkitWatch::Fingerprint() {
  // Bounded: a toolkit being rewritten for minutes is fingerprinted as it
  // is then, and the next change is noticed by the next Check.
  for (int attempt = 0; attempt < 30; ++attempt) {
    bool recent = false;
    absl::StatusOr<std::string> before = Metadata(&recent);
    if (!before.ok()) return before.status();
    if (recent) {
      std::this_thread::sleep_for(std::chrono::duration_cast<std::chrono::milliseconds>(options_.settle) / 4 +
                                  std::chrono::milliseconds(1));
      continue;
    }
    absl::StatusOr<ToolkitIdentity> id = ToolkitIdentity::Compute(options_.include_dir, options_.memo_dir);
    if (!id.ok()) return id.status();
    absl::StatusOr<std::string> after = Metadata(nullptr);
    if (!after.ok()) return after.status();
    if (*after != *before) continue;  // changed while it was read
    identity_ = *std::move(id);
    metadata_ = *before;
    return absl::OkStatus();
  }
  return absl::UnavailableError("the CUDA toolkit under " + options_.include_dir.string() +
                                " kept changing while it was fingerprinted");
}

absl::StatusOr<ToolkitWatch::Observation> ToolkitWatch::Check() {
  const Clock::time_point called = Clock::now();
  std::lock_guard lock(mu_);
  // A pass that started after this call began saw everything this call
  // must see.
  if (last_check_started_ >= called) return last_;
  last_check_started_ = Clock::now();
  absl::StatusOr<std::string> now = Metadata(nullptr);
  if (now.ok() && *now == metadata_) {
    last_ = Observation{epoch_, identity_.fingerprint};
    return last_;
  }
  const ToolkitIdentity before = identity_;
  ++epoch_;
  absl::Status fingerprinted = now.ok() ? Fingerprint() : now.status();
  if (!fingerprinted.ok()) {
    metadata_.clear();  // the next Check tries again
    spdlog::error("toolkit changed: {} is no longer usable: {}; compiles fail until it is", before.Describe(),
                  std::string(fingerprinted.message()));
    last_ = absl::UnavailableError("the CUDA toolkit changed and cannot be fingerprinted: " +
                                   std::string(fingerprinted.message()));
    return last_;
  }
  if (identity_.fingerprint == before.fingerprint) {
    // Touched, same content (a reinstall of the same package): the keys
    // stay; compiles that ran across it are still discarded (new epoch).
    spdlog::info("toolkit changed: files touched, same content ({}); keys unchanged", identity_.Describe());
  } else {
    spdlog::warn("toolkit changed: {} -> {}; restarting the compile workers, new keys from now on", before.Describe(),
                 identity_.Describe());
  }
  for (const auto& [id, listener] : listeners_) listener(identity_, before);
  last_ = Observation{epoch_, identity_.fingerprint};
  return last_;
}

absl::StatusOr<ToolkitWatch::Observation> ToolkitWatch::Last() const {
  std::lock_guard lock(mu_);
  return last_;
}

ToolkitIdentity ToolkitWatch::identity() const {
  std::lock_guard lock(mu_);
  return identity_;
}

std::uint64_t ToolkitWatch::epoch() const {
  std::lock_guard lock(mu_);
  return epoch_;
}

std::uint64_t ToolkitWatch::AddListener(Listener listener) {
  std::lock_guard lock(mu_);
  const std::uint64_t id = next_listener_++;
  listeners_.emplace_back(id, std::move(listener));
  return id;
}

void ToolkitWatch::RemoveListener(std::uint64_t id) {
  std::lock_guard lock(mu_);
  std::erase_if(listeners_, [id](const auto& entry) { return entry.first == id; });
}

}  // namespace jitd::compiler
