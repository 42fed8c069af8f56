// tests/03-mla/test_mla_chunk.cpp -- stage 03's chunk shape through the contract (ref/src/03-mla/contract.cpp):
// the s_q = 2 and 4 decode goldens and the ragged prefill golden, every reference rung at float32 and float64
// by `ladder run`'s path (run_rung) and judged by `ladder check`'s (check); wrong candidates that check must
// reject (a mask aligned top left, one sequence's q_len off by one, the chunk's rows not written, rows roped at
// chunk-local positions); a prefill run in several chunks through the contract == one pass, byte for byte;
// bad chunk inputs refused naming the input.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "ladder/core/fixed_order.hpp"
#include "test_mla_util.hpp"

using namespace ladder;
using namespace ladder::mla;
namespace fs = std::filesystem;

namespace {

const Contract& mla_contract() { return contract(kStage); }

// The weights every committed case runs on (model_small).
Weights<float> model32() { return load_model(test::mla_dir(kModelCase)); }

CaseFolder chunk_case(const std::string& name) { return read_case(mla_contract(), test::mla_dir(name)); }

std::vector<int64_t> ints(const CaseFolder& cf, const char* name) {
  return npy_as_int64(cf.inputs.at(name), name).data;
}

// The case's cache at float32 (seqlens: after the step), its rows written from h where the case is a prefill.
PagedCache<float> case_cache(const CaseFolder& cf, const Weights<float>& W, bool write_rows) {
  PagedCache<float> c;
  c.blocks = from_npy<float>(cf.inputs.at("blocks"), "blocks");
  c.block_size = c.blocks.shape[1];
  c.block_table = npy_as_int64(cf.inputs.at("block_table"), "block_table").cast<int32_t>();
  c.seqlens = ints(cf, "seqlens");
  const Mat<float> h = from_npy<float>(cf.inputs.at("h"), "h").mat();
  if (write_rows) write_chunk_rows(W, c, ints(cf, "q_lens"), h, ints(cf, "q_pos"));
  return c;
}

// A candidate u [N, hidden] of CD at float32, one decode step per token, token i of sequence b seeing the first
// seen(b, i) rows: the right answer at seen = seqlens - q_lens + i + 1; the planted bugs at other counts.
template <class Seen>
NpyData u_seeing(const CaseFolder& cf, const PagedCache<float>& cache, Seen seen) {
  const Weights<float> W = model32();
  const std::vector<int64_t> q_lens = ints(cf, "q_lens");
  const int64_t B = static_cast<int64_t>(q_lens.size()), width = cache.block_table.shape[1];
  PagedCache<float> per = cache;
  per.seqlens.clear();
  per.block_table = Array<int32_t>({std::accumulate(q_lens.begin(), q_lens.end(), int64_t{0}), width});
  int64_t t = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < q_lens[b]; ++i, ++t) {
      std::copy_n(&cache.block_table.data[b * width], width, &per.block_table.data[t * width]);
      per.seqlens.push_back(seen(b, i));
    }
  const Step<float> step{from_npy<float>(cf.inputs.at("h"), "h").mat(), ints(cf, "q_pos")};
  return to_npy(Array<float>::from(run(reference_rung<float>(Variant::CD), W, per, step).u));
}

bool passes(const CaseFolder& cf, const std::string& output, const NpyData& cand) {
  const CheckReport r = check(mla_contract(), cf.inputs, cf.params, cf.expected, output, cand);
  INFO(r.text);
  return r.pass;
}


// One piece of a chunked prefill: tokens [i0, i1) of sequence seq of the case.
struct Piece {
  int64_t seq, i0, i1;
};

