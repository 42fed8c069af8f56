// ladder/07-precision/attn_recipes.hpp -- rungs (e) and (f) as the case contract sees them: their inputs read
// from a case's tensors, the reference rung's outputs, and the oracle's outputs with the bound of each.
//
// kv_int8 | kv_fp8 (kv_quant.hpp): inputs q_abs [B, H, R], q_pe [B, H, rope], kv [B, Lmax, R + rope], seqlens [B],
//   w_o [hidden, H R]; outputs u [B, hidden], lse [B, H].
// attn_bf16 (attn_bf16.hpp): inputs q [Lq, d], k [Lk, d], v [Lk, dv]; outputs o [Lq, dv], lse [Lq].
#pragma once
#include <fmt/format.h>

#include <cmath>
#include <initializer_list>
#include <map>
#include <string>

#include "ladder/07-precision/attn_bf16.hpp"
#include "ladder/07-precision/kv_quant.hpp"
#include "ladder/07-precision/recipe.hpp"
#include "ladder/core/contract.hpp"

namespace ladder::precision {

inline KvFormat kv_format(const Recipe& r) { return r.name == "kv_int8" ? KvFormat::int8_token : KvFormat::fp8_record; }

inline Array<float> attn_input(const Tensors& in, const char* name, size_t rank, const char* shape, const Recipe& r) {
  require(in.count(name), "07-precision: input {} is missing; recipe {} needs it ({})", name, r.name, shape);
  const Array<float> a = from_npy<float>(in.at(name), fmt::format("input {}", name));
  require(a.shape.size() == rank, "07-precision: input {} has shape {}, violates {} (recipe {})", name,
          shape_str(a.shape), shape, r.name);
  return a;
}

inline void refuse_others(const Tensors& in, const Recipe& r, std::initializer_list<const char*> mine) {
  for (const auto& [name, d] : in) {
    bool ok = false;
    for (const char* m : mine) ok = ok || name == m;
    require(ok, "07-precision: input {} does not belong to recipe {} (its inputs: see `ladder describe 07-precision`)",
            name, r.name);
  }
}

inline MlaKvOperands mla_operands(const Tensors& in, const Recipe& r) {
  refuse_others(in, r, {"q_abs", "q_pe", "kv", "seqlens", "w_o"});
  const Array<float> qa = attn_input(in, "q_abs", 3, "[B, H, R]", r), qr = attn_input(in, "q_pe", 3, "[B, H, rope]", r);
  const Array<float> kv = attn_input(in, "kv", 3, "[B, Lmax, R + rope]", r), wo = attn_input(in, "w_o", 2, "[hidden, H R]", r);
  MlaKvOperands m;
  m.B = qa.shape[0], m.H = qa.shape[1], m.R = qa.shape[2], m.rope = qr.shape[2], m.Lmax = kv.shape[1], m.hidden = wo.shape[0];
  require(m.B >= 1 && m.H >= 1 && m.R >= 1 && m.rope >= 1 && qr.shape[0] == m.B && qr.shape[1] == m.H,
          "07-precision: inputs q_abs {} and q_pe {} violate [B, H, R] and [B, H, rope], all >= 1", shape_str(qa.shape),
          shape_str(qr.shape));
  require(kv.shape[0] == m.B && kv.shape[2] == m.R + m.rope && m.Lmax >= 1,
          "07-precision: input kv has shape {}, violates [B = {}, Lmax >= 1, R + rope = {}]", shape_str(kv.shape), m.B,
          m.R + m.rope);
  require(wo.shape[1] == m.H * m.R && m.hidden >= 1, "07-precision: input w_o has shape {}, violates [hidden, H R = {}]",
          shape_str(wo.shape), m.H * m.R);
  require(in.count("seqlens"), "07-precision: input seqlens [B] is missing; recipe {} needs it", r.name);
  m.seqlens = npy_as_int64(in.at("seqlens"), "input seqlens").data;
  require(static_cast<int64_t>(m.seqlens.size()) == m.B, "07-precision: input seqlens has {} entries, violates [B = {}]",
          m.seqlens.size(), m.B);
  for (size_t b = 0; b < m.seqlens.size(); ++b)
    require(m.seqlens[b] >= 1 && m.seqlens[b] <= m.Lmax, "07-precision: seqlens[{}] = {} violates 1 <= L <= Lmax = {}",
            b, m.seqlens[b], m.Lmax);
  check_kv_dims(kv_format(r), m.R, m.rope);
  m.q_abs = qa.data, m.q_pe = qr.data, m.kv = kv.data, m.w_o = wo.data;
  m.sigma = static_cast<float>(r.softmax_scale > 0 ? r.softmax_scale : 1.0 / std::sqrt(192.0));
  return m;
}

inline AttnOperands attn_operands(const Tensors& in, const Recipe& r) {
  refuse_others(in, r, {"q", "k", "v"});
  const Array<float> q = attn_input(in, "q", 2, "[Lq, d]", r), k = attn_input(in, "k", 2, "[Lk, d]", r),
                     v = attn_input(in, "v", 2, "[Lk, dv]", r);
  AttnOperands a;
  a.Lq = q.shape[0], a.d = q.shape[1], a.Lk = k.shape[0], a.dv = v.shape[1];
  require(k.shape[1] == a.d && v.shape[0] == a.Lk, "07-precision: inputs q {}, k {}, v {} violate [Lq, d], [Lk, d], [Lk, dv]",
          shape_str(q.shape), shape_str(k.shape), shape_str(v.shape));
  a.q = q.data, a.k = k.data, a.v = v.data, a.bc = r.bc;
  a.sigma = static_cast<float>(r.softmax_scale > 0 ? r.softmax_scale : 1.0 / std::sqrt(static_cast<double>(a.d)));
  check_attn(a);
  return a;
}

template <class T>
NpyData npy_of(std::vector<T> v, Shape s) {
  Array<T> a(s);
  a.data = std::move(v);
  return to_npy(a);
}

// The reference rung's outputs (float32).
inline Tensors run_attn_recipe(const Recipe& r, const Tensors& in) {
  if (r.kv()) {
    const MlaKvOperands m = mla_operands(in, r);
    MlaKvResult o = mla_kv_decode(m, kv_format(r));
    return Tensors{{"u", npy_of(std::move(o.u), {m.B, m.hidden})}, {"lse", npy_of(std::move(o.lse), {m.B, m.H})}};
  }
  const AttnOperands a = attn_operands(in, r);
  AttnResult o = attn_bf16_forward(a);
  return Tensors{{"o", npy_of(std::move(o.o), {a.Lq, a.dv})}, {"lse", npy_of(std::move(o.lse), {a.Lq})}};
}

// The oracle's outputs and, per output, the bound of each element (derived in attn_bound.hpp).
struct AttnRecipeOracle {
  Tensors outputs;
  std::map<std::string, Array<double>> bound;
};
inline AttnRecipeOracle oracle_attn_recipe(const Recipe& r, const Tensors& in) {
  AttnRecipeOracle o;
  auto put = [&](const char* name, std::vector<double> v, std::vector<double> b, Shape s) {
    o.outputs[name] = npy_of(std::move(v), s);
    Array<double> ba(s);
    ba.data = std::move(b);
    o.bound[name] = std::move(ba);
  };
  if (r.kv()) {
    const MlaKvOperands m = mla_operands(in, r);
    MlaKvOracle k = mla_kv_oracle(m, kv_format(r));
    put("u", std::move(k.u), std::move(k.u_bound), {m.B, m.hidden});
    put("lse", std::move(k.lse), std::move(k.lse_bound), {m.B, m.H});
    return o;
  }
  const AttnOperands a = attn_operands(in, r);
  AttnOracle k = attn_bf16_oracle(a);
  put("o", std::move(k.o), std::move(k.o_bound), {a.Lq, a.dv});
  put("lse", std::move(k.lse), std::move(k.lse_bound), {a.Lq});
  return o;
}

}  // namespace ladder::precision
