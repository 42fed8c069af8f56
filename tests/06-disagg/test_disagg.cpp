// tests/06-disagg/test_disagg.cpp -- stage 06 step models, data files, configs and the goodput search.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include "golden_util.hpp"
#include "ladder/core/json.hpp"
#include "ladder/06-disagg/disagg.hpp"
#include "ladder/06-disagg/golden.hpp"
#include "ladder/06-disagg/presets.hpp"
#include "source_dir.hpp"

using namespace ladder;
using namespace ladder::disagg;

namespace {
const std::filesystem::path kData = ladder::source_dir() / "data";

BatchStats one(int64_t l) { return BatchStats{1, static_cast<double>(l), static_cast<double>(l) * static_cast<double>(l)}; }

void same_cost(const Cost& a, const Cost& b) {
  CHECK(a.flops == doctest::Approx(b.flops).epsilon(1e-9));
  CHECK(a.bytes_read == doctest::Approx(b.bytes_read).epsilon(1e-9));
  CHECK(a.bytes_written == doctest::Approx(b.bytes_written).epsilon(1e-9));
}
}  // namespace

TEST_CASE("DistServe fitted form: the published OPT-13B A100 coefficients, term by term") {
  const DistServeModel m(distserve_opt13b_a100());
  CHECK(m.prefill_ms(one(512)) == 18.10 + 0.1019 * 512 + 7.12e-6 * 512.0 * 512.0);
  CHECK(m.decode_ms(BatchStats{3, 1539, 0}) == 19.93 + 6.27e-4 * 1539 + 0.0385 * 3);
  DistServeCoefficients bad = distserve_opt13b_a100();
  bad.decode[1] = -1;
  CHECK_THROWS_WITH_AS(DistServeModel{bad}, doctest::Contains("decode[1] = -1 violates >= 0"), Error);
}

TEST_CASE("data/ files hold the numbers presets.hpp uses (no drift between the two)") {
  const DistServeCoefficients c = load_distserve(kData / "disagg" / "distserve-opt-13b-a100.json");
  for (int i = 0; i < 3; ++i) {
    CHECK(c.prefill[i] == distserve_opt13b_a100().prefill[i]);
    CHECK(c.decode[i] == distserve_opt13b_a100().decode[i]);
  }
  for (const auto& [file, m] : {std::pair{"opt-13b.json", opt_13b()}, std::pair{"deepseek-v3.json", deepseek_v3()}}) {
    CAPTURE(file);
    const ModelSpec f = load_model(kData / "models" / file);
    CHECK(f.layers == m.layers);
    CHECK(f.hidden == m.hidden);
    CHECK(f.heads == m.heads);
    CHECK(f.head_dim == m.head_dim);
    CHECK(f.vocab == m.vocab);
    CHECK(f.intermediate == m.intermediate);
    CHECK(f.experts == m.experts);
    CHECK(f.top_k == m.top_k);
    CHECK(f.kv_bytes_per_token() == m.kv_bytes_per_token());
  }
  CHECK(deepseek_v3().kv_bytes_per_token() == 70272);  // the Huawei report: (512 + 64) x 61 x 2
  CHECK(opt_13b().kv_bytes_per_token() == 819200);
  // deepseek-v2-moe.json repeats stage 03's MLA dimensions: they must agree with deepseek-v2.json.
  const ModelSpec v2 = load_model(kData / "models" / "deepseek-v2-moe.json");
  const nlohmann::json a = read_json(kData / "models" / "deepseek-v2.json").at("attention");
  CHECK(v2.mla.kv_lora_rank == a.at("kv_lora_rank").at("value").get<int64_t>());
  CHECK(v2.mla.q_lora_rank == a.at("q_lora_rank").at("value").get<int64_t>());
  CHECK(v2.hidden == a.at("hidden_size").at("value").get<int64_t>());
  const GpuSpec a100 = load_gpu(kData / "gpus" / "a100-80gb.json"), h800 = load_gpu(kData / "gpus" / "h800-sxm.json");
  CHECK(a100.tflops == a100_80gb().tflops);
  CHECK(a100.hbm_GBps == a100_80gb().hbm_GBps);
  CHECK(h800.tflops == h800_sxm().tflops);
  CHECK(h800.hbm_GBps == h800_sxm().hbm_GBps);
  for (const char* g : {"h100-sxm.json", "ascend-910b.json"}) CHECK_NOTHROW(load_gpu(kData / "gpus" / g));
  // Every number in data/models and data/gpus carries a source.
  for (const auto& dir : {kData / "gpus", kData / "models"})
    for (const auto& f : std::filesystem::directory_iterator(dir)) {
      std::function<void(const nlohmann::json&, const std::string&)> walk = [&](const nlohmann::json& j, const std::string& at) {
        if (j.is_object() && j.contains("value")) {
          CAPTURE(at);
          CHECK((j.contains("source") || j.contains("formula")));
          return;
        }
        if (j.is_object())
          for (const auto& [k, v] : j.items()) walk(v, at + "." + k);
      };
      walk(read_json(f.path()), f.path().filename().string());
    }
}

