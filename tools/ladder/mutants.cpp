// tools/ladder/mutants.cpp -- the mutation catalogue (mutants.hpp) and `ladder mutants`.
#include "mutants.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>

#include "commands.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/05-eplb/eplb.hpp"
#include "source_dir.hpp"

namespace ladder::mutants {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The check that rejected a candidate: an invariant where one broke (it names the cause), else the rule's first line.
std::string first_check(const CheckReport& r) {
  if (r.pass) return "-";
  for (const std::string& f : r.failed)
    if (f.rfind("invariant ", 0) == 0) return f;
  return r.failed.empty() ? r.text.substr(0, r.text.find('\n')) : r.failed.front();
}

Outcome judged(std::string name, bool mutant, std::string source, const CheckReport& r) {
  return {std::move(name), mutant, std::move(source), r.pass, first_check(r)};
}

// A candidate output judged by its stage's contract (the output's rule and the contract's invariants).
Outcome candidate(std::string name, bool mutant, std::string source, const std::string& stage, const Tensors& in,
                  const json& params, const Tensors& expected, const std::string& output, const NpyData& cand,
                  const std::string& rule = "", const Tensors& companions = {}) {
  const Contract& c = contract(stage);
  return judged(std::move(name), mutant, std::move(source), check(c, in, params, expected, output, cand, rule, companions));
}

Array<float> random_f32(Shape s, uint64_t seed, double scale = 1) {
  Array<float> a(std::move(s));
  Rng rng(seed);
  for (float& v : a.data) v = static_cast<float>(scale * rng.normal());
  return a;
}

// ---- 01-softmax: a user kernel y = softmax(x) over rows, run by the harness ----------------------------------

using Kernel = std::function<void(float* x, float* y, int64_t rows, int64_t cols)>;

// The harness: the same two buffers for every call (as a framework reuses them), y poisoned with NaN before the
// first call only; after each call the input must be as it was, and y is judged by the contract's rule.
Outcome run_kernel(std::string name, bool mutant, std::string source, const Kernel& k, const std::vector<Array<float>>& xs) {
  const Contract& c = contract("01-softmax");
  std::vector<float> X(xs.front().data.size()), Y(X.size(), kNaN);
  for (const Array<float>& x : xs) {
    std::copy(x.data.begin(), x.data.end(), X.begin());
    k(X.data(), Y.data(), x.rows(), x.cols());
    for (size_t i = 0; i < X.size(); ++i)
      if (std::memcmp(&X[i], &x.data[i], sizeof(float)) != 0)
        return {std::move(name), mutant, std::move(source), false,
                fmt::format("harness inputs_unchanged: the kernel wrote its input x (element {})", i)};
    const Tensors in{{"x", to_npy(x)}};
    Array<float> y(x.shape);
    std::copy(Y.begin(), Y.end(), y.data.begin());
    const CheckReport r = check(c, in, json::object(), run_oracle(c, in, json::object()), "y", to_npy(y));
    if (!r.pass) return judged(std::move(name), mutant, std::move(source), r);
  }
  return {std::move(name), mutant, std::move(source), true, "-"};
}

// One row's safe softmax in float32, its sum over the row split into `splits` parts (each part's (m, d) merged
// by the online rule, Milakov & Gimelshein §3.5), each part summed forward or backward.
void softmax_row(const float* x, float* y, int64_t V, int64_t splits, bool backward) {
  float m = -INFINITY, d = 0;
  for (int64_t s = 0; s < splits; ++s) {
    const int64_t a = V * s / splits, b = V * (s + 1) / splits;
    float ms = -INFINITY, ds = 0;
    for (int64_t j = a; j < b; ++j) ms = std::max(ms, x[j]);
    for (int64_t t = 0; t < b - a; ++t) {
      const int64_t j = backward ? b - 1 - t : a + t;
      ds += std::exp(x[j] - ms);
    }
    if (ms == -INFINITY) continue;
    const float mn = std::max(m, ms);
    d = (m == -INFINITY ? 0.0f : d * std::exp(m - mn)) + ds * std::exp(ms - mn);
    m = mn;
  }
  for (int64_t j = 0; j < V; ++j) y[j] = std::exp(x[j] - m) / d;
}

Kernel split_kernel(int64_t splits, bool backward) {
  return [=](float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) softmax_row(x + r * cols, y + r * cols, cols, std::min(splits, cols), backward);
  };
}

