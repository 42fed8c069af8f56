// ref/src/06-disagg/config.cpp -- stage 06: configs and data files (ladder/06-disagg/config.hpp).
#include <cmath>
#include <fstream>
#include <sstream>

#include "ladder/core/json.hpp"
#include "ladder/06-disagg/config.hpp"

namespace ladder::disagg {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void check_keys(const json& j, const std::string& where, std::initializer_list<const char*> known) {
  require(j.is_object(), "config: {} must be a JSON object", where);
  std::string list;
  for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
  for (const auto& [key, v] : j.items()) {
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    require(ok, "config: unknown key '{}{}' (known: {})", where.empty() ? "" : where + ".", key, list);
  }
}

double num(const json& j, const std::string& key, const std::string& where) {
  require(j.contains(key), "config: {}.{} is required", where, key);
  const json& v = j.at(key).is_object() && j.at(key).contains("value") ? j.at(key).at("value") : j.at(key);
  require(v.is_number(), "config: {}.{} = {} must be a number", where, key, v.dump());
  return v.get<double>();
}
double num_or(const json& j, const std::string& key, const std::string& where, double dflt) {
  return j.contains(key) ? num(j, key, where) : dflt;
}
int64_t integer(const json& j, const std::string& key, const std::string& where, int64_t dflt) {
  if (!j.contains(key)) return dflt;
  const double v = num(j, key, where);
  require(v == static_cast<double>(static_cast<int64_t>(v)), "config: {}.{} = {} must be an integer", where, key, v);
  return static_cast<int64_t>(v);
}

fs::path resolve(const std::string& p, const fs::path& base, const fs::path& data_root, const char* folder) {
  if (fs::path(p).is_absolute()) return p;
  if (fs::exists(base / p)) return base / p;
  if (p.find('/') == std::string::npos && p.find('.') == std::string::npos)
    return data_root / folder / (p + ".json");
  return data_root.parent_path() / p;  // a repository path such as data/disagg/x.json
}

LengthDist length_dist(const json& j, const std::string& where) {
  if (j.is_number_integer()) return LengthDist::fixed(j.get<int64_t>());
  if (j.is_string() && j.get<std::string>() == "trace") return LengthDist{LengthDist::Kind::trace, 1, 1};
  require(j.is_object() && j.contains("uniform") && j.at("uniform").is_array() && j.at("uniform").size() == 2,
          "config: {} = {} must be a length, \"trace\" or {{\"uniform\": [lo, hi]}}", where, j.dump());
  check_keys(j, where, {"uniform"});
  return LengthDist::uniform(j.at("uniform")[0].get<int64_t>(), j.at("uniform")[1].get<int64_t>());
}

std::vector<std::pair<int64_t, int64_t>> load_trace(const fs::path& file) {
  std::ifstream in(file);
  require(in.good(), "config: workload.trace {}: cannot open file", file.string());
  std::vector<std::pair<int64_t, int64_t>> rows;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#' || line.rfind("input", 0) == 0) continue;
    std::istringstream s(line);
    int64_t a = 0, b = 0;
    char comma = 0;
    require(static_cast<bool>(s >> a >> comma >> b) && comma == ',', "{}:{}: '{}' is not 'input,output'",
            file.string(), n, line);
    rows.emplace_back(a, b);
  }
  return rows;
}

}  // namespace

