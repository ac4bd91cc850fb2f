// Metrics of the daemon in the Prometheus text exposition format 0.0.4,
// without an external metrics library.
//
// A Registry owns metric families. A family has a name, a help text, a type
// (counter, gauge, histogram) and a fixed list of label names; each set of
// label values is one child (one time series), made on first use by
// WithLabels() and kept by the family for the registry's lifetime:
//
//   Registry registry;
//   JITD_ASSIGN_OR_RETURN(
//       CounterFamily* requests,
//       registry.AddCounter("jitd_requests_total", "Kernel requests served.", {"outcome", "source"}));
//   Counter& ok_memory = requests->WithLabels({"ok", "memory"});  // once: takes the family's mutex
//   ok_memory.Increment();                                          // per request: one relaxed atomic add
//
// Values read only when scraped (cache bytes, queue depth) come from
// collectors, functions the registry calls during Render() with an Emitter,
// so the code that owns those values needs no hooks on its hot paths:
//
//   registry.AddCollector([&cache](Emitter& e) {
//     e.Gauge("jitd_cache_bytes", "Bytes of the disk cache.", cache.Bytes());
//   });
//
// Errors: registration never aborts. An invalid name, label name, bucket list
// or a name taken already is an error Status from Add*(). A WithLabels() call
// with the wrong number of values (a programming error) logs once and returns
// a child that is never rendered; a collector's invalid sample is dropped and
// logged once per name (see Emitter).
//
// Thread safety: everything here may be called from any thread at any time.
// Increment/Set/Add/Observe on a child are lock-free (relaxed atomics), also
// while Render() runs; Render() sees each value at some point during the
// render, not one snapshot of all of them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jitd::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// "counter", "gauge", "histogram": the word of the # TYPE line.
std::string_view TypeName(MetricType type);

// [a-zA-Z_:][a-zA-Z0-9_:]* (a metric name) and [a-zA-Z_][a-zA-Z0-9_]* not
// starting with "__" (a label name; "__" is Prometheus's own).
bool IsValidMetricName(std::string_view name);
bool IsValidLabelName(std::string_view name);

// The text exposition format's escapes: a label value gets \\, \" and \n; a
// help text \\ and \n.
std::string EscapeLabelValue(std::string_view value);
std::string EscapeHelp(std::string_view help);
// A sample value: the shortest text that reads back as `value` ("1", "0.25",
// "1e-05"), "+Inf", "-Inf" or "NaN".
std::string FormatValue(double value);

// Bucket bounds: `count` bounds start, start*factor, ... (start > 0,
// factor > 1) and start, start+width, ... (width > 0); empty for bad
// arguments.
std::vector<double> ExponentialBuckets(double start, double factor, size_t count);
std::vector<double> LinearBuckets(double start, double width, size_t count);

// A monotonic counter. Integer increments and fractional ones (seconds) are
// kept apart so that an integer count stays exact past 2^53; the value is
// their sum.
class Counter {
 public:
  // One relaxed fetch_add.
  void Increment(uint64_t n = 1) { ints_.fetch_add(n, std::memory_order_relaxed); }
  // A compare-exchange loop on a double. Negative and NaN amounts are
  // ignored: a counter only goes up.
  void Add(double amount);

  double Value() const;
  // The integer part alone (what Increment() added).
  uint64_t IntegerValue() const { return ints_.load(std::memory_order_relaxed); }
  // FormatValue(Value()), exact for integer counts.
  std::string FormattedValue() const;

 private:
  std::atomic<uint64_t> ints_{0};
  std::atomic<double> fraction_{0.0};
};

// A value that goes up and down. Set() is one relaxed store, Add() a
// compare-exchange loop.
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double amount);
  void Increment() { Add(1.0); }
  void Decrement() { Add(-1.0); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Observations counted into buckets fixed at creation. A value v goes into
// the first bucket whose upper bound b has v <= b (the exposition's `le`),
// else into +Inf; NaN goes into +Inf (and makes _sum NaN).
class Histogram {
 public:
  // Made by a HistogramFamily, which owns `bounds` (strictly increasing and
  // finite: Registry::AddHistogram checks) and outlives the histogram.
  explicit Histogram(const std::vector<double>* bounds);

  // A binary search over the bounds, one relaxed fetch_add on the bucket and
  // a compare-exchange loop on the sum. Lock-free.
  void Observe(double value);

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (== count)
    uint64_t count = 0;
    double sum = 0;
  };
  // Read bucket by bucket: while observations go on, count and the buckets
  // agree with each other (count is the +Inf bucket) but may be one or two
  // observations apart from sum.
  Snapshot Read() const;

 private:
  const std::vector<double>* bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_->size() + 1
  std::atomic<double> sum_{0.0};
};

// What families have in common; the registry renders them through this.
class FamilyBase {
 public:
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // Appends # HELP, # TYPE and one line per sample of every child, children
  // ordered by their label values. Takes the family's mutex.
  virtual void Render(std::string* out) const = 0;

 protected:
  FamilyBase(std::string name, std::string help, MetricType type, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), type_(type), label_names_(std::move(label_names)) {}
  void RenderHeader(std::string* out) const;
  // `name{a="x",b="y"<extra>} value\n`; `extra` is `le="..."` or empty.
  void RenderSample(std::string* out, std::string_view sample_name, const std::vector<std::string>& label_values,
                    std::string_view extra_label, std::string_view value) const;
  // Logs (once per family) a WithLabels() call with the wrong arity.
  void ReportArity(size_t got) const;

