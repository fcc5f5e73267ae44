#include "hw/net/double_binary_tree.h"

#include <fmt/format.h>
#include <bit>
#include <functional>
#include <stdexcept>

namespace ptsim::hw::net {
namespace {

void fill_height_depth(BinaryTree& t) {
  const int n = static_cast<int>(t.parent.size());
  t.height.assign(n, 0);
  t.depth.assign(n, -1);
  std::function<int(int)> depth = [&](int p) -> int {
    if (t.depth[p] >= 0) return t.depth[p];
    return t.depth[p] = t.parent[p] < 0 ? 0 : depth(t.parent[p]) + 1;
  };
  for (int p = 0; p < n; ++p) depth(p);
  // Heights: a child is always one level deeper, so relax parents in order of depth.
  std::vector<int> order(n);
  for (int p = 0; p < n; ++p) order[p] = p;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return t.depth[a] > t.depth[b]; });
  for (int p : order)
    if (t.parent[p] >= 0) t.height[t.parent[p]] = std::max(t.height[t.parent[p]], t.height[p] + 1);
}

}  // namespace

BinaryTree in_order_tree(int n) {
  if (n < 1) throw std::invalid_argument(fmt::format("binary tree: n must be >= 1, got {}", n));
  BinaryTree t;
  t.parent.assign(n, -1);
  const unsigned root_x = std::bit_floor(static_cast<unsigned>(n));
  t.root = static_cast<int>(root_x) - 1;
  for (int p = 0; p < n; ++p) {
    unsigned x = static_cast<unsigned>(p) + 1;
    if (x == root_x) continue;
    // Climb the infinite in-order tree until an ancestor lies in 1..n.
    do {
      const int l = std::countr_zero(x);
      const unsigned up = x + (1u << l), down = x - (1u << l);
      x = (std::countr_zero(up) == l + 1) ? up : down;
    } while (x > static_cast<unsigned>(n));
    t.parent[p] = static_cast<int>(x) - 1;
  }
  fill_height_depth(t);
  return t;
}

std::pair<BinaryTree, BinaryTree> double_binary_tree(int n) {
  BinaryTree a = in_order_tree(n);
  BinaryTree b;
  b.parent.assign(n, -1);
  // Position p of tree 2 plays position map(p) of tree 1.
  auto map = [n](int p) { return n % 2 == 0 ? n - 1 - p : (p + 1) % n; };
  std::vector<int> inv(n);
  for (int p = 0; p < n; ++p) inv[map(p)] = p;
  for (int p = 0; p < n; ++p) {
    const int q = a.parent[map(p)];
    b.parent[p] = q < 0 ? -1 : inv[q];
  }
  b.root = inv[a.root];
  fill_height_depth(b);
  return {std::move(a), std::move(b)};
}

}  // namespace ptsim::hw::net