TEST_CASE("roofline: the stages' Cost fitted once equals the Cost evaluated directly, at other lengths") {
  for (const auto& [m, g, gpus] : {std::tuple{opt_13b(), a100_80gb(), 1}, std::tuple{deepseek_v3(), h800_sxm(), 8}}) {
    CAPTURE(m.name);
    const RooflineModel r(m, g, gpus);
    for (int64_t l : {1, 97, 1023, 16384}) same_cost(r.fitted_prefill_attention(one(l)), r.attention_prefill(l));
    same_cost(r.fitted_prefill_attention(BatchStats{2, 97 + 1023, 97.0 * 97 + 1023.0 * 1023}),
              r.attention_prefill(97) + r.attention_prefill(1023));
    for (int64_t ctx : {1, 513, 4097}) same_cost(r.fitted_decode_attention(BatchStats{1, static_cast<double>(ctx), 0}), r.attention_decode(ctx));
  }
  // MLA decode: absorbed weights once per step, so B requests cost less than B single steps.
  const RooflineModel v3(deepseek_v3(), h800_sxm(), 8);
  const Cost two = v3.fitted_decode_attention(BatchStats{2, 2048, 0});
  CHECK(two.bytes_read < 2 * v3.attention_decode(1024).bytes_read);
  // OPT-13B decode at B = 1 on an A100 is weight-bandwidth bound: about 2 x 12.9e9 B / 2039 GB/s.
  const RooflineModel opt(opt_13b(), a100_80gb(), 1);
  const double ms = opt.decode_ms(BatchStats{1, 512, 0});
  CHECK(ms > 12.0);
  CHECK(ms < 14.5);
  CHECK(opt.prefill_ms(one(2048)) > 2 * opt.prefill_ms(one(1024)) * 0.99);  // compute bound: ~linear or worse
}

TEST_CASE("table model: interpolation, the CSV loader, and bad rows") {
  const TableModel t = load_table_model((kData / "disagg" / "example-step-table.csv").string());
  CHECK(t.prefill_ms(one(512)) == doctest::Approx(72.1));
  CHECK(t.prefill_ms(one(1280)) == doctest::Approx((72.1 + 257.7) / 2));
  CHECK(t.decode_ms(BatchStats{3, 2048, 0}) == doctest::Approx(24.9 - (24.9 - 24.0) * (4096 - 2048) / (4096 - 1024.0)));
  test::TempDir tmp;
  const auto bad = [&](const std::string& text, const std::string& msg) {
    const auto p = (tmp.path / "t.csv").string();
    std::ofstream(p) << "phase,batch,tokens,ms\n" << text;
    CHECK_THROWS_WITH_AS(load_table_model(p), doctest::Contains(msg.c_str()), Error);
  };
  bad("prefill,1,1,2\n", "no decode rows");
  bad("prefil,1,1,2\ndecode,1,1,2\n", "phase 'prefil' violates");
  bad("prefill,1,1,-2\ndecode,1,1,2\n", "ms = -2 violates ms > 0");
  bad("prefill,x,1,2\n", "is not 'phase,batch,tokens,ms'");
}

