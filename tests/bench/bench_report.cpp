#include "bench_report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace jitd::bench {
namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
      out += buffer;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string Number(double v) {
  if (!std::isfinite(v)) return "null";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.6g", v);
  return buffer;
}

std::string Value(double v, const std::string& unit) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), v >= 1000 ? "%.0f %s" : "%.1f %s", v, unit.c_str());
  return buffer;
}

}  // namespace

double Figure::ratio() const { return baseline.empty() || baseline_value == 0 ? 0 : value / baseline_value; }

bool Figure::met() const {
  switch (target) {
    case Target::kNone:
      return true;
    case Target::kRatioAtMost:
      return ratio() <= bound;
    case Target::kRatioAtLeast:
      return ratio() >= bound;
    case Target::kAtMost:
      return value <= bound;
  }
  return false;
}

std::string Figure::TargetText() const {
  char buffer[64];
  switch (target) {
    case Target::kNone:
      return "";
    case Target::kRatioAtMost:
      std::snprintf(buffer, sizeof(buffer), "<= %.2fx", bound);
      return buffer;
    case Target::kRatioAtLeast:
      std::snprintf(buffer, sizeof(buffer), ">= %.2fx", bound);
      return buffer;
    case Target::kAtMost:
      return "<= " + Value(bound, unit);
  }
  return "";
}

void Report::Print() const {
  std::printf("== %s  (%s)\n", bench_.c_str(), command_.c_str());
  for (const auto& [key, value] : context_) std::printf("   %s: %s\n", key.c_str(), value.c_str());
  std::printf("%-44s %14s  %-28s %14s %7s %9s %s\n", "figure", "value", "baseline", "baseline", "ratio", "target",
              "met");
  for (const Figure& f : figures_) {
    const std::string ratio = f.baseline.empty() ? "" : Number(f.ratio());
    std::printf("%-44s %14s  %-28s %14s %7s %9s %s\n", f.name.c_str(), Value(f.value, f.unit).c_str(),
                f.baseline.c_str(), f.baseline.empty() ? "" : Value(f.baseline_value, f.unit).c_str(),
                ratio.empty() ? "" : (ratio.substr(0, 5) + "x").c_str(), f.TargetText().c_str(),
                f.has_target() ? (f.met() ? "yes" : "NO") : "");
    if (!f.note.empty()) std::printf("    %s\n", f.note.c_str());
  }
  if (!curve_.empty()) {
    std::printf("%-6s %8s %14s %12s %12s\n", "server", "clients", "calls/s", "p50 us", "p99 us");
    for (const CurvePoint& p : curve_) {
      std::printf("%-6s %8d %14.0f %12.1f %12.1f\n", p.server.c_str(), p.clients, p.calls_per_s, p.p50_us, p.p99_us);
    }
  }
  std::fflush(stdout);
}

absl::Status Report::WriteJson(const std::string& path) const {
  std::ostringstream out;
  out << "{\n  \"bench\": " << JsonString(bench_) << ",\n  \"command\": " << JsonString(command_)
      << ",\n  \"context\": {";
  for (size_t i = 0; i < context_.size(); ++i) {
    out << (i ? ", " : "") << JsonString(context_[i].first) << ": " << JsonString(context_[i].second);
  }
  out << "},\n  \"figures\": [";
  for (size_t i = 0; i < figures_.size(); ++i) {
    const Figure& f = figures_[i];
    out << (i ? ",\n" : "\n") << "    {\"figure\": " << JsonString(f.name) << ", \"unit\": " << JsonString(f.unit)
        << ", \"value\": " << Number(f.value) << ", \"baseline\": " << JsonString(f.baseline)
        << ", \"baseline_value\": " << (f.baseline.empty() ? "null" : Number(f.baseline_value))
        << ", \"ratio\": " << (f.baseline.empty() ? "null" : Number(f.ratio()))
        << ", \"target\": " << JsonString(f.TargetText())
        << ", \"met\": " << (f.has_target() ? (f.met() ? "true" : "false") : "null")
        << ", \"note\": " << JsonString(f.note) << "}";
  }
  out << "\n  ],\n  \"curve\": [";
  for (size_t i = 0; i < curve_.size(); ++i) {
    const CurvePoint& p = curve_[i];
    out << (i ? ",\n" : "\n") << "    {\"server\": " << JsonString(p.server) << ", \"clients\": " << p.clients
        << ", \"calls_per_s\": " << Number(p.calls_per_s) << ", \"p50_us\": " << Number(p.p50_us)
        << ", \"p99_us\": " << Number(p.p99_us) << "}";
  }
  out << "\n  ]\n}\n";
  std::ofstream file(path);
  file << out.str();
  file.close();
  if (!file) return absl::UnavailableError("cannot write " + path);
  return absl::OkStatus();
}

void Report::PrintAndWrite(const std::string& json) const {
  Print();
  if (!json.empty()) OrDie(WriteJson(json), "json");
}

bool Report::AllMet() const {
  return std::all_of(figures_.begin(), figures_.end(), [](const Figure& f) { return f.met(); });
}

void OrDie(const absl::Status& status, const std::string& what) {
  if (!status.ok()) throw std::runtime_error(what + ": " + status.ToString());
}

int RunMain(const char* program, const std::function<int()>& run) {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

double Median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  return n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
}

double Percentile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(samples.size())));
  return samples[std::clamp<size_t>(rank, 1, samples.size()) - 1];
}

double ResidentMiB(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  }
  return 0;
}

}  // namespace jitd::bench