// Runs rung `r` on the case's chunk in `chunks`, one run_rung per chunk, each a case of its own: the sequences it
// touches (a subset of the case's), their h and q_pos rows, prefix = the case's prefix + i0 (what the cache holds
// by then), and blocks holding every row the earlier chunks returned as kv_rows (the caller's side of a chunked
// prefill: it writes the rows back into its pages). With `carry` false the rows are not written back (a planted
// bug: the later chunks find NaN where the earlier chunks' rows belong). Returns u, lse, kv_rows in the case's
// token order, as one pass returns them.
Tensors run_in_chunks(const CaseFolder& cf, const Rung& r, const std::vector<std::vector<Piece>>& chunks, DType prec,
                      bool carry = true) {
  const std::vector<int64_t> q_lens = ints(cf, "q_lens"), prefix = ints(cf, "prefix"), q_pos = ints(cf, "q_pos");
  const std::vector<int64_t> first = chunk_offsets(q_lens);
  const Array<float> h = from_npy<float>(cf.inputs.at("h"), "h");
  const Array<int64_t> table = npy_as_int64(cf.inputs.at("block_table"), "block_table");
  Array<float> blocks = from_npy<float>(cf.inputs.at("blocks"), "blocks");
  const int64_t hidden = h.shape[1], width = table.shape[1], bs = blocks.shape[1], D = blocks.shape[2];
  std::map<std::string, std::vector<unsigned char>> whole;  // output name -> bytes in the case's token order
  std::map<std::string, NpyData> shape_of;
  auto ints_npy = [](std::vector<int64_t> v) {
    Array<int64_t> a({static_cast<int64_t>(v.size())});
    a.data = std::move(v);
    return to_npy(a);
  };
  for (const std::vector<Piece>& chunk : chunks) {
    Tensors in = cf.inputs;
    std::vector<int64_t> n, pre, seqlens, pos, token;  // token: each chunk row's index in the case
    Array<int32_t> tab({static_cast<int64_t>(chunk.size()), width});
    for (size_t k = 0; k < chunk.size(); ++k) {
      const Piece& p = chunk[k];
      n.push_back(p.i1 - p.i0), pre.push_back(prefix[p.seq] + p.i0), seqlens.push_back(prefix[p.seq] + p.i1);
      for (int64_t i = p.i0; i < p.i1; ++i) token.push_back(first[p.seq] + i), pos.push_back(q_pos[first[p.seq] + i]);
      for (int64_t w = 0; w < width; ++w) tab.data[k * width + w] = static_cast<int32_t>(table.data[p.seq * width + w]);
    }
    Array<float> hc({static_cast<int64_t>(token.size()), hidden});
    for (size_t t = 0; t < token.size(); ++t)
      std::copy_n(&h.data[token[t] * hidden], hidden, &hc.data[t * hidden]);
    in["h"] = to_npy(hc), in["q_pos"] = ints_npy(pos), in["q_lens"] = ints_npy(n), in["prefix"] = ints_npy(pre);
    in["seqlens"] = ints_npy(seqlens), in["block_table"] = to_npy(tab), in["blocks"] = to_npy(blocks);
    const Tensors out = run_rung(mla_contract(), r, in, cf.params, prec);
    for (const auto& [name, d] : out) {
      const size_t row = d.bytes.size() / token.size();  // bytes of one token's row
      std::vector<unsigned char>& w = whole[name];
      w.resize(row * static_cast<size_t>(first.back()));
      for (size_t t = 0; t < token.size(); ++t)
        std::copy_n(&d.bytes[t * row], row, &w[static_cast<size_t>(token[t]) * row]);
      shape_of[name] = d;
    }
    if (!carry) continue;
    const Array<float> rows = from_npy<float>(out.at("kv_rows"), "kv_rows");  // float32 at float32
    int64_t t = 0;
    for (const Piece& p : chunk)
      for (int64_t i = p.i0; i < p.i1; ++i, ++t) {
        const int64_t j = prefix[p.seq] + i, blk = table.data[p.seq * width + j / bs];
        std::copy_n(&rows.data[t * D], D, &blocks.data[(blk * bs + j % bs) * D]);
      }
  }
  Tensors result;
  for (auto& [name, bytes] : whole) {
    NpyData d = shape_of.at(name);
    d.shape[0] = first.back();
    d.bytes = std::move(bytes);
    result[name] = std::move(d);
  }
  return result;
}

}  // namespace

TEST_CASE("chunk goldens: s_q = 2 and 4, prefix 0 and > 0, q_len 1 and awkward sizes") {
  std::set<int64_t> s_q, prefixes, q_lens;
  bool prefill = false;
  for (const ChunkCase& c : chunk_cases()) {
    const CaseFolder cf = chunk_case(c.name);
    CHECK(ints(cf, "q_lens") == c.spec.q_lens);
    if (c.prefill) {
      prefill = true;
      CHECK(ints(cf, "prefix") == c.spec.prefix);
      for (int64_t p : c.spec.prefix) prefixes.insert(p);
      for (int64_t n : c.spec.q_lens) q_lens.insert(n);
      CHECK(cf.expected.count("kv_rows") == 1);
    } else {
      CHECK(cf.inputs.count("prefix") == 0);
      s_q.insert(c.spec.q_lens.front());
    }
  }
  CHECK(prefill);
  CHECK(s_q == std::set<int64_t>{2, 4});
  CHECK(prefixes.count(0) == 1);
  CHECK(*prefixes.rbegin() > 0);
  CHECK(q_lens.count(1) == 1);
  CHECK(q_lens.count(13) == 1);
}

