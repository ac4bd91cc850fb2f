// `jitctl verify`: the daemon reads every entry and checks its checksum.
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "json_output.h"
#include "table.h"
#include "verb.h"

namespace jitd::jitctl {
namespace {

class VerifyVerb final : public Verb {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("verify", "Check every cache entry against its checksum");
    sub->add_flag("--repair", repair_,
                  "Drop corrupt entries and reconcile index and blob files (needs the daemon's admin token, "
                  "see jitctl evict --help)");
    sub->footer("Exits 1 when problems remain (found and not repaired), so scripts can alert.");
    return sub;
  }

  absl::StatusOr<int> Run(Client& client, const Output& output) override {
    v1::VerifyRequest request;
    request.set_repair(repair_);
    JITD_ASSIGN_OR_RETURN(v1::VerifyResponse report, client.Verify(request));
    if (output.json) {
      output.out << ToJson(report);
    } else {
      Table::PrintRecord(output.out, {{"checked", text::Cat(report.checked())},
                                      {"ok", text::Cat(report.ok())},
                                      {"corrupt", text::Cat(report.corrupt())},
                                      {"missing blobs", text::Cat(report.missing_blobs())},
                                      {"orphan blobs", text::Cat(report.orphan_blobs())},
                                      {"repaired", text::Cat(report.repaired())},
                                      {"index", report.index_integrity()}});
      for (const std::string& problem : report.problems()) output.out << "problem: " << problem << '\n';
    }
    const uint64_t problems = report.corrupt() + report.missing_blobs() + report.orphan_blobs();
    const bool index_ok = report.index_integrity().empty() || report.index_integrity() == "ok";
    return problems > report.repaired() || !index_ok ? 1 : 0;
  }

 private:
  bool repair_ = false;
};

}  // namespace

std::unique_ptr<Verb> MakeVerifyVerb() { return std::make_unique<VerifyVerb>(); }

}  // namespace jitd::jitctl
