// tests/06-disagg/test_deploy.cpp -- stage 06, part 2: deployment layouts (ladder/06-disagg/deploy/*, `ladder plan`).
// Every expected value is a formula written out by hand from the model's shapes (DeepSeek-V3: h 7168,
// 128 heads, q_lora 1536, kv_lora 512, nope 128, rope 64, v 128, inter 18432, moe_inter 2048, 256
// experts, top-8, vocab 129280, 61 layers of which 3 dense, + 1 MTP layer), never a copied output.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "06-disagg/plan.hpp"
#include "golden_util.hpp"
#include "ladder/core/error.hpp"
#include "ladder/core/json.hpp"
#include "ladder/06-disagg/deploy/balance.hpp"
#include "ladder/06-disagg/deploy/memory.hpp"
#include "ladder/06-disagg/deploy/overlap.hpp"
#include "ladder/06-disagg/deploy/traffic.hpp"
#include "source_dir.hpp"

namespace {
namespace fs = std::filesystem;
using namespace ladder::deploy;
const fs::path kData = ladder::source_dir() / "data";

Layout layout(const std::string& name) { return load_layout(kData / "deployments" / (name + ".json"), kData); }

// The MLA parameters of one DeepSeek-V3 layer, by hand: q_a, kv_a, q_b, kv_b, o_proj.
constexpr double kMlaLayer = 7168.0 * 1536 + 7168.0 * (512 + 64) + 1536.0 * 128 * (128 + 64) +
                             512.0 * 128 * (128 + 128) + 128.0 * 128 * 7168;
constexpr double kExpert = 3.0 * 7168 * 2048;
constexpr double kVocab = 129280.0 * 7168;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ladder::Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("deploy: the report's memory figures from the model's shapes, and which unit each fits") {
  const auto m = ladder::disagg::load_model(kData / "models" / "deepseek-v3.json");
  CHECK(mla_params(m) == kMlaLayer);
  std::map<std::string, ReportFigure> f;
  for (const auto& x : report_memory_figures(m)) f[x.id] = x;
  CHECK(f["mla_weights"].bytes == 62 * kMlaLayer);
  CHECK(f["expert_58_layers"].bytes == 58 * kExpert);
  CHECK(f["dense_ffn"].bytes == 3 * 3.0 * 7168 * 18432);
  CHECK(f["embedding"].bytes == 2 * kVocab);
  CHECK(f["shared_tp8_saving"].bytes == 58 * kExpert * 7 / 8);
  CHECK(f["vocab_dp4tp8_saving"].bytes == 2 * 2 * kVocab * 7 / 8);
  CHECK(f["kv_72x4k"].bytes == 72.0 * 4096 * 61 * (512 + 64) * 2);
  // Which unit fits: the printed numbers from data/papers/06-disagg-deploy.json.
  const nlohmann::json j = ladder::read_json(kData / "papers" / "06-disagg-deploy.json");
  for (const auto& e : j.at("entries")) {
    const std::string id = e.at("id").get<std::string>();
    if (f.count(id)) f[id].printed = e.at("value").get<double>();
  }
  CHECK(f["mla_weights"].fits() == "GB");        // 11.60 GB vs 10.80 GiB
  CHECK(f["expert_58_layers"].fits() == "GB");   // 2.55 GB vs 2.38 GiB
  CHECK(f["dense_ffn"].fits() == "GiB");         // 1.19 GB vs 1.11 GiB
  CHECK(f["embedding"].fits() == "GiB");         // 1.85 GB vs 1.73 GiB
  CHECK(f["shared_tp8_saving"].fits() == "GiB"); // 2.23 GB vs 2.08 GiB
  CHECK(f["vocab_dp4tp8_saving"].fits() == "GiB");
  CHECK(f["kv_72x4k"].fits() == "GiB");          // 20.72 GB vs 19.30 GiB: "close to 20"
}

TEST_CASE("deploy: per-card memory of the A2 decode layout, module by module") {
  const Layout L = layout("huawei-a2-decode");
  const auto cards = card_memory(L);
  REQUIRE(cards.size() == 1);
  std::map<std::string, double> b;
  for (const auto& r : cards[0].rows) b[r.module] = r.bytes;
  CHECK(b["MLA down (q_a, kv_a)"] + b["MLA up (q_b, kv_b)"] + b["MLA out (o_proj)"] == doctest::Approx(62 * kMlaLayer).epsilon(1e-15));
  CHECK(b["dense FFN"] == 3 * 3.0 * 7168 * 18432 / 8);
  CHECK(b["routed experts"] == 8 * 59 * kExpert);  // 256 / EP32 = 8 per card, 58 MoE + 1 MTP layer
  CHECK(b["shared expert"] == 59 * kExpert / 8);
  CHECK(b["embedding"] == 2 * kVocab / 8);
  CHECK(b["KV cache"] == 72.0 * 4096 * 62 * 576 * 2);
  CHECK(cards[0].total() <= L.gpu.hbm_GB * 1e9);  // the report's layout fits its 64 GB card
  // CM384: routed-expert and shared-expert cards are different kinds.
  const auto cm = card_memory(layout("huawei-cm384-decode"));
  REQUIRE(cm.size() == 2);
  CHECK(cm[0].count == 128);
  CHECK(cm[1].count == 16);
  CHECK(cm[0].rows.back().bytes == 2 * 59 * kExpert);
  // DeepSeek decode: (256 + 32 redundant) / 144 = 2 routed per GPU; prefill (256 + 32) / 32 = 9.
  CHECK(layout("deepseek-decode-ep144").routed.per_card(256) == 2);
  CHECK(layout("deepseek-prefill-ep32").routed.per_card(256) == 9);
}

TEST_CASE("deploy: KV per card, MLA under TP grows with t; MHA stays flat; GQA flat up to its KV heads") {
  const double N = 2304, ctx = 4096, layers = 61, cards = 32, row = 576 * 2;
  const double dp = kv_bytes_per_card(N, ctx, layers, cards, 1, row);
  CHECK(dp == 72 * ctx * layers * row);
  for (double t : {2.0, 4.0, 16.0}) {
    CHECK(kv_bytes_per_card(N, ctx, layers, cards, t, row) == t * dp);
    CHECK(kv_bytes_per_card(N, ctx, layers, cards, t, 0, 128, 128) == 72 * ctx * layers * 2 * 128 * 128 * 2);
  }
  CHECK(kv_bytes_per_card(N, ctx, layers, cards, 8, 0, 8, 128) == 72 * ctx * layers * 2 * 8 * 128 * 2);
  CHECK(kv_bytes_per_card(N, ctx, layers, cards, 16, 0, 8, 128) == 2 * 72 * ctx * layers * 2 * 8 * 128 * 2);
}

TEST_CASE("deploy: collective bytes equal the Huawei report's counts (AllGather 3 BS h vs All2All 6 BS h between nodes)") {
  Layout L = layout("huawei-a2-decode");  // 32 cards on 4 nodes
  const double T = 144, h = 7168;
  for (const Collective& x : collectives(L)) {
    if (x.name == "MoE AllGather") {
      CHECK(x.inter == 3 * T * h * 1);          // int8 activations: one copy from each of 3 other nodes
      CHECK(x.intra + x.inter == 31 * T * h);   // (g - 1) / g of the gathered 32 T h
    }
    if (x.name == "dense FFN AllGather") CHECK(x.inter == 0);
  }
  L.routed.comm = "all2all";
  for (const Collective& x : collectives(L))
    if (x.name == "MoE dispatch All2All") {
      CHECK(x.inter == 6 * T * h);             // 8 copies, 3/4 of them to other nodes
      CHECK(x.intra == 8 * T * h * 7 / 32);    // 7 of 32 cards are node peers
    }
  // Communication time: max of the two levels, the node link shared by 8 cards.
  const Collective c = gather_like("x", "allgather", 32 * T * h, 32, 8, 1);
  CHECK(collective_ms(L, c) == doctest::Approx(1e3 * std::max(c.intra / 392e9, c.inter / (50e9 / 8))));
}

TEST_CASE("deploy: module costs and the roofline step time") {
  const Layout L = layout("huawei-a2-decode");
  for (const ModuleCost& c : module_costs(L))
    if (c.module == "routed experts") {
      const double rows = 144.0 * 32 * 8 / 256;  // tokens of the EP group x top-8 over 256 experts = 144
      CHECK(rows == 144);
      CHECK(c.flops == 8 * 2 * rows * kExpert);
      CHECK(module_ms(L, c) == doctest::Approx(1e3 * 59 * std::max(c.flops / 626e12, c.bytes / 1600e9)));
    }
  const StepTime s = step_time(L);
  double sum = 0;
  for (const ModuleCost& c : module_costs(L)) sum += module_ms(L, c);
  CHECK(s.compute_ms == doctest::Approx(sum).epsilon(1e-12));
  CHECK(s.comm_ms > 0);
}

TEST_CASE("deploy: two streams -- no overlap is the sum, two-batch the critical path") {
  const LayerOps x{2, 0, 1, 2, 1};  // attention, gate, dispatch, ffn, combine
  CHECK(sequential_ms({x}) == 6);
  std::vector<Op> g = two_batch_graph({x});
  // A att [0,2], A disp [2,3], B att [2,4], B disp [4,5], A ffn [4,6], A comb [6,7], B ffn [6,8], B comb [8,9]
  CHECK(schedule(g) == 9);
  // Communication hidden (1 <= 2 per phase): the makespan is all compute plus the last combine.
  std::vector<Op> g3 = two_batch_graph({x, x, x});
  CHECK(schedule(g3) == 3 * 8 + 1);
  // Communication longer than compute: the comm stream is the critical path.
  const LayerOps y{1, 0, 3, 1, 3};
  std::vector<Op> gy = two_batch_graph({y});
  CHECK(schedule(gy) == 1 + 3 + 3 + 3 + 3);
  const OverlapResult r = overlap(layout("huawei-a2-decode"));
  CHECK(r.two_batch_ms > 0);
  CHECK(r.sequential_ms > 0);
}

TEST_CASE("ladder plan: every layout runs; bad files name the file and field") {
  const auto run = [](const std::string& file) {
    CLI::App app{"ladder"};
    ladder::cli::add_stage_commands(app, "06-disagg");  // simulate and plan
    std::vector<const char*> argv{"ladder", "plan", file.c_str()};
    app.parse(static_cast<int>(argv.size()), argv.data());
  };
  for (const auto& e : fs::directory_iterator(kData / "deployments")) CHECK_NOTHROW(run(e.path().string()));
  ladder::test::TempDir tmp;
  const nlohmann::json good = ladder::read_json(kData / "deployments" / "huawei-a2-decode.json");
  const auto fails = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& msg) {
    nlohmann::json j = good;
    edit(j);
    const fs::path f = tmp.path / "bad-layout.json";
    std::ofstream(f) << j.dump();
    const std::string e = error_of([&] { run(f.string()); });
    CHECK_MESSAGE(e.find("bad-layout.json") != std::string::npos, e);
    CHECK_MESSAGE(e.find(msg) != std::string::npos, e);
    CHECK(e.find('\n') == std::string::npos);
  };
  fails([](auto& j) { j.erase("cards"); }, "cards is required");
  fails([](auto& j) { j["modules"].erase("mla_up"); }, "modules.mla_up is required");
  fails([](auto& j) { j["modules"]["mla_up"] = {{"dp", 4}, {"tp", 8}}; j["modules"]["mla_out"] = {{"dp", 8}, {"tp", 3}}; },
        "dp x tp");
  fails([](auto& j) { j["cards"] = 24; j["modules"]["mla_down"]["dp"] = 24; j["modules"]["mla_up"]["dp"] = 24;
                      j["modules"]["mla_out"] = {{"dp", 2}, {"tp", 12}}; },
        "modules.mla_out.tp = 12 must divide num_attention_heads = 128");
  fails([](auto& j) { j["modules"]["routed_experts"]["ep"] = 24; j["modules"]["routed_experts"]["cards"] = 24; },
        "must divide n_routed_experts");
  fails([](auto& j) { j["workload"]["acceptance"] = 1.5; }, "workload.acceptance = 1.5");
  fails([](auto& j) { j["network"].erase("intra_GBps"); }, "network.intra_GBps is required");
  fails([](auto& j) { j["modules"]["bogus"] = 1; }, "unknown key modules.bogus");
}

