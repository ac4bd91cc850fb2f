// `jitctl stats`: the cache's sizes and counters, then what the daemon's
// request path and compile workers have done since it started.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "human_format.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
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

std::string Kernels(const v1::StatsResponse& stats) {
  return absl::StrFormat("%d from %s (fingerprint %s, NVRTC %s)", stats.kernels(), stats.kernels_dir(),
                         stats.kernels_fingerprint().substr(0, 12), stats.nvrtc_version());
}

// One line per kernel tree when the daemon serves named trees.
std::vector<std::pair<std::string, std::string>> Trees(const v1::StatsResponse& stats) {
  std::vector<std::pair<std::string, std::string>> rows;
  if (stats.trees_size() == 1 && stats.trees(0).name().empty()) return rows;
  for (const v1::KernelTreeInfo& tree : stats.trees()) {
    std::string line;
    if (tree.serving()) {
      line = absl::StrFormat("%d from %s (namespace %s, fingerprint %s", tree.kernels(), tree.dir(),
                             tree.kernel_namespace(), tree.fingerprint().substr(0, 12));
      if (!tree.lock().empty())
        text::Append(line, ", locked by ", tree.lock(), ": ", tree.locked_instantiations(), " instantiations");
      text::Append(line, ")");
      if (!tree.error().empty()) text::Append(line, "; last reload refused: ", tree.error());
    } else {
      line = text::Cat("REFUSED (", tree.dir(), "): ", tree.error());
    }
    rows.emplace_back(text::Cat("  tree ", tree.name().empty() ? "(unnamed)" : tree.name()), std::move(line));
  }
  return rows;
}

std::string Requests(const v1::StatsResponse& stats) {
  return absl::StrFormat("%d (%d from memory, %d from disk, %d joined a compile, %d cached-only misses, %d gave up)",
                         stats.requests(), stats.memory_hits(), stats.disk_hits(), stats.joined(),
                         stats.cached_only_misses(), stats.abandoned());
}

std::string HotCache(const v1::StatsResponse& stats) {
  return absl::StrFormat("%d entries, %s of %s (%d evicted)", stats.hot_entries(), FormatBytes(stats.hot_bytes()),
                         FormatBytes(stats.hot_max_bytes()), stats.hot_evictions());
}

std::string Compiles(const v1::StatsResponse& stats) {
  return absl::StrFormat("%d (%d rejected by NVRTC, %d errors, %d prefetched, %d in flight, %d not stored)",
                         stats.compiles(), stats.compile_failures(), stats.compile_errors(), stats.prefetches(),
                         stats.compiles_in_flight(), stats.store_failures());
}

std::string Workers(const v1::StatsResponse& stats) {
  return absl::StrFormat(
      "%d (%d busy, %d queued of at most %d, %d crashed, %d restarted; refused: %d prefetches, %d compiles over a "
      "client's share)",
      stats.workers(), stats.busy_workers(), stats.queue_depth(), stats.max_queue(), stats.worker_crashes(),
      stats.worker_restarts(), stats.prefetches_refused(), stats.peer_compiles_refused());
}

std::string Remote(const v1::StatsResponse& stats) {
  return absl::StrFormat(
      "%s%s: %d hits, %d misses, %d stored, %d waited for another daemon (%d took over), %d corrupt, %d oversized "
      "(%d lookups spared), %d unsigned modules refused, %d errors, %d skipped, %d outage%s",
      stats.remote(), stats.remote_circuit_open() ? " (UNAVAILABLE: serving locally)" : "", stats.remote_hits(),
      stats.remote_misses(), stats.remote_stores(), stats.remote_waits(), stats.remote_takeovers(),
      stats.remote_corrupt(), stats.remote_oversized(), stats.remote_not_reread(), stats.remote_unsigned_modules(),
      stats.remote_errors(), stats.remote_skipped(), stats.remote_outages(), stats.remote_outages() == 1 ? "" : "s");
}

// "none", or each mounted bundle and what it answered.
std::string Bundles(const v1::StatsResponse& stats) {
  if (stats.bundles().empty()) return "none";
  std::string text = absl::StrFormat("%d hits, %d corrupt;", stats.bundle_hits(), stats.bundle_corrupt());
  for (const v1::MountedBundle& bundle : stats.bundles()) {
    text::Append(text, " ", bundle.path(), " (", bundle.entries(), bundle.entries() == 1 ? " entry, " : " entries, ",
                 FormatBytes(bundle.bytes()), ", ", bundle.seal(), " ", bundle.seal_hex().substr(0, 12), ")");
  }
  return text;
}

