#include "hw/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "hw/errors.h"

namespace ptsim::hw {
namespace {

namespace fs = std::filesystem;

class AtomicFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ptsim_atomic_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::size_t entries() const {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++n;
    return n;
  }
  fs::path dir_;
};

TEST_F(AtomicFile, ReplacesARegularFileAndKeepsItsMode) {
  const fs::path f = dir_ / "r.json";
  write_file_atomically(f.string(), "old");
  ASSERT_EQ(::chmod(f.c_str(), 0600), 0);
  write_file_atomically(f.string(), "new");
  EXPECT_EQ(read(f), "new");
  struct stat st {};
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(entries(), 1u);  // no temporary left behind
}

TEST_F(AtomicFile, FollowsASymlinkAndReplacesItsTarget) {
  const fs::path target = dir_ / "target.json", link = dir_ / "link.json";
  write_file_atomically(target.string(), "old");
  fs::create_symlink("target.json", link);  // relative, as `ln -s` makes them
  write_file_atomically(link.string(), "new");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
  EXPECT_EQ(read(target), "new");
  // A dangling link gets its target created.
  const fs::path dangling = dir_ / "dangling.json";
  fs::create_symlink(dir_ / "made.json", dangling);
  write_file_atomically(dangling.string(), "made");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dangling)));
  EXPECT_EQ(read(dir_ / "made.json"), "made");
}

TEST_F(AtomicFile, WritesThroughACharacterDeviceInsteadOfReplacingIt) {
  // A link to /dev/null: the device must still be a device afterwards (as root, replacing
  // it would break the system), and the link must still be a link.
  const fs::path link = dir_ / "null.json";
  fs::create_symlink("/dev/null", link);
  write_file_atomically(link.string(), "anything");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFile, WritesThroughAFifo) {
  const fs::path fifo = dir_ / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = read(fifo); });
  write_file_atomically(fifo.string(), "through the pipe");
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST_F(AtomicFile, AFullDeviceIsAnErrorNamingTheTargetAndTheReason) {
  try {
    write_file_atomically("/dev/full", "x");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "/dev/full");
    EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos) << e.what();
  }
}

TEST_F(AtomicFile, AMissingFolderOrADirectoryTargetIsAnInputError) {
  const std::string missing = (dir_ / "no" / "such" / "r.json").string();
  try {
    write_file_atomically(missing, "x");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), missing);
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos) << e.what();
  }
  EXPECT_THROW(write_file_atomically(dir_.string(), "x"), InputError);
}

TEST_F(AtomicFile, RemovesTemporariesOfDeadWritersOnly) {
  // A writer killed with SIGKILL leaves `.NAME.tmp.PID`; PID 2^22 + 1 is above Linux's
  // pid_max limit (4,194,304), so no process has it. Our parent is alive: its file stays.
  const fs::path f = dir_ / "r.json";
  const fs::path dead = dir_ / ".r.json.tmp.4194305";
  const fs::path alive = dir_ / (".r.json.tmp." + std::to_string(::getppid()));
  const fs::path other = dir_ / ".x.json.tmp.4194305";
  for (const auto& p : {dead, alive, other}) std::ofstream(p) << "partial";
  write_file_atomically(f.string(), "new");
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_TRUE(fs::exists(other));  // another target's temporary is not ours to judge
  EXPECT_EQ(read(f), "new");
}

}  // namespace
}  // namespace ptsim::hw
