// tests/06-disagg/test_disagg_contract.cpp -- stage 06's case contract (ref/src/06-disagg/contract.cpp): a request
// list the user made runs through the generic oracle and check; the times are judged exactly (one ulp
// off fails), bad inputs and params are one Error naming the tensor or key, and a case folder written
// by the oracle round-trips through read_case.
#include <doctest/doctest.h>

#include <cmath>

#include "golden_util.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/06-disagg/disagg.hpp"
#include "ladder/06-disagg/presets.hpp"

using namespace ladder;

namespace {

// 40 requests, awkward lengths, bursts of equal arrival times.
Tensors user_requests() {
  Array<double> t({40});
  Array<int64_t> in({40}), out({40});
  for (int64_t i = 0; i < 40; ++i) {
    t.data[i] = 37.5 * static_cast<double>(i / 3);
    in.data[i] = 1 + (i * 97) % 1025;
    out.data[i] = 1 + (i * 13) % 113;
  }
  return {{"arrival_ms", to_npy(t)}, {"input_len", to_npy(in)}, {"output_len", to_npy(out.cast<int32_t>())}};
}

nlohmann::json colocated_chunked() {
  return {{"placement", {{"colocated", 1}}}, {"workers", {{"chunked_prefill_tokens", 256}}}};
}

}  // namespace

TEST_CASE("06-disagg contract: oracle = the simulator on the listed requests; exact check passes the oracle") {
  const Contract& c = contract("06-disagg");
  CHECK(describe(c).find("arrival_ms") != std::string::npos);
  for (const nlohmann::json& params :
       {nlohmann::json::object(), colocated_chunked(),
        nlohmann::json{{"placement", {{"prefill", 2}, {"decode", 1}}}, {"kv_transfer", {{"link_GBps", 25}}},
                       {"workers", {{"decode_max_batch", 7}}}}}) {
    CAPTURE(params.dump());
    const Tensors in = user_requests();
    const Tensors want = run_oracle(c, in, params);
    REQUIRE(want.size() == c.outputs.size());
    // The same numbers straight from simulate() on the same requests.
    disagg::Workload w;
    w.requests = 40;
    const Array<double> t = npy_as_double(in.at("arrival_ms")), il = npy_as_double(in.at("input_len")),
                        ol = npy_as_double(in.at("output_len"));
    for (int64_t i = 0; i < 40; ++i)
      w.arrivals.push_back({i, t.data[i], static_cast<int64_t>(il.data[i]), static_cast<int64_t>(ol.data[i])});
    disagg::Cluster cl;
    if (params.contains("placement") && params["placement"].contains("prefill")) {
      cl.prefill = 2, cl.decode = 1, cl.link_GBps = 25, cl.decode_max_batch = 7;
    } else {
      cl.colocated = 1;
    }
    cl.kv_bytes_per_token = disagg::opt_13b().kv_bytes_per_token();
    if (params.contains("workers") && params["workers"].contains("chunked_prefill_tokens")) cl.chunked_prefill_tokens = 256;
    disagg::SimOptions o;
    o.keep_requests = true;
    const disagg::SimResult r =
        disagg::simulate(disagg::DistServeModel(disagg::distserve_opt13b_a100()), cl, w, disagg::Slo{400, 40}, o);
    const Array<double> ttft = npy_as_double(want.at("ttft_ms")), tpot = npy_as_double(want.at("tpot_ms"));
    for (int64_t i = 0; i < 40; ++i) {
      CHECK(ttft.data[i] == r.records[static_cast<size_t>(i)].ttft());
      CHECK(tpot.data[i] == r.records[static_cast<size_t>(i)].tpot());
    }
    for (const OutputSpec& s : c.outputs) CHECK(check(c, in, params, want, s.name, want.at(s.name)).pass);
  }
}

