// ref/src/04-moe/deepep.cpp -- the layouts "04-moe/deepep_normal" and "04-moe/deepep_low_latency": stage 04's expert
// parallelism (rank r holds experts [r L, (r + 1) L), as ep_sharded's shards) in DeepEP's dispatch / combine
// interface (ladder/04-moe/deepep.hpp: the facts, ladder's form, what is judged). The oracle takes the receiver's
// view: for each destination (rank, or rank and local expert) it scans every source token in order.
#include "ladder/04-moe/deepep.hpp"
#include "deepep_in.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ladder/core/fp64_bound.hpp"
#include "ladder/core/quant.hpp"
#include "ladder/core/rng.hpp"

namespace ladder::moe::detail {
namespace {

int64_t required_int(const std::string& who, const nlohmann::json& p, const char* name, int64_t at_least) {
  require(p.is_object() && p.contains(name), "{}: param {} is required (case.json \"params\")", who, name);
  require(p.at(name).is_number_integer() && p.at(name).get<int64_t>() >= at_least, "{}: param {} = {} violates "
          "integer >= {}", who, name, p.at(name).dump(), at_least);
  return p.at(name).get<int64_t>();
}

}  // namespace

bool EpIn::sends(int64_t g, int64_t s) const {
  for (int64_t j = 0; j < K; ++j) {
    const int64_t e = idx[static_cast<size_t>(g * K + j)];
    if (e >= 0 && (ll ? e == s : e / L == s)) return true;
  }
  return false;
}

EpIn ep_read(const std::string& who, bool ll, const Tensors& t, const nlohmann::json& params) {
  EpIn in;
  in.ll = ll;
  in.R = required_int(who, params, "num_ranks", 1);
  in.E = required_int(who, params, "num_experts", 1);
  require(in.E % in.R == 0, "{}: param num_experts = {} violates a multiple of num_ranks = {} (each rank holds "
          "num_experts / num_ranks experts)", who, in.E, in.R);
  in.L = in.E / in.R;
  in.x = from_npy<float>(tensor(t, "x", who), "input x");
  require(in.x.shape.size() == 3 && in.x.shape[0] == in.R && in.x.shape[1] >= 1 && in.x.shape[2] >= 1, "{}: input x "
          "has shape {}, violates [num_ranks = {}, num_tokens >= 1, hidden >= 1]", who, shape_str(in.x.shape), in.R);
  in.T = in.x.shape[1], in.H = in.x.shape[2];
  if (ll) {
    in.M = required_int(who, params, "num_max_dispatch_tokens_per_rank", in.T);
    require(in.H % 128 == 0, "{}: input x has hidden = {}, violates a multiple of 128 (one FP8 scale per 128 "
            "channels)", who, in.H);
  }
  in.N = in.R * (ll ? in.M : in.T);
  const Array<int64_t> idx = npy_as_int64(tensor(t, "topk_idx", who), "input topk_idx");
  require(idx.shape.size() == 3 && idx.shape[0] == in.R && idx.shape[1] == in.T && idx.shape[2] >= 1, "{}: input "
          "topk_idx has shape {}, violates [num_ranks = {}, num_tokens = {}, num_topk >= 1]", who,
          shape_str(idx.shape), in.R, in.T);
  in.K = idx.shape[2];
  in.idx = idx.data;
  for (int64_t g = 0; g < in.R * in.T; ++g)
    for (int64_t j = 0; j < in.K; ++j) {
      const int64_t e = in.idx[static_cast<size_t>(g * in.K + j)];
      require(e >= -1 && e < in.E, "{}: input topk_idx[{}, {}, {}] = {} violates -1 <= topk_idx < num_experts = {}",
              who, g / in.T, g % in.T, j, e, in.E);
      for (int64_t i = 0; i < j && e >= 0; ++i)
        require(in.idx[static_cast<size_t>(g * in.K + i)] != e, "{}: input topk_idx[{}, {}] names expert {} twice "
                "(entries {} and {}), violates distinct experts per token", who, g / in.T, g % in.T, e, i, j);
    }
  in.w = from_npy<float>(tensor(t, "topk_weights", who), "input topk_weights");
  require(in.w.shape == idx.shape, "{}: input topk_weights has shape {}, violates topk_idx's {}", who,
          shape_str(in.w.shape), shape_str(idx.shape));
  const Array<float> s = from_npy<float>(tensor(t, "expert_scale", who), "input expert_scale");
  require(s.shape == Shape{in.E}, "{}: input expert_scale has shape {}, violates [num_experts = {}]", who,
          shape_str(s.shape), in.E);
  in.scale = s.data;
  for (const auto& [name, v] : {std::pair{"x", &in.x.data}, std::pair{"topk_weights", &in.w.data},
                                std::pair{"expert_scale", &in.scale}})
    for (size_t i = 0; i < v->size(); ++i)
      require(std::isfinite((*v)[i]), "{}: input {}[{}] = {} violates finite", who, name, i, (*v)[i]);
  return in;
}

std::vector<std::vector<int64_t>> ep_received(const EpIn& in) {
  std::vector<std::vector<int64_t>> seg(static_cast<size_t>(in.segments()));
  for (int64_t s = 0; s < in.segments(); ++s)
    for (int64_t g = 0; g < in.R * in.T; ++g)
      if (in.sends(g, s)) seg[static_cast<size_t>(s)].push_back(g);
  return seg;
}

void ep_fp8_row(const EpIn& in, int64_t g, float* values, float* scales) {
  Mat<float> row(1, in.H);
  std::copy_n(&in.x.data[g * in.H], in.H, row.data());
  const quant::Quantized q = quant::tiles_1x128(row, quant::ScaleRule::amax);
  for (int64_t h = 0; h < in.H; ++h) values[h] = q.element(0, h);
  for (int64_t b = 0; b < in.H / 128; ++b) scales[b] = q.scales(0, b);
}

bool ep_is_buffer(const std::string& o) {
  return o == "recv_src" || o == "recv_x" || o == "recv_x_scales" || o == "recv_topk_idx" || o == "recv_topk_weights";
}

namespace {

// combined_x [R, T, H] at T: sum over the token's entries j (ascending) of w_j expert_scale[e_j] x (low latency:
// x as the FP8 values times their scale, what the experts received).
template <class F>
Array<F> combined(const EpIn& in) {
  Array<F> out({in.R, in.T, in.H});
  std::vector<float> v(static_cast<size_t>(in.H)), sc(static_cast<size_t>(in.H / 128 + 1));
  for (int64_t g = 0; g < in.R * in.T; ++g) {
    if (in.ll) ep_fp8_row(in, g, v.data(), sc.data());
    for (int64_t h = 0; h < in.H; ++h) {
      const F xv = in.ll ? static_cast<F>(v[h]) * static_cast<F>(sc[h / 128]) : static_cast<F>(in.x.data[g * in.H + h]);
      F acc = 0;
      for (int64_t j = 0; j < in.K; ++j)
        if (const int64_t e = in.idx[static_cast<size_t>(g * in.K + j)]; e >= 0)
          acc += static_cast<F>(in.w.data[g * in.K + j]) * static_cast<F>(in.scale[e]) * xv;
      out.data[g * in.H + h] = acc;
    }
  }
  return out;
}

// A float64 candidate's allowance per element of combined_x (Contract::fp64_bound): the token's terms w_j
// expert_scale[e_j] x (x: in low latency the FP8 value times its scale, exact in float64), each two products in any
// association (2u), summed in any order (rank by rank, entry by entry); the oracle's bound plus the candidate's
// (core/fp64_bound.hpp). A token with no expert: 0 exactly.
Array<double> combined_allowance(const EpIn& in) {
  using namespace fp64;
  Array<double> out({in.R, in.T, in.H});
  std::vector<float> v(static_cast<size_t>(in.H)), sc(static_cast<size_t>(in.H / 128 + 1));
  for (int64_t g = 0; g < in.R * in.T; ++g) {
    if (in.ll) ep_fp8_row(in, g, v.data(), sc.data());
    for (int64_t h = 0; h < in.H; ++h) {
      const double xv = in.ll ? static_cast<double>(v[h]) * sc[h / 128] : in.x.data[g * in.H + h];
      Sum s;
      for (int64_t j = 0; j < in.K; ++j)
        if (const int64_t e = in.idx[static_cast<size_t>(g * in.K + j)]; e >= 0)
          s.add(mul(mul({in.w.data[g * in.K + j], 0}, {in.scale[e], 0}), {xv, 0}));
      out.data[g * in.H + h] = s.n == 0 ? 0.0 : 2 * s.done().e;
    }
  }
  return out;
}

Tensors oracle(const EpIn& in) {
  const auto seg = ep_received(in);
  const int64_t R = in.R, T = in.T, H = in.H, K = in.K, N = in.N, S = in.segments(), HB = in.H / 128;
  Tensors out;
  Array<int32_t> src(in.ll ? Shape{R, in.L, N} : Shape{R, N});
  std::fill(src.data.begin(), src.data.end(), -1);
  Array<float> rx(in.ll ? Shape{R, in.L, N, H} : Shape{R, N, H});
  std::fill(rx.data.begin(), rx.data.end(), 0.0f);
  for (int64_t s = 0; s < S; ++s)
    for (size_t i = 0; i < seg[s].size(); ++i) src.data[s * N + static_cast<int64_t>(i)] = static_cast<int32_t>(seg[s][i]);
  if (in.ll) {
    Array<int32_t> count({R, in.L});
    Array<float> scales({R, in.L, N, HB});
    std::fill(scales.data.begin(), scales.data.end(), 0.0f);
    for (int64_t s = 0; s < S; ++s) {
      count.data[s] = static_cast<int32_t>(seg[s].size());
      for (size_t i = 0; i < seg[s].size(); ++i) {
        const int64_t row = s * N + static_cast<int64_t>(i);
        ep_fp8_row(in, seg[s][i], &rx.data[row * H], &scales.data[row * HB]);
      }
    }
    out["recv_count"] = to_npy(count), out["recv_x_scales"] = to_npy(scales);
  } else {
    Array<int32_t> per_rank({R, R}), in_rank({R, T, R}), per_expert({R, in.E}), nrecv({R}), nrecv_e({R, in.L});
    Array<int64_t> ridx({R, N, K});
    Array<float> rw({R, N, K});
    for (auto* a : {&per_rank, &in_rank, &per_expert, &nrecv, &nrecv_e}) std::fill(a->data.begin(), a->data.end(), 0);
    std::fill(ridx.data.begin(), ridx.data.end(), -1);
    std::fill(rw.data.begin(), rw.data.end(), 0.0f);
    for (int64_t g = 0; g < R * T; ++g) {
      for (int64_t d = 0; d < R; ++d)
        if (in.sends(g, d)) in_rank.data[g * R + d] = 1, ++per_rank.data[(g / T) * R + d];
      for (int64_t j = 0; j < K; ++j)
        if (const int64_t e = in.idx[static_cast<size_t>(g * K + j)]; e >= 0) ++per_expert.data[(g / T) * in.E + e];
    }
    for (int64_t d = 0; d < R; ++d) {
      nrecv.data[d] = static_cast<int32_t>(seg[d].size());
      for (size_t i = 0; i < seg[d].size(); ++i) {
        const int64_t g = seg[d][i], row = d * N + static_cast<int64_t>(i);
        std::copy_n(&in.x.data[g * H], H, &rx.data[row * H]);
        for (int64_t j = 0; j < K; ++j) {
          const int64_t e = in.idx[static_cast<size_t>(g * K + j)];
          if (e < 0 || e / in.L != d) continue;  // DeepEP's tests: local index, -1 where the expert lives elsewhere
          ridx.data[row * K + j] = e - d * in.L;
          rw.data[row * K + j] = in.w.data[g * K + j];
          ++nrecv_e.data[d * in.L + e - d * in.L];
        }
      }
    }
    out["num_tokens_per_rank"] = to_npy(per_rank), out["is_token_in_rank"] = to_npy(in_rank);
    out["num_tokens_per_expert"] = to_npy(per_expert), out["num_recv_tokens"] = to_npy(nrecv);
    out["num_recv_tokens_per_expert"] = to_npy(nrecv_e), out["recv_topk_idx"] = to_npy(ridx);
    out["recv_topk_weights"] = to_npy(rw);
  }
  out["recv_src"] = to_npy(src), out["recv_x"] = to_npy(rx);
  out["combined_x"] = to_npy(combined<double>(in));
  return out;
}

OutputSpec exact(const char* name, const char* dtype, const char* shape, const char* doc, const char* why) {
  return {name, dtype, shape, doc, Rule::exact, 0, why, false, ""};
}

Contract deepep_contract(bool ll) {
  const std::string who = ll ? kDeepEpLowLatency : kDeepEpNormal;
  Contract c;
  c.stage = who;
  c.doc = ll ? "DeepEP's low_latency_dispatch / low_latency_combine (decode): each rank's tokens cast to E4M3 (1 x 128 "
               "scales) and packed per local expert, and the weighted combine; every rank in one case"
             : "DeepEP's get_dispatch_layout, dispatch and combine (normal mode: training, prefill): the layout counts, "
               "each rank's received tokens and the unweighted combine over ranks; every rank in one case";
  c.inputs = {{"x", "<f4", "[num_ranks, num_tokens, hidden]", "each rank's tokens"},
              {"topk_idx", "<i4|<i8", "[num_ranks, num_tokens, num_topk]", "experts of each token, -1 = none"},
              {"topk_weights", "<f4", "[num_ranks, num_tokens, num_topk]", "their weights"},
              {"expert_scale", "<f4", "[num_experts]", "the stand-in expert: y_e(x) = expert_scale[e] x"}};
  c.params = {{"num_ranks", "integer", "EP ranks (x's first axis)"},
              {"num_experts", "integer", "experts, a multiple of num_ranks; rank r holds [r L, (r + 1) L)"}};
  const char* order = "exact after matching rows by recv_src (order unspecified); rows past the count not judged";
  if (ll) {
    c.params.push_back({"num_max_dispatch_tokens_per_rank", "integer", "the receive buffer's rows per source rank "
                        "(>= num_tokens)"});
    c.outputs = {
        exact("recv_count", "<i4", "[num_ranks, num_local_experts]", "tokens each local expert received",
              "integer counts"),
        exact("recv_src", "<i4", "[num_ranks, num_local_experts, R M]", "source rank * num_tokens + token of each "
              "received row, -1 past recv_count (the handle's src_info and layout_range in one number)",
              "a multiset per (rank, expert), DeepEP's slot order not being stated; -1 past the count"),
        exact("recv_x", "<f4", "[num_ranks, num_local_experts, R M, hidden]", "E4M3 values as float32", order),
        exact("recv_x_scales", "<f4", "[num_ranks, num_local_experts, R M, hidden / 128]", "one fp32 scale per 128 "
              "channels (amax / 448, stage 07's quantiser)", order)};
  } else {
    c.outputs = {
        exact("num_tokens_per_rank", "<i4", "[num_ranks, num_ranks]", "row s: tokens rank s sends to each rank",
              "integer counts (get_dispatch_layout)"),
        exact("is_token_in_rank", "<i4", "[num_ranks, num_tokens, num_ranks]", "1 where a token is sent to a rank "
              "(DeepEP's bool as an integer)", "a mask"),
        exact("num_tokens_per_expert", "<i4", "[num_ranks, num_experts]", "row s: tokens rank s sends to each expert",
              "integer counts"),
        exact("num_recv_tokens", "<i4", "[num_ranks]", "tokens each rank received (recv_x's rows in DeepEP)",
              "integer counts"),
        exact("num_recv_tokens_per_expert", "<i4", "[num_ranks, num_local_experts]", "num_recv_tokens_per_expert_"
              "list of each rank (expert_alignment 1)", "integer counts"),
        exact("recv_src", "<i4", "[num_ranks, num_ranks num_tokens]", "source rank * num_tokens + token of each "
              "received row, -1 past num_recv_tokens (the handle's rank_prefix_matrix and recv_src_idx)",
              "a multiset per rank (order within a rank not stated by DeepEP); -1 past the count"),
        exact("recv_x", "<f4", "[num_ranks, num_ranks num_tokens, hidden]", "received tokens (copies)", order),
        exact("recv_topk_idx", "<i8", "[num_ranks, num_ranks num_tokens, num_topk]", "local expert index, -1 where "
              "the expert lives on another rank or the entry is -1", order),
        exact("recv_topk_weights", "<f4", "[num_ranks, num_ranks num_tokens, num_topk]", "the weights (entries with "
              "recv_topk_idx -1 not judged)", order)};
  }
  c.outputs.push_back({"combined_x", "<f8", "[num_ranks, num_tokens, hidden]",
                       ll ? "sum_j w_j expert_scale[e_j] dequant(x) (low_latency_combine: with weights)"
                          : "sum over ranks of each rank's sum_{j local} w_j expert_scale[e_j] x (combine: without "
                            "weights; the expert computation applied them)",
                       Rule::max_abs, 2, "one scale per token row (a short positive-weighted sum per element)", false,
                       ""});
  c.outputs.back().slice_axes = 2;
  c.oracle_doc = "the receiver's view: each destination scans every source token in order; combine at float64";
  c.baseline_doc = "the same combine at float32 (the other outputs are exact)";
  c.oracle = [who, ll](const Tensors& t, const nlohmann::json& p) { return oracle(ep_read(who, ll, t, p)); };
  c.baseline = [who, ll](const Tensors& t, const nlohmann::json& p, DType prec) {
    const EpIn in = ep_read(who, ll, t, p);
    return Tensors{{"combined_x", prec == DType::F4 ? to_npy(combined<float>(in)) : to_npy(combined<double>(in))}};
  };
  c.fp64_bound = [who, ll](const Tensors& t, const nlohmann::json& p, const Tensors&) {
    return Tensors{{"combined_x", to_npy(combined_allowance(ep_read(who, ll, t, p)))}};
  };
  c.canonical = [who, ll](const Tensors& in, const nlohmann::json& p, const Tensors& e, const std::string& o,
                          const NpyData& cand, const Tensors& comp) {
    return ep_canonical(who, ll, in, p, e, o, cand, comp);
  };
  return c;
}

}  // namespace
}  // namespace ladder::moe::detail

