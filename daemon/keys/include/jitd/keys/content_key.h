// Content keys: the identity of a cubin, and the fingerprints of the
// compile inputs that go into one (the toolkit headers, the compiler
// library files, a kernel program's include closure). The resolver
// (daemon/manifest) builds KeyInputs from exactly what it hands NVRTC; the
// toolkit watch (daemon/compiler) fingerprints the toolchain; the cache only
// stores what a key names and knows nothing of how one is made.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jitd::keys {

// A key changes exactly when the bytes NVRTC would produce could change,
// and never because of a path or an mtime.

// Bumped when what goes into a key changes, so old entries stop matching.
// 2: the NVRTC library identity joined the key, and sources are the names
// NVRTC is given (every spelling an #include uses), not file paths.
// 3: a compile whose PTX holds unused module-scope globals is assembled from
// that PTX without them by the toolkit's ptxas (daemon/compiler/ptx_link.h),
// and ptxas joined the compiler files.
inline constexpr int kKeySchemaVersion = 3;

struct KeyInputs {
  // Empty: a key is what was compiled, and the name a tree is served under
  // compiles nothing (so an entry warmed with the unnamed tree answers the
  // same tree served as `--kernels NAME=DIR`). Set only to compute the key
  // an instantiation had while jitd 0.2 put the tree's name in keys
  // (ResolvedKernel::named_key): old locks and caches.
  std::string tree;
  std::string nvrtc_version;        // "13.0"
  std::string toolkit_fingerprint;  // TreeFingerprint() of the toolkit headers
  // FilesFingerprint() of the compiler library files the compiles run
  // (libnvrtc, libnvrtc-builtins, ptxas): a patch release keeps
  // "13.0" but not this.
  std::string nvrtc_library_fingerprint;
  std::string arch;  // "sm_90a"
  // NVRTC options in the order they are passed. Include paths (-I: the
  // toolkit's, which toolkit_fingerprint covers), precompiled-header
  // options (the cubin is byte-identical with and without them) and
  // --no-source-include (every compile has it; it only stops NVRTC reading
  // files no key covers, so keys from before it stay valid) are left out
  // of the key.
  std::vector<std::string> options;
  std::vector<std::string> name_expressions;  // in order
  // Exactly what NVRTC is given from memory: the program (its name, its
  // source) and every project header under every name it is given by
  // (IncludeNames), as (name, content). Order does not matter. Names are
  // part of the program (they are what its #include lines say); where the
  // tree sits is not.
  std::vector<std::pair<std::string, std::string>> sources;
  // A module (a tvm-ffi shared object built by nvcc): the module
  // toolchain's fingerprint (nvcc, host compiler, tvm-ffi, the toolkit's
  // and the system headers: toolkit_fingerprint and
  // nvrtc_library_fingerprint are then empty) and the link options. `options` then holds nvcc's compile
  // options, `name_expressions` the export names, `sources` the generated
  // unit and every staged tree file. Empty for a cubin.
  std::string module_toolchain;
  std::vector<std::string> module_options;
};

// 64 hex digits: SHA-256 over every field above, each length-prefixed.
std::string ContentKey(const KeyInputs& inputs);

// Whether an option is left out of keys (see KeyInputs::options).
bool IsKeyNeutralOption(std::string_view option);

// The files under `root` that `source` (relative to root) can include,
// transitively, itself first and then the rest sorted: every `#include "x"`
// (looked up beside the including file, then in root) and `#include <x>`
// (looked up in root) that names a file inside root, whatever preprocessor
// conditions guard it, so the set can only be too large, never too small.
// Includes that resolve outside root (the toolkit's) are not followed.
absl::StatusOr<std::vector<std::filesystem::path>> IncludeClosure(const std::filesystem::path& root,
                                                                  const std::filesystem::path& source);

// One project header of a program, as NVRTC is to be given it: `name` is
// what an #include line spells, `path` the file it resolves to (relative
// to the tree's root).
struct IncludeName {
  std::string name;
  std::string path;
  bool operator==(const IncludeName&) const = default;
};

// One `#include` directive of a file of a tree.
struct IncludeDirective {
  std::string spelled;  // what the directive names: "common/dtype.cuh"
  int line = 0;         // 1-based
  // The tree files it may mean, relative to the root (generic form), in
  // the order they are tried: for `#include "x"` x beside the including
  // file, then x from the root; for `#include <x>` x from the root. A path
  // that leaves the root is not among them (NVRTC's -I paths, the
  // toolkit's, answer it).
  std::vector<std::string> candidates;
};

