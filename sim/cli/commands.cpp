#include "sim/cli/commands.h"

namespace ptsim::cli {

std::vector<Command> all_commands() {
  return {run_command(),         memory_command(), list_command(),    calibrate_command(), validate_command(),
          zero_report_command(), search_command(), compare_command(), import_command()};
}

}  // namespace ptsim::cli
