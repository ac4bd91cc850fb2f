// Aligned text tables for jitctl's human-readable output.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace jitd::jitctl {

class Table {
 public:
  enum class Align { kLeft, kRight };
  struct Column {
    std::string header;
    Align align = Align::kLeft;
  };

  explicit Table(std::vector<Column> columns);

  // A row with one cell per column (missing cells print empty, extra are
  // an error of the caller and are dropped).
  void AddRow(std::vector<std::string> cells);

  // Header, then rows; columns two spaces apart, lines without trailing
  // blanks (so output diffs and `grep -x` behave).
  void Print(std::ostream& out) const;

  // Two columns without a header: "name  value" lines, for single records.
  static void PrintRecord(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& fields);

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace jitd::jitctl
