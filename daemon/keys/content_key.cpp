// Content keys, include closures and tree fingerprints.
#include "jitd/keys/content_key.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>

#include "jitd/base/files.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/keys/field_digest.h"

namespace jitd::keys {
namespace {

namespace fs = std::filesystem;
using text::Cat;

}  // namespace

bool IsKeyNeutralOption(std::string_view o) {
  if (o == "--no-source-include" || o == "-no-source-include") return true;
  for (std::string_view prefix : {"-I", "--include-path", "-pch", "--pch", "--create-pch", "--use-pch", "--pch-dir",
                                  "--pch-messages", "--pch-verbose", "--instantiate-templates-in-pch"}) {
    if (o.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

std::string ContentKey(const KeyInputs& in) {
  FieldDigest h;
  h.Field("schema", std::to_string(kKeySchemaVersion));
  if (!in.tree.empty()) h.Field("tree", in.tree);
  h.Field("nvrtc", in.nvrtc_version);
  h.Field("toolkit", in.toolkit_fingerprint);
  h.Field("nvrtc-library", in.nvrtc_library_fingerprint);
  h.Field("arch", in.arch);
  for (const auto& o : in.options) {
    if (!IsKeyNeutralOption(o)) h.Field("option", o);
  }
  for (const auto& e : in.name_expressions) h.Field("expr", e);
  std::vector<const std::pair<std::string, std::string>*> sources;
  for (const auto& s : in.sources) sources.push_back(&s);
  std::sort(sources.begin(), sources.end(), [](auto* a, auto* b) { return *a < *b; });
  for (const auto* s : sources) {
    h.Field("source-name", s->first);
    h.Field("source", s->second);
  }
  // Only module keys have these, so every cubin key stays what it was.
  if (!in.module_toolchain.empty()) h.Field("module-toolchain", in.module_toolchain);
  for (const auto& o : in.module_options) h.Field("module-option", o);
  return h.Hex();
}

absl::StatusOr<std::vector<fs::path>> IncludeClosure(const fs::path& root_in, const fs::path& source) {
  // Matches the directive even when a comment or condition surrounds it.
  static const std::regex kInclude(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  std::error_code ec;
  fs::path root = fs::weakly_canonical(root_in, ec);
  if (ec) return absl::NotFoundError(Cat("kernels directory ", root_in.string(), ": ", ec.message()));
  fs::path first = (root / source).lexically_normal();
  if (!files::PathInside(root, first) || !fs::is_regular_file(first, ec)) {
    return absl::NotFoundError(Cat("kernel source ", source.string(), " not found in ", root.string()));
  }
  std::set<fs::path> seen{first};
  std::vector<fs::path> stack{first};
  while (!stack.empty()) {
    fs::path file = stack.back();
    stack.pop_back();
    std::ifstream in(file);
    if (!in) return absl::NotFoundError(Cat("cannot read ", file.string()));
    std::string line;
    while (std::getline(in, line)) {
      std::smatch m;
      if (!std::regex_search(line, m, kInclude)) continue;
      fs::path name = m[2].str();
      std::vector<fs::path> candidates;
      if (m[1] == "\"") candidates.push_back((file.parent_path() / name).lexically_normal());
      candidates.push_back((root / name).lexically_normal());
      for (const auto& c : candidates) {
        if (!files::PathInside(root, c) || !fs::is_regular_file(c, ec)) continue;
        fs::path real = fs::weakly_canonical(c, ec);
        if (ec || !files::PathInside(root, real)) break;  // a link out of the tree: the toolkit's business
        if (seen.insert(real).second) stack.push_back(real);
        break;
      }
    }
  }
  std::vector<fs::path> out;
  out.push_back(first.lexically_relative(root));
  for (const auto& p : seen) {
    if (p != first) out.push_back(p.lexically_relative(root));
  }
  std::sort(out.begin() + 1, out.end());
  return out;
}

namespace {

// The directive IncludeClosure and IncludeDirectives look for, even when a
// comment or condition surrounds it.
const std::regex& IncludeDirectiveRegex() {
  static const std::regex kInclude(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  return kInclude;
}

// std::regex matches by recursion, one frame per character matched: a
// directive spelling a megabyte-long name would overflow the stack. No
// path a tree can hold is longer than PATH_MAX, so a line is matched on
// its first kMaxDirectiveChars only (a longer name then never matches, as
// it could never name a file of the tree).
constexpr size_t kMaxDirectiveChars = 4096 + 64;

// Lexically normal, generic form; empty when it leaves the root.
std::string InsideRoot(const fs::path& relative) {
  const fs::path normal = relative.lexically_normal();
  if (normal.empty() || normal.is_absolute() || *normal.begin() == "..") return {};
  return normal.generic_string();
}

}  // namespace

std::vector<IncludeDirective> IncludeDirectives(const std::string& file, std::string_view content) {
  std::vector<IncludeDirective> out;
  int line_number = 0;
  for (size_t start = 0; start < content.size();) {
    size_t end = content.find('\n', start);
    if (end == std::string_view::npos) end = content.size();
    const std::string_view line = content.substr(start, end - start);
    start = end + 1;
    ++line_number;
    // Only a line whose first non-blank character is '#' can be one.
    const size_t first = line.find_first_not_of(" \t\r\f\v");
    if (first == std::string_view::npos || line[first] != '#') continue;
    const std::string text(line.substr(0, kMaxDirectiveChars));
    std::smatch m;
    if (!std::regex_search(text, m, IncludeDirectiveRegex())) continue;
    IncludeDirective d;
    d.spelled = m[2].str();
    d.line = line_number;
    if (m[1] == "\"") d.candidates.push_back(InsideRoot(fs::path(file).parent_path() / d.spelled));
    d.candidates.push_back(InsideRoot(d.spelled));
    d.candidates.erase(std::remove(d.candidates.begin(), d.candidates.end(), std::string()), d.candidates.end());
    out.push_back(std::move(d));
  }
  return out;
}

absl::StatusOr<std::vector<IncludeName>> IncludeNames(const std::map<std::string, std::string>& files,
                                                      const std::string& source) {
  if (!files.count(source)) return absl::NotFoundError(Cat("kernel source ", source, " is not in the kernels tree"));
  // spelling -> (file it means, where it was first seen as "path:line").
  std::map<std::string, std::pair<std::string, std::string>> names;
  std::set<std::string> seen{source};
  std::vector<std::string> stack{source};
  while (!stack.empty()) {
    const std::string file = stack.back();
    stack.pop_back();
    for (const IncludeDirective& d : IncludeDirectives(file, files.at(file))) {
      std::string target;
      for (const std::string& c : d.candidates) {
        if (files.count(c)) {
          target = c;
          break;
        }
      }
      if (target.empty()) continue;  // the toolkit's (or nobody's): NVRTC's -I paths find it
      const std::string where = Cat(file, ":", d.line);
      auto [it, inserted] = names.emplace(d.spelled, std::make_pair(target, where));
      if (!inserted && it->second.first != target) {
        return absl::InvalidArgumentError(Cat(
            where, ": #include \"", d.spelled, "\" means ", target, " here but ", it->second.first, " at ",
            it->second.second, "; NVRTC is given each header once per name, so one name cannot mean two files: ",
            "include them by their paths from the kernels directory (\"", target, "\", \"", it->second.first, "\")"));
      }
      if (seen.insert(target).second) stack.push_back(target);
    }
  }
  std::vector<IncludeName> out;
  out.reserve(names.size());
  for (const auto& [name, target] : names) {
    if (target.first == source && name == source) continue;  // the program itself
    out.push_back(IncludeName{name, target.first});
  }
  return out;
}

namespace {

constexpr char kMemoHeader[] = "jitd-tree-fingerprint 1";

int64_t Ns(const struct timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec; }

// (name hashed, path to stat) of every regular file under `dir`, sorted.
absl::StatusOr<std::vector<std::pair<std::string, fs::path>>> TreeFiles(const fs::path& dir) {
  std::error_code ec;
  std::vector<std::pair<std::string, fs::path>> files;
  // Every entry's path is `dir` / its relative path: cutting the prefix
  // costs a substring, where lexically_relative costs a path decomposition
  // per file (a watcher walks ~2k toolkit headers once per compile).
  const std::string prefix = dir.string();
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string& full = it->path().native();
    std::string relative = full.size() > prefix.size() && full.compare(0, prefix.size(), prefix) == 0
                               ? full.substr(prefix.size() + (prefix.back() == '/' ? 0 : 1))
                               : it->path().lexically_relative(dir).generic_string();
    files.emplace_back(std::move(relative), it->path());
  }
  if (ec) return absl::NotFoundError(Cat("cannot walk ", dir.string(), ": ", ec.message()));
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::pair<std::string, fs::path>> ListedFiles(const std::vector<fs::path>& paths) {
  std::vector<std::pair<std::string, fs::path>> files;
  for (const fs::path& p : paths) files.emplace_back(p.filename().string(), p);
  return files;
}

// SHA-256 over every regular file's name and metadata, in the order given;
// `recent` when a file's mtime or ctime is within `racy_ns` of now.
// `missing_is_error`: a listed file that cannot be stat'ed is NOT_FOUND
// (a tree walk skips what vanished under it instead).
absl::StatusOr<std::string> MetadataDigest(const std::vector<std::pair<std::string, fs::path>>& files, int64_t racy_ns,
                                           bool* recent, bool missing_is_error) {
  struct timespec now_ts;
  clock_gettime(CLOCK_REALTIME, &now_ts);
  const int64_t now = Ns(now_ts);
  bool any_recent = false;
  FieldDigest h;
  for (const auto& [name, path] : files) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      if (missing_is_error) return absl::NotFoundError(Cat("cannot stat ", path.string()));
      continue;
    }
    if (now - Ns(st.st_mtim) < racy_ns || now - Ns(st.st_ctim) < racy_ns) any_recent = true;
    h.Field("path", name);
    h.Field("stat", Cat(st.st_dev, ":", st.st_ino, ":", st.st_size, ":", Ns(st.st_mtim), ":", Ns(st.st_ctim)));
  }
  if (recent != nullptr) *recent = any_recent;
  return h.Hex();
}

// One file of a fingerprint: the one rule TreeFingerprint, FilesFingerprint
// and a tree held in memory share.
void AddFile(FieldDigest& h, std::string_view name, std::string_view content) {
  h.Field("path", name);
  h.Field("content", content);
}

absl::StatusOr<std::string> ContentDigest(const std::vector<std::pair<std::string, fs::path>>& files,
                                          bool skip_non_regular) {
  FieldDigest h;
  for (const auto& [name, path] : files) {
    std::error_code ec;
    if (skip_non_regular && !fs::is_regular_file(path, ec)) continue;
    JITD_ASSIGN_OR_RETURN(auto content, files::ReadWholeFile(path));
    AddFile(h, name, content);
  }
  return h.Hex();
}

// The memo protocol of MemoizedTreeFingerprint, over any file list;
// `list` is called again for the re-stat (a tree may have changed).
absl::StatusOr<std::string> Memoized(
    const std::function<absl::StatusOr<std::vector<std::pair<std::string, fs::path>>>()>& list, bool tree,
    const fs::path& memo_file, std::chrono::nanoseconds racy_window) {
  bool racy = false;
  const int64_t racy_ns = racy_window.count();
  JITD_ASSIGN_OR_RETURN(auto files, list());
  JITD_ASSIGN_OR_RETURN(std::string stats, MetadataDigest(files, racy_ns, &racy, !tree));
  {
    std::ifstream in(memo_file);
    std::string header, digest, fingerprint;
    if (std::getline(in, header) && std::getline(in, digest) && std::getline(in, fingerprint) &&
        header == kMemoHeader && digest == stats && fingerprint.size() == 64) {
      return fingerprint;
    }
  }
  absl::StatusOr<std::string> fingerprint = ContentDigest(files, tree);
  if (!fingerprint.ok() || racy) return fingerprint;
  // Re-stat: a file written while it was being hashed must not be
  // remembered under the digest taken before.
  auto again = list();
  if (!again.ok()) return fingerprint;
  absl::StatusOr<std::string> after = MetadataDigest(*again, racy_ns, &racy, !tree);
  if (!after.ok() || *after != stats || racy) return fingerprint;
  if (!files::MakePrivateDirs(memo_file.parent_path()).ok()) return fingerprint;
  // A memo is a hint: one lost to a crash is recomputed, so no fsync; a
  // failed write leaves the old one (or none).
  files::AtomicWrite how;
  how.sync = false;
  (void)files::WriteFileAtomically(memo_file, Cat(kMemoHeader, "\n", stats, "\n", *fingerprint, "\n"), how);
  return fingerprint;
}

}  // namespace

absl::StatusOr<std::string> TreeFingerprint(const fs::path& dir) {
  JITD_ASSIGN_OR_RETURN(auto files, TreeFiles(dir));
  return ContentDigest(files, /*skip_non_regular=*/true);
}

std::string TreeFingerprint(const std::map<std::string, std::string>& files) {
  FieldDigest h;
  for (const auto& [name, content] : files) AddFile(h, name, content);
  return h.Hex();
}

absl::StatusOr<std::string> MemoizedTreeFingerprint(const fs::path& dir, const fs::path& memo_file,
                                                    std::chrono::nanoseconds racy_window) {
  return Memoized([&dir] { return TreeFiles(dir); }, /*tree=*/true, memo_file, racy_window);
}

absl::StatusOr<std::string> FilesFingerprint(const std::vector<fs::path>& files) {
  return ContentDigest(ListedFiles(files), /*skip_non_regular=*/false);
}

absl::StatusOr<std::string> MemoizedFilesFingerprint(const std::vector<fs::path>& files, const fs::path& memo_file,
                                                     std::chrono::nanoseconds racy_window) {
  return Memoized(
      [&files]() -> absl::StatusOr<std::vector<std::pair<std::string, fs::path>>> { return ListedFiles(files); },
      /*tree=*/false, memo_file, racy_window);
}

absl::StatusOr<std::string> TreeMetadataDigest(const fs::path& dir, std::chrono::nanoseconds racy_window,
                                               bool* recent) {
  JITD_ASSIGN_OR_RETURN(auto files, TreeFiles(dir));
  return MetadataDigest(files, racy_window.count(), recent, /*missing_is_error=*/false);
}

absl::StatusOr<std::string> FilesMetadataDigest(const std::vector<fs::path>& files,
                                                std::chrono::nanoseconds racy_window, bool* recent) {
  return MetadataDigest(ListedFiles(files), racy_window.count(), recent, /*missing_is_error=*/true);
}

}  // namespace jitd::keys