void softmax_cases(const fs::path& golden, std::vector<Outcome>& out) {
  const std::vector<Array<float>> tiny{random_f32({6, 3}, 1), random_f32({6, 3}, 2)};
  const std::vector<Array<float>> wide{random_f32({4, 1000}, 3, 3), random_f32({4, 1000}, 4, 3)};
  for (const auto& [label, xs] : {std::pair{"[6, 3]", &tiny}, std::pair{"[4, 1000]", &wide}}) {
    out.push_back(run_kernel(fmt::format("softmax, sums reversed {}", label), false, "another summation order",
                             split_kernel(1, true), *xs));
    for (int64_t s : {2, 3, 7})
      out.push_back(run_kernel(fmt::format("softmax, {} splits merged {}", s, label), false,
                               "other split counts (online merge rule)", split_kernel(s, false), *xs));
  }
  // Input mutated in place: y right, x overwritten by the exponentials.
  out.push_back(run_kernel("input mutated in place", true, "kernels reusing the input as scratch",
                           [](float* x, float* y, int64_t rows, int64_t cols) {
                             for (int64_t r = 0; r < rows; ++r) {
                               float* xr = x + r * cols;
                               softmax_row(xr, y + r * cols, cols, 1, false);
                               for (int64_t j = 0; j < cols; ++j) xr[j] = y[r * cols + j];
                             }
                           },
                           wide));
  // Stale output: the kernel skips a call whose input pointer it saw last (a cache keyed by address).
  out.push_back(run_kernel("stale output from the previous call", true, "output cached by input address",
                           [last = static_cast<const float*>(nullptr)](float* x, float* y, int64_t rows, int64_t cols) mutable {
                             if (x == last) return;
                             last = x;
                             split_kernel(1, false)(x, y, rows, cols);
                           },
                           wide));
  // N < 4: columns in blocks of 4, cols / 4 of them: a row of 3 gets no block, and y is never written.
  out.push_back(run_kernel("N < 4: no block in the grid", true, "grid = N / 4 without rounding up",
                           [](float* x, float* y, int64_t rows, int64_t cols) {
                             const int64_t full = cols / 4 * 4;
                             for (int64_t r = 0; r < rows; ++r)
                               if (full > 0) softmax_row(x + r * cols, y + r * cols, full, 1, false);
                           },
                           tiny));
  // A row of -inf with one NaN: a kernel whose max skips the NaN writes zeros; the oracle says NaN.
  const Contract& c = contract("01-softmax");
  const CaseFolder nf = read_case(c, golden / "01-softmax" / "nan_inf");
  const Array<float> x = from_npy<float>(nf.inputs.at("x"), "x");
  Array<double> y = from_npy<double>(nf.expected.at("y"), "y");
  int64_t lost = 0;
  for (int64_t r = 0; r < x.rows(); ++r) {
    bool only = true, nan = false;
    for (int64_t j = 0; j < x.cols(); ++j) {
      const float v = x.data[static_cast<size_t>(r * x.cols() + j)];
      nan |= std::isnan(v), only &= std::isnan(v) || v == -INFINITY;
    }
    if (only && nan)
      for (int64_t j = 0; j < x.cols(); ++j) y.data[static_cast<size_t>(r * x.cols() + j)] = 0, ++lost;
  }
  if (lost > 0)
    out.push_back(candidate("-inf row with one NaN: NaN lost", true, "issue 41 (safe_vec / online_vec)", "01-softmax",
                            nf.inputs, nf.params, nf.expected, "y", to_npy(y.cast<float>())));
  for (const char* id : {"safe_vec", "online_vec", "online", "safe"}) {
    const Tensors t = run_rung(c, registry().find("01-softmax", "ref", id), nf.inputs, nf.params, DType::F4);
    out.push_back(candidate(fmt::format("rung {} on nan_inf", id), false, "ladder's own rungs", "01-softmax", nf.inputs,
                            nf.params, nf.expected, "y", t.at("y")));
  }
  // All-zero output where every true value is tiny (a row of 2^20: each y about 1e-6).
  const Tensors lg{{"x", to_npy(random_f32({1, int64_t{1} << 20}, 5))}};
  out.push_back(candidate("all-zero output, tiny true values (softmax 2^20)", true, "KernelBench #165", "01-softmax",
                          lg, json::object(), run_oracle(c, lg, json::object()), "y",
                          to_npy(Array<float>({1, int64_t{1} << 20}, 0.0f))));
}

// ---- 02-attention, 03-mla: candidate outputs ------------------------------------------------------------------

Array<float> scaled(const NpyData& d, double s) {
  Array<float> a = from_npy<float>(d, "input");
  for (float& v : a.data) v = static_cast<float>(v * s);
  return a;
}

