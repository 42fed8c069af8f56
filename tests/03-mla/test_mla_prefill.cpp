// tests/03-mla/test_mla_prefill.cpp -- stage 03's chunk of q_len tokens on a cached prefix (prefill.hpp): the
// decompressed prefill and the absorbed chunk (multi-token decode) vs the fp64 oracle, which is CD decoding the
// same tokens one at a time; every decode rung run token by token on the rows the chunk writes; the cache
// rows written bit for bit; a top-left causal mask caught; counted FLOPs == chunk_cost; the crossover formula
// vs the Cost it summarises; chunked == one pass; bad input named.
#include <doctest/doctest.h>

#include <cstring>

#include "test_mla_util.hpp"

using namespace ladder;
using namespace ladder::mla;

namespace {

// u [N, hidden] and lse [N, H] of a chunk's tokens, token after token.
template <class T>
struct Tokens {
  Array<T> u, lse;
};

// Rows [prefix rows | the chunk's rows] per sequence: the chunk's from kv_entries at T (positions P_b + i).
template <class T>
std::vector<Mat<T>> full_rows(const Weights<T>& W, const ChunkInputs& in) {
  const std::vector<int64_t> first = chunk_offsets(in.chunk.q_lens);
  const Mat<T> h = in.chunk.h.cast<T>();
  std::vector<Mat<T>> rows;
  for (size_t b = 0; b < in.prefix_rows.size(); ++b) {
    const int64_t P = in.prefix_rows[b].rows(), n = in.chunk.q_lens[b];
    std::vector<int64_t> pos(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = P + i;
    Mat<T> r(P + n, W.cfg.kv_dim());
    r.topRows(P) = in.prefix_rows[b].cast<T>();
    r.bottomRows(n) = kv_entries(W, Mat<T>(h.middleRows(first[b], n)), pos);
    rows.push_back(std::move(r));
  }
  return rows;
}

// A decode rung on token i of sequence b with a cache of exactly rows[b]'s first P_b + i + 1 rows (nothing
// past them: a page's unused rows are NaN), q_pos = P_b + i; one step per token.
template <class T>
Tokens<T> decode_tokens(const RungImpl<T>& rung, const Weights<T>& W, const std::vector<Mat<T>>& rows,
                        const ChunkInputs& in) {
  const std::vector<int64_t>& n = in.chunk.q_lens;
  const std::vector<int64_t> first = chunk_offsets(n);
  const int64_t B = static_cast<int64_t>(n.size()), H = W.cfg.n_heads, N = first[B];
  Tokens<T> r{Array<T>({N, W.cfg.hidden}), Array<T>({N, H})};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n[b]; ++i) {
      const int64_t t = first[b] + i, L = in.prefix_rows[b].rows() + i + 1;
      const std::vector<Mat<T>> seq{Mat<T>(rows[b].topRows(L))};
      const PagedCache<T> cache = make_paged<T>(seq, contiguous_block_table({L}), blocks_for(L, kBlockSize));
      const Step<T> step{Mat<T>(in.chunk.h.row(t).cast<T>()), {L - 1}};
      const Output<T> o = run(rung, W, cache, step);
      std::copy(o.u.data(), o.u.data() + W.cfg.hidden, &r.u.data[t * W.cfg.hidden]);
      const Array<T> lse = o.lse.size() ? o.lse : logsumexp_rows(o.scores, cache.seqlens);
      std::copy(lse.data.begin(), lse.data.end(), &r.lse.data[t * H]);
    }
  return r;
}

// The fp64 oracle (CD at double, token by token, the chunk's rows formed in double) and the rule's float32
// baseline (CD at float in the fixed order, on the float rows), for one set of inputs.
struct Judge {
  Tokens<double> oracle;
  Tokens<float> base;
  explicit Judge(const Weights<float>& W, const ChunkInputs& in) {
    const Weights<double> W64 = W.cast<double>();
    oracle = decode_tokens(reference_rung<double>(Variant::CD), W64, full_rows(W64, in), in);
    const FixedOrder fixed;
    base = decode_tokens(reference_rung<float>(Variant::CD), W, full_rows(W, in), in);
  }
  template <class T>
  bool check(const std::string& who, const std::string& test_case, const Array<T>& u, const Array<T>& lse) const {
    const std::string prec = std::is_same_v<T, float> ? "float32" : "float64";
    bool ok = test::check_one({who, prec, "u", test_case, {"token", "col"}}, oracle.u, u, base.u);
    return test::check_one({who, prec, "lse", test_case, {"token", "h"}}, oracle.lse, lse, base.lse) && ok;
  }
  bool passes(const Mat<float>& u) const {
    return compare(oracle.u, test::as_array(u), base.u, test::kMla32).pass;
  }
};

const Weights<float>& model() {
  static const Weights<float> W = golden_model();  // small_config(), the goldens' weights
  return W;
}

// Ragged: a chunk with no prefix, one token on a page minus one, a chunk crossing pages on a full page, three
// tokens on 100; shuffled pages, one spare.
const ChunkSpec kRagged{{0, 63, 64, 100}, {9, 1, 65, 3}, 4501, true, 1};

template <class T>
ChunkOutput<T> run_chunk(const Weights<float>& W, const ChunkInputs& in, ChunkPath path, PagedCache<T>* after = nullptr) {
  PagedCache<T> cache = cast_cache<T>(in.cache);
  const Chunk<T> chunk{in.chunk.h.cast<T>(), in.chunk.q_lens};
  ChunkOutput<T> o = prefill_chunk(W.cast<T>(), cache, chunk, path);
  if (after) *after = std::move(cache);
  return o;
}

const char* name(ChunkPath p) { return p == ChunkPath::Decompressed ? "prefill" : "chunk_absorbed"; }

}  // namespace

