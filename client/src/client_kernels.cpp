// Client::GetKernelBinary and Client::GetKernel: the GetKernel RPC with the
// arch default, the memo, path delivery and the read-only fallback, and
// loaded modules memoized per CUDA context.
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "jitd/base/files.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/blob.h"
#include "src/client_impl.h"
#include "src/cuda_driver.h"

namespace jitd {

using text::Cat;
namespace {

using Mode = v1::GetKernelRequest::Mode;
using Source = v1::GetKernelResponse::Source;

// `spec` with an empty arch replaced by the current device's, when the CUDA
// driver answers; left empty (the daemon's default) otherwise.
KernelSpec WithDefaultArch(const KernelSpec& spec) {
  KernelSpec filled = spec;
  if (filled.arch.empty() && filled.archs.empty() && !filled.fleet) {
    absl::StatusOr<std::string> arch = CurrentDeviceArch();
    if (arch.ok()) filled.arch = *std::move(arch);
  }
  return filled;
}

v1::GetKernelRequest ToRequest(const KernelSpec& spec, Mode mode, bool by_path) {
  v1::GetKernelRequest request;
  request.set_kernel(spec.kernel);
  for (const auto& [name, value] : spec.params) (*request.mutable_params())[name] = value;
  request.set_arch(spec.arch);
  for (const std::string& arch : spec.archs) request.add_archs(arch);
  request.set_fleet(spec.fleet);
  for (const std::string& option : spec.options) request.add_options(option);
  request.set_mode(mode);
  request.set_delivery(by_path ? v1::GetKernelRequest::PATH : v1::GetKernelRequest::BYTES);
  return request;
}

// Everything of the response but the cubin.
KernelBinary Describe(const v1::GetKernelResponse& response) {
  KernelBinary binary;
  binary.key = response.key();
  for (const v1::Symbol& symbol : response.symbols()) {
    binary.symbols.push_back({symbol.name_expression(), symbol.lowered_name()});
  }
  binary.arch = response.arch();
  binary.fatbin_archs.assign(response.fatbin_archs().begin(), response.fatbin_archs().end());
  binary.source = response.source();
  binary.compile_ms = response.compile_ms();
  binary.log = response.log();
  binary.nvrtc_version = response.nvrtc_version();
  return binary;
}

// The cubin of a PATH answer, read from its blob file and verified there.
// DATA_LOSS when the file is not the verified blob of the answer's key;
// other errors mean the file could not be read.
absl::StatusOr<KernelBinary> ReadDeliveredBlob(const v1::GetKernelResponse& response) {
  JITD_ASSIGN_OR_RETURN(std::string bytes, files::ReadWholeFile(response.blob_path()));
  cache::EntryMeta meta;
  KernelBinary binary = Describe(response);
  const std::string what = Cat("blob ", response.blob_path(), " (key ", response.key(), ")");
  // Decoded in the buffer it was read into: no second copy of the cubin.
  if (absl::Status decoded = cache::DecodeBlobInPlace(bytes, &meta); !decoded.ok()) {
    return absl::DataLossError(Cat(what, " failed verification: ", decoded.message(), "; not served"));
  }
  binary.cubin = std::move(bytes);
  if (meta.key != response.key()) {
    return absl::DataLossError(Cat(what, " holds key ", meta.key, "; not served"));
  }
  if (response.cubin_size() != 0 && response.cubin_size() != binary.cubin.size()) {
    return absl::DataLossError(Cat(what, " holds ", binary.cubin.size(), " cubin bytes where the daemon said ",
                                   response.cubin_size(), "; not served"));
  }
  binary.blob_path = response.blob_path();
  return binary;
}

// A cache hit over the local path, or nothing: a miss, an error, a file
// that cannot be read or a path that cannot be used now all leave the
// request to gRPC, so that the local path changes no answer, only how fast
// a hit arrives. A blob that fails verification is DATA_LOSS, as over gRPC;
// a connection the daemon refused (a bound) is UNAVAILABLE saying why.
std::optional<absl::StatusOr<KernelBinary>> FetchLocal(Client::Impl& impl, const KernelSpec& spec) {
  const bool by_path = impl.options_.prefer_path.value_or(false);
  bool refused = false;
  absl::StatusOr<v1::LocalAnswer> answer =
      impl.AskLocal(ToRequest(spec, v1::GetKernelRequest::CACHED_ONLY, by_path), &refused);
  if (refused) return answer.status();
  if (!answer.ok() || answer->code() != 0) return std::nullopt;
  const v1::GetKernelResponse& response = answer->response();
  absl::StatusOr<KernelBinary> binary;
  if (!response.blob_path().empty()) {
    binary = ReadDeliveredBlob(response);
    if (!binary.ok() && !absl::IsDataLoss(binary.status())) return std::nullopt;  // evicted since; unreadable
  } else {
    binary = Describe(response);
    binary->cubin = response.cubin();
  }
  impl.get_kernel_rpcs_.fetch_add(1, std::memory_order_relaxed);
  impl.local_answers_.fetch_add(1, std::memory_order_relaxed);
  return binary;
}

// One answer from the daemon: a hit over the local path when it can, else
// by gRPC: by path when preferred (verified here), by bytes otherwise or
// when the named file cannot be read.
absl::StatusOr<KernelBinary> FetchFromDaemon(Client& client, Client::Impl& impl, const KernelSpec& spec, Mode mode) {
  if (impl.options_.local_path.value_or(false)) {
    if (std::optional<absl::StatusOr<KernelBinary>> local = FetchLocal(impl, spec)) return *std::move(local);
  }
  absl::StatusOr<v1::GetKernelResponse> response =
      client.GetKernel(ToRequest(spec, mode, impl.options_.prefer_path.value_or(false)));
  if (!response.ok()) return response.status();
  if (!response->blob_path().empty()) {
    absl::StatusOr<KernelBinary> from_file = ReadDeliveredBlob(*response);
    if (from_file.ok() || absl::IsDataLoss(from_file.status())) return from_file;
    // Evicted since the answer, or in a directory this user cannot read.
    response = client.GetKernel(ToRequest(spec, mode, /*by_path=*/false));
    if (!response.ok()) return response.status();
  }
  KernelBinary binary = Describe(*response);
  binary.cubin = std::move(*response->mutable_cubin());
  return binary;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const KernelBinary>> Client::GetKernelBinary(const KernelSpec& spec, Mode mode) {
  const KernelSpec filled = WithDefaultArch(spec);
  const std::string memo_key = CanonicalSpec(filled);
  using Memo = client_detail::SingleFlightMemo<KernelBinary>;

  // The daemon's answer, else (daemon unreachable) the fallback's; `keep`
  // says whether the memo may hand it out again.
  auto produce = [&]() -> Memo::Produced {
    absl::StatusOr<KernelBinary> answer = FetchFromDaemon(*this, *impl_, filled, mode);
    if (answer.ok()) {
      const bool keep = answer->source != v1::GetKernelResponse::NONE;
      return {std::make_shared<const KernelBinary>(*std::move(answer)), keep};
    }
    if (!absl::IsUnavailable(answer.status()) || impl_->fallback_ == nullptr) return {answer.status(), false};
    absl::StatusOr<KernelBinary> fallback = impl_->fallback_->Find(filled);
    if (!fallback.ok()) {
      return {absl::UnavailableError(Cat(answer.status().message(), "; ", fallback.status().message())), false};
    }
    impl_->fallback_answers_.fetch_add(1, std::memory_order_relaxed);
    return {std::make_shared<const KernelBinary>(*std::move(fallback)), false};
  };

  if (mode != v1::GetKernelRequest::COMPILE) {
    // CACHED_ONLY and PREFETCH must not wait for another caller's compile:
    // they use the memo's answers but never join its flights.
    if (std::shared_ptr<const KernelBinary> kept = impl_->binaries_.Find(memo_key)) {
      impl_->memo_hits_.fetch_add(1, std::memory_order_relaxed);
      return kept;
    }
    Memo::Produced answer = produce();
    if (answer.result.ok() && answer.keep) impl_->binaries_.Remember(memo_key, *answer.result);
    return answer.result;
  }
  bool produced = false;
  Memo::Result result = impl_->binaries_.Get(memo_key, produce, &produced);
  if (!produced) impl_->memo_hits_.fetch_add(1, std::memory_order_relaxed);
  return result;
}

absl::StatusOr<std::shared_ptr<const Module>> Client::GetKernel(const KernelSpec& spec) {
  JITD_ASSIGN_OR_RETURN(const client_detail::CudaDriver* driver, client_detail::GetCudaDriver());
  JITD_ASSIGN_OR_RETURN(cuda::CUcontext context, client_detail::CurrentOrPrimaryContext(*driver));
  const KernelSpec filled = WithDefaultArch(spec);
  const std::string memo_key = Cat(client_detail::ContextId(*driver, context), "/", CanonicalSpec(filled));
  using Memo = client_detail::SingleFlightMemo<Module>;
  return impl_->modules_.Get(memo_key, [&]() -> Memo::Produced {
    absl::StatusOr<std::shared_ptr<const KernelBinary>> binary = GetKernelBinary(filled);
    if (!binary.ok()) return {binary.status(), false};
    impl_->module_loads_.fetch_add(1, std::memory_order_relaxed);
    absl::StatusOr<std::unique_ptr<Module>> module = Module::Load((*binary)->cubin, (*binary)->symbols, (*binary)->key);
    if (!module.ok()) return {module.status(), false};
    // A module made from a fallback answer is not kept, like the answer.
    return {std::shared_ptr<const Module>(*std::move(module)), (*binary)->source != v1::GetKernelResponse::FALLBACK};
  });
}

ClientCounters Client::counters() const {
  ClientCounters counters;
  counters.get_kernel_rpcs = impl_->get_kernel_rpcs_.load(std::memory_order_relaxed);
  counters.local_answers = impl_->local_answers_.load(std::memory_order_relaxed);
  counters.memo_hits = impl_->memo_hits_.load(std::memory_order_relaxed);
  counters.fallback_answers = impl_->fallback_answers_.load(std::memory_order_relaxed);
  counters.module_loads = impl_->module_loads_.load(std::memory_order_relaxed);
  return counters;
}

}  // namespace jitd
