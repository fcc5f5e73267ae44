#include "hw/input_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "hw/errors.h"

namespace ptsim::hw {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::string& path, std::size_t max = kMaxInputFileBytes) {
  try {
    read_input_file(path, "scenario file", max);
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), path);
    return e.what();
  }
  return "";
}

fs::path scratch(const std::string& name) {
  const auto dir = fs::temp_directory_path() / fmt::format("ptsim_input_file_test_{}", ::getpid());
  fs::create_directories(dir);
  return dir / name;
}

TEST(InputFile, ReadsARegularFile) {
  const auto p = scratch("ok.yaml");
  std::ofstream(p) << "a: 1\n";
  EXPECT_EQ(read_input_file(p.string(), "scenario file"), "a: 1\n");
}

TEST(InputFile, MissingFileCannotBeOpened) {
  EXPECT_NE(error_of("/nonexistent/x.yaml").find("cannot open the scenario file: No such file"), std::string::npos);
}

TEST(InputFile, DirectoryIsRefused) {
  EXPECT_NE(error_of(fs::temp_directory_path().string()).find("it is a directory"), std::string::npos);
}

// These used to hang (a FIFO with no writer) or never end (/dev/zero, /dev/urandom).
TEST(InputFile, FifoAndDevicesAreRefusedWithoutReading) {
  const auto fifo = scratch("input.fifo");
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(error_of(fifo.string()).find("not a regular file"), std::string::npos);
  EXPECT_NE(error_of("/dev/zero").find("not a regular file"), std::string::npos);
  EXPECT_NE(error_of("/dev/urandom").find("not a regular file"), std::string::npos);
}

TEST(InputFile, SizeIsCapped) {
  const auto p = scratch("big.yaml");
  std::ofstream(p) << std::string(1000, 'x');
  EXPECT_NE(error_of(p.string(), 999).find("too large: 1000 bytes, at most 999"), std::string::npos);
  EXPECT_EQ(read_input_file(p.string(), "scenario file", 1000).size(), 1000u);
}

}  // namespace
}  // namespace ptsim::hw
