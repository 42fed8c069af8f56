// python/src/rungs_eplb.cpp -- stage 05 (EPLB): a registry rung on a numpy load matrix.
//
// Every 05-eplb rung stores an eplb::RungFn: weight [L, n] (float64; float32 is widened, exactly) and
// the Config -> named int64 maps (pack_index, rank_in_pack | phy2log, rank, logcnt | phy2log,
// log2phy, logcnt). Invalid parameters (R < n, groups not dividing n, ...) are the rung's own
// ladder::Error, raised as ValueError naming the parameter.
#include "arrays.hpp"
#include "ladder/05-eplb/eplb.hpp"
#include "rungs.hpp"

namespace ladder::python {

py::dict eplb_rung(const Rung& r, py::handle weight, int64_t num_replicas, int64_t num_groups, int64_t num_nodes,
                   int64_t num_gpus, int64_t num_packs) {
  Float fp{};
  const Arg w = float_arg(weight, "weight", 2, "[L, n]: load of each logical expert per layer", &fp);
  Mat<double> W(w.shape[0], w.shape[1]);
  if (fp == Float::f32)
    W = ConstMatMap<float>(w.ptr<float>(), w.shape[0], w.shape[1]).cast<double>();
  else
    W = ConstMatMap<double>(w.ptr<double>(), w.shape[0], w.shape[1]);
  // The parameters' constraints, named as the Python caller spelled them (the C++ rungs check the
  // rest -- divisibility by groups and nodes -- in their own words).
  const int64_t n = w.shape[1];
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw py::value_error(what);
  };
  for (const auto& [name, v] : {std::pair{"num_groups", num_groups}, std::pair{"num_nodes", num_nodes},
                                std::pair{"num_gpus", num_gpus}, std::pair{"num_packs", num_packs}})
    need(v >= 1, std::string(name) + " = " + std::to_string(v) + " violates " + name + " >= 1");
  if (r.id != "balanced_packing")
    need(num_replicas >= n, "num_replicas = " + std::to_string(num_replicas) + " violates num_replicas >= experts = " +
                                std::to_string(n) + " (every expert needs a slot)");
  if (r.id == "hierarchical" || r.id == "global")
    need(num_replicas % num_gpus == 0, "num_replicas = " + std::to_string(num_replicas) +
                                           " violates num_replicas % num_gpus == 0 (num_gpus = " +
                                           std::to_string(num_gpus) + ")");
  eplb::Config cfg;
  cfg.num_replicas = num_replicas;
  cfg.num_groups = num_groups;
  cfg.num_nodes = num_nodes;
  cfg.num_gpus = num_gpus;
  cfg.num_packs = num_packs;
  eplb::Outputs out;
  {
    py::gil_scoped_release nogil;
    out = r.fn<eplb::RungFn>()(W, cfg);
  }
  py::dict d;
  for (const auto& [name, a] : out) d[py::str(name)] = to_numpy(a);
  return d;
}

}  // namespace ladder::python