// "none", or what a fleet fatbin holds and the archs asked for outside it.
std::string Fleet(const v1::StatsResponse& stats) {
  if (stats.fleet_targets().empty()) return "none";
  const std::vector<std::string> targets(stats.fleet_targets().begin(), stats.fleet_targets().end());
  std::string text = text::Cat(text::Join(targets, "+"), "; requests for other archs: ");
  if (stats.arch_misses().empty()) text::Append(text, "none");
  const std::map<std::string, uint64_t> misses(stats.arch_misses().begin(), stats.arch_misses().end());
  bool first = true;
  for (const auto& [arch, count] : misses) {
    text::Append(text, first ? "" : ", ", arch, " ", count);
    first = false;
  }
  return text;
}

// The last recompile of the most used instantiations (--rewarm-count).
std::string HotSet(const v1::StatsResponse& stats) {
  const v1::RewarmProgress& r = stats.rewarm();
  if (r.runs() == 0) return r.state().empty() ? "off (--rewarm-count 0)" : "not checked yet";
  return absl::StrFormat(
             "%d most used: %d ready under this toolkit (%d compiled by the %s run, %d failed, %d left "
             "for their first request); %s after %s; %d older entries unpinned",
             r.hot_set(), r.ready(), r.compiled(), r.state() == "running" ? "running" : "last", r.failed(), r.skipped(),
             r.state(), r.trigger(), r.unpinned()) +
         (r.migrated() > 0 ? absl::StrFormat("; %d copied from their jitd 0.2 tree-named keys", r.migrated()) : "");
}

// The cache's entries under the kernels and toolkit served now, and older.
std::string Generations(const v1::StatsResponse& stats) {
  const v1::RewarmProgress& r = stats.rewarm();
  if (r.state().empty()) return "not counted (--rewarm-count 0)";
  return absl::StrFormat("%d in the cache: %d entries (%s) current, %d entries (%s) of older toolkits or kernels",
                         r.generations(), r.current_entries(), FormatBytes(r.current_bytes()), r.older_entries(),
                         FormatBytes(r.older_bytes()));
}

class StatsVerb final : public Verb {
 public:
  CLI::App* Register(CLI::App& app) override {
    return app.add_subcommand("stats", "Show the cache's size, budget and counters, and the daemon's request counters");
  }

  absl::StatusOr<int> Run(Client& client, const Output& output) override {
    JITD_ASSIGN_OR_RETURN(v1::StatsResponse stats, client.Stats());
    if (output.json) {
      output.out << ToJson(stats);
      return 0;
    }
    std::vector<std::pair<std::string, std::string>> rows{
        {"cache dir", stats.cache_dir()},
        {"entries", absl::StrFormat("%d (%d pinned)", stats.entries(), stats.pinned_entries())},
        {"size", absl::StrFormat("%s (%s pinned)", FormatBytes(stats.bytes()), FormatBytes(stats.pinned_bytes()))},
        {"budget", Budget(stats)},
        {"hits / misses", HitRate(stats)},
        {"evictions", text::Cat(stats.evictions())},
        {"corrupt", text::Cat(stats.corrupt())},
        {"publishes", absl::StrFormat("%d (%d failed)", stats.publishes(), stats.publish_failures())},
        {"uptime", FormatSeconds(stats.uptime_s())},
        {"kernels", Kernels(stats)}};
    for (auto& row : Trees(stats)) rows.push_back(std::move(row));
    rows.insert(rows.end(), {{"requests", Requests(stats)},
                             {"hot cache", HotCache(stats)},
                             {"compiles", Compiles(stats)},
                             {"negative hits",
                              absl::StrFormat("%d (compile failures answered from memory)", stats.negative_hits())},
                             {"workers", Workers(stats)},
                             {"remote tier", stats.remote().empty() ? std::string("none") : Remote(stats)},
                             {"bundles", Bundles(stats)},
                             {"fleet", Fleet(stats)},
                             {"hot set", HotSet(stats)},
                             {"generations", Generations(stats)}});
    Table::PrintRecord(output.out, rows);
    return 0;
  }
};

}  // namespace

std::unique_ptr<Verb> MakeStatsVerb() { return std::make_unique<StatsVerb>(); }

}  // namespace jitd::jitctl