TEST_CASE("deploy: DP-rank balance -- the step waits for the rank with the most KV") {
  // Two ranks, one slot each; requests (input, output): A (10, 2), B (100, 1), C (10, 3).
  const std::vector<BalanceRequest> q = {{10, 2, 2}, {100, 1, 1}, {10, 3, 3}};
  // Round-robin: A, C on rank 0 (queue), B on rank 1.
  //   step 1: r0 A ctx 10, r1 B ctx 100 -> max 100; B done.  step 2: r0 A 11, r1 empty -> 11; A done.
  //   step 3..5: r0 C 10, 11, 12.  Total KV-time units = 100 + 11 + 10 + 11 + 12 = 144 over 5 steps.
  const BalanceResult rr = simulate_balance(q, 2, 1, 1.0, 1.0, Assign::round_robin);
  CHECK(rr.steps == 5);
  CHECK(rr.total_ms == 5 * 1.0 + 144);
  CHECK(rr.tokens == 6);
  // Least-KV: A -> r0, B -> r1 (both empty, lowest index first); step 1 max 100, B done; step 2 C -> r1
  //   (r1 empty): max(11, 10) = 11, A done; steps 3, 4: C 11, 12. Total 100 + 11 + 11 + 12 = 134, 4 steps.
  const BalanceResult lk = simulate_balance(q, 2, 1, 1.0, 1.0, Assign::least_kv);
  CHECK(lk.steps == 4);
  CHECK(lk.total_ms == 4 * 1.0 + 134);
  // The mixed workload: every token is emitted under every policy; balancing by KV beats round-robin.
  const auto w = mixed_workload(400, 5, 0.2);
  int64_t want = 0;
  for (const auto& r : w) want += r.output;
  std::map<int, double> total;
  for (Assign a : {Assign::round_robin, Assign::least_kv, Assign::predicted}) {
    const BalanceResult r = simulate_balance(w, 8, 10, 1.0, 1e-4, a);
    CHECK(r.tokens == want);
    total[static_cast<int>(a)] = r.total_ms;
  }
  CHECK(total[static_cast<int>(Assign::least_kv)] < total[static_cast<int>(Assign::round_robin)]);
}

TEST_CASE("reproduce 06-disagg, deployment half: every table is produced and says what it computed") {
  namespace d = ladder::cli::deploy06;
  const std::string mem = d::memory_figures_table();
  for (const char* id : {"MLA weights", "one routed expert", "dense FFN", "embedding", "shared expert TP8", "DP4+TP8",
                         "KV cache, 72 requests", "prefill activations"})
    CHECK_MESSAGE(mem.find(id) != std::string::npos, id);
  const std::string mtp = d::mtp_table(true);
  CHECK(mtp.find("| max(0, p - q) (correct) |") != std::string::npos);
  CHECK(mtp.find("follows p") != std::string::npos);
  CHECK(mtp.find("rejected: not p") != std::string::npos);  // the planted bug, caught
  for (const char* row : {"| 0.70 |", "| 0.80 |", "| 0.85 |", "| 0.90 |"}) CHECK(mtp.find(row) != std::string::npos);
  const std::string ov = d::overlap_table();
  CHECK(ov.find("huawei-a2-decode") != std::string::npos);
  const std::string bal = d::balance_table(true);
  for (const char* row : {"round-robin", "least KV-loaded", "predicted output length"}) CHECK(bal.find(row) != std::string::npos);
}