TEST_CASE("prefill and the absorbed chunk == the fp64 oracle (CD token by token); ragged, prefix 0 and > 0") {
  const ChunkInputs in = make_chunk_inputs(model(), kRagged);
  const Judge judge(model(), in);
  for (ChunkPath path : {ChunkPath::Decompressed, ChunkPath::Absorbed}) {
    const ChunkOutput<float> o32 = run_chunk<float>(model(), in, path);
    judge.check(name(path), "ragged", test::as_array(o32.u), o32.lse);
    const ChunkOutput<double> o64 = run_chunk<double>(model(), in, path);
    judge.check(name(path), "ragged", test::as_array(o64.u), o64.lse);
  }
}

TEST_CASE("multi-token decode: s_q = 2 and 4 query tokens per sequence on a cache holding their rows == the oracle") {
  for (int64_t sq : {2, 4}) {
    CAPTURE(sq);
    const ChunkInputs in = make_chunk_inputs(model(), ChunkSpec{{0, 62, 1, 100}, {sq, sq, sq, sq}, 4503, true, 1});
    const Judge judge(model(), in);
    // The cache after the tokens' rows were appended (as a decode step finds it), formed apart from the chunk code.
    const PagedCache<float> cache = make_paged(full_rows(model(), in), in.cache.block_table, in.cache.blocks.shape[0]);
    // At double, the rows as the oracle forms them (kv_entries at double), as the fp64 prefill writes them.
    const Weights<double> W64 = model().cast<double>();
    const PagedCache<double> cache64 = make_paged(full_rows(W64, in), in.cache.block_table, in.cache.blocks.shape[0]);
    const std::string what = "s_q = " + std::to_string(sq);
    for (ChunkPath path : {ChunkPath::Absorbed, ChunkPath::Decompressed}) {
      const ChunkOutput<float> o32 = attend_chunk(model(), cache, in.chunk.h, in.chunk.q_lens, path);
      judge.check(std::string("decode s_q, ") + name(path), what, test::as_array(o32.u), o32.lse);
      const ChunkOutput<double> o64 = attend_chunk(W64, cache64, Mat<double>(in.chunk.h.cast<double>()), in.chunk.q_lens, path);
      judge.check(std::string("decode s_q, ") + name(path), what, test::as_array(o64.u), o64.lse);
    }
    // The verify step without its causal mask (every draft token sees all L rows, its successors' included)
    // is caught: token i of each sequence run as a one-token query over all L keys.
    const Weights<float>& W = model();
    const int64_t B = 4, H = W.cfg.n_heads, R = W.cfg.kv_lora_rank;
    std::vector<int64_t> start, last;
    for (int64_t L : cache.seqlens) start.push_back(L - sq), last.push_back(L - 1);
    const Mat<float> cQ = query_latent(W, in.chunk.h);
    const Mat<float> q_abs = absorb_query(W, query_nope(W, cQ));
    const Mat<float> q_pe = query_rope(W, cQ, chunk_positions(start, in.chunk.q_lens));
    const Array<float> kv = gather(cache);
    Array<float> lse;
    Mat<float> o_lat(B * sq, H * R), u(B * sq, W.cfg.hidden);
    for (int64_t i = 0; i < sq; ++i) {
      Mat<float> qa(B, H * R), qr(B, q_pe.cols());
      for (int64_t b = 0; b < B; ++b) qa.row(b) = q_abs.row(b * sq + i), qr.row(b) = q_pe.row(b * sq + i);
      const Mat<float> o = chunk_attend_absorbed(W.cfg, qa, qr, kv, std::vector<int64_t>(B, 1), last, lse);
      for (int64_t b = 0; b < B; ++b) o_lat.row(b * sq + i) = o.row(b);
    }
    output_projection(W, absorb_output(W, o_lat), u);
    CHECK_FALSE(judge.passes(u));
    output_projection(W, absorb_output(W, chunk_attend_absorbed(W.cfg, q_abs, q_pe, kv, in.chunk.q_lens, start, lse)), u);
    CHECK(judge.passes(u));  // the same pieces with the mask pass
  }
}