namespace ladder::moe {

Tensors deepep_inputs(const DeepEpSpec& s) {
  require(s.num_ranks >= 1 && s.num_tokens >= 1 && s.hidden >= 1 && s.num_topk >= 1 && s.num_experts >= s.num_topk &&
              s.num_experts % s.num_ranks == 0, "deepep: spec violates num_ranks, num_tokens, hidden, num_topk >= 1, "
          "num_experts >= num_topk and a multiple of num_ranks");
  const int64_t R = s.num_ranks, T = s.num_tokens, K = s.num_topk, E = s.num_experts;
  Rng rng(s.seed);
  Array<float> x({R, T, s.hidden}), w({R, T, K}), sc({E});
  Array<int64_t> idx({R, T, K});
  for (float& v : x.data) v = static_cast<float>(rng.normal());
  for (int64_t g = 0; g < R * T; ++g) {  // each 128-channel block at its own magnitude: a scale of the wrong block shows
    for (int64_t h = 0; h < s.hidden; ++h) x.data[g * s.hidden + h] = std::ldexp(x.data[g * s.hidden + h], static_cast<int>((h / 128) % 3) * 2 - 2);
    std::vector<int64_t> pick;
    while (static_cast<int64_t>(pick.size()) < K) {
      const int64_t e = static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(E)));
      if (std::find(pick.begin(), pick.end(), e) == pick.end()) pick.push_back(e);
    }
    for (int64_t j = 0; j < K; ++j) {
      const bool none = g % T == T - 1 || (g % 5 == 2 && j == K - 1);  // a token with no expert; some -1 entries
      idx.data[g * K + j] = none ? -1 : pick[static_cast<size_t>(j)];
      w.data[g * K + j] = static_cast<float>(0.05 + rng.uniform());
    }
  }
  for (int64_t e = 0; e < E; ++e) sc.data[e] = static_cast<float>(0.5 + rng.uniform());
  return {{"x", to_npy(x)}, {"topk_idx", to_npy(idx)}, {"topk_weights", to_npy(w)}, {"expert_scale", to_npy(sc)}};
}

nlohmann::json deepep_params(const DeepEpSpec& s, bool low_latency) {
  nlohmann::json p = {{"num_ranks", s.num_ranks}, {"num_experts", s.num_experts}};
  if (low_latency)
    p["num_max_dispatch_tokens_per_rank"] = s.num_max_dispatch_tokens_per_rank > 0 ? s.num_max_dispatch_tokens_per_rank
                                                                                   : s.num_tokens + 3;
  return p;
}

}  // namespace ladder::moe

namespace ladder::stage_records {

Contract contract_04_moe_deepep_normal() { return moe::detail::deepep_contract(false); }
Contract contract_04_moe_deepep_low_latency() { return moe::detail::deepep_contract(true); }

}  // namespace ladder::stage_records
