// Each subcommand lives in its own file and registers itself here.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

#include "ptsim/config.h"

#define PTSIM_VERSION_STRING PTSIM_VERSION

namespace ptsim::cli {

struct Command {
  CLI::App* sub = nullptr;
  std::function<CLI::App*(CLI::App&)> add;  // creates the subcommand and its options
  std::function<int()> execute;
  void setup(CLI::App& app) { sub = add(app); }
  bool parsed() const { return sub && sub->parsed(); }
  int run() const { return execute(); }
};

Command run_command();
Command memory_command();
Command list_command();
Command zero_report_command();
Command search_command();
Command compare_command();
Command calibrate_command();
Command validate_command();
Command import_command();

std::vector<Command> all_commands();

}  // namespace ptsim::cli
