// Reading an input file with bounds (README "Reliability"): every file ptsim reads (scenario,
// HF config, topology graph, cost table, nccl-tests log, published runs) goes through here.
// Only a regular file is read (a FIFO with no writer, /dev/zero or /dev/urandom would hang or
// never end), and at most a size cap: a clear InputError names the file instead.
#pragma once
#include <cstddef>
#include <string>

namespace ptsim::hw {

inline constexpr std::size_t kMaxInputFileBytes = std::size_t{64} << 20;  // 64 MiB

// The whole content of `path`. Throws ptsim::InputError (file = `path`) when it does not
// exist or cannot be opened ("cannot open ... : strerror"), is a directory, is not a
// regular file, or is larger than `max_bytes`. `what` names the kind of file in messages
// ("scenario file", "topology graph").
std::string read_input_file(const std::string& path, const std::string& what,
                            std::size_t max_bytes = kMaxInputFileBytes);

}  // namespace ptsim::hw
