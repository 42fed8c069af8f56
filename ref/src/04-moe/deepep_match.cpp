// ref/src/04-moe/deepep_match.cpp -- the DeepEP layouts' order-insensitive matching (Contract::canonical) and the
// candidate computed another way (ladder/04-moe/deepep.hpp).
//
// Matching, per receive segment (a destination rank; low latency: a rank's local expert): each of the oracle's
// rows p < count takes the first unused candidate row with the same recv_src; the candidate's rows left over (a
// token sent where none of its experts lives, a duplicate, padding) fill the remaining places in their own order.
// So a dropped token leaves a padding row (recv_src -1) where the oracle has a token, a duplicated or misrouted one
// lands past the count where recv_src must be -1: recv_src's exact rule names either. Other buffers: places past the
// count, and recv_topk_weights where the oracle's recv_topk_idx is -1, take the oracle's value (not judged).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "deepep_in.hpp"
#include "ladder/04-moe/deepep.hpp"
#include "ladder/core/quant.hpp"

namespace ladder::moe::detail {
namespace {

// An integer candidate in the oracle's integer dtype (a <i4 recv_topk_idx for an <i8 oracle), so rows copy as bytes.
NpyData as_dtype_of(const NpyData& cand, const NpyData& like) {
  if (cand.dtype == like.dtype || (like.dtype != DType::I4 && like.dtype != DType::I8)) return cand;
  const Array<int64_t> v = npy_as_int64(cand, "candidate");
  if (like.dtype == DType::I8) return to_npy(v);
  Array<int32_t> n(v.shape);
  for (size_t i = 0; i < v.data.size(); ++i) n.data[i] = static_cast<int32_t>(v.data[i]);
  return to_npy(n);
}

}  // namespace

std::optional<NpyData> ep_canonical(const std::string& who, bool ll, const Tensors& inputs,
                                    const nlohmann::json& params, const Tensors& expected, const std::string& output,
                                    const NpyData& candidate, const Tensors& companions) {
  if (!ep_is_buffer(output) || !expected.count(output) || !expected.count("recv_src")) return std::nullopt;
  const NpyData& exp = expected.at(output);
  const bool is_int = candidate.dtype == DType::I4 || candidate.dtype == DType::I8;
  if (candidate.shape != exp.shape || (is_int != (exp.dtype == DType::I4 || exp.dtype == DType::I8)) ||
      (!is_int && candidate.dtype != exp.dtype))
    return std::nullopt;  // check() refuses it, naming the dtype or shape
  const NpyData& esrc_npy = expected.at("recv_src");
  const bool self = output == "recv_src";
  require(self || companions.count("recv_src"), "{}: output {} is judged with the candidate's recv_src beside it "
          "(DeepEP leaves the order of received tokens unspecified, so rows are matched by their source): put "
          "recv_src.npy in the same folder (Python: companions={{\"recv_src\": ...}})", who, output);
  const NpyData& csrc_npy = self ? candidate : companions.at("recv_src");
  require(csrc_npy.shape == esrc_npy.shape, "{}: the candidate's recv_src has shape {}, violates {}", who,
          shape_str(csrc_npy.shape), shape_str(esrc_npy.shape));
  const std::vector<int64_t> ek = npy_as_int64(esrc_npy, "recv_src (expected)").data;
  const std::vector<int64_t> ck = npy_as_int64(csrc_npy, "the candidate's recv_src").data;
  const EpIn in = ep_read(who, ll, inputs, params);
  const int64_t S = in.segments(), N = in.N;
  const NpyData cand = as_dtype_of(candidate, exp);
  const size_t row_bytes = exp.bytes.size() / static_cast<size_t>(S * N);
  NpyData out = cand;
  const std::vector<int64_t> eidx = output == "recv_topk_weights" ? npy_as_int64(expected.at("recv_topk_idx"),
                                                                                 "recv_topk_idx (expected)").data
                                                                  : std::vector<int64_t>{};
  for (int64_t s = 0; s < S; ++s) {
    std::map<int64_t, std::vector<int64_t>> by_key;  // key -> candidate rows, in order (popped from the back)
    for (int64_t i = N - 1; i >= 0; --i)
      if (ck[static_cast<size_t>(s * N + i)] >= 0) by_key[ck[static_cast<size_t>(s * N + i)]].push_back(i);
    std::vector<int64_t> from(static_cast<size_t>(N), -1);
    std::vector<bool> used(static_cast<size_t>(N), false);
    for (int64_t p = 0; p < N; ++p) {
      const int64_t k = ek[static_cast<size_t>(s * N + p)];
      auto it = by_key.find(k);
      if (k < 0 || it == by_key.end() || it->second.empty()) continue;
      from[static_cast<size_t>(p)] = it->second.back();
      used[static_cast<size_t>(it->second.back())] = true;
      it->second.pop_back();
    }
    std::vector<int64_t> left;  // unmatched candidate rows: real tokens first, then padding
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t i = 0; i < N; ++i)
        if (!used[static_cast<size_t>(i)] && (ck[static_cast<size_t>(s * N + i)] >= 0) == (pass == 0)) left.push_back(i);
    size_t next = 0;
    for (int64_t p = 0; p < N; ++p) {
      if (from[static_cast<size_t>(p)] < 0) from[static_cast<size_t>(p)] = left[next++];
      const bool padding = ek[static_cast<size_t>(s * N + p)] < 0;
      const NpyData& src = padding && !self ? exp : cand;  // past the count: not judged (recv_src must be -1 there)
      const int64_t row = padding && !self ? p : from[static_cast<size_t>(p)];
      std::memcpy(&out.bytes[static_cast<size_t>(s * N + p) * row_bytes], &src.bytes[static_cast<size_t>(s * N + row) * row_bytes],
                  row_bytes);
    }
  }
  if (!eidx.empty()) {  // weights of entries whose expert lives elsewhere: not judged
    const size_t es = exp.bytes.size() / eidx.size();
    for (size_t i = 0; i < eidx.size(); ++i)
      if (eidx[i] < 0) std::memcpy(&out.bytes[i * es], &exp.bytes[i * es], es);
  }
  return out;
}

}  // namespace ladder::moe::detail

