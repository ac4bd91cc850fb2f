// One jitctl verb ("ls", "stats", ...): its options and what it does.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <ostream>
#include <vector>

#include "absl/status/statusor.h"
#include "jitd/client.h"

namespace jitd::jitctl {

// Where a verb writes its answer: a table for people or, with --json, one
// JSON document for programs. Errors go to stderr, in main.
struct Output {
  std::ostream& out;
  bool json = false;
};

class Verb {
 public:
  virtual ~Verb() = default;

  // Adds the verb's subcommand and its options to `app`; the returned
  // subcommand tells main which verb the user chose.
  virtual CLI::App* Register(CLI::App& app) = 0;

  // Checks the options once parsed, before anything connects
  // (INVALID_ARGUMENT for a usage mistake CLI11 cannot express).
  virtual absl::Status Validate() { return absl::OkStatus(); }

  // Performs the verb's RPC and prints the result. Returns the exit code
  // for a call that succeeded (0, or 1 when the answer reports problems,
  // as `verify` does); an error is the daemon's, printed by main.
  virtual absl::StatusOr<int> Run(Client& client, const Output& output) = 0;
};

// Every verb, in the order `jitctl --help` lists them.
std::vector<std::unique_ptr<Verb>> MakeVerbs();

std::unique_ptr<Verb> MakeGetVerb();
std::unique_ptr<Verb> MakeKernelsVerb();
std::unique_ptr<Verb> MakeWarmVerb();
std::unique_ptr<Verb> MakeLsVerb();
std::unique_ptr<Verb> MakeStatsVerb();
std::unique_ptr<Verb> MakeEvictVerb();
std::unique_ptr<Verb> MakeVerifyVerb();
std::unique_ptr<Verb> MakeHealthVerb();

}  // namespace jitd::jitctl
