#include "metrics/metrics.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>
#include <type_traits>

#include "jitd/base/status.h"
#include "jitd/base/text.h"

namespace jitd::metrics {

namespace {

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string FormatInteger(uint64_t value) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  (void)ec;  // 24 characters hold any uint64
  return std::string(buf, end);
}

// The label part of a sample, `{a="x",b="y"}`, from names and values.
std::string LabelPart(const std::vector<std::pair<std::string, std::string>>& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out += ',';
    jitd::text::Append(out, labels[i].first, "=\"", EscapeLabelValue(labels[i].second), "\"");
  }
  out += '}';
  return out;
}

}  // namespace

std::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

bool IsValidMetricName(std::string_view name) {
  if (name.empty() || !(IsNameStart(name[0]) || name[0] == ':')) return false;
  return std::all_of(name.begin() + 1, name.end(), [](char c) { return IsNameStart(c) || IsDigit(c) || c == ':'; });
}

bool IsValidLabelName(std::string_view name) {
  if (name.empty() || !IsNameStart(name[0]) || name.substr(0, 2) == "__") return false;
  return std::all_of(name.begin() + 1, name.end(), [](char c) { return IsNameStart(c) || IsDigit(c); });
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  if (ec != std::errc()) return "NaN";  // cannot happen: 64 characters hold any double
  return std::string(buf, end);
}

std::vector<double> ExponentialBuckets(double start, double factor, size_t count) {
  std::vector<double> bounds;
  if (!(start > 0) || !(factor > 1) || !std::isfinite(start) || !std::isfinite(factor)) return bounds;
  bounds.reserve(count);
  for (double b = start; bounds.size() < count; b *= factor) bounds.push_back(b);
  return bounds;
}

std::vector<double> LinearBuckets(double start, double width, size_t count) {
  std::vector<double> bounds;
  if (!(width > 0) || !std::isfinite(start) || !std::isfinite(width)) return bounds;
  bounds.reserve(count);
  for (size_t i = 0; i < count; ++i) bounds.push_back(start + width * static_cast<double>(i));
  return bounds;
}

// Counter, Gauge, Histogram.

void Counter::Add(double amount) {
  if (!(amount > 0)) return;
  fraction_.fetch_add(amount, std::memory_order_relaxed);
}

double Counter::Value() const {
  return static_cast<double>(ints_.load(std::memory_order_relaxed)) + fraction_.load(std::memory_order_relaxed);
}

std::string Counter::FormattedValue() const {
  const uint64_t ints = ints_.load(std::memory_order_relaxed);
  const double fraction = fraction_.load(std::memory_order_relaxed);
  if (fraction == 0) return FormatInteger(ints);
  return FormatValue(static_cast<double>(ints) + fraction);
}

void Gauge::Add(double amount) { value_.fetch_add(amount, std::memory_order_relaxed); }

