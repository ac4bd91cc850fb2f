// The compile-all half of the guard.
#include <atomic>
#include <mutex>
#include <thread>

#include "guard/namespace_guard.h"
#include "jitd/base/text.h"
#include "manifest/signature.h"

namespace jitd::guard {
namespace {

using text::Cat;

struct Item {
  const manifest::KernelDef* kernel;
  std::map<std::string, std::string> params;
  std::string arch;
};

}  // namespace

std::string SignatureMismatch(std::string_view declared, std::string_view lowered_name) {
  const absl::StatusOr<std::vector<manifest::ArgKind>> want = manifest::DeclaredArgs(declared);
  if (!want.ok()) return std::string(want.status().message());
  const absl::StatusOr<std::vector<manifest::ArgKind>> have = manifest::CompiledArgs(lowered_name);
  if (!have.ok()) return std::string(have.status().message());
  if (*want == *have) return {};
  return Cat("the signature in kernels.toml, ", declared, ", passes (", text::Join(*want, ", "),
             ") but the compiled entry point takes (", text::Join(*have, ", "), ")");
}

std::vector<Finding> CompileAll(const manifest::Resolver& resolver, const std::vector<std::string>& archs,
                                const CompileFunction& compile, size_t parallelism, const Progress& progress,
                                const std::set<std::string>& skip) {
  std::vector<Item> items;
  for (const auto& k : resolver.tree().manifest().kernels) {
    if (skip.count(k.name)) continue;
    for (const auto& params : manifest::Manifest::Instantiations(k)) {
      for (const auto& arch : archs) items.push_back({&k, params, arch});
    }
  }
  std::mutex mu;  // guards findings and the progress callback
  std::vector<Finding> findings;
  std::atomic<size_t> next{0}, done{0};
  auto work = [&] {
    for (size_t i = next++; i < items.size(); i = next++) {
      const Item& item = items[i];
      std::vector<Finding> local;
      auto add = [&](std::string what) {
        local.push_back({item.kernel->source, 0, item.kernel->name, std::move(what)});
      };
      auto resolved = resolver.Resolve({item.kernel->name, item.params, item.arch, {}});
      std::string params;
      if (!resolved.ok()) {
        add(Cat(item.arch, ": cannot resolve: ", resolved.status().message()));
      } else {
        params = resolved->params;
        auto result = compile(resolved->job);
        std::string where = Cat(item.arch, params.empty() ? "" : Cat(" ", params));
        if (!result.ok()) {
          add(Cat(where, ": does not compile: ", result.status().message()));
        } else {
          for (size_t e = 0; e < resolved->job.name_expressions.size(); ++e) {
            const std::string& expr = resolved->job.name_expressions[e];
            bool lowered = e < result->lowered_names.size() && !result->lowered_names[e].second.empty();
            if (!lowered) {
              add(Cat(where, ": name expression `", expr, "` did not resolve"));
            } else if (const std::string& declared = item.kernel->SignatureOf(e); !declared.empty()) {
              if (std::string why = SignatureMismatch(declared, result->lowered_names[e].second); !why.empty()) {
                add(Cat(where, ": `", expr, "`: ", why));
              }
            }
          }
          if (result->cubin.empty()) {
            add(Cat(where, ": NVRTC produced no cubin"));
          } else {
            const std::string& ns = resolver.tree().manifest().kernel_namespace;
            for (std::string& outside : ModuleSymbolsOutside(result->cubin, ns)) {
              add(Cat(where, ": compiled module: ", outside, " (declare it in namespace ", ns,
                      ", without extern \"C\")"));
            }
          }
        }
      }
      std::lock_guard lock(mu);
      size_t d = ++done;
      if (progress) progress(d, items.size(), item.kernel->name, params, item.arch, local.empty());
      for (auto& f : local) findings.push_back(std::move(f));
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < std::max<size_t>(1, parallelism); ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  std::sort(findings.begin(), findings.end(),
            [](const Finding& a, const Finding& b) { return std::tie(a.kernel, a.what) < std::tie(b.kernel, b.what); });
  return findings;
}

}  // namespace jitd::guard
