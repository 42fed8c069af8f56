// tools/ladder/04-moe/mutants.cpp -- the mutation catalogue's DeepGEMM part (mutants.hpp): stage 04's ragged dot in
// DeepGEMM's grouped-GEMM layouts (ladder/04-moe/deepgemm.hpp), each bug class as the candidate a port with that bug
// writes (stage 04's ragged_dot rung run on the inputs as the buggy port reads them), beside correct variants.
#include <fmt/format.h>

#include <limits>

#include "ladder/04-moe/deepep.hpp"
#include "ladder/04-moe/deepgemm.hpp"
#include "mutants.hpp"

namespace ladder::mutants {
namespace {

struct Case {
  std::string layout;
  Tensors in;
  nlohmann::json params;
  Tensors expected;
};

Case make(bool masked) {
  moe::DeepGemmSpec s;
  s.n = 24;
  Case c{masked ? moe::kDeepGemmMasked : moe::kDeepGemmContiguous, {}, moe::deepgemm_params(s, masked), {}};
  c.in = masked ? moe::deepgemm_masked_inputs(s) : moe::deepgemm_contiguous_inputs(s);
  c.expected = run_oracle(contract(c.layout), c.in, c.params);
  return c;
}

Outcome judge(std::string name, bool mutant, std::string source, const Case& c, const Array<float>& d,
              const nlohmann::json& params) {
  const CheckReport r = check(contract(c.layout), c.in, params, c.expected, "d", to_npy(d));
  std::string first = r.pass ? "-" : r.failed.empty() ? r.text.substr(0, r.text.find('\n')) : r.failed.front();
  return {std::move(name), mutant, std::move(source), r.pass, std::move(first)};
}

Array<float> ragged(const Case& c, const Tensors& in) {
  return from_npy<float>(moe::deepgemm_run_ragged(c.layout, in, c.params).at("d"), "d");
}

Tensors with_ints(Tensors in, const char* name, const std::vector<int64_t>& v) {
  Array<int32_t> a({static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) a.data[i] = static_cast<int32_t>(v[i]);
  in[name] = to_npy(a);
  return in;
}

}  // namespace

void deepgemm_cases(std::vector<Outcome>& out) {
  const Case c = make(false);
  const std::vector<int64_t> idx = npy_as_int64(c.in.at("m_indices"), "m_indices").data;
  const Array<float> good = ragged(c, c.in);
  const int64_t n = good.shape[1], bm = c.params.at("block_m").get<int64_t>(), G = c.in.at("b").shape[0];
  out.push_back(judge("DeepGEMM contiguous: the ragged_dot rung in the layout", false, "stage 04's grouped product",
                      c, good, c.params));
  int64_t end = 0;  // expert 1's last row; the next row is padding
  while (idx[end + 1] == 1) ++end;
  Array<float> written = good;
  std::copy_n(&written.data[end * n], n, &written.data[(end + 1) * n]);
  out.push_back(judge("a padding row of the contiguous layout written", true, "a store one row past the segment", c,
                      written, c.params));
  nlohmann::json loose = c.params;
  loose["padding_rows"] = "unjudged";
  out.push_back(judge("DeepGEMM contiguous: padding row written, padding_rows unjudged", false,
                      "DeepGEMM's tests mask padding rows out", c, written, loose));
  std::vector<int64_t> wrap = idx;  // each M block's expert read from its last row, -1 wrapping to G - 1
  for (size_t i = 0; i < idx.size(); ++i)
    if (idx[i] >= 0) wrap[i] = idx[(i / bm + 1) * bm - 1] < 0 ? G - 1 : idx[(i / bm + 1) * bm - 1];
  out.push_back(judge("a padding row's group index (-1) taken as an expert", true, "negative index wraps (Python)", c,
                      ragged(c, with_ints(c.in, "m_indices", wrap)), c.params));
  Array<float> shifted = good;
  int64_t first = 0, last = 0;
  while (idx[first] != 3) ++first;
  for (last = first; idx[last + 1] == 3;) ++last;
  for (int64_t i = last; i >= first; --i) std::copy_n(&good.data[i * n], n, &shifted.data[(i + 1) * n]);
  std::fill_n(&shifted.data[first * n], n, 0.0f);
  out.push_back(judge("one expert's segment shifted by a row", true, "segment offsets off by one", c, shifted, c.params));

  const Case m = make(true);
  const std::vector<int64_t> mm = npy_as_int64(m.in.at("masked_m"), "masked_m").data;
  const Array<float> mgood = ragged(m, m.in);
  const int64_t M = mgood.shape[1], mn = mgood.shape[2], k = m.in.at("a").shape[2];
  Array<float> nan_past = mgood;
  for (size_t g = 0; g < mm.size(); ++g)
    std::fill(nan_past.data.begin() + (static_cast<int64_t>(g) * M + mm[g]) * mn,
              nan_past.data.begin() + (static_cast<int64_t>(g) + 1) * M * mn, std::numeric_limits<float>::quiet_NaN());
  out.push_back(judge("DeepGEMM masked: NaN in rows past masked_m", false, "rows DeepGEMM leaves unspecified", m,
                      nan_past, m.params));
  Array<float> a = from_npy<float>(m.in.at("a"), "a"), packed = a;
  int64_t off = 0;  // row i of group g read from flat row sum(masked_m[< g]) + i
  for (size_t g = 0; g < mm.size(); off += mm[g], ++g)
    std::copy_n(&a.data[off * k], mm[g] * k, &packed.data[static_cast<int64_t>(g) * M * k]);
  Tensors in = m.in;
  in["a"] = to_npy(packed);
  out.push_back(judge("masked buffer read as packed (rows past masked_m counted)", true, "masked vs contiguous offsets",
                      m, ragged(m, in), m.params));
  std::vector<int64_t> hint(mm.size(), std::min<int64_t>(m.params.at("expected_m").get<int64_t>(), M));
  out.push_back(judge("expected_m taken for masked_m", true, "the hint read as the count", m,
                      ragged(m, with_ints(m.in, "masked_m", hint)), m.params));
}

void deepep_cases(std::vector<Outcome>& out) {
  for (const bool ll : {false, true}) {  // DeepEP's dispatch / combine (ladder/04-moe/deepep.hpp)
    const moe::DeepEpSpec s;
    const std::string layout = ll ? moe::kDeepEpLowLatency : moe::kDeepEpNormal;
    const Tensors in = moe::deepep_inputs(s);
    const nlohmann::json params = moe::deepep_params(s, ll);
    const Tensors expected = run_oracle(contract(layout), in, params);
    for (const moe::DeepEpVariant& v : moe::deepep_variants(layout, in, params)) {
      if (ll && v.mutant && v.name.find("FP8") == std::string::npos && v.name.find("recv_count") == std::string::npos)
        continue;  // the bug classes both modes share are listed once, for the normal mode
      std::string first = "-";
      for (const CheckReport& r : moe::deepep_check(layout, in, params, expected, v.candidate))
        if (!r.pass && first == "-")
          first = r.output + ": " + (r.failed.empty() ? r.text.substr(0, r.text.find('\n')) : r.failed.front());
      out.push_back({(ll ? "DeepEP low latency: " : "DeepEP normal: ") + v.name, v.mutant, v.source, first == "-",
                     first});
    }
  }
}

}  // namespace ladder::mutants