TEST_CASE("every reference rung through the contract meets the oracle on the chunk goldens (float32 and float64)") {
  const Contract& c = mla_contract();
  for (const ChunkCase& gc : chunk_cases()) {
    const CaseFolder cf = chunk_case(gc.name);
    for (const Rung* r : registry().stage(kStage, "ref")) {
      for (DType prec : {DType::F4, DType::F8}) {
        CAPTURE(gc.name);
        CAPTURE(r->key());
        const std::string precision = dtype_name(prec);
        CAPTURE(precision);
        const Tensors out = run_rung(c, *r, cf.inputs, cf.params, prec);
        CHECK(out.count("u") == 1);
        CHECK(out.count("lse") == 1);
        // The chunk rungs write a prefill chunk's rows themselves and return them; the decode rungs read them.
        CHECK(out.count("kv_rows") == (gc.prefill && chunk_rung_path(r->id) ? 1u : 0u));
        for (const auto& [name, cand] : out) {
          CAPTURE(name);
          CHECK(passes(cf, name, cand));
        }
      }
    }
  }
}

TEST_CASE("the chunk rungs on a one-token decode golden meet its oracle (a decode step is a chunk of one)") {
  const CaseFolder cf = read_case(mla_contract(), test::mla_dir("batch_ragged"));
  for (const char* id : {kPrefillRung, kChunkAbsorbedRung}) {
    CAPTURE(id);
    const Tensors out = run_rung(mla_contract(), registry().find(kStage, "ref", id), cf.inputs, cf.params, DType::F4);
    CHECK(passes(cf, "u", out.at("u")));
    CHECK(passes(cf, "lse", out.at("lse")));
  }
}

TEST_CASE("wrong chunk candidates fail `ladder check`: top-left mask, a q_len off by one, rows unwritten or misplaced" *
          doctest::test_suite("judge")) {
  const CaseFolder cf = chunk_case("prefill_ragged");  // prefixes 0, 64, 37; q_len 7, 1, 13
  const Weights<float> W = model32();
  const std::vector<int64_t> seqlens = ints(cf, "seqlens"), q_lens = ints(cf, "q_lens");
  const PagedCache<float> written = case_cache(cf, W, true);
  auto prefix = [&](int64_t b) { return seqlens[b] - q_lens[b]; };
  // The right construction passes: the planted ones below differ from it in one thing each.
  CHECK(passes(cf, "u", u_seeing(cf, written, [&](int64_t b, int64_t i) { return prefix(b) + i + 1; })));
  // Top left: token i sees keys j <= i, the prefix hidden from the chunk's first tokens.
  CHECK_FALSE(passes(cf, "u", u_seeing(cf, written, [&](int64_t, int64_t i) { return i + 1; })));
  // Sequence 2's q_len taken one too large: its diagonal shifts, every token misses its own row.
  CHECK_FALSE(passes(cf, "u", u_seeing(cf, written, [&](int64_t b, int64_t i) { return prefix(b) + i + (b == 2 ? 0 : 1); })));
  // The chunk's rows never written: the blocks hold NaN there.
  CHECK_FALSE(passes(cf, "u", u_seeing(cf, case_cache(cf, W, false), [&](int64_t b, int64_t i) { return prefix(b) + i + 1; })));
  // kv_rows roped at chunk-local positions (i instead of prefix + i): sequence 0 (prefix 0) is right, 1 and 2 not.
  std::vector<int64_t> local;
  for (int64_t n : q_lens)
    for (int64_t i = 0; i < n; ++i) local.push_back(i);
  const Mat<float> h = from_npy<float>(cf.inputs.at("h"), "h").mat();
  CHECK(passes(cf, "kv_rows", to_npy(Array<float>::from(kv_entries(W, h, ints(cf, "q_pos"))))));
  CHECK_FALSE(passes(cf, "kv_rows", to_npy(Array<float>::from(kv_entries(W, h, local)))));
}

