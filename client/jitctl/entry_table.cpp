#include "entry_table.h"

#include <string>

#include "human_format.h"
#include "table.h"

namespace jitd::jitctl {

// 16 hex digits (64 bits) identify an entry among any realistic number of
// cached cubins and keep the table within a terminal's width.
constexpr size_t kShortKeyDigits = 16;

void PrintEntryTable(std::ostream& out, const google::protobuf::RepeatedPtrField<v1::EntryInfo>& entries) {
  using A = Table::Align;
  Table table({{"KEY"},
               {"KERNEL"},
               {"PARAMS"},
               {"ARCH"},
               {"SIZE", A::kRight},
               {"HITS", A::kRight},
               {"LAST USED"},
               {"CREATED"},
               {"PINNED"}});
  const int64_t now = NowUnixMs();
  for (const v1::EntryInfo& entry : entries) {
    table.AddRow({entry.key().substr(0, kShortKeyDigits), entry.kernel(), entry.params(), entry.arch(),
                  FormatBytes(entry.size_bytes()), std::to_string(entry.hits()),
                  FormatAge(entry.last_used_unix_ms(), now), FormatAge(entry.created_unix_ms(), now),
                  entry.pinned() ? "yes" : ""});
  }
  table.Print(out);
}

}  // namespace jitd::jitctl