ModelSpec load_model(const fs::path& file) {
  const json j = read_json(file);
  require(j.contains("model"), "{}: no \"model\" section", file.string());
  const json& m = j.at("model");
  const std::string w = file.filename().string();
  ModelSpec s;
  s.name = m.value("name", file.stem().string());
  s.layers = integer(m, "num_hidden_layers", w, 0);
  s.hidden = integer(m, "hidden_size", w, 0);
  s.heads = integer(m, "num_attention_heads", w, 0);
  s.kv_heads = integer(m, "num_key_value_heads", w, s.heads);
  s.head_dim = integer(m, "head_dim", w, s.heads > 0 ? s.hidden / s.heads : 1);
  s.vocab = integer(m, "vocab_size", w, 1);
  s.attention = m.value("attention", "mha");
  s.ffn = m.value("ffn", "gelu");
  s.intermediate = integer(m, "intermediate_size", w, 1);
  s.dense_layers = integer(m, "first_k_dense_replace", w, 0);
  s.experts = integer(m, "n_routed_experts", w, 0);
  s.top_k = integer(m, "num_experts_per_tok", w, 0);
  s.shared_experts = integer(m, "n_shared_experts", w, 0);
  s.moe_intermediate = integer(m, "moe_intermediate_size", w, 0);
  s.kv_elem_bytes = num_or(m, "kv_elem_bytes", w, 2);
  if (s.attention == "mla") {
    const json& a = j.contains("attention") ? j.at("attention") : m;
    s.mla.hidden = s.hidden;
    s.mla.n_heads = s.heads;
    s.mla.q_lora_rank = integer(a, "q_lora_rank", w, 0);
    s.mla.kv_lora_rank = integer(a, "kv_lora_rank", w, 0);
    s.mla.qk_nope = integer(a, "qk_nope_head_dim", w, 0);
    s.mla.qk_rope = integer(a, "qk_rope_head_dim", w, 0);
    s.mla.v_head = integer(a, "v_head_dim", w, 0);
    mla::check_config(s.mla, "disagg model");
  }
  require(s.layers >= 1 && s.hidden >= 1 && s.heads >= 1, "{}: num_hidden_layers, hidden_size, num_attention_heads "
          "must be >= 1", file.string());
  return s;
}

GpuSpec load_gpu(const fs::path& file, const std::string& dtype) {
  const json j = read_json(file);
  const std::string w = file.filename().string();
  GpuSpec g;
  g.name = j.value("name", file.stem().string());
  require(j.contains("tflops") && j.at("tflops").contains(dtype), "{}: no tflops.{} (the compute dtype)", w, dtype);
  g.tflops = num(j.at("tflops"), dtype, w + ".tflops");
  g.hbm_GBps = num(j, "hbm_GBps", w);
  g.hbm_GB = num_or(j, "hbm_GB", w, 0);
  g.link_GBps = num_or(j, "link_GBps", w, 0);
  return g;
}

DistServeCoefficients load_distserve(const fs::path& file) {
  const json j = read_json(file);
  DistServeCoefficients c;
  for (const char* phase : {"prefill", "decode"}) {
    require(j.contains(phase) && j.at(phase).contains("value") && j.at(phase).at("value").size() == 3,
            "{}: {}.value must hold the three coefficients [a, b, c]", file.string(), phase);
    for (int i = 0; i < 3; ++i)
      (std::string(phase) == "prefill" ? c.prefill : c.decode)[i] = j.at(phase).at("value")[static_cast<size_t>(i)].get<double>();
  }
  return c;
}

TableModel load_table_model(const std::string& path) {
  std::ifstream in(path);
  require(in.good(), "table model: {}: cannot open file", path);
  std::vector<TableRow> pre, dec;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#' || line.rfind("phase", 0) == 0) continue;
    std::istringstream s(line);
    std::string phase, f[3];
    std::getline(s, phase, ',');
    for (auto& x : f) std::getline(s, x, ',');
    TableRow r;
    try {
      r.batch = std::stoll(f[0]), r.tokens = std::stod(f[1]), r.ms = std::stod(f[2]);
    } catch (const std::exception&) {
      throw Error(fmt::format("{}:{}: '{}' is not 'phase,batch,tokens,ms'", path, n, line));
    }
    require(phase == "prefill" || phase == "decode", "{}:{}: phase '{}' violates prefill | decode", path, n, phase);
    (phase == "prefill" ? pre : dec).push_back(r);
  }
  return TableModel(pre, dec, path);
}

