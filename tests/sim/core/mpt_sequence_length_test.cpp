// The attention kernel of llm-foundry's MPT runs, against the rows of their benchmark tables
// that no reference run uses: MPT-7B on 8 GPUs at 8,192 to 65,536 tokens, where attention is
// most of the step (mosaicml/llm-foundry scripts/train/benchmarking/README.md at b2a43a1,
// tables "A100 80GB with 1600 Gbps node-node interconnect (RoCE)" and "H100 80GB BF16": FULL_SHARD,
// activation checkpointing, amp_bf16). Their `attn_impl: triton` is FlashAttention-1-class
// (`training.attention: fa1`, README "Validation", the FSDP item); FlashAttention-2 rates put
// ptsim 44-69 % too fast at 32,768 and 65,536 tokens.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"
#include "tests/test_paths.h"

namespace ptsim::sim {
namespace {

struct MptSequenceRow {
  const char* scenario;  // the 2,048-token reference run of that GPU
  int seq, micro_batch, global_batch;
  double tokens_per_s;  // published Throughput (T/s)
};
// "| 7b | S | 8 | GPU | … | MicroBatchSize | GradAccum | GlobalBatchSize | … | Throughput (T/s) |".
constexpr MptSequenceRow kMptSequenceRows[] = {
    {"mpt-7b-8xa100.yaml", 8192, 8, 128, 25655}, {"mpt-7b-8xa100.yaml", 32768, 2, 32, 13382},
    {"mpt-7b-8xa100.yaml", 65536, 1, 16, 8108},  {"mpt-7b-8xh100.yaml", 8192, 8, 128, 55481},
    {"mpt-7b-8xh100.yaml", 32768, 2, 32, 26550}, {"mpt-7b-8xh100.yaml", 65536, 1, 16, 15654},
};

double mpt_tokens_per_s(const MptSequenceRow& row, const std::string& attention) {
  std::vector<std::string> sets = {
      "model.seq_length=" + std::to_string(row.seq), "training.micro_batch_size=" + std::to_string(row.micro_batch),
      "training.global_batch_size=" + std::to_string(row.global_batch), "parallel.recompute=full"};
  if (!attention.empty()) sets.push_back("training.attention=" + attention);
  const Scenario s = load_scenario(test::repo_path("scenarios/reference/") + row.scenario, sets);
  return simulate(s).result.tokens_per_s;
}

TEST(MptSequenceLength, TritonAttentionAsFlashAttention1MatchesTheLongSequenceRows) {
  for (const auto& row : kMptSequenceRows) {
    SCOPED_TRACE(::testing::Message() << row.scenario << " at " << row.seq << " tokens");
    // Measured at stop 56: A100 −8.4 / −2.1 / +1.7 %, H100 −3.3 / −8.2 / −9.9 % (stop 54, before
    // the backward and causal attention rates: −3.5 / +7.7 / +14.1 %, +0.6 / −3.1 / −4.3 %).
    EXPECT_NEAR(mpt_tokens_per_s(row, "") / row.tokens_per_s, 1.0, 0.15);
  }
  // With FlashAttention-2 rates the 65,536-token rows come out 60 % and more too fast: the
  // check above tells the kernels apart. (On A100 the default flash kernel is FA2.)
  EXPECT_GT(mpt_tokens_per_s(kMptSequenceRows[2], "flash") / kMptSequenceRows[2].tokens_per_s, 1.5);
  EXPECT_GT(mpt_tokens_per_s(kMptSequenceRows[5], "fa2") / kMptSequenceRows[5].tokens_per_s, 1.5);
}

}  // namespace
}  // namespace ptsim::sim