namespace ladder::moe {

Tensors deepep_run(const std::string& layout, const Tensors& t, const nlohmann::json& params) {
  require(layout == kDeepEpNormal || layout == kDeepEpLowLatency, "deepep_run: layout '{}' violates {} | {}", layout,
          kDeepEpNormal, kDeepEpLowLatency);
  const bool ll = layout == kDeepEpLowLatency;
  const detail::EpIn in = detail::ep_read(layout, ll, t, params);
  const int64_t R = in.R, T = in.T, H = in.H, K = in.K, L = in.L, N = in.N, S = in.segments(), HB = H / 128;
  // The senders' loop: rank by rank, token by token, each token pushed to every segment it goes to, then each
  // segment's rows taken in reverse (another order; DeepEP states none within a segment).
  std::vector<std::vector<int64_t>> buf(static_cast<size_t>(S));
  Array<int32_t> per_rank({R, R}), in_rank({R, T, R}), per_expert({R, in.E});
  for (auto* a : {&per_rank, &in_rank, &per_expert}) std::fill(a->data.begin(), a->data.end(), 0);
  for (int64_t src = 0; src < R; ++src)
    for (int64_t tok = 0; tok < T; ++tok) {
      const int64_t g = src * T + tok;
      std::vector<bool> to(static_cast<size_t>(S), false);
      for (int64_t j = 0; j < K; ++j)
        if (const int64_t e = in.idx[static_cast<size_t>(g * K + j)]; e >= 0) {
          to[static_cast<size_t>(ll ? e : e / L)] = true;
          ++per_expert.data[src * in.E + e];
        }
      for (int64_t s = 0; s < S; ++s)
        if (to[static_cast<size_t>(s)]) {
          buf[static_cast<size_t>(s)].push_back(g);
          if (!ll) in_rank.data[g * R + s] = 1, ++per_rank.data[src * R + s];
        }
    }
  for (auto& b : buf) std::reverse(b.begin(), b.end());
  Array<int32_t> src_ids(ll ? Shape{R, L, N} : Shape{R, N});
  Array<float> rx(ll ? Shape{R, L, N, H} : Shape{R, N, H});
  std::fill(src_ids.data.begin(), src_ids.data.end(), -1);
  std::fill(rx.data.begin(), rx.data.end(), 0.0f);
  Tensors out;
  // combine: each rank's (low latency: each expert's) output summed back to its token, float32, rank descending.
  Array<float> comb({R, T, H});
  std::fill(comb.data.begin(), comb.data.end(), 0.0f);
  if (ll) {
    Array<int32_t> count({R, L});
    Array<float> scales({R, L, N, HB});
    std::fill(scales.data.begin(), scales.data.end(), 0.0f);
    for (int64_t s = S - 1; s >= 0; --s) {
      count.data[s] = static_cast<int32_t>(buf[s].size());
      for (size_t i = 0; i < buf[s].size(); ++i) {
        const int64_t g = buf[s][i], row = s * N + static_cast<int64_t>(i);
        src_ids.data[row] = static_cast<int32_t>(g);
        detail::ep_fp8_row(in, g, &rx.data[row * H], &scales.data[row * HB]);
        float w = 0;
        for (int64_t j = 0; j < K; ++j)
          if (in.idx[static_cast<size_t>(g * K + j)] == s) w = in.w.data[g * K + j];
        for (int64_t h = 0; h < H; ++h)  // y = expert_scale x, reduced with its weight (low_latency_combine)
          comb.data[g * H + h] += w * (in.scale[s] * (rx.data[row * H + h] * scales.data[row * HB + h / 128]));
      }
    }
    out["recv_count"] = to_npy(count), out["recv_x_scales"] = to_npy(scales);
  } else {
    Array<int32_t> nrecv({R}), nrecv_e({R, L}), ridx({R, N, K});
    Array<float> rw({R, N, K});
    std::fill(nrecv_e.data.begin(), nrecv_e.data.end(), 0);
    std::fill(ridx.data.begin(), ridx.data.end(), -1);
    std::fill(rw.data.begin(), rw.data.end(), 0.0f);
    for (int64_t d = R - 1; d >= 0; --d) {
      nrecv.data[d] = static_cast<int32_t>(buf[d].size());
      for (size_t i = 0; i < buf[d].size(); ++i) {
        const int64_t g = buf[d][i], row = d * N + static_cast<int64_t>(i);
        src_ids.data[row] = static_cast<int32_t>(g);
        std::copy_n(&in.x.data[g * H], H, &rx.data[row * H]);
        std::vector<float> y(static_cast<size_t>(H), 0.0f);  // this rank's expert output, weights applied
        for (int64_t j = 0; j < K; ++j) {
          const int64_t e = in.idx[static_cast<size_t>(g * K + j)];
          if (e < 0 || e / L != d) continue;
          ridx.data[row * K + j] = static_cast<int32_t>(e - d * L);
          rw.data[row * K + j] = in.w.data[g * K + j];
          ++nrecv_e.data[d * L + e - d * L];
          for (int64_t h = 0; h < H; ++h) y[h] += in.w.data[g * K + j] * (in.scale[e] * in.x.data[g * H + h]);
        }
        for (int64_t h = 0; h < H; ++h) comb.data[g * H + h] += y[h];  // combine: addition without weights
      }
    }
    out["num_tokens_per_rank"] = to_npy(per_rank), out["is_token_in_rank"] = to_npy(in_rank);
    out["num_tokens_per_expert"] = to_npy(per_expert), out["num_recv_tokens"] = to_npy(nrecv);
    out["num_recv_tokens_per_expert"] = to_npy(nrecv_e), out["recv_topk_idx"] = to_npy(ridx);
    out["recv_topk_weights"] = to_npy(rw);
  }
  out["recv_src"] = to_npy(src_ids), out["recv_x"] = to_npy(rx), out["combined_x"] = to_npy(comb);
  return out;
}

}  // namespace ladder::moe