SimSetup parse_sim_config(const json& j, const std::string& name, const fs::path& base, const fs::path& data_root) {
  check_keys(j, "", {"about", "model", "gpu", "dtype", "step_model", "placements", "workers", "kv_transfer",
                     "workload", "slo", "goodput"});
  SimSetup s;
  s.name = name;
  require(j.contains("model") && j.at("model").is_string(), "config: model (a data/models name) is required");
  s.model_name = j.at("model").get<std::string>();
  const ModelSpec model = load_model(resolve(s.model_name, base, data_root, "models"));
  s.gpu_name = j.value("gpu", std::string("a100-80gb"));
  const GpuSpec gpu = load_gpu(resolve(s.gpu_name, base, data_root, "gpus"), j.value("dtype", std::string("bf16")));

  // Placements first: the roofline model needs gpus_per_worker (one per config).
  require(j.contains("placements") && j.at("placements").is_array() && !j.at("placements").empty(),
          "config: placements must be a non-empty list");
  const json wk = j.value("workers", json::object());
  check_keys(wk, "workers", {"prefill_token_budget", "decode_max_batch", "kv_capacity_tokens", "block_tokens"});
  json kv = j.value("kv_transfer", json::object());
  check_keys(kv, "kv_transfer", {"link_GBps", "latency_ms", "bytes_per_token", "measured"});
  if (kv.contains("measured")) {
    // A link measured by ladder-kv-migrate --write-link: its rate and latency replace the typed-in ones.
    require(kv.at("measured").is_string(), "config: kv_transfer.measured = {} must be a file path (JSON written by "
            "ladder-kv-migrate --write-link)", kv.at("measured").dump());
    require(!kv.contains("link_GBps") && !kv.contains("latency_ms"),
            "config: kv_transfer.measured excludes link_GBps and latency_ms (the file gives both)");
    const fs::path mp = resolve(kv.at("measured").get<std::string>(), base, data_root, "disagg");
    require(fs::exists(mp), "config: kv_transfer.measured = '{}' violates an existing file", mp.string());
    const json m = read_json(mp);
    for (const char* key : {"link_GBps", "latency_ms"})
      require(m.contains(key) && m.at(key).is_number() && m.at(key).get<double>() >= 0 &&
                  std::isfinite(m.at(key).get<double>()),
              "config: kv_transfer.measured file '{}': {} violates a finite number >= 0", mp.string(), key);
    require(m.at("link_GBps").get<double>() > 0, "config: kv_transfer.measured file '{}': link_GBps violates > 0",
            mp.string());
    kv["link_GBps"] = m.at("link_GBps");
    kv["latency_ms"] = m.at("latency_ms");
    kv.erase("measured");
  }
  s.kv_bytes_per_token = num_or(kv, "bytes_per_token", "kv_transfer", model.kv_bytes_per_token());
  for (size_t i = 0; i < j.at("placements").size(); ++i) {
    const json& p = j.at("placements")[i];
    const std::string where = fmt::format("placements[{}]", i);
    check_keys(p, where, {"name", "prefill", "decode", "colocated", "gpus_per_worker", "chunked_prefill_tokens"});
    Placement pl;
    Cluster& c = pl.cluster;
    c.prefill = integer(p, "prefill", where, 0), c.decode = integer(p, "decode", where, 0);
    c.colocated = integer(p, "colocated", where, 0), c.gpus_per_worker = integer(p, "gpus_per_worker", where, 1);
    pl.name = p.value("name", c.colocated ? fmt::format("colocated x{}", c.colocated)
                                          : fmt::format("{}P{}D", c.prefill, c.decode));
    c.prefill_token_budget = integer(wk, "prefill_token_budget", "workers", c.prefill_token_budget);
    c.decode_max_batch = integer(wk, "decode_max_batch", "workers", c.decode_max_batch);
    c.kv_capacity_tokens = integer(wk, "kv_capacity_tokens", "workers", c.kv_capacity_tokens);
    c.block_tokens = integer(wk, "block_tokens", "workers", c.block_tokens);
    c.kv_bytes_per_token = s.kv_bytes_per_token;
    c.link_GBps = num_or(kv, "link_GBps", "kv_transfer", 0);
    c.link_latency_ms = num_or(kv, "latency_ms", "kv_transfer", 0);
    if (p.contains("chunked_prefill_tokens")) {
      // Sarathi-Serve's per-step token budget (simulator.hpp): a colocated worker's option only.
      c.chunked_prefill_tokens = integer(p, "chunked_prefill_tokens", where, 0);
      require(c.chunked_prefill_tokens >= 1, "config: {}.chunked_prefill_tokens = {} violates >= 1 (omit it for no "
              "chunking)", where, c.chunked_prefill_tokens);
      require(c.colocated > 0, "config: {}.chunked_prefill_tokens applies to colocated placements only ({} has "
              "prefill = {}, decode = {})", where, where, c.prefill, c.decode);
    }
    s.placements.push_back(pl);
  }

  const json sm = j.value("step_model", json{{"kind", "distserve"}});
  check_keys(sm, "step_model", {"kind", "file", "csv"});
  const std::string kind = sm.value("kind", std::string("distserve"));
  if (kind == "distserve") {
    s.model = std::make_shared<DistServeModel>(load_distserve(resolve(
        sm.value("file", std::string("data/disagg/distserve-opt-13b-a100.json")), base, data_root, "disagg")));
  } else if (kind == "roofline") {
    s.model = std::make_shared<RooflineModel>(model, gpu, s.placements.front().cluster.gpus_per_worker);
  } else if (kind == "table") {
    require(sm.contains("csv"), "config: step_model.csv is required for kind \"table\"");
    s.model = std::make_shared<TableModel>(load_table_model(resolve(sm.at("csv").get<std::string>(), base, data_root, "disagg").string()));
  } else {
    throw Error("config: step_model.kind = '" + kind + "' violates distserve | roofline | table");
  }

  require(j.contains("workload"), "config: workload is required");
  const json& w = j.at("workload");
  check_keys(w, "workload", {"rate", "cv", "requests", "seed", "input", "output", "trace"});
  s.workload.rate = num_or(w, "rate", "workload", 1.0);
  s.workload.cv = num_or(w, "cv", "workload", 1.0);
  s.workload.requests = integer(w, "requests", "workload", 1000);
  s.workload.seed = static_cast<uint64_t>(integer(w, "seed", "workload", 1));
  require(s.workload.rate > 0, "config: workload.rate = {} violates rate > 0", s.workload.rate);
  require(s.workload.cv > 0, "config: workload.cv = {} violates cv > 0", s.workload.cv);
  s.workload.input = length_dist(w.value("input", json(512)), "workload.input");
  s.workload.output = length_dist(w.value("output", json(64)), "workload.output");
  if (w.contains("trace")) s.workload.trace = load_trace(resolve(w.at("trace").get<std::string>(), base, data_root, "disagg"));
  check_workload(s.workload);

  require(j.contains("slo"), "config: slo is required");
  const json& slo = j.at("slo");
  check_keys(slo, "slo", {"ttft_s", "tpot_s", "attainment"});
  const double ttft = num(slo, "ttft_s", "slo"), tpot = num(slo, "tpot_s", "slo");
  require(ttft > 0, "config: slo.ttft_s = {} violates > 0", ttft);
  require(tpot > 0, "config: slo.tpot_s = {} violates > 0", tpot);
  s.slo = Slo{ttft * 1e3, tpot * 1e3};
  s.search.target = num_or(slo, "attainment", "slo", 0.9);
  const json g = j.value("goodput", json::object());
  check_keys(g, "goodput", {"precision_rps", "start_rps", "max_rps"});
  s.search.precision = num_or(g, "precision_rps", "goodput", 0.01);
  s.search.start = num_or(g, "start_rps", "goodput", 1.0);
  s.search.max_rate = num_or(g, "max_rps", "goodput", 1e5);
  for (const Placement& p : s.placements) check_cluster(p.cluster, s.workload);
  return s;
}

SimSetup load_sim_config(const fs::path& file, const fs::path& data_root) {
  const json j = read_json(file);
  return parse_sim_config(j, file.stem().string(), file.parent_path(), data_root);
}

}  // namespace ladder::disagg