  const std::string name_;
  const std::string help_;
  const MetricType type_;
  const std::vector<std::string> label_names_;
  mutable std::once_flag arity_reported_;
};

// A family of counters, gauges or histograms (T). Made by the Registry, which
// owns it: the pointer Add*() returns is valid as long as the registry.
template <typename T>
class Family final : public FamilyBase {
 public:
  // The child for these label values, one per label name in order, made on
  // first use. The reference is valid as long as the registry: keep it and
  // update it without any lock. Costs one mutex and one map lookup; call it
  // once per label set, not per event. With the wrong number of values:
  // logged once, and a child that is never rendered comes back.
  T& WithLabels(std::initializer_list<std::string_view> values);
  T& WithLabels(const std::vector<std::string>& values);

  void Render(std::string* out) const override;

 private:
  friend class Registry;
  Family(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
         std::vector<double> bounds);
  T& Child(std::vector<std::string> values);
  std::unique_ptr<T> MakeChild() const;

  const std::vector<double> bounds_;  // histograms only
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> children_;
  std::unique_ptr<T> detached_;  // for calls with the wrong arity; never rendered
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

// Handed to collectors during Registry::Render(). Samples are grouped by
// name: a name's # HELP and # TYPE come once (the first help text wins),
// with every sample given for it, whatever the order of the calls and
// however many collectors give it. A sample is dropped (and a warning logged
// once per name) when its name or a label name is invalid, its name is a
// registered family's (or one of a histogram's _bucket/_sum/_count), it was
// given before with another type, or the same name and labels were given
// before.
class Emitter {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;  // name, value

  void Gauge(std::string_view name, std::string_view help, double value, const Labels& labels = {});
  // The value is the counter's running total (from the object that counts).
  void Counter(std::string_view name, std::string_view help, double value, const Labels& labels = {});

 private:
  friend class Registry;
  struct Group {
    std::string name, help;
    MetricType type;
    std::string samples;               // rendered lines
    std::set<std::string> label_sets;  // rendered label parts, for duplicates
  };
  Emitter(const std::set<std::string>* taken, std::function<void(const std::string&, const std::string&)> warn)
      : taken_(taken), warn_(std::move(warn)) {}
  void Add(MetricType type, std::string_view name, std::string_view help, double value, const Labels& labels);
  void Render(std::string* out) const;

  const std::set<std::string>* taken_;  // sample names of registered families
  std::function<void(const std::string& name, const std::string& why)> warn_;
  std::vector<Group> groups_;  // in order of first emission
  std::map<std::string, size_t, std::less<>> index_;
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // A new family, rendered in the order of registration. INVALID_ARGUMENT
  // for an invalid name or label name or a label name given twice;
  // ALREADY_EXISTS when the name, or one of the sample names it would render
  // (a histogram's NAME_bucket, NAME_sum, NAME_count), is taken. A family
  // without labels has its one child at once (rendered as 0 until used).
  // Takes the registry's mutex; call at start-up.
  absl::StatusOr<CounterFamily*> AddCounter(std::string name, std::string help,
                                            std::vector<std::string> label_names = {});
  absl::StatusOr<GaugeFamily*> AddGauge(std::string name, std::string help, std::vector<std::string> label_names = {});
  // `bounds`: the upper bounds of the buckets, at least one, strictly
  // increasing and finite (a last +Inf is allowed and dropped: +Inf is
  // always there); INVALID_ARGUMENT otherwise. A histogram may not have a
  // label named "le".
  absl::StatusOr<HistogramFamily*> AddHistogram(std::string name, std::string help,
                                                std::vector<std::string> label_names, std::vector<double> bounds);

  // Called by every Render(), after the registered families, in the order
  // added, never two at once (renders are serialized), with no lock of the
  // registry held but the render one: a collector must not call Render() or
  // RemoveCollector() (they would deadlock). Runs on the scraping thread, so
  // keep it cheap (read counters, not the disk).
  using Collector = std::function<void(Emitter&)>;
  using CollectorId = uint64_t;
  CollectorId AddCollector(Collector collector);
  // After this returns the collector is not running and never runs again
  // (so it may capture objects that die after this). Unknown ids: no-op.
  void RemoveCollector(CollectorId id);

  // The exposition, text format 0.0.4 (Content-Type
  // "text/plain; version=0.0.4; charset=utf-8"): every family's # HELP,
  // # TYPE and samples, then the collectors'. Renders are serialized; each
  // takes each family's mutex in turn (holding up only WithLabels() calls
  // on that family meanwhile), never one across the whole render, and
  // hot-path updates are never blocked. Costs one formatted line per sample
  // (a histogram: its bounds + 3 per child) plus the collectors.
  std::string Render();

 private:
  absl::Status CheckNew(const std::string& name, const std::vector<std::string>& label_names,
                        const std::vector<std::string>& sample_names) const;  // under mu_
  void Warn(const std::string& name, const std::string& why);

  std::mutex render_mu_;  // serializes Render() and RemoveCollector(); taken before mu_
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<FamilyBase>> families_;
  std::set<std::string> sample_names_;  // every name a registered family renders
  std::map<CollectorId, std::shared_ptr<const Collector>> collectors_;
  CollectorId next_collector_ = 1;
  std::set<std::string> warned_;  // names whose dropped samples were logged, under render_mu_
};

}  // namespace jitd::metrics