TEST_CASE("prefill and the absorbed chunk on awkward dimensions (hidden 97, 3 heads, kv_lora 111, nope 13, rope 10, v 7)") {
  Config c;
  c.hidden = 97, c.n_heads = 3, c.q_lora_rank = 59, c.kv_lora_rank = 111, c.qk_nope = 13, c.qk_rope = 10, c.v_head = 7;
  const Weights<float> W = random_weights(c, 31);
  const ChunkInputs in = make_chunk_inputs(W, ChunkSpec{{1, 0, 130}, {1, 67, 2}, 4504, true, 2});
  const Judge judge(W, in);
  for (ChunkPath path : {ChunkPath::Decompressed, ChunkPath::Absorbed}) {
    const ChunkOutput<float> o32 = run_chunk<float>(W, in, path);
    judge.check(name(path), "awkward dims", test::as_array(o32.u), o32.lse);
    const ChunkOutput<double> o64 = run_chunk<double>(W, in, path);
    judge.check(name(path), "awkward dims", test::as_array(o64.u), o64.lse);
  }
}

TEST_CASE("every decode rung, token by token on the rows the chunk writes, == the same oracle") {
  const ChunkInputs in = make_chunk_inputs(model(), kRagged);
  const Judge judge(model(), in);
  const std::vector<Mat<float>> rows = full_rows(model(), in);
  for (const Rung* r : registry().stage(kStage, "ref")) {
    test::mla_coverage().mark(*r);
    const Tokens<float> t = decode_tokens(r->fn<RungFns>().f32, model(), rows, in);
    judge.check(r->id + " token by token", "ragged", t.u, t.lse);
  }
}

