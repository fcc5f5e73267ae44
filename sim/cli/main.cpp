// The `ptsim` command line (CONTRACT §1). Exit codes: 0 success, 1 internal
// error, 2 bad input, 3 missing resource, 4 validation bound missed.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "hw/errors.h"
#include "sim/cli/commands.h"

namespace {

// A command's answer is only given if it reached standard output: a full disk, a closed
// stdout or an I/O error is reported (exit 2; 1 for a broken pipe, as other tools do).
int checked_stdout(int rc) {
  errno = 0;
  std::cout.flush();
  int err = errno;
  const bool failed = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (!failed) return rc;
  if (err == 0) err = errno;
  std::cerr << "error: cannot write to standard output: " << std::strerror(err != 0 ? err : EIO) << "\n";
  return err == EPIPE ? 1 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ptsim::cli;
  CLI::App app{"ptsim — simulate and plan large-model training (tp/pp/dp/cp/ep, ZeRO, schedules)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(PTSIM_VERSION_STRING));
  std::vector<Command> commands = all_commands();
  for (auto& c : commands) c.setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    for (auto& c : commands)
      if (c.parsed()) return checked_stdout(c.run());
  } catch (const ptsim::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const ptsim::ResourceError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 3;
  } catch (const std::invalid_argument& e) {
    // models/ (no dependency on hw/errors.h) reports bad model input this way.
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "internal error, please report: " << e.what() << "\n";
    return 1;
  }
  return 1;
}
