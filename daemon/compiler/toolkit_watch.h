// The toolkit a compile runs with, besides its job: the CUDA headers NVRTC
// reads from disk (the -I paths) and the NVRTC libraries the workers load.
// Both can change under a running daemon (a package upgrade in place); a key
// names them, so a compile must never run with other ones than its key's.
//
//   ToolkitIdentity  what they are: content fingerprints, computed once
//                    (and remembered on disk against the files' metadata).
//   ToolkitWatch     notices when they change: Check() stats every header
//                    and library file (~2k files, ~10 ms) and compares
//                    with the metadata the identity was computed from,
//                    when inotify (or the mount table) says something may
//                    have changed since the last pass, or that pass is
//                    older than Options::full_pass_every; otherwise it
//                    costs a read of an empty inotify queue (microseconds).
//
// WorkerPool reads Last() right before it sends a job to a worker and calls
// Check() when the answer arrives (see WorkerPool::Options::toolkit): a job
// whose CompileJob::toolkit_fingerprint is not the current identity, or
// whose compile saw a change, is answered UNAVAILABLE ("toolkit changed")
// and its result is discarded, never stored under its key. The check after
// is what makes that sound: a change at any moment after the last pass
// (even before the job was sent) shows in a pass that starts after the
// compile ended, as a new epoch. So one stat pass per compile suffices.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace jitd::compiler {

// The default toolkit headers (the CMake CUDAToolkit the daemon was built
// against installs here).
inline constexpr char kDefaultCudaInclude[] = "/usr/local/cuda/include";

// Memo files, in the directory given as `memo_dir` (the cache directory).
inline constexpr char kToolkitHeadersMemo[] = "toolkit-fingerprint";
inline constexpr char kNvrtcLibrariesMemo[] = "nvrtc-fingerprint";

struct ToolkitIdentity {
  std::filesystem::path include_dir;  // the toolkit headers (-I), e.g. /usr/local/cuda/include
  std::string headers_fingerprint;    // keys::TreeFingerprint(include_dir)
  // libnvrtc and libnvrtc-builtins, as real files (links resolved).
  std::vector<std::filesystem::path> nvrtc_libraries;
  std::string nvrtc_library_fingerprint;  // keys::FilesFingerprint(nvrtc_libraries)
  // SHA-256 over both fingerprints: what CompileJob::toolkit_fingerprint
  // carries and WorkerPool compares.
  std::string fingerprint;

  // Reads every header and both libraries (~30 MB + ~110 MB; with
  // `memo_dir`, only stats them when they match the memo files there).
  // FAILED_PRECONDITION when `include_dir` holds no cuda_fp16.h, NOT_FOUND
  // when the NVRTC libraries cannot be found.
  static absl::StatusOr<ToolkitIdentity> Compute(const std::filesystem::path& include_dir,
                                                 const std::filesystem::path& memo_dir = {});
  // "headers <dir> 0123abcd4567, nvrtc libnvrtc.so.13+libnvrtc-builtins.so.13.0 89ab..."
  std::string Describe() const;
};

// The compiler library files this process uses, real paths: libnvrtc (the
// file nvrtcVersion lives in, by dladdr), libnvrtc-builtins (the one loaded,
// by dl_iterate_phdr; NVRTC loads it lazily, so until then the file of the
// name NVRTC asks for in libnvrtc's directory) and, where the toolkit has
// one, ptxas (it assembles some cubins: ptx_link.h). NOT_FOUND names what is
// missing.
absl::StatusOr<std::vector<std::filesystem::path>> NvrtcLibraryFiles();

class ToolkitWatch {
 public:
  struct Options {
    std::filesystem::path include_dir = kDefaultCudaInclude;
    // Where the fingerprints are remembered (the cache directory); empty: nowhere.
    std::filesystem::path memo_dir;
    // A change is fingerprinted only once every file has been still this
    // long: timestamps are coarse (a clock tick), and a second write within
    // the tick of the first could otherwise leave the metadata unchanged.
    std::chrono::nanoseconds settle = std::chrono::seconds(2);
    // inotify watches every header directory, the directories above the
    // include directory (a /usr/local/cuda link repointed), the library
    // files and their directories; /proc/self/mountinfo tells of mounts
    // (a bind mount over a header changes no file inotify sees). Without
    // an event, Check() skips the stat pass, but never for longer than
    // this (what neither can see: a network file system changed from
    // another host). Zero: a stat pass at every Check(), as without
    // inotify (the fallback when it cannot be set up).
    std::chrono::nanoseconds full_pass_every = std::chrono::seconds(30);
  };

  // Computes the identity (waiting for a toolkit that changed within
  // `settle` to settle). Errors: ToolkitIdentity::Compute's.
  static absl::StatusOr<std::shared_ptr<ToolkitWatch>> Start(Options options);

  struct Observation {
    // Bumped by every change Check() noticed: a compile whose bracket saw
    // two epochs saw a change, even if the toolkit changed back.
    std::uint64_t epoch = 0;
    std::string fingerprint;  // ToolkitIdentity::fingerprint now
  };

  // Stats the headers and libraries (skipped when nothing may have changed:
  // see Options::full_pass_every). Unchanged: the current observation.
  // Changed: logs one line "toolkit changed: ...", waits for the files to
  // settle, computes the new identity, bumps the epoch and calls every
  // listener, all before it returns (and before any other Check returns
  // the new epoch). Concurrent calls share one stat pass when it started
  // after they were called. Thread-safe. Errors (the include directory or
  // a library gone) are returned and logged; the epoch is bumped then too,
  // so nothing compiled across the error is kept.
  absl::StatusOr<Observation> Check();

  // What the last Check() (or Start) saw, without looking again. Cheap.
  absl::StatusOr<Observation> Last() const;

  // The identity now (after the last change Check() noticed).
  ToolkitIdentity identity() const;
  std::uint64_t epoch() const;
  // Stat passes run so far (at Start and by Check), for tests and benches.
  std::uint64_t stat_passes() const;
  // Whether inotify watches the toolkit (else every Check() is a pass).
  bool notified() const;

  // Called as fn(now, before) inside Check() after a change, in the order
  // added, under the watch's lock: it must not call Check(). Returns an id
  // for RemoveListener, after which the listener is not running and will
  // not run.
  using Listener = std::function<void(const ToolkitIdentity& now, const ToolkitIdentity& before)>;
  std::uint64_t AddListener(Listener listener);
  void RemoveListener(std::uint64_t id);

 private:
  explicit ToolkitWatch(Options options);
  // The metadata digest of the headers and libraries (requires mu_).
  absl::StatusOr<std::string> Metadata(bool* recent) const;
  // Waits until the toolkit is still, then computes identity and metadata
  // (requires mu_).
  absl::Status Fingerprint();

  // inotify and the mount table: what makes a stat pass needed.
  class Notifier;
  // Whether a stat pass may find a change now (requires mu_).
  bool PassNeeded();

  const Options options_;
  mutable std::mutex mu_;
  std::shared_ptr<Notifier> notifier_;  // null: a stat pass every Check()
  std::chrono::steady_clock::time_point last_full_pass_{};
  std::uint64_t stat_passes_ = 0;
  ToolkitIdentity identity_;
  std::string metadata_;  // of the files identity_ was computed from
  std::uint64_t epoch_ = 0;
  std::chrono::steady_clock::time_point last_check_started_{};
  absl::StatusOr<Observation> last_{Observation{}};
  std::uint64_t next_listener_ = 1;
  std::vector<std::pair<std::uint64_t, Listener>> listeners_;
};

}  // namespace jitd::compiler