NpyData f32_of(const NpyData& d, double s = 1) {
  const Array<double> a = npy_as_double(d);
  Array<float> f(a.shape);
  for (size_t i = 0; i < a.data.size(); ++i) f.data[i] = static_cast<float>(a.data[i] * s);
  return to_npy(f);
}

void attention_cases(const fs::path& golden, std::vector<Outcome>& out) {
  const Contract& c = contract("02-attention");
  const CaseFolder g = read_case(c, golden / "02-attention" / "q97_k113_d32_causal");
  // All-zero output where the true O is tiny: V scaled by 1e-30 (normal floats still).
  Tensors tiny = g.inputs;
  tiny["V"] = to_npy(scaled(g.inputs.at("V"), 1e-30));
  tiny.erase("dO");
  const Tensors tiny_exp = run_oracle(c, tiny, g.params);
  out.push_back(candidate("all-zero output, tiny true values (attention O ~ 1e-30)", true, "KernelBench #165",
                          "02-attention", tiny, g.params, tiny_exp, "O",
                          to_npy(Array<float>(npy_as_double(tiny_exp.at("O")).shape, 0.0f))));
  const Tensors tiled = run_rung(c, registry().find("02-attention", "ref", "tiled"), tiny, g.params, DType::F4);
  out.push_back(candidate("attention tiled (float32), O ~ 1e-30", false, "other block order", "02-attention", tiny,
                          g.params, tiny_exp, "O", tiled.at("O")));
  // lse in log2 where ln is promised.
  out.push_back(candidate("lse in log2 where ln is promised (attention L)", true, "FlashMLA: base-2 lse in sparse prefill",
                          "02-attention", g.inputs, g.params, g.expected, "L", f32_of(g.expected.at("L"), 1 / std::log(2.0))));
  const Tensors fl = run_rung(c, registry().find("02-attention", "ref", "flash"), g.inputs, g.params, DType::F4);
  out.push_back(candidate("attention flash (float32) L", false, "online rows", "02-attention", g.inputs, g.params,
                          g.expected, "L", fl.at("L")));
  // Causal flag ignored in the backward.
  json open = g.params;
  open["causal"] = false;
  const Tensors nc = run_oracle(c, g.inputs, open);
  out.push_back(candidate("causal flag ignored in the backward (dQ)", true, "backward kernels with their own mask flag",
                          "02-attention", g.inputs, g.params, g.expected, "dQ", f32_of(nc.at("dQ"))));
  // NHD vs HND with identical shapes: H = Nq = 4, O written [B, Nq, H, d_v] and read as [B, H, Nq, d_v].
  const Tensors in{{"Q", to_npy(random_f32({1, 4, 4, 16}, 11))}, {"K", to_npy(random_f32({1, 4, 6, 16}, 12))},
                   {"V", to_npy(random_f32({1, 4, 6, 16}, 13))}};
  const Tensors exp = run_oracle(c, in, json::object());
  const Array<double> o = npy_as_double(exp.at("O"));
  Array<float> swapped(o.shape);
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t n = 0; n < 4; ++n)
      for (int64_t d = 0; d < 16; ++d)
        swapped.data[static_cast<size_t>((h * 4 + n) * 16 + d)] = static_cast<float>(o.data[static_cast<size_t>((n * 4 + h) * 16 + d)]);
  out.push_back(candidate("NHD read as HND, identical shapes (H = Nq)", true, "LMCache #4463", "02-attention", in,
                          json::object(), exp, "O", to_npy(swapped)));
  const Tensors t2 = run_rung(c, registry().find("02-attention", "ref", "tiled"), in, json::object(), DType::F4);
  out.push_back(candidate("attention tiled (float32), H = Nq", false, "other block order", "02-attention", in,
                          json::object(), exp, "O", t2.at("O")));
  // MLA decode's lse (FlashMLA's softmax_lse) in log2.
  const Contract& m = contract("03-mla");
  const CaseFolder mc = read_case(m, golden / "03-mla" / "L_63");
  out.push_back(candidate("lse in log2 where ln is promised (MLA lse)", true, "FlashMLA: base-2 lse in sparse prefill",
                          "03-mla", mc.inputs, mc.params, mc.expected, "lse", f32_of(mc.expected.at("lse"), 1 / std::log(2.0))));
  // A sequence shorter than a block (63 tokens in a page of 64): a kernel reading the whole page reads the padding
  // row too, which the case fills with NaN.
  Tensors whole = mc.inputs;
  whole["seqlens"] = to_npy(Array<int64_t>({1}, 64));
  out.push_back(candidate("sequence shorter than a block: whole page read", true, "paged kernels without a tail mask",
                          "03-mla", mc.inputs, mc.params, mc.expected, "u", f32_of(run_oracle(m, whole, mc.params).at("u"))));
  // Paged cache, 1000 tokens in 16 pages: a wrong block_table entry (page 0 read in place of page 1) ...
  const CaseFolder pc = read_case(m, golden / "03-mla" / "L_1000");
  const Array<int64_t> table = npy_as_int64(pc.inputs.at("block_table"), "block_table");
  Tensors wrong = pc.inputs;
  Array<int32_t> t32(table.shape);
  for (size_t i = 0; i < table.data.size(); ++i) t32.data[i] = static_cast<int32_t>(table.data[i]);
  t32.data[1] = t32.data[0];
  wrong["block_table"] = to_npy(t32);
  out.push_back(candidate("a wrong block_table entry (one page read twice)", true, "paged-attention ports", "03-mla",
                          pc.inputs, pc.params, pc.expected, "u", f32_of(run_oracle(m, wrong, pc.params).at("u"))));
  // ... and the same pages stored in other places, the table following them: flash_mla (float32) must pass.
  const Array<float> blocks = from_npy<float>(pc.inputs.at("blocks"), "blocks");
  const int64_t nb = blocks.shape[0], per = blocks.size() / nb;
  Array<float> moved(blocks.shape);
  for (int64_t b = 0; b < nb; ++b)  // page b now lives at nb - 1 - b
    std::copy(blocks.data.begin() + b * per, blocks.data.begin() + (b + 1) * per, moved.data.begin() + (nb - 1 - b) * per);
  Tensors placed = pc.inputs;
  for (size_t i = 0; i < table.data.size(); ++i)
    t32.data[i] = table.data[i] < 0 ? -1 : static_cast<int32_t>(nb - 1 - table.data[i]);
  placed["blocks"] = to_npy(moved), placed["block_table"] = to_npy(t32);
  const Tensors fm = run_rung(m, registry().find("03-mla", "ref", "flash_mla"), placed, pc.params, DType::F4);
  out.push_back(candidate("flash_mla (float32), pages placed elsewhere", false, "other page placements", "03-mla",
                          pc.inputs, pc.params, pc.expected, "u", fm.at("u")));
}

