// ladder/06-disagg/config.hpp -- stage 06: `ladder simulate` configs and the data/ files they name.
//
// A config (data/disagg/*.json) names a model (data/models/<name>.json), a GPU (data/gpus/<name>.json),
// a step model, one or more placements, the workers, the KV link, the workload, the SLOs and the
// goodput search. Every key is checked: an unknown key, a negative rate, an SLO of 0, a placement
// without a decode worker or a request longer than the KV capacity throws ladder::Error naming the key
// (the CLI prints that one line and exits 2). Relative paths resolve against the config's folder, then
// against the data root (the repository's data/).
#pragma once
#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ladder/06-disagg/goodput.hpp"
#include "ladder/06-disagg/roofline.hpp"
#include "ladder/06-disagg/simulator.hpp"

namespace ladder::disagg {

struct Placement {
  std::string name;
  Cluster cluster;
};

struct SimSetup {
  std::string name;                         // the config file's stem
  std::shared_ptr<const StepModel> model;
  std::string model_name, gpu_name;
  double kv_bytes_per_token = 0;
  std::vector<Placement> placements;
  Workload workload;
  Slo slo;
  GoodputSearch search;
};

ModelSpec load_model(const std::filesystem::path& file);
GpuSpec load_gpu(const std::filesystem::path& file, const std::string& dtype = "bf16");
DistServeCoefficients load_distserve(const std::filesystem::path& file);
SimSetup load_sim_config(const std::filesystem::path& file, const std::filesystem::path& data_root);
SimSetup parse_sim_config(const nlohmann::json& j, const std::string& name, const std::filesystem::path& base,
                          const std::filesystem::path& data_root);

}  // namespace ladder::disagg
