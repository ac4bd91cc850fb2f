#include "entry_table.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "human_format.h"
#include "table.h"

namespace jitd::jitctl {

// 16 hex digits (64 bits) identify an entry among any realistic number of
// cached cubins and keep the table within a terminal's width.
constexpr size_t kShortKeyDigits = 16;

void PrintEntryTable(std::ostream& out, const google::protobuf::RepeatedPtrField<v1::EntryInfo>& entries) {
  using A = Table::Align;
  // OPTIONS only when an entry has some: entries that differ only in their
  // request's options must not read as identical rows, and most have none.
  const bool any_options =
      std::any_of(entries.begin(), entries.end(), [](const v1::EntryInfo& e) { return e.options_size() > 0; });
  // KIND only when an entry is not a cubin (a PTX or a module kernel's
  // shared object), so that a cache of cubins reads as it always did.
  const bool any_kind =
      std::any_of(entries.begin(), entries.end(), [](const v1::EntryInfo& e) { return e.kind() != "cubin"; });
  std::vector<Table::Column> columns = {{"KEY"}, {"KERNEL"}, {"PARAMS"}};
  if (any_options) columns.push_back({"OPTIONS"});
  if (any_kind) columns.push_back({"KIND"});
  // BLOB: the blob file (cubin plus metadata), what the budget counts; `get`
  // reports the cubin alone.
  for (Table::Column column : std::vector<Table::Column>{
           {"ARCH"}, {"BLOB", A::kRight}, {"HITS", A::kRight}, {"LAST USED"}, {"CREATED"}, {"PINNED"}}) {
    columns.push_back(std::move(column));
  }
  Table table(std::move(columns));
  const int64_t now = NowUnixMs();
  for (const v1::EntryInfo& entry : entries) {
    std::vector<std::string> row = {entry.key().substr(0, kShortKeyDigits), entry.kernel(), entry.params()};
    if (any_options) row.push_back(absl::StrJoin(entry.options(), " "));
    if (any_kind) row.push_back(entry.kind());
    for (std::string cell : {entry.arch(), FormatBytes(entry.size_bytes()), std::to_string(entry.hits()),
                             FormatAge(entry.last_used_unix_ms(), now), FormatAge(entry.created_unix_ms(), now),
                             std::string(entry.pinned() ? "yes" : "")}) {
      row.push_back(std::move(cell));
    }
    table.AddRow(std::move(row));
  }
  table.Print(out);
}

std::string KernelGlob(const std::string& tree, const std::string& glob) {
  if (tree.empty()) return glob;
  return tree + "/" + (glob.empty() ? std::string("*") : glob);
}

}  // namespace jitd::jitctl