// The cache bytes (kv_rows) are the same bits whatever the chunking, as the rungs run. u and lse are the same
// bits once every product is summed in one order (a FixedOrder scope, core/fixed_order.hpp, which pins the order
// of Eigen's float32 products): without it the prefill's u and lse differed in the last bits here (Eigen sums a
// [L, kv_lora] x kv_b^T decompression in an order that depends on the product's shape), within the rule.
TEST_CASE("a prefill in chunks through the contract == one pass, byte for byte (u, lse, kv_rows); rows not carried fail") {
  const CaseFolder cf = chunk_case("prefill_ragged");  // prefixes 0, 64, 37; q_len 7, 1, 13
  // Three chunks: a subset of the sequences, then all three (one of a single token), then one sequence alone.
  const std::vector<std::vector<Piece>> chunks{{{0, 0, 3}, {2, 0, 5}}, {{0, 3, 7}, {1, 0, 1}, {2, 5, 6}}, {{2, 6, 13}}};
  for (const std::string id : {kPrefillRung, kChunkAbsorbedRung}) {
    CAPTURE(id);
    const Rung& r = registry().find(kStage, "ref", id);
    {
      const Tensors one = run_rung(mla_contract(), r, cf.inputs, cf.params, DType::F4);
      const Tensors chunked = run_in_chunks(cf, r, chunks, DType::F4);
      REQUIRE(one.size() == 3);
      CHECK(chunked.at("kv_rows").bytes == one.at("kv_rows").bytes);
      for (const auto& [name, d] : chunked) {
        CAPTURE(name);
        CHECK(passes(cf, name, d));
      }
    }
    {
      const FixedOrder pinned;
      const Tensors one = run_rung(mla_contract(), r, cf.inputs, cf.params, DType::F4);
      const Tensors chunked = run_in_chunks(cf, r, chunks, DType::F4);
      REQUIRE(one.size() == 3);
      for (const auto& [name, d] : one) {
        CAPTURE(name);
        REQUIRE(chunked.count(name) == 1);
        CHECK(chunked.at(name).shape == d.shape);
        CHECK(chunked.at(name).dtype == d.dtype);
        CHECK(chunked.at(name).bytes == d.bytes);
      }
    }
    // The planted bug: the caller forgets to write a chunk's rows back into its pages before the next chunk.
    const Tensors lost = run_in_chunks(cf, r, chunks, DType::F4, false);
    CHECK(passes(cf, "kv_rows", lost.at("kv_rows")));  // each chunk still forms its own rows right
    CHECK_FALSE(passes(cf, "u", lost.at("u")));
    CHECK_FALSE(passes(cf, "lse", lost.at("lse")));
  }
}

TEST_CASE("the s_q = 4 golden: a mask that lets every draft token see the whole chunk fails") {
  const CaseFolder cf = chunk_case("s_q_4");
  const Weights<float> W = model32();
  const std::vector<int64_t> seqlens = ints(cf, "seqlens");
  const PagedCache<float> cache = case_cache(cf, W, false);
  CHECK(passes(cf, "u", u_seeing(cf, cache, [&](int64_t b, int64_t i) { return seqlens[b] - 4 + i + 1; })));
  CHECK_FALSE(passes(cf, "u", u_seeing(cf, cache, [&](int64_t b, int64_t) { return seqlens[b]; })));
}

TEST_CASE("bad chunk inputs are refused naming the input and the constraint") {
  const Contract& c = mla_contract();
  const Rung& cd = registry().find(kStage, "ref", "CD");
  const CaseFolder cf = chunk_case("prefill_ragged");
  auto with = [&](const char* name, std::vector<int64_t> v) {
    Tensors t = cf.inputs;
    Array<int64_t> a({static_cast<int64_t>(v.size())});
    a.data = std::move(v);
    t[name] = to_npy(a);
    return t;
  };
  CHECK_THROWS_WITH_AS(run_rung(c, cd, with("q_lens", {7, 1}), cf.params, DType::F4),
                       doctest::Contains("input q_lens [2] violates [B = 3]"), Error);
  CHECK_THROWS_WITH_AS(run_rung(c, cd, with("q_lens", {7, 2, 12}), cf.params, DType::F4),
                       doctest::Contains("violates prefix = seqlens - q_lens"), Error);
  CHECK_THROWS_WITH_AS(run_rung(c, cd, with("q_lens", {7, 1, 14}), cf.params, DType::F4),
                       doctest::Contains("[N = 22] (the sum of q_lens)"), Error);
  CHECK_THROWS_WITH_AS(run_rung(c, cd, with("q_lens", {7, 1, 51}), cf.params, DType::F4),
                       doctest::Contains("q_lens[2] = 51 violates 1 <= q_len <= seqlens[2] = 50"), Error);
  CHECK_THROWS_WITH_AS(run_rung(c, cd, with("prefix", {0, 64, 36}), cf.params, DType::F4),
                       doctest::Contains("input prefix[2] = 36 violates prefix = seqlens - q_lens"), Error);
  Tensors no_dkv = cf.inputs;
  no_dkv.erase("W_DKV");
  CHECK_THROWS_WITH_AS(run_rung(c, cd, no_dkv, cf.params, DType::F4),
                       doctest::Contains("input W_DKV is missing; input prefix makes the case a prefill chunk"), Error);
  // kv_rows exists only with input prefix: asking for it on a decode case names the input.
  const CaseFolder dec = chunk_case("s_q_2");
  CHECK(dec.expected.count("kv_rows") == 0);
  CHECK_THROWS_WITH_AS(check(c, dec.inputs, dec.params, dec.expected, "kv_rows", cf.expected.at("kv_rows")),
                       doctest::Contains("needs input prefix"), Error);
}
