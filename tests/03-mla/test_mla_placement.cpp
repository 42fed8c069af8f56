// tests/03-mla/test_mla_placement.cpp -- stage 03: a rung's bits are a function of the logical sequences
// only, never of where their blocks sit in the paged pool. A KV migration (tests/mpi.cmake,
// mpi.kv_migrate.*) lays the same blocks out anew on the decode rank and compares its decode output
// with one process's bit for bit; here the same sequences are decoded from pools laid out in several
// ways -- each sequence's pages back to back, shuffled over a pool with spare pages, interleaved across
// the sequences, runs of pages in reverse order -- at two page sizes, and every output (u, scores, attn,
// lse) of every registered reference rung, fp32 and fp64, must be identical to the contiguous pool's.
// flash_mla reads the pool in place (its tiles are in place or gathered depending on the layout);
// the other rungs gather it in their prepare step.
#include <doctest/doctest.h>

#include <cstring>
#include <numeric>

#include "test_mla_util.hpp"

using namespace ladder;
using namespace ladder::mla;

namespace {

// Sequence b's rows [L_b, kv_dim] read out of a paged cache.
template <class T>
std::vector<Mat<T>> sequence_rows(const PagedCache<T>& c) {
  std::vector<Mat<T>> rows;
  for (int64_t b = 0; b < c.batch(); ++b) {
    Mat<T> r(c.seqlens[b], c.kv_dim());
    for (int64_t j = 0; j < c.seqlens[b]; ++j) std::copy(c.row(b, j), c.row(b, j) + c.kv_dim(), r.row(j).data());
    rows.push_back(std::move(r));
  }
  return rows;
}

enum class Layout { Contiguous, Shuffled, Interleaved, ReversedRuns };
const char* name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Shuffled: return "shuffled";
    case Layout::Interleaved: return "interleaved";
    default: return "reversed runs of 3 pages";
  }
}

// The same sequences in a pool of page size bs laid out as `l`.
template <class T>
PagedCache<T> relayout(const std::vector<Mat<T>>& rows, int64_t bs, Layout l) {
  std::vector<int64_t> L;
  for (const Mat<T>& r : rows) L.push_back(r.rows());
  Array<int32_t> t = contiguous_block_table(L, bs);
  const int64_t B = t.shape[0], cols = t.shape[1];
  int64_t needed = 0;
  for (int32_t v : t.data) needed += v >= 0;
  int64_t pool = needed;
  if (l == Layout::Shuffled) {
    pool = needed + 7;  // spare (NaN) pages between the owned ones
    Rng rng(5);
    const std::vector<int32_t> perm = permutation(pool, rng);
    for (int32_t& v : t.data)
      if (v >= 0) v = perm[static_cast<size_t>(v)];
  } else if (l == Layout::Interleaved) {  // page i of sequence b at i * B + b: no two of a sequence adjacent
    pool = cols * B;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < cols; ++i)
        if (t.data[b * cols + i] >= 0) t.data[b * cols + i] = static_cast<int32_t>(i * B + b);
  } else if (l == Layout::ReversedRuns) {  // runs of 3 pages back to back, the runs in reverse order
    pool = 0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = blocks_for(L[b], bs), runs = (n + 2) / 3;  // a short last run leaves spare slots
      for (int64_t i = 0; i < n; ++i) t.data[b * cols + i] = static_cast<int32_t>(pool + (runs - 1 - i / 3) * 3 + i % 3);
      pool += runs * 3;
    }
  }
  return make_paged(rows, std::move(t), pool, bs);
}

template <class T>
bool same_bits(const Array<T>& a, const Array<T>& b) {
  return a.shape == b.shape && (a.data.empty() || std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(T)) == 0);
}

template <class T>
void check_rungs(const Weights<T>& W, const Step<T>& step, const std::vector<Mat<T>>& rows, int64_t bs) {
  const PagedCache<T> ref = relayout(rows, bs, Layout::Contiguous);
  for (const Rung* r : registry().stage(kStage, "ref")) {
    const Output<T> a = test::run_rung(*r, W, ref, step);
    for (Layout l : {Layout::Shuffled, Layout::Interleaved, Layout::ReversedRuns}) {
      CAPTURE(r->key());
      const std::string layout = name(l);
      CAPTURE(layout);
      CAPTURE(bs);
      const Output<T> b = test::run_rung(*r, W, relayout(rows, bs, l), step);
      CHECK_MESSAGE(same_bits(test::as_array(a.u), test::as_array(b.u)), r->key(), ": u differs between a contiguous and a ", name(l), " pool");
      CHECK(same_bits(a.scores, b.scores));
      CHECK(same_bits(a.attn, b.attn));
      CHECK(same_bits(a.lse, b.lse));
    }
  }
}

}  // namespace

TEST_CASE("bits do not depend on the pool layout: contiguous, shuffled, interleaved, reversed runs (page sizes 64, 16)") {
  Config c;  // small, with a row of kv_lora + rope = 75 floats, so rows start at every alignment
  c.hidden = 64, c.n_heads = 8, c.q_lora_rank = 48, c.kv_lora_rank = 67, c.qk_nope = 16, c.qk_rope = 8, c.v_head = 16;
  const Weights<float> W = random_weights(c, 41);
  // lengths around a page and a tile (kFlashTileRows = 256): one row, a partial page, page and tile
  // boundaries +- 1, a tile tail of one row, and a sequence of several splits
  const std::vector<int64_t> L = {1, 63, 65, 255, 256, 257, 700, 1100};
  const Inputs in = make_inputs(W, InputSpec{L, 43, false, 0, true});
  const std::vector<Mat<float>> rows = sequence_rows(in.cache);
  const Weights<double> W64 = W.cast<double>();
  const Step<double> step64 = cast_step<double>(in.step);
  std::vector<Mat<double>> rows64;
  for (const Mat<float>& r : rows) rows64.push_back(r.cast<double>());
  for (int64_t bs : {64, 16}) {
    check_rungs(W, in.step, rows, bs);
    check_rungs(W64, step64, rows64, bs);
  }
}
