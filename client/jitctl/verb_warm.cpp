// `jitctl warm`: has the daemon compile many instantiations into its cache.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "jitd/base/progress.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "json_output.h"
#include "verb.h"

namespace jitd::jitctl {
namespace {

std::string Describe(const v1::KernelSpec& spec) {
  return text::Instantiation(spec.kernel(), CanonicalParams({spec.params().begin(), spec.params().end()}), spec.arch(),
                             {spec.options().begin(), spec.options().end()});
}

const char* OutcomeWord(v1::WarmProgress::Outcome outcome) {
  switch (outcome) {
    case v1::WarmProgress::COMPILED:
      return "compiled";
    case v1::WarmProgress::CACHED:
      return "cached";
    case v1::WarmProgress::FAILED:
      return "failed";
    default:
      return "done";
  }
}

// What follows an item's name: its compile time, or the first line of why
// it failed (the whole reason is in the summary).
std::string Detail(const v1::WarmProgress& item) {
  if (!item.error().empty()) return item.error().substr(0, item.error().find('\n'));
  if (item.compile_ms() > 0) return absl::StrFormat("%.0f ms", item.compile_ms());
  return {};
}

class WarmVerb final : public Verb {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("warm", "Compile many instantiations into the cache");
    sub->add_flag("--all", all_, "Every instantiation the manifest registers (or --manifest)");
    sub->add_option("--manifest", manifest_, "A TOML file of [[spec]] tables to warm (or --all)")
        ->check(CLI::Validator(CLI::ExistingFile).description(""))
        ->type_name("FILE");
    sub->add_option("--arch", archs_, "Arch to warm for (repeatable); default: the daemon's")->type_name("ARCH");
    sub->add_flag("--fleet", fleet_, "For the daemon's fleet set too: each --fleet-archs arch and the lowest's PTX");
    sub->add_option("--concurrency", concurrency_, "Compiles at once (0 = the daemon's workers)")->type_name("N");
    return sub;
  }

  absl::Status Validate() override {
    if (!all_ && manifest_.empty()) {
      return absl::InvalidArgumentError("warm needs --all or --manifest FILE");
    }
    if (all_ && !manifest_.empty()) {
      return absl::InvalidArgumentError("--all and --manifest exclude each other: give one");
    }
    request_.set_all(all_);
    for (const std::string& arch : archs_) request_.add_archs(arch);
    request_.set_fleet(fleet_);
    request_.set_concurrency(concurrency_);
    if (!manifest_.empty()) {
      JITD_ASSIGN_OR_RETURN(std::vector<v1::KernelSpec> specs, LoadSpecFile(manifest_));
      for (v1::KernelSpec& spec : specs) *request_.add_specs() = std::move(spec);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int> Run(Client& client, const Output& output) override {
    // Progress goes to stderr (a bar on a terminal, a line per item
    // elsewhere); stdout gets the summary or the one JSON document, which
    // progress lines would corrupt unless they are a terminal's bar.
    const bool show_progress = !output.json || ::isatty(::fileno(stderr)) == 1;
    std::unique_ptr<Progress> progress;  // made at the first message, which carries the total
    std::vector<std::string> json_progress;
    std::vector<v1::WarmProgress> failures;
    absl::StatusOr<v1::WarmProgress> last = client.Warm(request_, [&](const v1::WarmProgress& item) {
      if (output.json) json_progress.push_back(ToJson(item));
      if (item.outcome() == v1::WarmProgress::FAILED) failures.push_back(item);
      if (!show_progress) return;
      if (progress == nullptr) progress = std::make_unique<Progress>("warm", item.total(), stderr);
      progress->Done(OutcomeWord(item.outcome()), Describe(item.spec()), Detail(item), item.compile_ms() / 1000);
    });
    if (progress != nullptr) progress->Finish();
    if (!last.ok()) return last.status();
    if (output.json) {
      std::vector<std::string> json_failures;
      for (const v1::WarmProgress& failure : failures) json_failures.push_back(ToJson(failure));
      output.out << ToJsonObject({{"total", text::Cat(last->total())},
                                  {"compiled", text::Cat(last->compiled())},
                                  {"cached", text::Cat(last->cached())},
                                  {"failed", text::Cat(last->failed())},
                                  {"elapsed_ms", text::Cat(last->elapsed_ms())},
                                  {"failures", ToJsonArray(json_failures)},
                                  {"progress", ToJsonArray(json_progress)}});
    } else {
      output.out << absl::StrFormat("warm: %d instantiations in %.1f s: %d compiled, %d already cached, %d failed\n",
                                    last->total(), static_cast<double>(last->elapsed_ms()) / 1000, last->compiled(),
                                    last->cached(), last->failed());
      for (const v1::WarmProgress& failure : failures) {
        output.out << "failed: " << Describe(failure.spec()) << ": " << failure.error() << '\n';
      }
    }
    return last->failed() > 0 ? 1 : 0;
  }

 private:
  bool all_ = false;
  std::string manifest_;
  std::vector<std::string> archs_;
  bool fleet_ = false;
  uint32_t concurrency_ = 0;
  v1::WarmRequest request_;
};

}  // namespace

std::unique_ptr<Verb> MakeWarmVerb() { return std::make_unique<WarmVerb>(); }

}  // namespace jitd::jitctl
