// ListKernels: the kernels of the served trees, a page at a time. Each
// kernel's instantiations are counted (manifest::InstantiationCount), never
// listed; a page holds at most kMaxListPage kernels, and each call counts
// against the caller's --max-calls-per-peer: what one peer can make the
// daemon hold for listings is bounded.
#include <fnmatch.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "jitd/base/text.h"
#include "manifest/manifest.h"
#include "rpc/compiler_rpc.h"
#include "rpc/grpc_status.h"

namespace jitd::daemon {
namespace {

using text::Cat;
using text::Join;

// Kernels one ListKernels answer holds at most, and what a request without
// page_size gets: every kernel of any one tree (a tree has at most
// kMaxInstantiationsPerTree instantiations, each kernel at least one), so
// a client that knows nothing of pages gets the whole list of a daemon of
// one tree, as it always did.
constexpr size_t kMaxListPage = manifest::kMaxInstantiationsPerTree;

// What a page token is bound to: the served trees (names and content). A
// reload changes it, and a token of the listing before is refused rather
// than answered with kernels skipped or repeated.
std::string ListingTag(const manifest::Resolver& resolver) {
  std::string trees;
  for (const manifest::ServedTree& t : resolver.trees()) text::Append(trees, t.name, "=", t.tree->fingerprint(), ";");
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016zx", std::hash<std::string>{}(trees));
  return hex;
}

// A page token is "INDEX@TAG": where the next page starts in
// Resolver::Kernels(), and ListingTag() of the listing it belongs to.
absl::StatusOr<size_t> ParsePageToken(const std::string& token, const std::string& tag, size_t kernels) {
  const size_t at = token.find('@');
  size_t index = 0;
  const bool digits = at != std::string::npos && at > 0 && at <= 9 &&
                      std::all_of(token.begin(), token.begin() + static_cast<std::ptrdiff_t>(at),
                                  [](char c) { return c >= '0' && c <= '9'; });
  if (digits) index = std::stoul(token.substr(0, at));
  if (!digits || index > kernels) {
    return absl::InvalidArgumentError(Cat("page_token '", token.substr(0, 40),
                                          "' is not one this daemon gave: leave it empty for the first page, then "
                                          "pass each answer's next_page_token"));
  }
  if (token.substr(at + 1) != tag) {
    return absl::AbortedError(
        "the kernels were reloaded since the first page of this listing: list again from the first page");
  }
  return index;
}

std::string NameExpressionTemplate(const manifest::KernelDef& kernel) {
  // Most kernels have one entry point; several are listed with "; " (a
  // template's own arguments are separated by ", ").
  return Join(kernel.name_expressions, "; ");
}

}  // namespace

grpc::Status CompilerRpc::ListKernels(grpc::ServerContext* context, const v1::ListKernelsRequest* request,
                                      v1::ListKernelsResponse* response) {
  const InFlightCalls::Scope in_flight(calls_);
  // What one peer makes the daemon hold for listings: max_calls_per_peer
  // calls, each one page of at most kMaxListPage kernels.
  serving::Admission::Ticket slot;
  if (absl::Status admitted = service_.admission().AdmitCall(PeerOf(*context), &slot); !admitted.ok()) {
    return ToGrpcStatus(admitted);
  }
  const std::shared_ptr<const manifest::Resolver> resolver = service_.resolver();
  const std::vector<manifest::TreeKernel> kernels = resolver->Kernels();
  const std::string tag = ListingTag(*resolver);
  size_t first = 0;
  if (!request->page_token().empty()) {
    absl::StatusOr<size_t> start = ParsePageToken(request->page_token(), tag, kernels.size());
    if (!start.ok()) return ToGrpcStatus(start.status());
    first = *start;
  }
  const size_t page_size =
      request->page_size() == 0 ? kMaxListPage : std::min<size_t>(request->page_size(), kMaxListPage);
  const auto wanted = [&](const manifest::TreeKernel& listed) {
    return request->glob().empty() || fnmatch(request->glob().c_str(), listed.name.c_str(), 0) == 0 ||
           fnmatch(request->glob().c_str(), listed.def->name.c_str(), 0) == 0;
  };
  for (size_t i = first; i < kernels.size(); ++i) {
    const manifest::TreeKernel& listed = kernels[i];
    const manifest::KernelDef& kernel = *listed.def;
    const manifest::Manifest& manifest = listed.tree->tree->manifest();
    if (!wanted(listed)) continue;
    if (static_cast<size_t>(response->kernels_size()) == page_size) {
      response->set_next_page_token(Cat(i, "@", tag));  // the next one wanted
      break;
    }
    v1::KernelInfo* info = response->add_kernels();
    info->set_name(listed.name);
    info->set_tree(listed.tree->name);
    info->set_source(kernel.source);
    info->set_name_expression(NameExpressionTemplate(kernel));
    info->set_description(kernel.description);
    info->set_signature(kernel.SignatureText());
    info->set_launch(kernel.launch);
    for (const manifest::ParamDef& param : kernel.params) {
      v1::KernelParam* out = info->add_params();
      out->set_name(param.name);
      out->set_type(param.type);
      for (const auto& [value, cpp] : param.values) out->add_allowed(value);
      out->set_default_value(param.default_value.value_or(""));
    }
    for (const std::string& option : manifest.default_options) info->add_default_options(option);
    for (const std::string& option : kernel.options) info->add_default_options(option);
    // Counted, never listed (a kernel may have up to kMaxInstantiationsPerTree).
    info->set_instantiations(static_cast<uint32_t>(
        std::min<uint64_t>(manifest::InstantiationCount(kernel), std::numeric_limits<uint32_t>::max())));
  }
  response->set_default_arch(resolver->default_arch());
  for (int arch : resolver->toolchain().archs) response->add_supported_archs(Cat("sm_", arch));
  return grpc::Status::OK;
}

}  // namespace jitd::daemon