// Every include directive of `content`, the text of `file` (a path relative
// to the root, generic form), whatever preprocessor conditions guard it:
// the rule IncludeNames follows and the kernel tree reader reads by (it
// reads the first candidate the tree has, which is the one IncludeNames
// then finds).
std::vector<IncludeDirective> IncludeDirectives(const std::string& file, std::string_view content);

// IncludeClosure's rules over a tree held in memory (`files`: path relative
// to the root, generic form -> content), answering what NVRTC needs, which
// matches an #include's text against the names it was given and nothing
// else: every (spelling, file) pair of the closure of `source`, sorted by
// name. The same file may appear under several names ("common/dtype.cuh",
// and "dtype.cuh" from a file beside it). Errors: NOT_FOUND when `source`
// is not in `files`; INVALID_ARGUMENT when one spelling means two files
// (an `#include "util.cuh"` beside a/util.cuh and another beside b/util.cuh):
// NVRTC would get one file for both, so the message names both includes
// and asks for a path from the root.
absl::StatusOr<std::vector<IncludeName>> IncludeNames(const std::map<std::string, std::string>& files,
                                                      const std::string& source);

// SHA-256 (hex) over the relative path and content of every regular file
// under `dir`, in sorted order, following symbolic links.
absl::StatusOr<std::string> TreeFingerprint(const std::filesystem::path& dir);

// TreeFingerprint's digest of files held in memory (`files`: path relative
// to the root, generic form -> content): what TreeFingerprint answers for
// a directory holding exactly these files. A kernel tree's fingerprint
// (KernelTree::fingerprint) is this over every file it read, so the two
// name a tree the same way.
std::string TreeFingerprint(const std::map<std::string, std::string>& files);

// TreeFingerprint(dir), remembered in `memo_file` beside a digest of every
// file's metadata (relative path, device, inode, size, mtime and ctime in
// nanoseconds). While that digest is unchanged the contents are not read
// again: a start then stats the files (~2k toolkit headers: milliseconds)
// instead of hashing ~30 MB. Any write to a file moves its ctime, which no
// program can set back, and a replaced file has a new inode, so a changed
// tree always misses the memo. A memo is only written when every file's
// times are more than `racy_window` old (a file written within the
// timestamps' granularity of the memo could otherwise match it). A missing,
// unreadable or stale memo means the full fingerprint; a memo that cannot
// be written is skipped silently (the next start computes it again).
absl::StatusOr<std::string> MemoizedTreeFingerprint(const std::filesystem::path& dir,
                                                    const std::filesystem::path& memo_file,
                                                    std::chrono::nanoseconds racy_window = std::chrono::seconds(2));

// SHA-256 (hex) over the file name (not the directory) and content of each
// of `files` (symbolic links followed), in the order given.
absl::StatusOr<std::string> FilesFingerprint(const std::vector<std::filesystem::path>& files);

// FilesFingerprint(files), remembered in `memo_file` exactly as
// MemoizedTreeFingerprint remembers a tree's (by each file's metadata).
absl::StatusOr<std::string> MemoizedFilesFingerprint(const std::vector<std::filesystem::path>& files,
                                                     const std::filesystem::path& memo_file,
                                                     std::chrono::nanoseconds racy_window = std::chrono::seconds(2));

// The metadata digest MemoizedTreeFingerprint compares (relative path,
// device, inode, size, mtime, ctime of every regular file under `dir`):
// equal digests mean unchanged contents, at the cost of one stat per file.
// `*recent` (may be null) is set when some file's mtime or ctime is within
// `racy_window` of now: a write in the same timestamp tick could then
// leave the digest unchanged, so a caller that must see every change waits
// until the tree has been still that long before trusting the digest.
absl::StatusOr<std::string> TreeMetadataDigest(const std::filesystem::path& dir, std::chrono::nanoseconds racy_window,
                                               bool* recent);
// The same for a list of files (their names and metadata, links followed).
absl::StatusOr<std::string> FilesMetadataDigest(const std::vector<std::filesystem::path>& files,
                                                std::chrono::nanoseconds racy_window, bool* recent);

}  // namespace jitd::keys
