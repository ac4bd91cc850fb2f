// jitctl's tables: columns aligned, numbers right-aligned, no trailing blanks.
#include <gtest/gtest.h>

#include <sstream>

#include "table.h"

namespace jitd::jitctl {
namespace {

TEST(Table, AlignsColumnsToTheWidestCell) {
  Table table({{"KEY"}, {"SIZE", Table::Align::kRight}, {"KERNEL"}});
  table.AddRow({"aaaa", "1.0 KiB", "moe.topk"});
  table.AddRow({"b", "12 B", "norm"});
  std::ostringstream out;
  table.Print(out);
  EXPECT_EQ(out.str(),
            "KEY      SIZE  KERNEL\n"
            "aaaa  1.0 KiB  moe.topk\n"
            "b        12 B  norm\n");
}

TEST(Table, MissingCellsPrintEmptyAndLinesEndWithoutBlanks) {
  Table table({{"A"}, {"B"}});
  table.AddRow({"x"});
  std::ostringstream out;
  table.Print(out);
  EXPECT_EQ(out.str(), "A  B\nx\n");
}

TEST(Table, RecordsAlignValues) {
  std::ostringstream out;
  Table::PrintRecord(out, {{"entries", "3"}, {"cache dir", "/c"}});
  EXPECT_EQ(out.str(), "entries    3\ncache dir  /c\n");
}

}  // namespace
}  // namespace jitd::jitctl
