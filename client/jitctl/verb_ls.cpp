// `jitctl ls`: the entries of the daemon's on-disk cache.
#include "entry_table.h"
#include "human_format.h"
#include "jitd/base/status.h"
#include "json_output.h"
#include "verb.h"

namespace jitd::jitctl {
namespace {

class LsVerb final : public Verb {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("ls", "List cache entries, most recently used first");
    sub->add_option("--kernel", kernel_glob_, "Only kernels matching this glob (\"moe.*\")")->type_name("GLOB");
    sub->add_option("--tree", tree_,
                    "Only kernels of this kernel tree (--kernels NAME=DIR); with --kernel, its glob within it")
        ->type_name("NAME");
    sub->add_option("--arch", arch_, "Only entries for this arch (\"sm_90\")")->type_name("ARCH");
    sub->add_option("--limit", limit_, "At most this many entries (0 = all)")->type_name("N");
    return sub;
  }

  absl::StatusOr<int> Run(Client& client, const Output& output) override {
    v1::ListEntriesRequest request;
    request.set_kernel_glob(KernelGlob(tree_, kernel_glob_));
    request.set_arch(arch_);
    request.set_limit(limit_);
    JITD_ASSIGN_OR_RETURN(v1::ListEntriesResponse response, client.ListEntries(request));
    if (output.json) {
      output.out << ToJson(response);
      return 0;
    }
    PrintEntryTable(output.out, response.entries());
    uint64_t bytes = 0;
    for (const v1::EntryInfo& entry : response.entries()) bytes += entry.size_bytes();
    output.out << response.entries_size() << " of " << response.total() << " entries, " << FormatBytes(bytes)
               << " in blob files\n";
    return 0;
  }

 private:
  std::string kernel_glob_;
  std::string tree_;
  std::string arch_;
  uint32_t limit_ = 0;
};

}  // namespace

std::unique_ptr<Verb> MakeLsVerb() { return std::make_unique<LsVerb>(); }

}  // namespace jitd::jitctl
