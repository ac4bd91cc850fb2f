// An environment variable set (or unset) for one scope, restored after.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace jitd::testing {

class ScopedEnv {
 public:
  // Sets `name` to `value`, or unsets it when `value` is nullptr.
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value == nullptr ? unsetenv(name) : setenv(name, value, 1);
  }
  ~ScopedEnv() { old_.has_value() ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace jitd::testing
