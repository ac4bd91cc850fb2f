#include "table.h"

#include <algorithm>
#include <utility>

#include "jitd/base/text.h"

namespace jitd::jitctl {
namespace {

void AppendCell(std::string& line, const std::string& cell, size_t width, Table::Align align) {
  const std::string padding(width - std::min(width, cell.size()), ' ');
  if (align == Table::Align::kRight) {
    text::Append(line, padding, cell);
  } else {
    text::Append(line, cell, padding);
  }
}

}  // namespace

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

void Table::Print(std::ostream& out) const {
  std::vector<size_t> widths(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    widths[c] = columns_[c].header.size();
    for (const auto& row : rows_) widths[c] = std::max(widths[c], row[c].size());
  }
  auto print_line = [&](auto cell_at) {
    std::string line;
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (c > 0) line += "  ";
      AppendCell(line, cell_at(c), widths[c], columns_[c].align);
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << '\n';
  };
  print_line([&](size_t c) -> const std::string& { return columns_[c].header; });
  for (const auto& row : rows_) {
    print_line([&](size_t c) -> const std::string& { return row[c]; });
  }
}

void Table::PrintRecord(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& fields) {
  size_t width = 0;
  for (const auto& field : fields) width = std::max(width, field.first.size());
  for (const auto& [name, value] : fields) {
    out << name << std::string(width - name.size() + 2, ' ') << value << '\n';
  }
}

}  // namespace jitd::jitctl
