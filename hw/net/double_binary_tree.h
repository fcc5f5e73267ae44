// NCCL's double binary tree over n positions (NCCL 2.4 blog post "Massively scale
// your deep learning training with NCCL 2.4"; Sanders, Speck, Träff 2009).
// Tree 1 is the in-order binary tree on x = position + 1 in 1..n: a node with
// x = m·2^l (m odd) has parent x ± 2^l, whichever has exactly l+1 trailing zeros,
// climbing further while that exceeds n; the root is the largest power of two <= n.
// Its leaves are the even positions. Tree 2 mirrors tree 1 (position p -> n−1−p) when
// n is even and shifts it by one when n is odd, so every rank is a leaf in at least one
// tree and an inner node in at most one: each tree carries half of the data at full
// link bandwidth.
#pragma once

#include <vector>

namespace ptsim::hw::net {

struct BinaryTree {
  std::vector<int> parent;  // -1 at the root
  std::vector<int> height;  // longest path down to a leaf (leaves 0)
  std::vector<int> depth;   // root 0
  int root = 0;
};

BinaryTree in_order_tree(int n);
// The two trees; second.parent is expressed in positions too.
std::pair<BinaryTree, BinaryTree> double_binary_tree(int n);

}  // namespace ptsim::hw::net
