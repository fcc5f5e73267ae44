// Writing an output so that nothing the user had is lost half-way (README "Reliability").
// A regular file (or a path that does not exist yet) is replaced atomically: the text goes
// to a temporary `.NAME.tmp.PID` in the same folder, is fsync'ed, then rename(2) puts it in
// place and the folder is fsync'ed — a crash, Ctrl-C or kill -9 leaves the old file or the
// new one, never a mix. The replaced file keeps its permission bits. A symlink is followed:
// its final target is replaced and the link stays. Anything else — a character device
// (/dev/null, /dev/stdout), a FIFO, a socket — is written through, never replaced.
// Temporaries left by writers that died (their PID is gone) are removed on the next write
// of the same target.
#pragma once
#include <string>

namespace ptsim::hw {

// Throws ptsim::InputError (file = `path`) naming the target and strerror on any failure:
// a missing folder, no permission, a full disk (ENOSPC), a directory as target.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace ptsim::hw
