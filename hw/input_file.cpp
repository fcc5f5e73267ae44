#include "hw/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "hw/errors.h"

namespace ptsim::hw {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what, const std::string& hint = {}) {
  throw InputError(path, "", what, hint);
}

void check_regular(const std::string& path, const std::string& what, const struct stat& st, std::size_t max_bytes) {
  if (S_ISDIR(st.st_mode)) fail(path, fmt::format("cannot open the {}: it is a directory", what), "give a file");
  if (!S_ISREG(st.st_mode))
    fail(path, fmt::format("cannot open the {}: not a regular file (a FIFO, device or socket)", what),
         "inputs are read from regular files only");
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    fail(path, fmt::format("the {} is too large: {} bytes, at most {} are read", what, st.st_size, max_bytes),
         "inputs are capped by kind, see README \"Reliability\"");
}

}  // namespace

std::string read_input_file(const std::string& path, const std::string& what, std::size_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(path, fmt::format("cannot open the {}: {}", what, std::strerror(errno)));
  check_regular(path, what, st, max_bytes);
  // O_NONBLOCK: should the path have become a FIFO since stat(), open() does not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(path, fmt::format("cannot open the {}: {}", what, std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::fstat(fd, &st) != 0) fail(path, fmt::format("cannot read the {}: {}", what, std::strerror(errno)));
  check_regular(path, what, st, max_bytes);
  std::string text;
  text.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path, fmt::format("cannot read the {}: {}", what, std::strerror(errno)));
    }
    if (n == 0) break;
    if (text.size() + static_cast<std::size_t>(n) > max_bytes)  // grew while being read
      fail(path, fmt::format("the {} is too large: more than {} bytes", what, max_bytes));
    text.append(buf, static_cast<std::size_t>(n));
  }
  // Every input is text (YAML, JSON, logs): a NUL byte means a binary file given by mistake.
  if (const auto nul = text.find('\0'); nul != std::string::npos)
    fail(path, fmt::format("the {} is not a text file (a NUL byte at offset {})", what, nul), "give the text file");
  return text;
}

}  // namespace ptsim::hw
