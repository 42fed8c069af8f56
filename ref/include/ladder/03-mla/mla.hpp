// ladder/03-mla/mla.hpp -- stage 03: Multi-head Latent Attention (DeepSeek-V2), one decode step, six rungs.
//
//   01 softmax     naive -> safe -> online
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward (recompute)
// > 03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM            (DeepSeek-V2 shapes; decode step)   <- this stage
//   04 moe         gate -> sort -> ragged dot -> unsort + combine (dropless | dropping)
//   05 eplb        balanced packing -> replicate -> hierarchical | global
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// Sources: the DeepSeek-V2 MLA optimisation notes ("DeepSeek-V2高性能推理优化笔记：MLA优化": CD, CC,
// A_CC, A_CC_ME, AM and their table of cache sizes and FLOPs), the CSE 234 lecture notes §5.2
// (Fig. 10, the MLA equations), the code of madsys-dev/deepseekv2-profile and deepseek-ai/FlashMLA
// (layouts, scale, RoPE layout).
// The chapter is chapters/03-mla/README.md. Split by concept:
//   mla/config.hpp        Config (DeepSeek-V2, small and tiny test shapes), check_config
//   mla/model.hpp         Weights (W_DQ, W_UQ, W_QR, W_DKV, kv_b = [W_UK; W_UV] per head, W_O), random_weights
//   mla/layers.hpp        RMSNorm, RoPE (half-split; why interleaved gives the same q.k), query path, cache rows
//   mla/gemm.hpp          the one matrix product of every rung, with its multiply-add counter
//   mla/cache.hpp         the paged compressed cache every rung starts from; gather, decompress
//   mla/step.hpp          Step, Output, Prepared; softmax per row, absorbed query and output paths
//   mla/decompressed.hpp  CD (the fp64 oracle at T = double), CC
//   mla/absorbed.hpp      A_CC, A_CC_ME, AM
//   mla/flash.hpp         flash_mla: A_CC_ME + tiled online softmax over pages + split-KV combine
//   mla/cost.hpp          FLOPs, cache bytes, traffic and scratch as formulas of the shape
//   mla/synthetic.hpp     seeded decode inputs (prefilled or random cache rows, shuffled block tables)
//   mla/prefill.hpp       a chunk of q_len tokens on a cached prefix: the prefill (decompressed), the
//                         decode of s_q tokens (absorbed); chunk_cost and the crossover in mla/cost.hpp
//   mla/golden.hpp        the golden cases (data/golden/03-mla; ref/src/03-mla/golden.cpp)
//
// A rung is two functions: prepare (the cache in the rung's layout, AM's absorbed matrices; once per
// sequence state, outside the timed step) and decode (the step). T = double is the oracle (CD), T =
// float the rung at kernel precision. OpenMP runs over sequences and heads (and split-KV chunks);
// every output element is computed by the same serial code whatever the thread count.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "ladder/core/registry.hpp"
#include "ladder/core/math.hpp"
#include "ladder/03-mla/absorbed.hpp"
#include "ladder/03-mla/cache.hpp"
#include "ladder/03-mla/config.hpp"
#include "ladder/03-mla/cost.hpp"
#include "ladder/03-mla/decompressed.hpp"
#include "ladder/03-mla/flash.hpp"
#include "ladder/03-mla/gemm.hpp"
#include "ladder/03-mla/layers.hpp"
#include "ladder/03-mla/model.hpp"
#include "ladder/03-mla/prefill.hpp"
#include "ladder/03-mla/step.hpp"
#include "ladder/03-mla/synthetic.hpp"

