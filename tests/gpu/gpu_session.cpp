#include "gpu_session.h"

#include <algorithm>

#include "jitd/base/text.h"

namespace jitd::gpu {

using text::Cat;

absl::StatusOr<KernelSession*> KernelSession::Get() {
  static const absl::StatusOr<KernelSession*> session = []() -> absl::StatusOr<KernelSession*> {
    // Allocations made before the first GetKernel() need a current context;
    // the client then finds this one current and loads into it.
    if (absl::Status s = MakePrimaryContextCurrent(); !s.ok()) return s;
    ClientOptions options;  // endpoint: $JITD_ENDPOINT, else the default
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
    if (!client.ok()) {
      return absl::Status(client.status().code(),
                          Cat("cannot reach the jitd daemon under test (set JITD_ENDPOINT to a running jitd; "
                              "tests/gpu/run.sh starts one): ",
                              client.status().message()));
    }
    return new KernelSession(*std::move(client));  // lives for the process
  }();
  return session;
}

absl::StatusOr<Function> KernelSession::GetFunction(const KernelSpec& spec, const std::string& name_expression) {
  absl::StatusOr<std::shared_ptr<const Module>> module = client_->GetKernel(spec);
  if (!module.ok()) {
    return absl::Status(module.status().code(),
                        Cat("GetKernel(", CanonicalSpec(spec), ") from ", endpoint(), ": ", module.status().message()));
  }
  if ((*module)->symbols().size() != 1 || (*module)->symbols()[0].name_expression != name_expression) {
    std::vector<std::string> names;
    for (const KernelSymbol& symbol : (*module)->symbols()) names.push_back(symbol.name_expression);
    return absl::InternalError(Cat(CanonicalSpec(spec), ": the module's entry points are [", text::Join(names, ", "),
                                   "], expected exactly ", name_expression));
  }
  absl::StatusOr<Function> function = (*module)->GetFunction(name_expression);
  if (!function.ok()) return function.status();
  if (function->handle == nullptr || function->lowered_name.empty()) {
    return absl::InternalError(Cat(name_expression, ": no function handle or lowered name"));
  }
  modules_.push_back(*std::move(module));
  return function;
}

void GpuTest::SetUp() {
  if (absl::Status driver = CudaDriverStatus(); !driver.ok()) {
    GTEST_SKIP() << "no CUDA driver on this host: " << driver.message();
  }
  absl::StatusOr<KernelSession*> session = KernelSession::Get();
  ASSERT_TRUE(session.ok()) << session.status();
  session_ = *session;
  // Each test makes the context current again: harmless, and it keeps the
  // tests independent of which one ran first.
  const absl::Status context = MakePrimaryContextCurrent();
  ASSERT_TRUE(context.ok()) << context;
}

std::string CanaryMessage(std::size_t byte, std::size_t begin, std::size_t end) {
  if (byte < begin) {
    return Cat("out-of-bounds write: byte ", begin - byte, " before the data [", begin, ", ", end,
               ") of the buffer was changed");
  }
  return Cat("out-of-bounds write: byte ", byte - end, " past the end of the data [", begin, ", ", end,
             ") of the buffer was changed");
}

LaunchShape ElementwiseLaunch(std::int64_t work_items) {
  constexpr std::int64_t kBlock = 256;
  constexpr std::int64_t kMaxGrid = 132 * 16;
  const std::int64_t blocks = std::clamp<std::int64_t>((work_items + kBlock - 1) / kBlock, 1, kMaxGrid);
  return {static_cast<unsigned>(blocks), static_cast<unsigned>(kBlock)};
}

}  // namespace jitd::gpu
