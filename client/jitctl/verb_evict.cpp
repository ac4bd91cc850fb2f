// `jitctl evict`: removes entries by key, kernel glob, arch, age or budget.
#include "absl/strings/str_format.h"
#include "entry_table.h"
#include "human_format.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "json_output.h"
#include "verb.h"

namespace jitd::jitctl {
namespace {

class EvictVerb final : public Verb {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* sub =
        app.add_subcommand("evict", "Remove cache entries (filters combine with AND; at least one is needed)");
    sub->add_option("--max-bytes", max_bytes_,
                    "Evict least recently used matches until the cache holds at most this (10G)")
        ->type_name("SIZE");
    sub->add_option("--kernel", kernel_glob_, "Kernels matching this glob (\"moe.*\")")->type_name("GLOB");
    sub->add_option("--tree", tree_,
                    "The kernels of this kernel tree (--kernels NAME=DIR); with --kernel, its glob within it")
        ->type_name("NAME");
    sub->add_option("--older-than", older_than_, "Entries unused for this long (30s, 15m, 2h, 7d)")
        ->type_name("DURATION");
    sub->add_option("--key", keys_, "This content key (repeatable)")->type_name("KEY");
    sub->add_option("--arch", arch_, "Entries for this arch (\"sm_90\")")->type_name("ARCH");
    sub->add_flag("--dry-run", dry_run_, "Only report what would be evicted");
    sub->add_flag("--include-pinned", include_pinned_,
                  "Pinned entries too (warmed manifest instantiations, kept otherwise)");
    sub->footer(
        "Needs the daemon's admin token (not for --dry-run): read by itself from the file beside the daemon's "
        "socket (SOCKET.admin-token, which the daemon's user may read), or --admin-token-file FILE.");
    return sub;
  }

  absl::Status Validate() override {
    if (max_bytes_.empty() && kernel_glob_.empty() && tree_.empty() && older_than_.empty() && keys_.empty() &&
        arch_.empty()) {
      return absl::InvalidArgumentError(
          "evict needs at least one of --max-bytes, --kernel, --tree, --older-than, --key, --arch");
    }
    if (!max_bytes_.empty()) {
      absl::StatusOr<uint64_t> bytes = ParseByteSize(max_bytes_);
      if (!bytes.ok()) return absl::InvalidArgumentError(text::Cat("--max-bytes: ", bytes.status().message()));
      request_.set_max_bytes(*bytes);
    }
    if (!older_than_.empty()) {
      absl::StatusOr<std::chrono::seconds> age = ParseDuration(older_than_);
      if (!age.ok()) return absl::InvalidArgumentError(text::Cat("--older-than: ", age.status().message()));
      request_.set_older_than_s(static_cast<uint64_t>(age->count()));
    }
    request_.set_kernel_glob(KernelGlob(tree_, kernel_glob_));
    request_.set_arch(arch_);
    for (const std::string& key : keys_) request_.add_keys(key);
    request_.set_dry_run(dry_run_);
    request_.set_include_pinned(include_pinned_);
    return absl::OkStatus();
  }

  absl::StatusOr<int> Run(Client& client, const Output& output) override {
    JITD_ASSIGN_OR_RETURN(v1::EvictResponse response, client.Evict(request_));
    if (output.json) {
      output.out << ToJson(response);
      return 0;
    }
    if (response.evicted_size() > 0) PrintEntryTable(output.out, response.evicted());
    output.out << absl::StrFormat("%s %d entries (%s); the cache %s %d entries (%s)\n",
                                  response.dry_run() ? "would evict" : "evicted", response.evicted_entries(),
                                  FormatBytes(response.evicted_bytes()),
                                  response.dry_run() ? "would keep" : "now holds", response.remaining_entries(),
                                  FormatBytes(response.remaining_bytes()));
    return 0;
  }

 private:
  std::string max_bytes_;
  std::string kernel_glob_;
  std::string tree_;
  std::string older_than_;
  std::vector<std::string> keys_;
  std::string arch_;
  bool dry_run_ = false;
  bool include_pinned_ = false;
  v1::EvictRequest request_;
};

}  // namespace

std::unique_ptr<Verb> MakeEvictVerb() { return std::make_unique<EvictVerb>(); }

}  // namespace jitd::jitctl