Histogram::Histogram(const std::vector<double>* bounds)
    : bounds_(bounds), buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds->size() + 1)) {
  for (size_t i = 0; i <= bounds_->size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  size_t i = bounds_->size();
  if (!std::isnan(value)) i = std::lower_bound(bounds_->begin(), bounds_->end(), value) - bounds_->begin();
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.cumulative.reserve(bounds_->size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_->size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(running);
  }
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

// Families.

void FamilyBase::RenderHeader(std::string* out) const {
  jitd::text::Append(*out, "# HELP ", name_, " ", EscapeHelp(help_), "\n# TYPE ", name_, " ", TypeName(type_), "\n");
}

void FamilyBase::RenderSample(std::string* out, std::string_view sample_name,
                              const std::vector<std::string>& label_values, std::string_view extra_label,
                              std::string_view value) const {
  out->append(sample_name);
  if (!label_values.empty() || !extra_label.empty()) {
    *out += '{';
    for (size_t i = 0; i < label_values.size(); ++i) {
      if (i > 0) *out += ',';
      jitd::text::Append(*out, label_names_[i], "=\"", EscapeLabelValue(label_values[i]), "\"");
    }
    if (!extra_label.empty()) {
      if (!label_values.empty()) *out += ',';
      out->append(extra_label);
    }
    *out += '}';
  }
  jitd::text::Append(*out, " ", value, "\n");
}

void FamilyBase::ReportArity(size_t got) const {
  std::call_once(arity_reported_, [&] {
    spdlog::error("metrics: {} has {} label(s) but was given {} value(s); those samples are not exported", name_,
                  label_names_.size(), got);
  });
}

template <typename T>
Family<T>::Family(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
                  std::vector<double> bounds)
    : FamilyBase(std::move(name), std::move(help), type, std::move(label_names)), bounds_(std::move(bounds)) {
  detached_ = MakeChild();
  if (label_names_.empty()) children_.emplace(std::vector<std::string>{}, MakeChild());
}

template <typename T>
std::unique_ptr<T> Family<T>::MakeChild() const {
  if constexpr (std::is_same_v<T, Histogram>) {
    return std::make_unique<Histogram>(&bounds_);
  } else {
    return std::make_unique<T>();
  }
}

template <typename T>
T& Family<T>::WithLabels(std::initializer_list<std::string_view> values) {
  if (values.size() != label_names_.size()) {
    ReportArity(values.size());
    return *detached_;
  }
  return Child(std::vector<std::string>(values.begin(), values.end()));
}

template <typename T>
T& Family<T>::WithLabels(const std::vector<std::string>& values) {
  if (values.size() != label_names_.size()) {
    ReportArity(values.size());
    return *detached_;
  }
  return Child(values);
}

template <typename T>
T& Family<T>::Child(std::vector<std::string> values) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = children_.find(values);
  if (it == children_.end()) it = children_.emplace(std::move(values), MakeChild()).first;
  return *it->second;
}

template <typename T>
void Family<T>::Render(std::string* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  RenderHeader(out);
  for (const auto& [values, child] : children_) {
    if constexpr (std::is_same_v<T, Counter>) {
      RenderSample(out, name_, values, "", child->FormattedValue());
    } else if constexpr (std::is_same_v<T, Gauge>) {
      RenderSample(out, name_, values, "", FormatValue(child->Value()));
    } else {
      const Histogram::Snapshot s = child->Read();
      const std::string bucket = jitd::text::Cat(name_, "_bucket");
      for (size_t i = 0; i < bounds_.size(); ++i) {
        const std::string le = jitd::text::Cat("le=\"", FormatValue(bounds_[i]), '"');
        RenderSample(out, bucket, values, le, FormatInteger(s.cumulative[i]));
      }
      RenderSample(out, bucket, values, "le=\"+Inf\"", FormatInteger(s.count));
      RenderSample(out, jitd::text::Cat(name_, "_sum"), values, "", FormatValue(s.sum));
      RenderSample(out, jitd::text::Cat(name_, "_count"), values, "", FormatInteger(s.count));
    }
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

// Emitter.

void Emitter::Gauge(std::string_view name, std::string_view help, double value, const Labels& labels) {
  Add(MetricType::kGauge, name, help, value, labels);
}

void Emitter::Counter(std::string_view name, std::string_view help, double value, const Labels& labels) {
  Add(MetricType::kCounter, name, help, value, labels);
}

void Emitter::Add(MetricType type, std::string_view name, std::string_view help, double value, const Labels& labels) {
  const std::string key(name);
  if (!IsValidMetricName(name)) return warn_(key, "not a valid metric name");
  if (taken_->count(key) != 0) return warn_(key, "a registered metric renders this name");
  std::set<std::string_view> label_names;
  for (const auto& [label, label_value] : labels) {
    if (!IsValidLabelName(label)) return warn_(key, jitd::text::Cat("\"", label, "\" is not a valid label name"));
    if (!label_names.insert(label).second) return warn_(key, jitd::text::Cat("label \"", label, "\" given twice"));
  }
  auto it = index_.find(key);
  if (it == index_.end()) {
    it = index_.emplace(key, groups_.size()).first;
    groups_.push_back(Group{key, std::string(help), type, {}, {}});
  }
  Group& group = groups_[it->second];
  if (group.type != type) {
    return warn_(key, jitd::text::Cat("given as a ", TypeName(type), " after being given as a ", TypeName(group.type)));
  }
  std::string label_part = LabelPart(labels);
  if (!group.label_sets.insert(label_part).second) {
    return warn_(key, jitd::text::Cat("the sample ", key, label_part, " was given twice"));
  }
  jitd::text::Append(group.samples, key, label_part, " ", FormatValue(value), "\n");
}

void Emitter::Render(std::string* out) const {
  for (const Group& group : groups_) {
    if (group.samples.empty()) continue;  // every sample dropped
    jitd::text::Append(*out, "# HELP ", group.name, " ", EscapeHelp(group.help), "\n# TYPE ", group.name, " ",
                       TypeName(group.type), "\n", group.samples);
  }
}

// Registry.

absl::Status Registry::CheckNew(const std::string& name, const std::vector<std::string>& label_names,
                                const std::vector<std::string>& sample_names) const {
  if (!IsValidMetricName(name)) {
    return absl::InvalidArgumentError(
        jitd::text::Cat("metric name \"", name, "\" is not valid: it must match [a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  std::set<std::string_view> seen;
  for (const std::string& label : label_names) {
    if (!IsValidLabelName(label)) {
      return absl::InvalidArgumentError(jitd::text::Cat("metric ", name, ": label name \"", label,
                                                        "\" is not valid: it must match [a-zA-Z_][a-zA-Z0-9_]* "
                                                        "and not start with __"));
    }
    if (!seen.insert(label).second) {
      return absl::InvalidArgumentError(jitd::text::Cat("metric ", name, ": label name \"", label, "\" given twice"));
    }
  }
  for (const std::string& sample : sample_names) {
    if (sample_names_.count(sample) != 0) {
      return absl::AlreadyExistsError(jitd::text::Cat("metric ", name, ": the name ", sample, " is taken"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CounterFamily*> Registry::AddCounter(std::string name, std::string help,
                                                    std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mu_);
  JITD_RETURN_IF_ERROR(CheckNew(name, label_names, {name}));
  sample_names_.insert(name);
  auto* family = new CounterFamily(std::move(name), std::move(help), MetricType::kCounter, std::move(label_names), {});
  families_.emplace_back(family);
  return family;
}

absl::StatusOr<GaugeFamily*> Registry::AddGauge(std::string name, std::string help,
                                                std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mu_);
  JITD_RETURN_IF_ERROR(CheckNew(name, label_names, {name}));
  sample_names_.insert(name);
  auto* family = new GaugeFamily(std::move(name), std::move(help), MetricType::kGauge, std::move(label_names), {});
  families_.emplace_back(family);
  return family;
}

absl::StatusOr<HistogramFamily*> Registry::AddHistogram(std::string name, std::string help,
                                                        std::vector<std::string> label_names,
                                                        std::vector<double> bounds) {
  if (!bounds.empty() && std::isinf(bounds.back()) && bounds.back() > 0) bounds.pop_back();
  if (bounds.empty()) {
    return absl::InvalidArgumentError(jitd::text::Cat("histogram ", name, ": no bucket bounds"));
  }
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      return absl::InvalidArgumentError(
          jitd::text::Cat("histogram ", name, ": bucket bound ", FormatValue(bounds[i]), " is not finite"));
    }
    if (i > 0 && !(bounds[i - 1] < bounds[i])) {
      return absl::InvalidArgumentError(jitd::text::Cat("histogram ", name,
                                                        ": bucket bounds are not strictly increasing (",
                                                        FormatValue(bounds[i - 1]), ", ", FormatValue(bounds[i]), ")"));
    }
  }
  if (std::find(label_names.begin(), label_names.end(), "le") != label_names.end()) {
    return absl::InvalidArgumentError(
        jitd::text::Cat("histogram ", name, ": \"le\" cannot be a label name, it names the buckets"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> samples = {name, jitd::text::Cat(name, "_bucket"), jitd::text::Cat(name, "_sum"),
                                      jitd::text::Cat(name, "_count")};
  JITD_RETURN_IF_ERROR(CheckNew(name, label_names, samples));
  sample_names_.insert(samples.begin(), samples.end());
  auto* family = new HistogramFamily(std::move(name), std::move(help), MetricType::kHistogram, std::move(label_names),
                                     std::move(bounds));
  families_.emplace_back(family);
  return family;
}

Registry::CollectorId Registry::AddCollector(Collector collector) {
  std::lock_guard<std::mutex> lock(mu_);
  const CollectorId id = next_collector_++;
  collectors_.emplace(id, std::make_shared<const Collector>(std::move(collector)));
  return id;
}

void Registry::RemoveCollector(CollectorId id) {
  std::lock_guard<std::mutex> render_lock(render_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  collectors_.erase(id);
}

void Registry::Warn(const std::string& name, const std::string& why) {
  if (warned_.insert(name).second) {
    spdlog::warn("metrics: a collector's sample of {} is dropped (logged once): {}", name, why);
  }
}

std::string Registry::Render() {
  std::lock_guard<std::mutex> render_lock(render_mu_);
  std::vector<const FamilyBase*> families;
  std::vector<std::shared_ptr<const Collector>> collectors;
  std::set<std::string> taken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    families.reserve(families_.size());
    for (const auto& family : families_) families.push_back(family.get());
    collectors.reserve(collectors_.size());
    for (const auto& [id, collector] : collectors_) collectors.push_back(collector);
    taken = sample_names_;
  }
  std::string out;
  for (const FamilyBase* family : families) family->Render(&out);
  Emitter emitter(&taken, [this](const std::string& name, const std::string& why) { Warn(name, why); });
  for (const auto& collector : collectors) (*collector)(emitter);
  emitter.Render(&out);
  return out;
}

}  // namespace jitd::metrics
