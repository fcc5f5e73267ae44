// One path per kind of error (STYLE.md item 12): user input problems are a
// ScenarioError carrying the file, the key path and a hint; the CLI maps it to
// exit code 2. Internal invariants use assert; missing resources ResourceError (exit 3).
#pragma once
#include <stdexcept>
#include <string>

namespace ptsim::sim {

class ScenarioError : public std::runtime_error {
 public:
  ScenarioError(std::string file, std::string key, std::string what, std::string hint = {})
      : std::runtime_error(compose(file, key, what, hint)),
        file_(std::move(file)), key_(std::move(key)), hint_(std::move(hint)) {}
  const std::string& file() const { return file_; }
  const std::string& key() const { return key_; }
  const std::string& hint() const { return hint_; }

 private:
  static std::string compose(const std::string& file, const std::string& key, const std::string& what,
                             const std::string& hint) {
    std::string s = file.empty() ? std::string("<input>") : file;
    if (!key.empty()) s += ": " + key;
    s += ": " + what;
    if (!hint.empty()) s += " (" + hint + ")";
    return s;
  }
  std::string file_, key_, hint_;
};

// A resource the command needs is missing (no CUDA device, unreadable table): exit 3.
class ResourceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ptsim::sim
