// Storage slots reused after release — the engine's events, the replay's pipeline
// messages, the transports' transfers, the flow network's flows — so that hot loops
// allocate nothing once their arrays are warm.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ptsim {

// A released index from `free`, or a new one: a default element is appended to every
// array of `storage` (parallel arrays of the same size) and the new last index returned.
// Release an index by pushing it back onto `free`.
template <class... Storage>
std::uint32_t take_slot(std::vector<std::uint32_t>& free, Storage&... storage) {
  if (!free.empty()) {
    const std::uint32_t i = free.back();
    free.pop_back();
    return i;
  }
  const std::size_t sizes[] = {storage.size()...};
  (storage.emplace_back(), ...);
  const auto i = static_cast<std::uint32_t>(sizes[0]);
  return i;
}

}  // namespace ptsim