TEST_CASE("goodput bisection: the highest rate measured to meet the target, within the precision") {
  const auto step = [](double edge) { return [edge](double r) { return r <= edge ? 0.95 : 0.5; }; };
  for (double edge : {0.37, 3.7, 123.4}) {
    GoodputSearch s;
    s.precision = 0.01;
    const GoodputResult g = find_goodput(step(edge), 3, s);
    // rung find_goodput, output rate / upper, case edge_E (attainment 0.95 up to E, 0.5 above)
    const std::string head = "rung find_goodput (float64), output ";
    const std::string tail = ", case edge_" + fmt::format("{}", edge) + ": ";
    CHECK_MESSAGE((g.rate <= edge && g.rate > edge - 0.01), head << "rate" << tail << "expected in (" << edge - 0.01
                  << ", " << edge << "] (the highest rate measured to meet the target, within the precision 0.01), got "
                  << g.rate);
    CHECK_MESSAGE(g.upper > edge, head << "upper" << tail << "expected > " << edge << " (the lowest rate measured to "
                  "miss the target), got " << g.upper);
    CHECK_MESSAGE(g.attainment == 0.95, head << "attainment" << tail << "expected 0.95 (the attainment at rate), got "
                  << g.attainment);
    CHECK_MESSAGE(g.per_gpu == g.rate / 3, head << "per_gpu" << tail << "expected rate / 3 = " << g.rate / 3
                  << " (3 GPUs), got " << g.per_gpu);
  }
  GoodputSearch s;
  s.max_rate = 100;
  {  // chapter 06, section 3: a target still met at max_rate is an error whose message names max_rate
    INFO("rung find_goodput, output error, case always_met: attainment 1 at every rate must throw ladder::Error "
         "naming 'max_rate' (the doubling stops there)");
    CHECK_THROWS_WITH_AS(find_goodput([](double) { return 1.0; }, 1, s), doctest::Contains("max_rate"), Error);
  }
  const GoodputResult never = find_goodput([](double) { return 0.0; }, 1, s);
  CHECK_MESSAGE(never.rate == 0, "rung find_goodput (float64), output rate, case never_met: expected 0 (no rate "
                "meets the target), got " << never.rate);
}

TEST_CASE("simulate configs: every example loads; bad keys and values name the key") {
  for (const auto& f : std::filesystem::directory_iterator(kData / "disagg")) {
    if (f.path().extension() != ".json" || read_json(f.path()).contains("prefill")) continue;  // coefficient files
    CAPTURE(f.path().string());
    CHECK_NOTHROW(load_sim_config(f.path(), kData));
  }
  const nlohmann::json good = read_json(kData / "disagg" / "distserve-fig1.json");
  const auto fails = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& msg) {
    nlohmann::json j = good;
    edit(j);
    CAPTURE(msg);
    CHECK_THROWS_WITH_AS(parse_sim_config(j, "t", kData / "disagg", kData), doctest::Contains(msg.c_str()), Error);
  };
  fails([](auto& j) { j["workload"]["rte"] = 1; }, "unknown key 'workload.rte'");
  fails([](auto& j) { j["colour"] = 1; }, "unknown key 'colour'");
  fails([](auto& j) { j["workload"]["rate"] = -1; }, "workload.rate = -1 violates rate > 0");
  fails([](auto& j) { j["slo"]["ttft_s"] = 0; }, "slo.ttft_s = 0 violates > 0");
  fails([](auto& j) { j["placements"] = nlohmann::json::array({{{"prefill", 2}}}); }, "decode = 0 violates decode >= 1");
  fails([](auto& j) { j["workers"]["kv_capacity_tokens"] = 512; }, "kv_capacity_tokens = 512");
  fails([](auto& j) { j["step_model"]["kind"] = "magic"; }, "step_model.kind = 'magic'");
  fails([](auto& j) { j["workload"]["input"] = "long"; }, "workload.input");
}
