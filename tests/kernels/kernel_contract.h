// KERNELS.md's entry-point table, written down once for the tests: what the
// manifest must declare and what each lowered name must demangle to.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace jitd::kernels_test {

struct ContractKernel {
  std::string name;
  std::string name_expression;                             // with {param} placeholders, as in the manifest
  std::map<std::string, std::vector<std::string>> params;  // name -> request values
  // The parameter list, with {T} for the element type, as NVRTC 13 lowers it:
  // int64_t is `long long`, int32_t is `int`.
  std::string signature;
};

inline const std::vector<ContractKernel>& contract_kernels() {
  static const std::vector<ContractKernel> kernels{
      {"diffusion.modulate_scale_shift",
       "sglang::modulate_scale_shift::modulate_scale_shift_kernel<{dtype}>",
       {{"dtype", {"bf16", "fp16"}}},
       "({T}*, {T} const*, {T} const*, {T} const*, long long, long long, long long)"},
      {"diffusion.residual_gate_add",
       "sglang::residual_gate_add::residual_gate_add_kernel<{dtype}, {gate}>",
       {{"dtype", {"bf16", "fp16"}}, {"gate", {"broadcast", "full"}}},
       "({T}*, {T} const*, {T} const*, {T} const*, long long, long long)"},
      {"moe.align_block_size",
       "sglang::moe::align_block_size_kernel",
       {},
       "(int const*, long long, int, int, int*, int*, int*)"},
      {"moe.align_single_token",
       "sglang::moe::align_single_token_kernel",
       {},
       "(int const*, int, int, int*, int*, int*)"},
      {"moe.topk_sum",
       "sglang::moe::topk_sum_kernel<{dtype}>",
       {{"dtype", {"bf16", "fp16", "fp32"}}},
       "({T}*, {T} const*, long long, int, long long)"},
      {"activation.silu_and_mul",
       "sglang::activation::silu_and_mul_kernel<{dtype}>",
       {{"dtype", {"bf16", "fp16", "fp32"}}},
       "({T}*, {T} const*, long long, long long)"},
      {"norm.rmsnorm",
       "sglang::norm::rmsnorm_kernel<{dtype}, {threads}>",
       {{"dtype", {"bf16", "fp16", "fp32"}}, {"threads", {"1024", "128", "256", "512"}}},
       "({T}*, {T} const*, {T} const*, long long, long long, float)"},
  };
  return kernels;
}

// KERNELS.md: T is __nv_bfloat16 for bf16, __half for fp16, float for fp32.
inline const std::map<std::string, std::string>& contract_dtypes() {
  static const std::map<std::string, std::string> dtypes{
      {"bf16", "__nv_bfloat16"}, {"fp16", "__half"}, {"fp32", "float"}};
  return dtypes;
}

}  // namespace jitd::kernels_test
