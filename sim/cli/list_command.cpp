#include <fmt/format.h>
#include <iostream>
#include <memory>

#include "hw/gpu_catalog.h"
#include "models/model_spec.h"
#include "models/params.h"
#include "sim/cli/commands.h"
#include "sim/io/scenario_keys.h"

namespace ptsim::cli {

Command list_command() {
  auto what = std::make_shared<std::string>();
  auto markdown = std::make_shared<bool>(false);
  Command c;
  c.add = [what, markdown](CLI::App& app) {
    auto* sub = app.add_subcommand("list", "the built-in catalogs: models | gpus | topologies | keys");
    sub->add_option("what", *what, "models | gpus | topologies | keys (the scenario key reference)")
        ->required()
        ->check(CLI::IsMember({"models", "gpus", "topologies", "keys"}));
    sub->add_flag("--markdown", *markdown, "keys: as docs/scenario-keys.md (meaning, Megatron-LM and DeepSpeed names)");
    return sub;
  };
  c.execute = [what, markdown]() {
    if (*what == "keys") {
      fmt::print("{}", *markdown ? sim::keys_markdown() : sim::keys_text());
    } else if (*what == "models") {
      fmt::print("{:<16} {:>7} {:>7} {:>6} {:>5} {:>7} {:>7} {:>6}  {}\n", "name", "params", "layers", "hidden",
                 "heads", "groups", "ffn", "seq", "notes");
      for (const auto& m : models::presets()) {
        const auto pc = models::count_params(m);
        std::string notes = m.mlp == models::Mlp::swiglu ? "swiglu" : "gelu";
        if (m.moe) {
          notes += fmt::format(", moe {}x top-{}", m.moe->num_experts, m.moe->top_k);
          if (m.moe->shared_experts > 0) notes += fmt::format(" + {} shared", m.moe->shared_experts);
          int dense = 0;
          for (int l = 0; l < m.num_layers; ++l) dense += m.is_moe_layer(l) ? 0 : 1;
          if (dense > 0) notes += fmt::format(", {} dense layer{}", dense, dense == 1 ? "" : "s");
          notes += fmt::format(" ({:.1f}B active)", pc.active / 1e9);
        }
        fmt::print("{:<16} {:>6.1f}B {:>7} {:>6} {:>5} {:>7} {:>7} {:>6}  {}\n", m.name, pc.total / 1e9, m.num_layers,
                   m.hidden_size, m.num_attention_heads, m.num_query_groups, m.ffn_hidden_size, m.seq_length, notes);
      }
    } else if (*what == "gpus") {
      fmt::print("{:<14} {:>10} {:>10} {:>10} {:>9} {:>10} {:>11}  {}\n", "name", "bf16", "fp8", "fp32", "HBM",
                 "HBM bw", "NVLink/dir", "description");
      for (const auto& g : hw::gpu_catalog())
        fmt::print("{:<14} {:>7.0f} TF {:>7.0f} TF {:>7.1f} TF {:>9} {:>10} {:>11}  {}\n", g.name, g.peak_bf16 / 1e12,
                   g.peak_fp8 / 1e12, g.peak_fp32 / 1e12, format_bytes(g.hbm), format_bandwidth(g.hbm_bandwidth),
                   format_bandwidth(g.nvlink_bandwidth), g.description);
    } else {
      fmt::print("fat-tree        2-tier leaf/spine, full bisection unless inter_node.oversubscription > 1\n");
      fmt::print("fat-tree-3      3-tier leaf/spine/core\n");
      fmt::print("rail-optimized  NIC i of every node on rail switch i, rails joined by spines\n");
      fmt::print("torus           2D torus of nodes (inter_node.torus_dims: [x, y] or [x, y, z])\n");
      fmt::print("torus-2d        2D torus of nodes\n");
      fmt::print("torus-3d        3D torus of nodes\n");
      fmt::print("user            your own graph: inter_node.graph_file (YAML nodes and links)\n");
      fmt::print(
          "\nequal-cost paths (inter_node.routing): ecmp = a hash per flow (Ethernet, RoCE; the default),\n"
          "d-mod-k = by destination (InfiniBand fat trees: ring steps never share a fabric link)\n");
    }
    return 0;
  };
  return c;
}

}  // namespace ptsim::cli
