// One error path per kind (STYLE.md item 12), shared by hw/, sim/ and calibration/:
//   InputError     a file, key or option the user gave is wrong: names the file, the key
//                  path, what is wrong and a hint                          -> exit 2
//   ResourceError  something the command needs is missing (no CUDA device, no CUDA
//                  module)                                                 -> exit 3
//   InternalError  an invariant of ours broke (PTSIM_CHECK)                -> exit 1,
//                  "internal error, please report"
// The CLI (sim/cli/main.cpp) maps them to exit codes; nothing else converts between them.
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace ptsim {

class InputError : public std::runtime_error {
 public:
  InputError(std::string file, std::string key, std::string what, std::string hint = {})
      : std::runtime_error(compose(file, key, what, hint)),
        file_(std::move(file)),
        key_(std::move(key)),
        hint_(std::move(hint)) {}
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

class ResourceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace ptsim

// Checks an invariant of ours (never the user's input: that is an InputError with file and
// key). Throws InternalError naming the condition, the source line and the formatted detail.
#define PTSIM_CHECK(cond, ...)                                                                                   \
  do {                                                                                                           \
    if (!(cond))                                                                                                 \
      throw ::ptsim::InternalError(                                                                              \
          ::fmt::format("{}:{}: check '{}' failed: {}", __FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__))); \
  } while (false)
