// GetKernel with `archs` or `fleet`: the request and the answer converted;
// serving::FatbinAssembly does the work.
#include "jitd/base/text.h"
#include "rpc/compiler_rpc.h"
#include "rpc/grpc_status.h"

namespace jitd::daemon {

grpc::Status CompilerRpc::GetFatbin(const v1::GetKernelRequest& request, serving::Mode mode,
                                    const serving::CallContext& call, v1::GetKernelResponse* response,
                                    serving::Origin* origin) {
  serving::FatbinTargets targets;
  targets.arch = request.arch();
  targets.archs.assign(request.archs().begin(), request.archs().end());
  targets.fleet = request.fleet();
  manifest::KernelRequest base = ToKernelRequest(request);
  base.arch.clear();
  absl::StatusOr<serving::FatbinAnswer> answer = fatbins_.Get(base, targets, mode, call);
  if (!answer.ok()) return ToGrpcStatus(answer.status());
  response->set_key(answer->key);
  response->set_arch(text::Join(answer->targets, "+"));
  for (const std::string& target : answer->targets) response->add_fatbin_archs(target);
  *origin = answer->origin;
  response->set_source(SourceOf(answer->origin));
  if (answer->fatbin == nullptr) return grpc::Status::OK;  // PREFETCH queued what was missing
  for (const cache::Symbol& symbol : answer->symbols) {
    v1::Symbol* out = response->add_symbols();
    out->set_name_expression(symbol.name_expression);
    out->set_lowered_name(symbol.lowered_name);
  }
  response->set_compile_ms(answer->compile_ms);
  response->set_log(answer->log);
  response->set_nvrtc_version(answer->nvrtc_version);
  response->set_cubin_size(answer->fatbin->size());
  response->set_cubin(*answer->fatbin);
  return grpc::Status::OK;
}

}  // namespace jitd::daemon
