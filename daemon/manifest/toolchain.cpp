// What NVRTC and the CUDA toolkit contribute: version, architectures, header
// fingerprint; and the arch names requests may use.
#include <nvrtc.h>

#include <algorithm>
#include <charconv>

#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/keys/content_key.h"
#include "manifest/manifest.h"

namespace jitd::manifest {
namespace {

using text::Cat;
using text::Join;

// Architecture-specific ("a", sm_90 and later) and family-specific ("f",
// sm_100 and later) variants, as NVRTC 13 accepts them.
constexpr int kFirstArchSpecific = 90;
constexpr int kFirstFamilySpecific = 100;

std::string SupportedSummary(const Toolchain& t) {
  std::vector<std::string> names;
  for (int a : t.archs) names.push_back(Cat("sm_", a));
  return Cat("NVRTC ", t.nvrtc_version, " supports ", Join(names, ", "), " (with an 'a' suffix from sm_",
             kFirstArchSpecific, ", an 'f' suffix from sm_", kFirstFamilySpecific, ")");
}

}  // namespace

absl::StatusOr<Toolchain> Toolchain::Detect(const std::filesystem::path& cuda_include,
                                            const std::filesystem::path& memo_dir) {
  JITD_ASSIGN_OR_RETURN(compiler::ToolkitIdentity identity, compiler::ToolkitIdentity::Compute(cuda_include, memo_dir));
  return FromIdentity(identity);
}

std::string NvrtcVersion() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return Cat(major, ".", minor);
}

absl::StatusOr<Toolchain> Toolchain::FromIdentity(const compiler::ToolkitIdentity& identity) {
  Toolchain t;
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return absl::InternalError("nvrtcVersion failed");
  t.nvrtc_version = Cat(major, ".", minor);
  int n = 0;
  if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) {
    return absl::InternalError("nvrtcGetNumSupportedArchs failed");
  }
  t.archs.resize(static_cast<size_t>(n));
  if (nvrtcGetSupportedArchs(t.archs.data()) != NVRTC_SUCCESS)
    return absl::InternalError("nvrtcGetSupportedArchs failed");
  std::sort(t.archs.begin(), t.archs.end());
  t.cuda_include = identity.include_dir;
  t.cccl_include = t.cuda_include / "cccl";
  t.fingerprint = identity.headers_fingerprint;
  t.nvrtc_libraries = identity.nvrtc_libraries;
  t.nvrtc_library_fingerprint = identity.nvrtc_library_fingerprint;
  t.identity = identity.fingerprint;
  return t;
}

namespace {

// The spelling rule, its refusals ending in `hint`.
absl::StatusOr<ArchName> ParseArchSpelling(std::string_view arch, std::string_view hint) {
  auto bad = [&](std::string_view why) { return absl::InvalidArgumentError(Cat("arch '", arch, "' ", why, hint)); };
  if (arch.size() > 16) {
    return absl::InvalidArgumentError(Cat("arch name of ", arch.size(), " characters is not an arch"));
  }
  ArchName name;
  std::string_view rest;
  if (arch.substr(0, 3) == "sm_") {
    rest = arch.substr(3);
  } else if (arch.substr(0, 8) == "compute_") {
    rest = arch.substr(8);
    name.virtual_arch = true;
  } else {
    return bad("is not of the form sm_XX, sm_XXa or sm_XXf (or compute_XX for PTX)");
  }
  if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) {
    name.suffix = rest.back();
    rest.remove_suffix(1);
  }
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), name.number);
  if (rest.empty() || ec != std::errc() || end != rest.data() + rest.size()) {
    return bad("is not of the form sm_XX, sm_XXa or sm_XXf");
  }
  // sm_090 would pass as 90 here and reach NVRTC as "sm_090", which it
  // rejects (then remembered as the kernel's failure): one spelling only.
  if (rest.front() == '0') {
    return bad(Cat("has a leading zero (write ", name.virtual_arch ? "compute_" : "sm_", name.number, ")"));
  }
  if (name.number < 10) return bad("has one digit; an arch has two or three (sm_90, sm_100)");
  return name;
}

}  // namespace

absl::StatusOr<ArchName> ParseArchName(std::string_view arch) {
  return ParseArchSpelling(arch, " (write sm_90, sm_90a or sm_100f; compute_90 for PTX)");
}

std::vector<std::string> FleetTargets(const std::vector<std::string>& archs) {
  if (archs.empty()) return {};
  std::vector<std::string> targets = archs;
  int lowest = 0;
  for (const std::string& arch : archs) {
    absl::StatusOr<ArchName> name = ParseArchName(arch);
    if (name.ok() && (lowest == 0 || name->number < lowest)) lowest = name->number;
  }
  if (lowest != 0) targets.push_back(Cat("compute_", lowest));
  return targets;
}

absl::Status ValidateArch(std::string_view arch, const Toolchain& t) {
  const std::string hint = Cat("; ", SupportedSummary(t));
  JITD_ASSIGN_OR_RETURN(ArchName name, ParseArchSpelling(arch, hint));
  auto bad = [&](std::string_view why) { return absl::InvalidArgumentError(Cat("arch '", arch, "' ", why, hint)); };
  if (std::find(t.archs.begin(), t.archs.end(), name.number) == t.archs.end()) return bad("is not supported");
  if (name.suffix == 'a' && name.number < kFirstArchSpecific) {
    return bad("has no architecture-specific ('a') variant");
  }
  if (name.suffix == 'f' && name.number < kFirstFamilySpecific) return bad("has no family-specific ('f') variant");
  return absl::OkStatus();
}

}  // namespace jitd::manifest