// ---- 07-precision: block scales ------------------------------------------------------------------------------

void precision_cases(const fs::path& golden, std::vector<Outcome>& out) {
  const Contract& c = contract("07-precision");
  const CaseFolder g = read_case(c, golden / "07-precision" / "fp8_blocks");  // x [33, 320]: 3 tiles of 1 x 128
  // Scales of the wrong block: tile t of x dequantised with tile t + 1's scale (mod 3). That kernel's y is the
  // recipe's y on x with tile t multiplied by xs[t + 1] / xs[t] (same codes, the scale it applied).
  const Array<float> x = from_npy<float>(g.inputs.at("x"), "x");
  const Array<float> xs = from_npy<float>(g.expected.at("xs"), "xs");
  const int64_t M = x.rows(), K = x.cols(), T = xs.cols();
  Array<float> shifted = x;
  for (int64_t r = 0; r < M; ++r)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t t = k / 128, u = (t + 1) % T;
      const float a = xs.data[static_cast<size_t>(r * T + t)], b = xs.data[static_cast<size_t>(r * T + u)];
      if (a > 0) shifted.data[static_cast<size_t>(r * K + k)] *= b / a;
    }
  Tensors wrong = g.inputs;
  wrong["x"] = to_npy(shifted);
  out.push_back(candidate("scales of the wrong block (FP8 1 x 128 tiles)", true, "block-scaled GEMM ports", "07-precision",
                          g.inputs, g.params, g.expected, "y", run_oracle(c, wrong, g.params).at("y")));
  const Tensors r = run_rung(c, registry().find("07-precision", "ref", "fp8_block"), g.inputs, g.params, DType::F4);
  out.push_back(candidate("fp8_block recipe (float32)", false, "the recipe's own arithmetic", "07-precision", g.inputs,
                          g.params, g.expected, "y", r.at("y")));
}

// ---- 05-eplb: placements -----------------------------------------------------------------------------------------

