// ladder/06-disagg/deploy/layout.hpp -- stage 06, part 2: a deployment layout as data (data/deployments/*.json).
//
//   06 disagg   step-time model -> event simulator -> KV-cache migration -> [deployment: layouts, memory,
//               traffic, overlap, MTP]
//
// A layout gives every module of the model its own parallel layout (Huawei report Table 1): MLA in three
// parts (down projections q_a/kv_a, up projections + attention q_b/kv_b, output projection o_proj), the
// dense FFN, the routed experts (EP, optional redundant replicas), the shared expert, the embedding and
// the LM head, each as dp x tp over the cards it lives on. The file also names the model and card
// (data/models, data/gpus), the network, the dtypes (bytes per element) and the workload per card.
// Every key is checked; a bad value throws ladder::Error "FILE: FIELD = VALUE violates CONSTRAINT"
// before any work (the CLI prints that one line and exits 2).
#pragma once
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "ladder/core/error.hpp"
#include "ladder/core/json.hpp"
#include "ladder/06-disagg/config.hpp"
#include "ladder/06-disagg/roofline.hpp"

namespace ladder::deploy {

// One module's layout: dp replicas of a tp-way split over `cards` cards (dp x tp == cards).
struct Par {
  int64_t dp = 1, tp = 1, cards = 1;
};

// The routed experts: EP over `cards` cards, `redundant` extra replicas (DeepSeek day 6: 32).
struct Experts {
  int64_t ep = 1, cards = 1, redundant = 0;
  std::string comm = "allgather";  // "allgather" (AllGather before, ReduceScatter after) or "all2all"
  int64_t per_card(int64_t experts) const { return (experts + redundant) / ep; }
};

struct Dtypes {
  double weights = 1, embedding = 2, lm_head = 2, kv = 2, activations = 2, comm = 1;
};

struct Workload {
  int64_t requests_per_card = 1;  // decode concurrency per card (a prefill batch: requests in flight)
  int64_t context = 1;            // tokens of KV per request
  int64_t tokens_per_card = 1;    // tokens one step computes per card (decode: requests x (1 + mtp_draft))
  int64_t mtp_draft = 0;          // k draft tokens per request (decode with MTP)
  double acceptance = 0;          // MTP acceptance rate p of one draft token
};

struct Layout {
  std::string file, name, source, phase;  // phase: "prefill" or "decode"
  disagg::ModelSpec model;
  disagg::GpuSpec gpu;
  double gemm_tflops = 0;                 // peak at the weights' compute dtype (A8W8: int8)
  double intra_GBps = 0;                  // per card, inside a node
  double inter_GBps_node = 0;             // per node, shared by its cards
  int64_t cards = 1, cards_per_node = 1, mtp_layers = 0;
  Dtypes bytes;
  Par mla_down, mla_up, mla_out, dense_ffn, shared_expert, embedding, lm_head;
  Experts routed;
  Workload work;
  int64_t nodes() const { return (cards + cards_per_node - 1) / cards_per_node; }
  // Layer counts: MLA in every layer plus the MTP layer(s); the first dense_layers are dense, the rest
  // and the MTP layer MoE (DeepSeek-V3: 61 + 1 MLA layers, 3 dense, 58 + 1 MoE).
  int64_t mla_layers() const { return model.layers + mtp_layers; }
  int64_t moe_layers() const { return model.layers - model.dense_layers + mtp_layers; }
};

namespace detail {

inline const nlohmann::json& field(const nlohmann::json& j, const std::string& key, const std::string& where,
                                   const std::string& file) {
  require(j.is_object() && j.contains(key), "{}: {}{} is required", file, where.empty() ? "" : where + ".", key);
  const nlohmann::json& v = j.at(key);
  return v.is_object() && v.contains("value") ? v.at("value") : v;
}
inline double number(const nlohmann::json& j, const std::string& key, const std::string& where,
                     const std::string& file) {
  const nlohmann::json& v = field(j, key, where, file);
  require(v.is_number(), "{}: {}.{} = {} must be a number", file, where, key, v.dump());
  return v.get<double>();
}
inline int64_t positive_int(const nlohmann::json& j, const std::string& key, const std::string& where,
                            const std::string& file) {
  const double v = number(j, key, where, file);
  require(v >= 1 && v == static_cast<double>(static_cast<int64_t>(v)), "{}: {}.{} = {} violates integer >= 1", file,
          where, key, v);
  return static_cast<int64_t>(v);
}
inline void known_keys(const nlohmann::json& j, const std::string& where, const std::string& file,
                       std::initializer_list<const char*> known) {
  require(j.is_object(), "{}: {} must be a JSON object", file, where);
  for (const auto& [key, v] : j.items()) {
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    require(ok, "{}: unknown key {}.{}", file, where, key);
  }
}
// A module's dp x tp; `split` is the dimension tp cuts (heads, FFN width, vocab), named in the error.
inline Par par(const nlohmann::json& mods, const char* key, int64_t cards, int64_t split, const char* split_name,
               const std::string& file) {
  const std::string where = std::string("modules.") + key;
  require(mods.contains(key), "{}: {} is required", file, where);
  const nlohmann::json& m = mods.at(key);
  known_keys(m, where, file, {"dp", "tp", "cards", "note"});
  Par p;
  p.dp = positive_int(m, "dp", where, file);
  p.tp = positive_int(m, "tp", where, file);
  p.cards = m.contains("cards") ? positive_int(m, "cards", where, file) : cards;
  require(p.dp * p.tp == p.cards, "{}: {}: dp x tp = {} x {} violates dp x tp == cards = {}", file, where, p.dp, p.tp,
          p.cards);
  require(split % p.tp == 0, "{}: {}.tp = {} must divide {} = {}", file, where, p.tp, split_name, split);
  return p;
}

}  // namespace detail

// Parse a layout; `data_root` is the repository's data/ (model and gpu names resolve there).
inline Layout parse_layout(const nlohmann::json& j, const std::string& file, const std::filesystem::path& data_root) {
  using detail::number;
  using detail::positive_int;
  detail::known_keys(j, "(top level)", file,
                     {"name", "source", "phase", "model", "gpu", "compute_dtype", "cards", "cards_per_node",
                      "network", "mtp_layers", "dtype_bytes", "modules", "workload", "notes"});
  Layout L;
  L.file = file;
  for (const char* k : {"name", "phase", "model", "gpu", "compute_dtype"})
    require(j.contains(k) && j.at(k).is_string(), "{}: {} is required (a string)", file, k);
  L.name = j.at("name").get<std::string>();
  L.source = j.value("source", std::string());
  L.phase = j.at("phase").get<std::string>();
  require(L.phase == "prefill" || L.phase == "decode", "{}: phase = '{}' must be prefill or decode", file, L.phase);
  L.model = disagg::load_model(data_root / "models" / (j.at("model").get<std::string>() + ".json"));
  require(L.model.attention == "mla" && L.model.is_moe(), "{}: model '{}' must be an MLA MoE model (DeepSeek-V3)",
          file, j.at("model").get<std::string>());
  const std::string gpu = j.at("gpu").get<std::string>();
  L.gpu = disagg::load_gpu(data_root / "gpus" / (gpu + ".json"), "bf16");
  L.gemm_tflops = disagg::load_gpu(data_root / "gpus" / (gpu + ".json"), j.at("compute_dtype").get<std::string>()).tflops;
  L.cards = positive_int(j, "cards", "", file);
  L.cards_per_node = positive_int(j, "cards_per_node", "", file);
  L.mtp_layers = j.contains("mtp_layers") ? static_cast<int64_t>(number(j, "mtp_layers", "", file)) : 0;
  require(L.mtp_layers >= 0, "{}: mtp_layers = {} violates >= 0", file, L.mtp_layers);
  const auto& net = detail::field(j, "network", "", file);
  detail::known_keys(net, "network", file, {"intra_GBps", "inter_GBps_per_node", "note"});
  L.intra_GBps = number(net, "intra_GBps", "network", file);
  L.inter_GBps_node = number(net, "inter_GBps_per_node", "network", file);
  require(L.intra_GBps > 0 && L.inter_GBps_node > 0, "{}: network bandwidths must be > 0", file);
  const auto& db = detail::field(j, "dtype_bytes", "", file);
  detail::known_keys(db, "dtype_bytes", file, {"weights", "embedding", "lm_head", "kv", "activations", "comm", "note"});
  double* slots[] = {&L.bytes.weights, &L.bytes.embedding, &L.bytes.lm_head, &L.bytes.kv, &L.bytes.activations,
                     &L.bytes.comm};
  const char* names[] = {"weights", "embedding", "lm_head", "kv", "activations", "comm"};
  for (int i = 0; i < 6; ++i) {
    *slots[i] = number(db, names[i], "dtype_bytes", file);
    require(*slots[i] > 0 && *slots[i] <= 8, "{}: dtype_bytes.{} = {} violates 0 < bytes <= 8", file, names[i],
            *slots[i]);
  }
  const auto& mods = detail::field(j, "modules", "", file);
  detail::known_keys(mods, "modules", file,
                     {"mla_down", "mla_up", "mla_out", "dense_ffn", "routed_experts", "shared_expert", "embedding",
                      "lm_head"});
  const disagg::ModelSpec& m = L.model;
  L.mla_down = detail::par(mods, "mla_down", L.cards, 1, "(not split)", file);
  require(L.mla_down.tp == 1, "{}: modules.mla_down.tp = {} must be 1 (the down projections run DP)", file,
          L.mla_down.tp);
  L.mla_up = detail::par(mods, "mla_up", L.cards, m.heads, "num_attention_heads", file);
  L.mla_out = detail::par(mods, "mla_out", L.cards, m.heads, "num_attention_heads", file);
  L.dense_ffn = detail::par(mods, "dense_ffn", L.cards, m.intermediate, "intermediate_size", file);
  L.shared_expert = detail::par(mods, "shared_expert", L.cards, m.moe_intermediate, "moe_intermediate_size", file);
  L.embedding = detail::par(mods, "embedding", L.cards, m.vocab, "vocab_size", file);
  L.lm_head = detail::par(mods, "lm_head", L.cards, m.vocab, "vocab_size", file);
  {
    const std::string w = "modules.routed_experts";
    require(mods.contains("routed_experts"), "{}: {} is required", file, w);
    const auto& r = mods.at("routed_experts");
    detail::known_keys(r, w, file, {"ep", "cards", "redundant", "comm", "note"});
    L.routed.ep = positive_int(r, "ep", w, file);
    L.routed.cards = r.contains("cards") ? positive_int(r, "cards", w, file) : L.cards;
    L.routed.redundant = r.contains("redundant") ? static_cast<int64_t>(number(r, "redundant", w, file)) : 0;
    L.routed.comm = r.value("comm", std::string("allgather"));
    require(L.routed.comm == "allgather" || L.routed.comm == "all2all", "{}: {}.comm = '{}' must be allgather or all2all",
            file, w, L.routed.comm);
    require(L.routed.ep == L.routed.cards, "{}: {}.ep = {} violates ep == cards = {}", file, w, L.routed.ep,
            L.routed.cards);
    require(L.routed.redundant >= 0 && (m.experts + L.routed.redundant) % L.routed.ep == 0,
            "{}: {}.ep = {} must divide n_routed_experts + redundant = {}", file, w, L.routed.ep,
            m.experts + L.routed.redundant);
  }
  // Cards host the routed and the shared experts either both (every card) or apart (CM384: 128 + 16).
  const bool both = L.routed.cards == L.cards && L.shared_expert.cards == L.cards;
  const bool apart = L.routed.cards + L.shared_expert.cards == L.cards;
  require(both || apart,
          "{}: modules.routed_experts.cards = {} and modules.shared_expert.cards = {} must both equal cards = {} or "
          "sum to it",
          file, L.routed.cards, L.shared_expert.cards, L.cards);
  for (const auto* p : {&L.mla_down, &L.mla_up, &L.mla_out, &L.dense_ffn, &L.embedding, &L.lm_head})
    require(p->cards == L.cards, "{}: every module but the experts spans all {} cards", file, L.cards);
  const auto& w = detail::field(j, "workload", "", file);
  detail::known_keys(w, "workload", file,
                     {"requests_per_card", "context", "tokens_per_card", "mtp_draft", "acceptance", "note"});
  L.work.requests_per_card = positive_int(w, "requests_per_card", "workload", file);
  L.work.context = positive_int(w, "context", "workload", file);
  L.work.mtp_draft = w.contains("mtp_draft") ? static_cast<int64_t>(number(w, "mtp_draft", "workload", file)) : 0;
  require(L.work.mtp_draft >= 0 && L.work.mtp_draft <= L.mtp_layers,
          "{}: workload.mtp_draft = {} violates 0 <= mtp_draft <= mtp_layers = {}", file, L.work.mtp_draft, L.mtp_layers);
  L.work.acceptance = w.contains("acceptance") ? number(w, "acceptance", "workload", file) : 0;
  require(L.work.acceptance >= 0 && L.work.acceptance <= 1, "{}: workload.acceptance = {} violates 0 <= p <= 1", file,
          L.work.acceptance);
  L.work.tokens_per_card = w.contains("tokens_per_card") ? positive_int(w, "tokens_per_card", "workload", file)
                                                         : L.work.requests_per_card * (1 + L.work.mtp_draft);
  return L;
}

inline Layout load_layout(const std::filesystem::path& file, const std::filesystem::path& data_root) {
  require(std::filesystem::exists(file), "plan: {}: no such file", file.string());
  nlohmann::json j;
  try {
    j = read_json(file);
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: not valid JSON ({})", file.string(), e.what()));
  }
  return parse_layout(j, file.filename().string(), data_root);
}

}  // namespace ladder::deploy
