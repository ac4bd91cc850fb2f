"""Writes .gpu/exp/silu-NAME/kernels: copies of kernels/ whose silu_fp32 is a faster
fp32 evaluation (run from the repository root)."""
import os, shutil
src = open('kernels/activation/silu_and_mul.cu').read()
helpers = r'''
__device__ __forceinline__ float ex2a(float x){float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y;}
__device__ __forceinline__ float rcpa(float x){float y; asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y;}
__device__ __forceinline__ float exp_c(float x){
  const float L = 1.44269502f;
  const float Llo = 1.925963033500e-8f;
  float hi = x * L;
  float lo = fmaf(x, L, -hi);
  lo = fmaf(x, Llo, lo);
  float t = ex2a(hi);
  return fmaf(t, lo * 0.693147182f, t);
}
'''
old = "__device__ __forceinline__ float silu_fp32(float a) { return __fdiv_rn(a, __fadd_rn(1.0f, expf(-a))); }"
assert old in src
variants = {"mufu8": ("a * rcpa(1.0f + exp_c(-a))", 8), "mufu12": ("a * rcpa(1.0f + exp_c(-a))", 12),
            "splitdiv8": ("__fdiv_rn(a, 1.0f + exp_c(-a))", 8)}
for name, (expr, guard) in variants.items():
    d = f'.gpu/exp/silu-{name}/kernels'
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree('kernels', d)
    s = src.replace(old, helpers + "__device__ __forceinline__ float silu_fp32(float a) { return " + expr + "; }")
    s = s.replace("inline constexpr int kGuardUlps = 8;", f"inline constexpr int kGuardUlps = {guard};")
    open(f'{d}/activation/silu_and_mul.cu', 'w').write(s)
