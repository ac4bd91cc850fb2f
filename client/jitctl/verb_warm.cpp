// `jitctl warm`: has the daemon compile many instantiations into its cache.
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "json_output.h"
#include "verb.h"


namespace jitd::jitctl {
namespace {

std::string Describe(const v1::KernelSpec& spec) {
  std::vector<std::string> params;
  for (const auto& [name, value] : spec.params()) params.push_back(name + "=" + value);
  std::sort(params.begin(), params.end());
  return absl::StrCat(spec.kernel(), "{", absl::StrJoin(params, ","), "} ", spec.arch());
}

class WarmVerb final : public Verb {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("warm", "Compile many instantiations into the cache");
    CLI::Option* all = sub->add_flag("--all", all_, "Every instantiation the manifest registers");
    CLI::Option* manifest = sub->add_option("--manifest", manifest_, "A TOML file of [[spec]] tables to warm")
                                ->check(CLI::ExistingFile)
                                ->type_name("FILE");
    all->excludes(manifest);
    sub->add_option("--arch", archs_, "Arch to warm for (repeatable); default: the daemon's")->type_name("ARCH");
    sub->add_option("--concurrency", concurrency_, "Compiles at once (0 = the daemon's workers)")->type_name("N");
    return sub;
  }

  absl::Status Validate() override {
    if (!all_ && manifest_.empty()) {
      return absl::InvalidArgumentError("warm needs --all or --manifest FILE");
    }
    request_.set_all(all_);
    for (const std::string& arch : archs_) request_.add_archs(arch);
    request_.set_concurrency(concurrency_);
    if (!manifest_.empty()) {
      absl::StatusOr<std::vector<v1::KernelSpec>> specs = LoadSpecFile(manifest_);
      if (!specs.ok()) return specs.status();
      for (v1::KernelSpec& spec : *specs) *request_.add_specs() = std::move(spec);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int> Run(Client& client, const Output& output) override {
    std::vector<std::string> json_progress;
    absl::StatusOr<v1::WarmProgress> last = client.Warm(request_, [&](const v1::WarmProgress& progress) {
      if (output.json) {
        json_progress.push_back(ToJson(progress));
        return;
      }
      output.out << absl::StrFormat("[%d/%d] %-8s %s", progress.done(), progress.total(),
                                    v1::WarmProgress::Outcome_Name(progress.outcome()), Describe(progress.spec()));
      if (progress.compile_ms() > 0) output.out << absl::StrFormat(" (%.0f ms)", progress.compile_ms());
      if (!progress.error().empty()) output.out << "\n    " << progress.error();
      output.out << '\n';
    });
    if (!last.ok()) return last.status();
    if (output.json) {
      output.out << ToJsonArray(json_progress);
    } else {
      output.out << absl::StrFormat("%d compiled, %d cached, %d failed in %.1fs\n", last->compiled(), last->cached(),
                                    last->failed(), static_cast<double>(last->elapsed_ms()) / 1000);
    }
    return last->failed() > 0 ? 1 : 0;
  }

 private:
  bool all_ = false;
  std::string manifest_;
  std::vector<std::string> archs_;
  uint32_t concurrency_ = 0;
  v1::WarmRequest request_;
};

}  // namespace

std::unique_ptr<Verb> MakeWarmVerb() { return std::make_unique<WarmVerb>(); }

}  // namespace jitd::jitctl
