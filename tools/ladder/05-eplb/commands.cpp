// tools/ladder/05-eplb/commands.cpp -- `ladder eplb`: run the stage-05 balancer on a load file.
//
//   ladder eplb --weights FILE(.npy|.json) --replicas R --groups G --nodes N --gpus P [--layer L] [--out DIR]
//
// FILE holds the load statistics: [layers, experts] or [experts] (one layer), as .npy (float or int
// dtypes) or JSON (a list, a list of equal-length lists, or {"weight": ...}). Prints the placement per
// GPU and the imbalance before (static layout, no replicas) and after. --out writes a case folder
// (weight.npy, phy2log.npy, log2phy.npy, logcnt.npy, case.json) that `ladder check 05-eplb` reads.
// The arithmetic is eplb.py's float32. Bad input throws ladder::Error (main.cpp: one line, exit 2).
#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <memory>

#include "cli.hpp"
#include "report.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/json.hpp"
#include "ladder/core/npy.hpp"
#include "ladder/05-eplb/eplb.hpp"

namespace ladder::cli {
namespace {

namespace fs = std::filesystem;
using eplb::Index;

double element_as_double(DType t, const unsigned char* b) {
  switch (t) {
    case DType::F4: {
      float x;
      std::memcpy(&x, b, 4);
      return x;
    }
    case DType::F8: {
      double x;
      std::memcpy(&x, b, 8);
      return x;
    }
    case DType::I4: {
      int32_t x;
      std::memcpy(&x, b, 4);
      return x;
    }
    case DType::I8: {
      int64_t x;
      std::memcpy(&x, b, 8);
      return static_cast<double>(x);
    }
    case DType::U1: return *b;
  }
  throw Error("eplb: unknown .npy dtype");
}

Mat<double> weights_from_npy(const fs::path& path) {
  const NpyData d = read_npy(path);
  require(d.shape.size() == 1 || d.shape.size() == 2,
          "{}: shape {} violates rank 1 [experts] or rank 2 [layers, experts]", path.string(), shape_str(d.shape));
  const Index rows = d.shape.size() == 2 ? d.shape[0] : 1, cols = d.shape.back();
  Mat<double> w(rows, cols);
  for (Index i = 0; i < rows * cols; ++i) {
    const unsigned char* b = d.bytes.data() + static_cast<size_t>(i) * dtype_size(d.dtype);
    w(i / cols, i % cols) = element_as_double(d.dtype, b);
  }
  return w;
}

Mat<double> weights_from_json(const fs::path& path) {
  nlohmann::json j = read_json(path);
  if (j.is_object()) {
    require(j.contains("weight"), "{}: a JSON object must hold the loads under \"weight\"", path.string());
    j = j.at("weight");
  }
  require(j.is_array() && !j.empty(), "{}: loads must be a non-empty list or a list of lists", path.string());
  if (!j.front().is_array()) j = nlohmann::json::array({j});
  const Index rows = static_cast<Index>(j.size()), cols = static_cast<Index>(j.front().size());
  Mat<double> w(rows, cols);
  for (Index l = 0; l < rows; ++l) {
    const auto& row = j[static_cast<size_t>(l)];
    require(row.is_array() && static_cast<Index>(row.size()) == cols,
            "{}: row {} has {} entries, violates equal-length rows of {}", path.string(), l,
            row.is_array() ? row.size() : 0, cols);
    for (Index e = 0; e < cols; ++e) {
      const auto& v = row[static_cast<size_t>(e)];
      require(v.is_number(), "{}: weight[{}][{}] = {} violates weight is a number", path.string(), l, e, v.dump());
      w(l, e) = v.get<double>();
    }
  }
  return w;
}

Mat<double> load_weights(const std::string& file) {
  const fs::path path(file);
  const std::string ext = path.extension().string();
  require(ext == ".npy" || ext == ".json", "eplb: --weights {}: extension '{}' violates .npy or .json", file, ext);
  require(fs::exists(path), "eplb: --weights {}: no such file", file);
  require(!fs::is_directory(path), "eplb: --weights {}: is a folder, a .npy or .json file is required", file);
  return ext == ".npy" ? weights_from_npy(path) : weights_from_json(path);
}

struct EplbOpts {
  std::string weights, out;
  Index replicas = 0, groups = 1, nodes = 1, gpus = 1, layer = -1;
};

// More slots than this per layer is a typo, not a model (DeepSeek-V3 has 288); refused before any allocation.
constexpr Index kMaxReplicas = Index{1} << 20;

void run_eplb(const EplbOpts& o) {
  require(o.replicas >= 1 && o.replicas <= kMaxReplicas, "eplb: --replicas {} violates 1 <= replicas <= {}", o.replicas,
          kMaxReplicas);
  require(o.out.empty() || !fs::exists(o.out) || fs::is_directory(o.out), "eplb: --out {}: exists and is not a folder",
          o.out);
  const Mat<double> w = load_weights(o.weights);
  require(static_cast<double>(w.rows()) * static_cast<double>(o.replicas) <= static_cast<double>(Index{1} << 26),
          "eplb: layers x --replicas = {} x {} violates <= 2^26 slots", w.rows(), o.replicas);
  // eplb.py's arithmetic: float32 (weight.float()); refuses loads float32 cannot hold, naming the entry.
  const eplb::Placement p =
      eplb::rebalance_experts(eplb::detail::to_float32_weights(w, "--weights"), o.replicas, o.groups, o.nodes, o.gpus);
  require(o.layer >= -1 && o.layer < p.num_layers(), "eplb: --layer {} violates -1 <= layer < num_layers = {}",
          o.layer, p.num_layers());
  fmt::print("{}\n", eplb_report::summary_line(p));
  if (p.policy == eplb::Policy::hierarchical)
    fmt::print("{} groups of {} experts, {} groups per node (num_groups % num_nodes == 0 -> hierarchical)\n",
               o.groups, p.num_log() / o.groups, o.groups / o.nodes);
  else
    fmt::print("groups ignored (num_groups {} % num_nodes {} != 0 -> global)\n", o.groups, o.nodes);
  for (Index l = 0; l < p.num_layers(); ++l)
    if (o.layer < 0 || o.layer == l) fmt::print("{}", eplb_report::layer_placement(w, p, l));
  fmt::print("{}", eplb_report::imbalance_table(w, p));
  if (!o.out.empty()) {
    // A case folder (weight, the three maps, case.json with the digest): `ladder check 05-eplb DIR` reads it.
    const nlohmann::json params = {{"num_replicas", o.replicas}, {"num_groups", o.groups}, {"num_nodes", o.nodes},
                                   {"num_gpus", o.gpus}};
    write_case(contract(eplb::kStage), o.out, {{"weight", to_npy(Array<double>::from(w))}}, params,
               {{"phy2log", to_npy(Array<Index>::from(p.phy2log))},
                {"log2phy", to_npy(p.log2phy)},
                {"logcnt", to_npy(Array<Index>::from(p.logcnt))}});
    fmt::print("wrote weight.npy, phy2log.npy, log2phy.npy, logcnt.npy and case.json to {}\n", o.out);
  }
}

}  // namespace

void commands_05_eplb(CLI::App& app) {
  auto o = std::make_shared<EplbOpts>();
  auto* cmd = app.add_subcommand("eplb", "stage 05: place experts on GPUs with the EPLB reference (eplb.py)");
  cmd->add_option("--weights", o->weights, "expert loads [layers, experts] or [experts], .npy or .json")->required();
  cmd->add_option("--replicas", o->replicas, "physical expert slots per layer (multiple of --gpus)")->required();
  cmd->add_option("--groups", o->groups, "expert groups (hierarchical policy when groups % nodes == 0)")
      ->capture_default_str();
  cmd->add_option("--nodes", o->nodes, "server nodes")->capture_default_str();
  cmd->add_option("--gpus", o->gpus, "GPUs in all (multiple of --nodes)")->required();
  cmd->add_option("--layer", o->layer, "print the placement of this layer only (default: every layer)");
  cmd->add_option("--out", o->out, "also write phy2log.npy, log2phy.npy, logcnt.npy into this folder");
  cmd->callback([o] { run_eplb(*o); });
}

}  // namespace ladder::cli