namespace ladder::mla {

inline constexpr const char* kStage = "03-mla";

// ---- registry types -------------------------------------------------------------------------------

template <class T>
struct RungImpl {
  std::function<Prepared<T>(const Weights<T>&, const PagedCache<T>&)> prepare;
  std::function<Output<T>(const Weights<T>&, const Prepared<T>&, const Step<T>&)> decode;
  // The same step into the caller's Output, reusing its storage (step.hpp); empty where a rung has no such
  // form (the CUDA rungs): decode_into() below falls back to decode.
  std::function<void(const Weights<T>&, const Prepared<T>&, const Step<T>&, Output<T>&)> decode_into = {};
};

// One decode step into out: the rung's decode_into where it has one, else out = decode(...).
template <class T>
void decode_into(const RungImpl<T>& r, const Weights<T>& W, const Prepared<T>& p, const Step<T>& step, Output<T>& out) {
  if (r.decode_into)
    r.decode_into(W, p, step, out);
  else
    out = r.decode(W, p, step);
}

// A whole chunk at float32, for a CUDA chunk rung (the contract runs the reference chunk rungs through prefill.hpp
// itself): h [N, hidden], q_lens [B], q_pos [N]. With write_rows the cache's seqlens are the prefixes and the rung
// writes the chunk's rows and grows them (prefill_chunk's contract); without, the rows are cached already
// (attend_chunk's). Returns u [N, hidden] and lse [N, H].
using ChunkFn = std::function<ChunkOutput<float>(const Weights<float>&, PagedCache<float>&, const Mat<float>& h,
                                                 const std::vector<int64_t>& q_lens,
                                                 const std::vector<int64_t>& q_pos, bool write_rows)>;

// What a stage-03 Rung::function holds. f64 is empty for CUDA rungs (kernels run in fp32); variant
// names the cost formula (Rung::cost is step_cost(variant, shape)); chunk_f32: a CUDA chunk rung's whole chunk.
struct RungFns {
  Variant variant;
  RungImpl<float> f32;
  RungImpl<double> f64;
  ChunkFn chunk_f32 = {};
};

template <class T>
Output<T> decode_flash_default(const Weights<T>& W, const Prepared<T>& p, const Step<T>& s) {
  return decode_flash(W, p, s, FlashParams{});
}
template <class T>
void decode_flash_default_into(const Weights<T>& W, const Prepared<T>& p, const Step<T>& s, Output<T>& out) {
  decode_flash_into(W, p, s, FlashParams{}, out);
}

template <class T>
RungImpl<T> reference_rung(Variant v) {
  switch (v) {
    case Variant::CD: return {&prepare_cd<T>, &decode_cd<T>, &decode_cd_into<T>};
    case Variant::CC: return {&prepare_compressed<T>, &decode_cc<T>, &decode_cc_into<T>};
    case Variant::A_CC: return {&prepare_compressed<T>, &decode_acc<T>, &decode_acc_into<T>};
    case Variant::A_CC_ME: return {&prepare_compressed<T>, &decode_acc_me<T>, &decode_acc_me_into<T>};
    case Variant::AM: return {&prepare_am<T>, &decode_am<T>, &decode_am_into<T>};
    case Variant::flash_mla: return {&prepare_flash<T>, &decode_flash_default<T>, &decode_flash_default_into<T>};
  }
  throw Error("mla: unknown variant");
}

// The chunk paths of prefill.hpp as rungs: "prefill" (decompressed; FlashMLA's MHA mode, d_qk = nope + rope, d_v
// = v per head) and "chunk_absorbed" (A_CC_ME's arithmetic over s_q query tokens at once; MQA mode over the
// latent cache). Their decode-step form is prepare_chunk / decode_chunk; the contract (ref/src/03-mla/
// contract.cpp) runs them on whole chunks (inputs q_lens and prefix) through prefill_chunk and attend_chunk.
inline constexpr const char* kPrefillRung = "prefill";
inline constexpr const char* kChunkAbsorbedRung = "chunk_absorbed";

// The path of a chunk rung by its id; nullopt for the decode rungs.
inline std::optional<ChunkPath> chunk_rung_path(const std::string& id) {
  if (id == kPrefillRung) return ChunkPath::Decompressed;
  if (id == kChunkAbsorbedRung) return ChunkPath::Absorbed;
  return std::nullopt;
}

template <class T>
RungImpl<T> chunk_rung(ChunkPath path) {
  if (path == ChunkPath::Decompressed)
    return {&prepare_chunk<T>, &decode_chunk<T, ChunkPath::Decompressed>,
            &decode_chunk_into<T, ChunkPath::Decompressed>};
  return {&prepare_chunk<T>, &decode_chunk<T, ChunkPath::Absorbed>, &decode_chunk_into<T, ChunkPath::Absorbed>};
}

// prepare + decode in one call.
template <class T>
Output<T> run(const RungImpl<T>& r, const Weights<T>& W, const PagedCache<T>& cache, const Step<T>& step) {
  return r.decode(W, r.prepare(W, cache), step);
}

// The oracle: CD at T = double.
inline Output<double> oracle(const Weights<double>& W, const PagedCache<double>& cache, const Step<double>& step) {
  return run(reference_rung<double>(Variant::CD), W, cache, step);
}

// Casts of the inputs (fp32 inputs -> the fp64 oracle's inputs).
template <class U, class T>
PagedCache<U> cast_cache(const PagedCache<T>& c) {
  PagedCache<U> r;
  r.block_size = c.block_size;
  r.blocks = c.blocks.template cast<U>();
  r.block_table = c.block_table;
  r.seqlens = c.seqlens;
  return r;
}
template <class U, class T>
Step<U> cast_step(const Step<T>& s) {
  return Step<U>{s.h.template cast<U>(), s.q_pos};
}

// log sum_j e^{s_j} over j < L_b for scores [B, H, Lmax] (the oracle of flash_mla's lse).
template <class T>
Array<T> logsumexp_rows(const Array<T>& scores, const std::vector<int64_t>& seqlens) {
  const int64_t B = scores.shape[0], H = scores.shape[1], Lmax = scores.shape[2];
  Array<T> lse({B, H});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const T* s = &scores.data[(b * H + h) * Lmax];
      T m = s[0];
      for (int64_t j = 1; j < seqlens[b]; ++j) m = std::max(m, s[j]);
      T sum = 0;
      for (int64_t j = 0; j < seqlens[b]; ++j) sum += math::exp(s[j] - m);
      lse.data[b * H + h] = m + math::log(sum);
    }
  return lse;
}

}  // namespace ladder::mla
