// The `ptsim` command line (CONTRACT §1). Exit codes: 0 success, 1 internal
// error, 2 bad input, 3 missing resource, 4 validation bound missed.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>

#include "sim/cli/commands.h"
#include "hw/errors.h"

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
      if (c.parsed()) return c.run();
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
