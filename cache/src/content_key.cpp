// Content keys, include closures and tree fingerprints.
#include <openssl/evp.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "jitd/cache.h"
#include "jitd/detail/text.h"

namespace jitd::cache {
namespace {

namespace fs = std::filesystem;
using text::Cat;

// Incremental SHA-256 over length-prefixed fields, so that ("ab","c") and
// ("a","bc") hash differently.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Field(std::string_view tag, std::string_view value) {
    Raw(tag);
    uint64_t n = value.size();
    EVP_DigestUpdate(ctx_, &n, sizeof n);
    Raw(value);
  }
  std::string Hex() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_DigestFinal_ex(ctx_, out, &len);
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string hex;
    for (unsigned i = 0; i < len; ++i) {
      hex.push_back(kDigits[out[i] >> 4]);
      hex.push_back(kDigits[out[i] & 15]);
    }
    return hex;
  }

 private:
  void Raw(std::string_view v) { EVP_DigestUpdate(ctx_, v.data(), v.size()); }
  EVP_MD_CTX* ctx_;
};

absl::StatusOr<std::string> ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return absl::NotFoundError(Cat("cannot read ", p.string()));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whether `p` (already normalised) lies inside `root` (normalised).
bool Inside(const fs::path& root, const fs::path& p) {
  auto rel = p.lexically_relative(root);
  return !rel.empty() && *rel.begin() != "..";
}

}  // namespace

bool IsKeyNeutralOption(std::string_view o) {
  for (std::string_view prefix : {"-I", "--include-path", "-pch", "--pch", "--create-pch", "--use-pch", "--pch-dir",
                                  "--pch-messages", "--pch-verbose", "--instantiate-templates-in-pch"}) {
    if (o.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

std::string ContentKey(const KeyInputs& in) {
  Sha256 h;
  h.Field("schema", std::to_string(kKeySchemaVersion));
  h.Field("nvrtc", in.nvrtc_version);
  h.Field("toolkit", in.toolkit_fingerprint);
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
  return h.Hex();
}

absl::StatusOr<std::vector<fs::path>> IncludeClosure(const fs::path& root_in, const fs::path& source) {
  // Matches the directive even when a comment or condition surrounds it.
  static const std::regex kInclude(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  std::error_code ec;
  fs::path root = fs::weakly_canonical(root_in, ec);
  if (ec) return absl::NotFoundError(Cat("kernels directory ", root_in.string(), ": ", ec.message()));
  fs::path first = (root / source).lexically_normal();
  if (!Inside(root, first) || !fs::is_regular_file(first)) {
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
        if (!Inside(root, c) || !fs::is_regular_file(c, ec)) continue;
        fs::path real = fs::weakly_canonical(c, ec);
        if (ec || !Inside(root, real)) break;  // a link out of the tree: the toolkit's business
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

absl::StatusOr<std::string> TreeFingerprint(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) files.push_back(it->path().lexically_relative(dir));
  }
  if (ec) return absl::NotFoundError(Cat("cannot walk ", dir.string(), ": ", ec.message()));
  std::sort(files.begin(), files.end());
  Sha256 h;
  for (const auto& f : files) {
    auto content = ReadFile(dir / f);
    if (!content.ok()) return content.status();
    h.Field("path", f.generic_string());
    h.Field("content", *content);
  }
  return h.Hex();
}

namespace {

constexpr char kMemoHeader[] = "jitd-tree-fingerprint 1";

int64_t Ns(const struct timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec; }

// SHA-256 over every regular file's relative path and metadata, sorted;
// `racy` when a file's mtime or ctime is within `racy_ns` of now.
absl::StatusOr<std::string> TreeStatDigest(const fs::path& dir, int64_t racy_ns, bool* racy) {
  std::error_code ec;
  std::vector<std::pair<std::string, std::string>> rows;
  struct timespec now_ts;
  clock_gettime(CLOCK_REALTIME, &now_ts);
  const int64_t now = Ns(now_ts);
  *racy = false;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (::stat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (now - Ns(st.st_mtim) < racy_ns || now - Ns(st.st_ctim) < racy_ns) *racy = true;
    rows.emplace_back(it->path().lexically_relative(dir).generic_string(),
                      Cat(st.st_dev, ":", st.st_ino, ":", st.st_size, ":", Ns(st.st_mtim), ":", Ns(st.st_ctim)));
  }
  if (ec) return absl::NotFoundError(Cat("cannot walk ", dir.string(), ": ", ec.message()));
  std::sort(rows.begin(), rows.end());
  Sha256 h;
  for (const auto& [path, meta] : rows) {
    h.Field("path", path);
    h.Field("stat", meta);
  }
  return h.Hex();
}

}  // namespace

absl::StatusOr<std::string> MemoizedTreeFingerprint(const fs::path& dir, const fs::path& memo_file,
                                                    std::chrono::nanoseconds racy_window) {
  bool racy = false;
  const int64_t racy_ns = racy_window.count();
  absl::StatusOr<std::string> stats = TreeStatDigest(dir, racy_ns, &racy);
  if (!stats.ok()) return stats.status();
  {
    std::ifstream in(memo_file);
    std::string header, digest, fingerprint;
    if (std::getline(in, header) && std::getline(in, digest) && std::getline(in, fingerprint) &&
        header == kMemoHeader && digest == *stats && fingerprint.size() == 64) {
      return fingerprint;
    }
  }
  absl::StatusOr<std::string> fingerprint = TreeFingerprint(dir);
  if (!fingerprint.ok() || racy) return fingerprint;
  // Re-stat: a file written while it was being hashed must not be
  // remembered under the digest taken before.
  absl::StatusOr<std::string> after = TreeStatDigest(dir, racy_ns, &racy);
  if (!after.ok() || *after != *stats || racy) return fingerprint;
  std::error_code ec;
  fs::create_directories(memo_file.parent_path(), ec);
  const fs::path tmp = Cat(memo_file.string(), ".tmp-", ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kMemoHeader << "\n" << *stats << "\n" << *fingerprint << "\n";
    if (!out) {
      fs::remove(tmp, ec);
      return fingerprint;
    }
  }
  fs::rename(tmp, memo_file, ec);
  if (ec) fs::remove(tmp, ec);
  return fingerprint;
}

}  // namespace jitd::cache