TEST_CASE("06-disagg contract: a time one ulp or 1e-9 off fails; wrong dtype or shape is an Error") {
  const Contract& c = contract("06-disagg");
  const Tensors in = user_requests();
  const nlohmann::json params = colocated_chunked();
  const Tensors want = run_oracle(c, in, params);
  for (const char* out : {"ttft_ms", "tpot_ms", "finish_ms"}) {
    Array<double> a = from_npy<double>(want.at(out), out);
    Array<double> ulp = a, nine = a;
    ulp.data[17] = std::nextafter(a.data[17], 1e300);
    nine.data[3] += 1e-9;
    CAPTURE(out);
    const CheckReport r = check(c, in, params, want, out, to_npy(ulp));
    CHECK_FALSE(r.pass);
    CHECK(r.text.find("[17]") != std::string::npos);
    CHECK_FALSE(check(c, in, params, want, out, to_npy(nine)).pass);
    CHECK_THROWS_WITH_AS(check(c, in, params, want, out, to_npy(a.cast<float>())),
                         doctest::Contains("dtype <f4 where <f8 is required"), Error);
    Array<double> short_one({39});
    CHECK_THROWS_WITH_AS(check(c, in, params, want, out, to_npy(short_one)), doctest::Contains("shape [39]"), Error);
  }
  Array<int64_t> w = from_npy<int64_t>(want.at("slo_met"), "slo_met");
  w.data[0] = 1 - w.data[0];
  CHECK_FALSE(check(c, in, params, want, "slo_met", to_npy(w)).pass);
}

TEST_CASE("06-disagg contract: bad inputs and params name the tensor or key") {
  const Contract& c = contract("06-disagg");
  auto throws = [&](Tensors in, const nlohmann::json& params, const char* msg) {
    CAPTURE(msg);
    CHECK_THROWS_WITH_AS(run_oracle(c, in, params), doctest::Contains(msg), Error);
  };
  Tensors in = user_requests();
  Array<double> t = from_npy<double>(in.at("arrival_ms"), "t");
  t.data[10] = t.data[9] - 1;
  Tensors bad = in;
  bad["arrival_ms"] = to_npy(t);
  throws(bad, {}, "arrival_ms[10]");
  bad = in;
  bad["arrival_ms"] = to_npy(t.cast<float>());
  throws(bad, {}, "input arrival_ms has dtype <f4");
  bad = in;
  bad["input_len"] = to_npy(Array<int64_t>({39}));
  throws(bad, {}, "input input_len has shape [39]");
  bad = in;
  Array<int64_t> z = npy_as_int64(in.at("output_len"), "o");
  z.data[2] = 0;
  bad["output_len"] = to_npy(z);
  throws(bad, {}, "request 2");
  throws(in, {{"placment", {}}}, "unknown param 'placment'");
  throws(in, {{"workers", {{"chunked_prefill_tokens", 0}}}}, "workers.chunked_prefill_tokens = 0 violates >= 1");
  throws(in, {{"placement", {{"prefill", 1}, {"decode", 1}}}, {"workers", {{"chunked_prefill_tokens", 64}}}},
         "applies to colocated workers only");
  throws(in, {{"placement", {{"prefill", 1}}}}, "decode = 0 violates");
  throws(in, {{"step_model", {{"kind", "roofline"}}}}, "step_model.kind = 'roofline' violates distserve | table");
  throws(in, {{"step_model", {{"prefill", {1, 2}}}}}, "step_model.prefill = [1,2] violates [a, b, c]");
  throws(in, {{"step_model", {{"decode", {1e300, 1, 1}}}}}, "step_model.decode = [1e+300,1,1] violates [a, b, c]");
  throws(in, {{"slo", {{"ttft_s", 0}}}}, "violates ttft_s > 0");
  throws(in, {{"workers", {{"kv_capacity_tokens", 64}}}}, "cannot hold the longest request");
  // A measured table as the step model runs too.
  const nlohmann::json table = {{"step_model",
                                 {{"kind", "table"},
                                  {"prefill", {{1, 1, 18.2}, {1, 2048, 257.7}}},
                                  {"decode", {{1, 1, 19.97}, {64, 131072, 104.5}}}}}};
  CHECK(run_oracle(c, in, table).size() == c.outputs.size());
}

TEST_CASE("06-disagg contract: a case folder from the oracle round-trips through read_case and check") {
  const Contract& c = contract("06-disagg");
  test::TempDir tmp;
  const Tensors in = user_requests();
  const Tensors want = run_oracle(c, in, colocated_chunked());
  write_case(c, tmp.path / "case", in, colocated_chunked(), want);
  const CaseFolder cf = read_case(c, tmp.path / "case");
  CHECK(cf.params == colocated_chunked());
  CHECK(check(c, cf.inputs, cf.params, cf.expected, "ttft_ms", want.at("ttft_ms")).pass);
}
