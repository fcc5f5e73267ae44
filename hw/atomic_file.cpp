#include "hw/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "hw/errors.h"

namespace ptsim::hw {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& path, std::string_view what, int err) {
  throw InputError(path, "",
                   fmt::format("cannot write the output: {}{}{}", what, what.empty() ? "" : ": ", std::strerror(err)));
}

// The file a path finally names: symlinks followed (up to the kernel's limit of 40 links),
// a dangling link's target included (it is created).
fs::path final_target(const std::string& path) {
  fs::path p(path);
  for (int hops = 0; hops < 40; ++hops) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) return p;
    const fs::path next = fs::read_symlink(p, ec);
    if (ec) fail(path, "cannot read the symbolic link", ec.value());
    p = next.is_absolute() ? next : p.parent_path() / next;
  }
  fail(path, "", ELOOP);
}

void write_all(int fd, const std::string& text, const std::string& path) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(path, "", errno);
    done += static_cast<std::size_t>(n);
  }
}

// Devices, FIFOs and sockets are written to, never replaced.
void write_through(const fs::path& target, const std::string& text, const std::string& path) {
  const int fd = ::open(target.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) fail(path, "", errno);
  try {
    write_all(fd, text, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) fail(path, "", errno);
}

// `.NAME.tmp.PID` files of this target whose writer no longer runs.
void remove_stale_temporaries(const fs::path& dir, const std::string& name) {
  const std::string prefix = "." + name + ".tmp.";
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    if (file.size() <= prefix.size() || file.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string pid_text = file.substr(prefix.size());
    if (pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) fs::remove(it->path(), ec);
  }
}

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // the rename is done; a folder we cannot open cannot be synced either
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& text) {
  const fs::path target = final_target(path);
  struct stat st {};
  const bool exists = ::stat(target.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) fail(path, "", EISDIR);
  if (exists && !S_ISREG(st.st_mode)) return write_through(target, text, path);

  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string name = target.filename().string();
  remove_stale_temporaries(dir, name);
  // Same folder as the target, so rename(2) is atomic (one file system); the PID keeps two
  // concurrent writers apart and tells a later writer whether this one is still alive.
  const fs::path tmp = dir / fmt::format(".{}.tmp.{}", name, ::getpid());
  const mode_t mode = exists ? (st.st_mode & 07777) : 0666;
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) fail(path, "", errno);
  try {
    // Keep the replaced file's mode exactly (open's mode is filtered by the umask).
    if (exists && ::fchmod(fd, mode) != 0) fail(path, "", errno);
    write_all(fd, text, path);
    if (::fsync(fd) != 0) fail(path, "", errno);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(path, "", err);
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(path, "cannot rename into place", err);
  }
  fsync_dir(dir);
}

}  // namespace ptsim::hw
