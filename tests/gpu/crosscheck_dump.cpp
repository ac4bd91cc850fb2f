#include "crosscheck_dump.h"

#include <cstdlib>
#include <fstream>
#include <system_error>

#include "jitd/base/text.h"

namespace jitd::gpu {
namespace {

using text::Cat;

absl::Status WriteFile(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return absl::InternalError(Cat("cannot write ", path.string()));
  return absl::OkStatus();
}

void AppendRaw(std::string& out, std::span<const std::uint16_t> values) {
  // The host is little-endian like the GPU and like numpy's int16 that
  // crosscheck.py reads these files as.
  out.append(reinterpret_cast<const char*>(values.data()), values.size_bytes());
}

// The names here are plain identifiers; nothing needs escaping.
std::string Quoted(const std::string& s) { return Cat("\"", s, "\""); }

}  // namespace

std::optional<std::filesystem::path> DumpDir() {
  const char* dir = std::getenv("JITD_GPU_DUMP_DIR");
  if (dir == nullptr || *dir == '\0') return std::nullopt;
  return std::filesystem::path(dir);
}

absl::Status WriteDump(const std::filesystem::path& dir, const DumpCase& c) {
  if (c.inputs.size() != c.input_shapes.size()) {
    return absl::InvalidArgumentError(
        Cat(c.name, ": ", c.inputs.size(), " inputs but ", c.input_shapes.size(), " shapes"));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(Cat("cannot create ", dir.string(), ": ", ec.message()));

  std::string inputs;
  std::vector<std::string> shapes;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    std::int64_t n = 1;
    std::vector<std::string> dims;
    for (std::int64_t d : c.input_shapes[i]) {
      n *= d;
      dims.push_back(Cat(d));
    }
    if (static_cast<std::int64_t>(c.inputs[i].size()) != n) {
      return absl::InvalidArgumentError(
          Cat(c.name, ": input ", i, " holds ", c.inputs[i].size(), " values, its shape ", n));
    }
    AppendRaw(inputs, c.inputs[i]);
    shapes.push_back(Cat("[", text::Join(dims, ", "), "]"));
  }
  std::string output;
  AppendRaw(output, c.output);

  std::string json =
      Cat("{\"name\": ", Quoted(c.name), ", \"kernel\": ", Quoted(c.kernel), ", \"dtype\": ", Quoted(c.dtype));
  if (c.gate.has_value()) json += Cat(", \"gate\": ", Quoted(*c.gate));
  json += Cat(", \"input_shapes\": [", text::Join(shapes, ", "), "]}\n");

  // The .json last: crosscheck.py lists .json files, so a case shows up only
  // once its data is complete.
  if (absl::Status s = WriteFile(dir / (c.name + ".inputs"), inputs); !s.ok()) return s;
  if (absl::Status s = WriteFile(dir / (c.name + ".output"), output); !s.ok()) return s;
  return WriteFile(dir / (c.name + ".json"), json);
}

}  // namespace jitd::gpu
