// ref/src/04-moe/deepep_mutants.cpp -- the DeepEP layouts' whole-candidate check and their part of the mutation
// catalogue (ladder/04-moe/deepep.hpp): bug classes of dispatch / combine ports as the candidates such a port writes,
// each built from deepep_run's correct outputs with the one bug applied, beside correct variants.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "deepep_in.hpp"
#include "ladder/04-moe/deepep.hpp"

namespace ladder::moe {
namespace {

Array<int32_t> ints(const Tensors& t, const char* name) { return from_npy<int32_t>(t.at(name), name); }
Array<float> floats(const Tensors& t, const char* name) { return from_npy<float>(t.at(name), name); }

// The first (segment, row) of the candidate's receive buffer that holds a token, in a segment with a padding row.
std::pair<int64_t, int64_t> last_row(const Array<int32_t>& src, int64_t N) {
  for (int64_t s = 0; s * N < static_cast<int64_t>(src.data.size()); ++s) {
    int64_t n = 0;
    while (n < N && src.data[s * N + n] >= 0) ++n;
    if (n > 0 && n < N) return {s, n - 1};
  }
  throw Error("deepep_variants: the case has no receive segment with a token and a free row");
}

// Row r of segment s of `from` copied to row q of segment s of `to`, in every receive buffer (recv_src included).
void copy_row(const Tensors& from, Tensors& to, int64_t N, int64_t s, int64_t r, int64_t q) {
  for (auto& [name, t] : to) {
    if (!detail::ep_is_buffer(name)) continue;
    int64_t segs = 1;  // the axes before the row axis: [R, N, ...] or [R, L, N, ...] (recv_src: all but the last)
    const size_t axis = name == "recv_src" ? t.shape.size() - 1 : (t.shape.size() == 4 ? 2 : 1);
    for (size_t i = 0; i < axis; ++i) segs *= t.shape[i];
    const size_t rb = t.bytes.size() / static_cast<size_t>(segs * N);
    std::copy_n(&from.at(name).bytes[static_cast<size_t>(s * N + r) * rb], rb, &t.bytes[static_cast<size_t>(s * N + q) * rb]);
  }
}

// combined_x recomputed from inputs whose weights are transformed by f (the combine's own bug).
NpyData combine_with(const std::string& layout, Tensors in, const nlohmann::json& params, float (*f)(float)) {
  Array<float> w = floats(in, "topk_weights");
  for (float& v : w.data) v = f(v);
  in["topk_weights"] = to_npy(w);
  return deepep_run(layout, in, params).at("combined_x");
}

}  // namespace

std::vector<CheckReport> deepep_check(const std::string& layout, const Tensors& in, const nlohmann::json& params,
                                      const Tensors& expected, const Tensors& cand) {
  const Contract& c = contract(layout);
  std::vector<CheckReport> out;
  for (const OutputSpec& o : c.outputs)
    out.push_back(check(c, in, params, expected, o.name, tensor(cand, o.name, layout + " candidate"), "", cand));
  return out;
}

std::vector<DeepEpVariant> deepep_variants(const std::string& layout, const Tensors& in, const nlohmann::json& params) {
  const bool ll = layout == kDeepEpLowLatency;
  const detail::EpIn e = detail::ep_read(layout, ll, in, params);
  const Tensors good = deepep_run(layout, in, params);
  const int64_t N = e.N;
  std::vector<DeepEpVariant> v;
  v.push_back({"the senders' loop, rows in reverse order",
               "another receive order (DeepEP states none within a segment)", false, good});
  {  // rows rotated by one within every segment, and NaN in the unspecified rows past the count
    Tensors c = good;
    const Array<int32_t> src = ints(good, "recv_src");
    for (int64_t s = 0; s * N < static_cast<int64_t>(src.data.size()); ++s) {
      int64_t n = 0;
      while (n < N && src.data[s * N + n] >= 0) ++n;
      for (int64_t i = 0; i < n; ++i) copy_row(good, c, N, s, (i + 1) % n, i);
    }
    Array<float> x = floats(c, "recv_x");
    for (int64_t s = 0; s * N < static_cast<int64_t>(src.data.size()); ++s)
      for (int64_t i = 0; i < N; ++i)
        if (src.data[s * N + i] < 0) std::fill_n(&x.data[(s * N + i) * e.H], e.H, std::numeric_limits<float>::quiet_NaN());
    c["recv_x"] = to_npy(x);
    v.push_back({"rows rotated within each segment, NaN past the count", "rows DeepEP leaves unordered / "
                 "unspecified", false, c});
  }
  const Array<int32_t> src = ints(good, "recv_src");
  const auto [s0, r0] = last_row(src, N);
  {
    Tensors c = good;
    Array<int32_t> sr = ints(c, "recv_src");
    sr.data[s0 * N + r0] = -1;  // the segment's last token lost, the counts as computed before
    c["recv_src"] = to_npy(sr);
    v.push_back({"a dropped token (a received row lost, counts unchanged)", "a lost send / a slot overwritten", true, c});
  }
  {
    Tensors c = good;
    copy_row(good, c, N, s0, r0, r0 + 1);
    v.push_back({"a duplicated token (one row received twice)", "a send issued twice (retry, two warps)", true, c});
  }
  {  // -1 entries routed as expert num_experts - 1 (a negative index wrapping, as Python's does)
    Tensors wrapped = in;
    Array<int64_t> idx = npy_as_int64(in.at("topk_idx"), "topk_idx");
    for (int64_t g = 0; g < e.R * e.T; ++g) {
      const auto row = idx.data.begin() + g * e.K;
      if (std::find(row, row + e.K, e.E - 1) != row + e.K) continue;
      const auto neg = std::find(row, row + e.K, -1);
      if (neg != row + e.K) *neg = e.E - 1;
    }
    wrapped["topk_idx"] = to_npy(idx);
    Tensors c = deepep_run(layout, wrapped, params);
    v.push_back({"-1 topk entries routed (a negative index wrapping to the last expert)", "-1 = no selection "
                 "(DeepEP's docs) ignored", true, c});
  }
  {
    Tensors c = good;
    c["combined_x"] = combine_with(layout, in, params, [](float w) { return w * w; });
    v.push_back({"combine weights applied twice", ll ? "the expert applies them and low_latency_combine again"
                                                     : "combine (without weights) given them again", true, c});
    c = good;
    c["combined_x"] = combine_with(layout, in, params, [](float) { return 1.0f; });
    v.push_back({"combine weights not applied", "neither the expert nor the combine applies them", true, c});
  }
  if (ll) {
    Tensors c = good;
    Array<int32_t> n = ints(c, "recv_count");
    ++n.data[1];
    c["recv_count"] = to_npy(n);
    v.push_back({"per-expert count off by one (recv_count)", "an inclusive / exclusive prefix mix-up", true, c});
    Array<float> sc = floats(good, "recv_x_scales");
    const int64_t HB = e.H / 128;
    Array<float> bad = sc;
    for (size_t i = 0; i < sc.data.size(); ++i) bad.data[i] = sc.data[i - i % HB + (i % HB + 1) % HB];
    c = good;
    c["recv_x_scales"] = to_npy(bad);
    v.push_back({"FP8 scale of the wrong 128-block", "a scale index off by one block", true, c});
    return v;
  }
  {
    Tensors c = good;
    Array<int32_t> m = ints(c, "is_token_in_rank");
    m.data[0] = 1 - m.data[0];
    c["is_token_in_rank"] = to_npy(m);
    v.push_back({"is_token_in_rank wrong for one token", "a mask bit set from the wrong entry", true, c});
  }
  {
    Tensors c = good;
    Array<int32_t> idx = ints(c, "recv_topk_idx");
    for (int64_t i = 0; i < static_cast<int64_t>(idx.data.size()); ++i)
      if (idx.data[i] >= 0) idx.data[i] += static_cast<int32_t>((i / (N * e.K)) * e.L);  // the rank's offset kept
    c["recv_topk_idx"] = to_npy(idx);
    v.push_back({"recv_topk_idx global instead of local", "the rank's expert offset not subtracted", true, c});
  }
  {
    Tensors c = good;
    Array<int32_t> n = ints(c, "num_recv_tokens_per_expert");
    ++n.data[0];
    c["num_recv_tokens_per_expert"] = to_npy(n);
    v.push_back({"per-expert count off by one (num_recv_tokens_per_expert)", "an inclusive / exclusive prefix "
                 "mix-up", true, c});
  }
  {  // a token sent to a rank holding none of its experts: the rank's buffers and counts take it
    Tensors c = good;
    int64_t g = 0, d = 0;
    for (g = 0; g < e.R * e.T; ++g) {
      for (d = 0; d < e.R && e.sends(g, d); ++d) {}
      if (d < e.R) break;
    }
    Array<int32_t> sr = ints(c, "recv_src"), n = ints(c, "num_recv_tokens"), pr = ints(c, "num_tokens_per_rank");
    Array<float> x = floats(c, "recv_x");
    const int64_t row = d * N + n.data[d];
    sr.data[row] = static_cast<int32_t>(g);
    std::copy_n(&e.x.data[g * e.H], e.H, &x.data[row * e.H]);
    ++n.data[d], ++pr.data[(g / e.T) * e.R + d];
    c["recv_src"] = to_npy(sr), c["recv_x"] = to_npy(x), c["num_recv_tokens"] = to_npy(n);
    c["num_tokens_per_rank"] = to_npy(pr);
    v.push_back({"a token sent to a rank holding none of its experts", "the rank of an expert computed wrongly (e % R "
                 "for e / L)", true, c});
  }
  return v;
}

}  // namespace ladder::moe