void eplb_cases(std::vector<Outcome>& out) {
  const Contract& c = contract("05-eplb");
  // Issue #22's layout: 256 experts, 288 slots, 16 groups, 2 nodes, 32 GPUs; the first Zipf seed whose eplb.py
  // placement puts two replicas of one expert on one GPU.
  json params{{"num_replicas", 288}, {"num_groups", 16}, {"num_nodes", 2}, {"num_gpus", 32}};
  Tensors in, exp;
  bool found = false;
  eplb::CheckOptions distinct;
  distinct.distinct_per_gpu = true;
  for (uint64_t seed = 1; seed <= 64 && !found; ++seed) {  // found by the placement alone, not by the check judged
    Rng rng(seed);
    const Mat<double> w = eplb::zipf_loads(rng, 1, 256, 4096 * 8, 1.2);
    found = !eplb::check_placement(eplb::rebalance_experts(eplb::detail::to_float32_weights(w), 288, 16, 2, 32), 1, 256, distinct).empty();
    in = {{"weight", to_npy(Array<double>::from(w))}};
  }
  require(found, "mutants: no Zipf seed in 1..64 gives eplb.py a duplicate expert on one GPU");
  exp = run_oracle(c, in, params);
  json promise = params;
  promise["distinct_per_gpu"] = true;
  out.push_back(candidate("duplicate hot experts on one rank (eplb.py's own answer)", true, "deepseek-ai/EPLB #22",
                            "05-eplb", in, promise, exp, "phy2log", exp.at("phy2log")));
  // The same experts on each GPU in another slot order: any balancer may do that (rule valid).
  Array<int64_t> phy = npy_as_int64(exp.at("phy2log"), "phy2log");
  for (int64_t g = 0; g < 32; ++g) std::reverse(phy.data.begin() + g * 9, phy.data.begin() + (g + 1) * 9);
  out.push_back(candidate("placement, slots reordered within each GPU (rule valid)", false, "another slot order",
                          "05-eplb", in, params, exp, "phy2log", to_npy(phy), "valid"));
  // An expert left without a replica: its only slot given to the hottest expert.
  Array<int64_t> lost = npy_as_int64(exp.at("phy2log"), "phy2log");
  const Array<int64_t> cnt = npy_as_int64(exp.at("logcnt"), "logcnt");
  const int64_t hot = std::max_element(cnt.data.begin(), cnt.data.end()) - cnt.data.begin();
  for (int64_t& e : lost.data)
    if (cnt.data[static_cast<size_t>(e)] == 1 && e != hot) {
      e = hot;
      break;
    }
  out.push_back(candidate("an expert left without a replica", true, "replica maps out of step", "05-eplb", in, params, exp,
                          "phy2log", to_npy(lost)));
}

}  // namespace

std::vector<Outcome> run_catalogue(const fs::path& golden_root) {
  std::vector<Outcome> out;
  softmax_cases(golden_root, out);
  attention_cases(golden_root, out);
  precision_cases(golden_root, out);
  eplb_cases(out);
  deepgemm_cases(out);  // 04-moe/mutants.cpp
  flashmla_cases(out);  // 03-mla/mutants.cpp
  deepep_cases(out);
  return out;
}

bool all_good(const std::vector<Outcome>& outcomes) {
  return std::all_of(outcomes.begin(), outcomes.end(), [](const Outcome& o) { return o.mutant != o.passed; });
}

std::string table(const std::vector<Outcome>& outcomes) {
  std::string s = fmt::format("{:<8} {:<56} {:<9} {}\n", "kind", "candidate", "verdict", "caught by / seen in");
  int mutants = 0, caught = 0, variants = 0, passed = 0;
  for (const Outcome& o : outcomes) {
    (o.mutant ? mutants : variants) += 1;
    (o.mutant ? caught : passed) += o.mutant ? !o.passed : o.passed;
    const std::string verdict = o.mutant ? (o.passed ? "MISSED" : "caught") : (o.passed ? "pass" : "REJECTED");
    std::string why = o.mutant && !o.passed ? o.check : o.source;
    if (!o.mutant && !o.passed) why = o.check;
    if (why.size() > 110) why = why.substr(0, 107) + "...";
    s += fmt::format("{:<8} {:<56} {:<9} {}\n", o.mutant ? "mutant" : "correct", o.name, verdict, why);
  }
  s += fmt::format("{}/{} mutants caught, {}/{} correct variants passed\n", caught, mutants, passed, variants);
  return s;
}

}  // namespace ladder::mutants

namespace ladder::cli {

void add_mutants_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("mutants", "the mutation score: real bug classes as candidates; each must be caught");
  cmd->callback([&exit_code] {
    const auto outcomes = mutants::run_catalogue(ladder::source_dir() / "data" / "golden");
    std::fputs(mutants::table(outcomes).c_str(), stdout);
    exit_code = mutants::all_good(outcomes) ? 0 : 1;
  });
}

}  // namespace ladder::cli
