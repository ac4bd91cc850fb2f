// `jitctl stats`: the cache's counters and sizes.
#include "absl/strings/str_format.h"
#include "human_format.h"
#include "json_output.h"
#include "table.h"
#include "verb.h"

namespace jitd::jitctl {
namespace {

std::string Budget(const v1::StatsResponse& stats) {
  if (stats.max_bytes() == 0) return "unbounded";
  return absl::StrFormat("%s (evicts above %s down to %s)", FormatBytes(stats.max_bytes()),
                         FormatBytes(stats.high_watermark_bytes()), FormatBytes(stats.low_watermark_bytes()));
}

std::string HitRate(const v1::StatsResponse& stats) {
  const uint64_t lookups = stats.hits() + stats.misses();
  if (lookups == 0) return "0 / 0";
  return absl::StrFormat("%d / %d (%.1f%% hits)", stats.hits(), stats.misses(),
                         100.0 * static_cast<double>(stats.hits()) / static_cast<double>(lookups));
}

class StatsVerb final : public Verb {
 public:
  CLI::App* Register(CLI::App& app) override {
    return app.add_subcommand("stats", "Show the cache's size, budget and counters");
  }

  absl::StatusOr<int> Run(Client& client, const Output& output) override {
    absl::StatusOr<v1::StatsResponse> stats = client.Stats();
    if (!stats.ok()) return stats.status();
    if (output.json) {
      output.out << ToJson(*stats);
      return 0;
    }
    Table::PrintRecord(
        output.out,
        {{"cache dir", stats->cache_dir()},
         {"entries", absl::StrFormat("%d (%d pinned)", stats->entries(), stats->pinned_entries())},
         {"size", absl::StrFormat("%s (%s pinned)", FormatBytes(stats->bytes()), FormatBytes(stats->pinned_bytes()))},
         {"budget", Budget(*stats)},
         {"hits / misses", HitRate(*stats)},
         {"evictions", absl::StrCat(stats->evictions())},
         {"corrupt", absl::StrCat(stats->corrupt())},
         {"publishes", absl::StrFormat("%d (%d failed)", stats->publishes(), stats->publish_failures())},
         {"uptime", FormatSeconds(stats->uptime_s())}});
    return 0;
  }
};

}  // namespace

std::unique_ptr<Verb> MakeStatsVerb() { return std::make_unique<StatsVerb>(); }

}  // namespace jitd::jitctl
