// A writer killed with SIGKILL at any moment leaves the target absent, old or complete —
// never a partial file (README "Reliability"). A child process rewrites a large output
// through write_file_atomically in a loop and is killed after a varying delay, many times.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "hw/atomic_file.h"

namespace ptsim::hw {
namespace {

namespace fs = std::filesystem;

std::string contents(char fill, std::size_t bytes) { return std::string(bytes, fill) + "\nEND\n"; }

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Kills a child rewriting `target` after `delay`; returns whether a temporary of the dead
// writer was left behind (the kill came in the middle of a write).
bool kill_a_writer(const fs::path& target, std::chrono::microseconds delay, const std::string& a,
                   const std::string& b) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (int i = 0;; ++i) {
      try {
        write_file_atomically(target.string(), i % 2 ? b : a);
      } catch (...) {
        ::_exit(3);
      }
    }
  }
  EXPECT_GT(pid, 0);
  std::this_thread::sleep_for(delay);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the writer ended by itself: " << status;
  bool temporary = false;
  for (const auto& e : fs::directory_iterator(target.parent_path()))
    if (e.path().filename().string().starts_with("." + target.filename().string() + ".tmp")) temporary = true;
  return temporary;
}

TEST(AtomicFileKill, AKilledWriterNeverLeavesAPartialFile) {
  const fs::path dir = fs::temp_directory_path() / ("ptsim_atomic_kill_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path target = dir / "result.json";
  const std::string old_text = contents('o', 1 << 20), a = contents('a', 8 << 20), b = contents('b', 8 << 20);
  int mid_write = 0;
  constexpr int kKills = 24;
  for (int i = 0; i < kKills; ++i) {
    const bool fresh = i % 2 == 0;  // half the time there is no target yet, half the time an old one
    fs::remove(target);
    if (!fresh) write_file_atomically(target.string(), old_text);
    if (kill_a_writer(target, std::chrono::microseconds(500 + 1700 * i), a, b)) ++mid_write;
    if (fs::exists(target)) {
      const std::string got = read(target);
      EXPECT_TRUE(got == a || got == b || (!fresh && got == old_text))
          << "kill " << i << ": partial file of " << got.size() << " bytes";
    }
  }
  RecordProperty("kills_in_the_middle_of_a_write", mid_write);
  EXPECT_GT(mid_write, 0) << "no kill landed during a write: the test did not test anything";
  // The next write removes the temporaries of the dead writers.
  write_file_atomically(target.string(), "done\n");
  EXPECT_EQ(read(target), "done\n");
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  EXPECT_EQ(n, 1u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ptsim::hw