TEST_CASE("the chunk writes its cache rows bit for bit where the block table says, and nothing else") {
  const ChunkInputs in = make_chunk_inputs(model(), kRagged);
  const std::vector<Mat<float>> rows = full_rows(model(), in);
  const PagedCache<float> want = make_paged(rows, in.cache.block_table, in.cache.blocks.shape[0]);
  for (ChunkPath path : {ChunkPath::Decompressed, ChunkPath::Absorbed}) {
    CAPTURE(name(path));
    PagedCache<float> after;
    run_chunk<float>(model(), in, path, &after);
    CHECK(after.seqlens == std::vector<int64_t>{9, 64, 129, 103});
    REQUIRE(after.blocks.data.size() == want.blocks.data.size());
    CHECK(std::memcmp(after.blocks.data.data(), want.blocks.data.data(), want.blocks.data.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("a wrong candidate is caught: the causal mask aligned top left (the prefix hidden from the chunk)" *
          doctest::test_suite("judge")) {
  const ChunkInputs in = make_chunk_inputs(model(), kRagged);
  const Judge judge(model(), in);
  const Weights<float>& W = model();
  PagedCache<float> cache;
  run_chunk<float>(W, in, ChunkPath::Decompressed, &cache);  // the cache with the chunk's rows
  const std::vector<int64_t> prefix = in.cache.seqlens;
  const Mat<float> cQ = query_latent(W, in.chunk.h);
  const Mat<float> q_nope = query_nope(W, cQ), q_pe = query_rope(W, cQ, chunk_positions(prefix, in.chunk.q_lens));
  const Array<float> kv = gather(cache);
  Array<float> K, V, lse;
  decompress(W, kv, cache.seqlens, K, V);
  for (const auto& [diag, right] : {std::pair{prefix, true}, std::pair{std::vector<int64_t>(4, 0), false}}) {
    CAPTURE(right);
    Mat<float> u(in.chunk.h.rows(), W.cfg.hidden);
    output_projection(W, chunk_attend_decompressed(W.cfg, q_nope, q_pe, K, V, in.chunk.q_lens, diag, lse), u);
    CHECK(judge.passes(u) == right);
    const Mat<float> o_lat = chunk_attend_absorbed(W.cfg, absorb_query(W, q_nope), q_pe, kv, in.chunk.q_lens, diag, lse);
    output_projection(W, absorb_output(W, o_lat), u);
    CHECK(judge.passes(u) == right);
  }
}

TEST_CASE("chunked prefill == one pass: the same cache bytes exactly, outputs within the rule") {
  const ChunkInputs in = make_chunk_inputs(model(), ChunkSpec{{0, 5}, {100, 70}, 4502, true, 0});
  const Judge judge(model(), in);
  PagedCache<float> one;
  run_chunk<float>(model(), in, ChunkPath::Decompressed, &one);
  PagedCache<float> cache = in.cache;
  Mat<float> u(in.chunk.h.rows(), model().cfg.hidden);
  Array<float> lse({in.chunk.h.rows(), model().cfg.n_heads});
  const std::vector<int64_t> first = chunk_offsets(in.chunk.q_lens);
  for (const auto& [i0, i1] : {std::pair<int64_t, int64_t>{0, 37}, {37, 64}, {64, 100}}) {  // token ranges
    Chunk<float> part;  // tokens i0 .. i1 - 1 of sequence 0 (100 tokens) and of sequence 1 (70: the last part 6)
    const int64_t n0 = i1 - i0, n1 = std::min<int64_t>(70, i1) - i0;
    part.q_lens = {n0, n1};
    part.h = Mat<float>(n0 + n1, model().cfg.hidden);
    part.h.topRows(n0) = in.chunk.h.middleRows(i0, n0);
    part.h.bottomRows(n1) = in.chunk.h.middleRows(first[1] + i0, n1);
    const ChunkOutput<float> o = prefill_chunk(model(), cache, part, ChunkPath::Decompressed);
    const int64_t H = model().cfg.n_heads;
    u.middleRows(i0, n0) = o.u.topRows(n0);
    u.middleRows(first[1] + i0, n1) = o.u.bottomRows(n1);
    std::copy(&o.lse.data[0], &o.lse.data[n0 * H], &lse.data[i0 * H]);
    std::copy(&o.lse.data[n0 * H], &o.lse.data[(n0 + n1) * H], &lse.data[(first[1] + i0) * H]);
  }
  CHECK(cache.seqlens == one.seqlens);
  CHECK(std::memcmp(cache.blocks.data.data(), one.blocks.data.data(), one.blocks.data.size() * sizeof(float)) == 0);
  judge.check("prefill in chunks of 37, 27, 36 (6)", "two sequences", test::as_array(u), lse);
}

TEST_CASE("counted multiply-adds == chunk_cost for both paths (B = 3; prefix 0 and 37, q_len 1 and 11)") {
  const Weights<float> W = random_weights(small_config(), 5);
  for (const auto& [P, n] : {std::pair<int64_t, int64_t>{0, 11}, {37, 11}, {37, 1}}) {
    const ChunkInputs in = make_chunk_inputs(W, ChunkSpec{{P, P, P}, {n, n, n}, 6, true, 2});
    for (ChunkPath path : {ChunkPath::Decompressed, ChunkPath::Absorbed}) {
      CAPTURE(name(path));
      CAPTURE(P);
      CAPTURE(n);
      PagedCache<float> cache = in.cache;
      FlopCount count;
      {
        CountFlops guard(count);
        prefill_chunk(W, cache, in.chunk, path);
      }
      CHECK(count.flops() == chunk_cost(path, chunk_cost_shape(W.cfg, 3, P, n)).flops);
    }
  }
}

TEST_CASE("the crossover q_len: the closed form brackets the sign change of the two Costs (V2, H = 16, P = 0)") {
  for (int64_t H : {128, 16}) {
    Config c = deepseek_v2();
    c.n_heads = H;
    for (int64_t P : {0, 1, 100, 4096, 65536}) {
      CAPTURE(H);
      CAPTURE(P);
      const double nstar = chunk_crossover(c, static_cast<double>(P));
      auto diff = [&](int64_t n) {  // F_abs - F_dec
        return chunk_cost(ChunkPath::Absorbed, chunk_cost_shape(c, 1, P, n, 2)).flops -
               chunk_cost(ChunkPath::Decompressed, chunk_cost_shape(c, 1, P, n, 2)).flops;
      };
      const int64_t below = static_cast<int64_t>(std::floor(nstar));
      if (below >= 1) CHECK(diff(below) <= 0);
      CHECK(diff(below + 1) > 0);
      CHECK(nstar < 512.0 * 256 / 768);  // approaches kv_lora (nope + v) / (2 kv_lora - nope - v) from below
    }
  }
  CHECK(chunk_crossover(deepseek_v2(), 0) == 0);
  CHECK(chunk_crossover(deepseek_v2(), 65536) > 170);
}

TEST_CASE("results do not depend on the OpenMP thread count (bit-identical, both paths)") {
  const ChunkInputs in = make_chunk_inputs(model(), kRagged);
  for (ChunkPath path : {ChunkPath::Decompressed, ChunkPath::Absorbed}) {
    ChunkOutput<float> a, b;
    test::with_threads(1, [&] { a = run_chunk<float>(model(), in, path); });
    test::with_threads(2, [&] { b = run_chunk<float>(model(), in, path); });
    CHECK(test::as_array(a.u).data == test::as_array(b.u).data);
    CHECK(a.lse.data == b.lse.data);
  }
}

TEST_CASE("bad input names the parameter and the constraint") {
  const ChunkInputs in = make_chunk_inputs(model(), ChunkSpec{{60}, {4}, 7, false, 0});
  auto message = [&](auto&& edit) {
    PagedCache<float> cache = in.cache;
    Chunk<float> chunk = in.chunk;
    Weights<float> W = model();
    edit(W, cache, chunk);
    const std::vector<int64_t> before = cache.seqlens;
    try {
      prefill_chunk(W, cache, chunk, ChunkPath::Decompressed);
    } catch (const Error& e) {
      CHECK(cache.seqlens == before);  // a refused chunk leaves the cache as it was
      return std::string(e.what());
    }
    return std::string("no error");
  };
  using C = PagedCache<float>;
  using K = Chunk<float>;
  using Wt = Weights<float>;
  CHECK(message([](Wt&, C&, K& k) { k.q_lens = {0}; }).find("q_lens[0] = 0 violates q_len >= 1") != std::string::npos);
  CHECK(message([](Wt&, C& c, K&) { c.seqlens = {-1}; }).find("(the prefix) = -1 violates prefix >= 0") !=
        std::string::npos);
  CHECK(message([](Wt&, C&, K& k) { k.q_lens = {5}; }).find("h.rows = 4 violates == sum of q_lens = 5") !=
        std::string::npos);
  CHECK(message([](Wt&, C& c, K& k) { c.seqlens = {64}, k.q_lens = {4}; }).find("needs 2 blocks") != std::string::npos);
  CHECK(message([](Wt& w, C&, K&) { w.W_DKV = Mat<float>(); }).find("W_DKV and kv_norm are empty") != std::string::npos);
  // attend_chunk (the rows already in the cache): at most the cached tokens can be queries.
  std::string e;
  try {
    attend_chunk(model(), in.cache, Mat<float>(in.chunk.h.topRows(1)), {61}, ChunkPath::Absorbed);
  } catch (const Error& x) {
    e = x.what();
  }
  CHECK(e.find("q_lens[0] = 61 violates 1 <= q_len <= cache.seqlens[0] = 60") != std::string::npos);
}
