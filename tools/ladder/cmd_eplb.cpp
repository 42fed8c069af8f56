// tools/ladder/cmd_eplb.cpp -- `ladder eplb`: run the stage-05 balancer on a load file.
//
//   ladder eplb --weights FILE(.npy|.json) --replicas R --groups G --nodes N --gpus P [--layer L] [--out DIR]
//
// FILE holds the load statistics: [layers, experts] or [experts] (one layer), as .npy (float or int
// dtypes) or JSON (a list, a list of equal-length lists, or {"weight": ...}). Prints the placement per
// GPU and the imbalance before (static layout, no replicas) and after. --out writes phy2log.npy,
// log2phy.npy and logcnt.npy. Bad input throws ladder::Error (main.cpp: one line, exit 2).
#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <memory>

#include "cli.hpp"
#include "eplb_report.hpp"
#include "ladder/core/golden.hpp"
#include "ladder/core/npy.hpp"
#include "ladder/eplb.hpp"

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
  return ext == ".npy" ? weights_from_npy(path) : weights_from_json(path);
}

struct EplbOpts {
  std::string weights, out;
  Index replicas = 0, groups = 1, nodes = 1, gpus = 1, layer = -1;
};

void run_eplb(const EplbOpts& o) {
  const Mat<double> w = load_weights(o.weights);
  const eplb::Placement p = eplb::rebalance_experts(w, o.replicas, o.groups, o.nodes, o.gpus);
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
    fs::create_directories(o.out);
    save_npy(fs::path(o.out) / "phy2log.npy", Array<Index>::from(p.phy2log));
    save_npy(fs::path(o.out) / "log2phy.npy", p.log2phy);
    save_npy(fs::path(o.out) / "logcnt.npy", Array<Index>::from(p.logcnt));
    fmt::print("wrote phy2log.npy, log2phy.npy, logcnt.npy to {}\n", o.out);
  }
}

}  // namespace

void add_eplb_command(CLI::App& app) {
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
