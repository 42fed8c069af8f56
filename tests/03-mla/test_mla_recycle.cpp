// tests/03-mla/test_mla_recycle.cpp -- decode's storage reuse without the caller's help (core/recycle.hpp):
// the per-thread bin keeps, evicts and hands out buffers as documented; an Output that dies (or is assigned
// over) gives its large arrays to the bin and the next decode takes them -- the same storage, with the bits of
// a decode on fresh storage (every reference rung, float and double). A bin that kept a buffer's stale tails
// (planted below: the reuse path without the tail fill) is caught. CD's cache advised for huge pages
// (core/huge_pages.hpp) holds the bits of plain storage and decodes to them (a planted changed value caught).
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "ladder/core/huge_pages.hpp"
#include "ladder/core/recycle.hpp"
#include "test_mla_util.hpp"

using namespace ladder;
using namespace ladder::mla;

namespace {

constexpr int64_t kBig = int64_t{1} << 19;  // floats: 2 MiB, over the bin's 1 MiB floor

TEST_CASE("recycle: the bin keeps large buffers only, takes the best fit, evicts the smallest, releases") {
  using R = Recycler<float>;
  recycle_release<float>();
  R& r = *R::local();
  std::vector<float> small(1000);
  R::recycle(small);
  CHECK(small.capacity() == 0);
  CHECK(r.buffers() == 0);  // under kMinBytes: freed, not kept
  std::vector<float> a(static_cast<size_t>(kBig)), b(static_cast<size_t>(2 * kBig));
  const float *pa = a.data(), *pb = b.data();
  R::recycle(b);
  R::recycle(a);
  CHECK(r.buffers() == 2);
  std::vector<float> got;
  CHECK(!R::reuse(got, 3 * kBig));  // none large enough
  CHECK(R::reuse(got, kBig / 2));   // the smallest that fits: a
  CHECK(got.data() == pa);
  CHECK(R::reuse(got, kBig + 1));  // b; got's old storage is freed
  CHECK(got.data() == pb);
  CHECK(r.buffers() == 0);
  for (size_t i = 0; i < R::kMaxBuffers + 3; ++i) {
    std::vector<float> v(static_cast<size_t>(kBig) + i);
    R::recycle(v);
  }
  CHECK(r.buffers() == R::kMaxBuffers);
  CHECK(R::reuse(got, kBig));  // the best fit left: kBig + 3 (kBig + 0, 1, 2 were evicted as the smallest)
  CHECK(got.capacity() == static_cast<size_t>(kBig) + 3);
  RawBuffer<float> raw{std::unique_ptr<float[]>(new float[static_cast<size_t>(kBig)]), kBig};
  const float* praw = raw.data.get();
  R::recycle(raw);
  CHECK(raw.size == 0);
  RawBuffer<float> back;
  CHECK(R::reuse(back, kBig));
  CHECK(back.data.get() == praw);
  recycle_release<float>();
  CHECK(r.buffers() == 0);
}

// Two steps with the same B and Lmax (so the same array sizes), the second with a shorter sequence: a reused
// scores array must have -inf (attn 0) where the first step had values.
template <class T>
void check_decode_reuses(const RungImpl<T>& f, const std::string& id) {
  CAPTURE(id);
  Config c;
  c.hidden = 37, c.n_heads = 64, c.q_lora_rank = 19, c.kv_lora_rank = 23, c.qk_nope = 5, c.qk_rope = 4, c.v_head = 3;
  const Weights<float> W32 = random_weights(c, 41);
  const auto W = [&] {
    if constexpr (std::is_same_v<T, float>) return W32;
    else return W32.template cast<double>();
  }();
  const Inputs in1 = make_inputs(W32, InputSpec{{2048, 2048}, 42, true, 1, true});
  const Inputs in2 = make_inputs(W32, InputSpec{{2048, 300}, 43, false, 0, true});
  const Prepared<T> p1 = f.prepare(W, cast_cache<T>(in1.cache)), p2 = f.prepare(W, cast_cache<T>(in2.cache));
  const Step<T> s1 = cast_step<T>(in1.step), s2 = cast_step<T>(in2.step);
  recycle_release<T>();
  const Output<T> want = f.decode(W, p2, s2);  // fresh storage (the bin was empty)
  recycle_release<T>();
  std::set<const T*> first;
  Output<T> out = f.decode(W, p1, s1);
  for (const Array<T>* a : {&out.scores, &out.attn})
    if (a->size() > 0) first.insert(a->data.data());
  out = f.decode(W, p2, s2);  // allocates (out still holds step 1), then step 1's arrays die into the bin
  out = f.decode(W, p2, s2);  // takes step 1's arrays
  std::set<const T*> third;
  for (const Array<T>* a : {&out.scores, &out.attn})
    if (a->size() > 0) third.insert(a->data.data());
  CHECK(third == first);
  CHECK(out.scores.data == want.scores.data);
  CHECK(out.attn.data == want.attn.data);
  CHECK(test::as_array(Mat<T>(out.u)).data == test::as_array(Mat<T>(want.u)).data);
  CHECK(out.lse.data == want.lse.data);
  {
    const Output<T> dropped = f.decode(W, p1, s1);  // a loop body's Output: dies at the end of the scope
  }
  const Output<T> again = f.decode(W, p2, s2);
  CHECK(again.scores.data == want.scores.data);
  CHECK(again.attn.data == want.attn.data);
  recycle_release<T>();
}

}  // namespace

TEST_CASE("decode reuses the storage of the Outputs that died, with fresh storage's bits (every rung)") {
  for (const Rung* r : registry().stage(kStage, "ref")) {
    const auto& f = r->fn<RungFns>();
    check_decode_reuses(f.f32, r->id);
    check_decode_reuses(f.f64, r->id);
  }
}

TEST_CASE("huge-page advice: assign_advised is assign; CD's advised cache decodes to plain storage's bits") {
  std::vector<float> v(10, 5.0f);
  assign_advised(v, static_cast<size_t>(kBig) * 3, 2.5f);  // 6 MiB: advised (where Linux allows it)
  CHECK(v.size() == static_cast<size_t>(kBig) * 3);
  CHECK(std::count(v.begin(), v.end(), 2.5f) == 3 * kBig);
  assign_advised(v, 7, -1.0f);  // small: plain
  CHECK(v == std::vector<float>(7, -1.0f));
  CHECK(!advise_huge_pages(nullptr, kHugeAdviceBytes));
  CHECK(!advise_huge_pages(v.data(), v.size() * sizeof(float)));  // under kHugeAdviceBytes: left alone

  Config c;  // K, V of 64 heads x 2048 tokens: 8 MiB each, advised by prepare_cd
  c.hidden = 37, c.n_heads = 64, c.q_lora_rank = 19, c.kv_lora_rank = 23, c.qk_nope = 5, c.qk_rope = 4, c.v_head = 3;
  const Weights<float> W = random_weights(c, 41);
  const Inputs in = make_inputs(W, InputSpec{{2048, 1500}, 44, false, 0, false});
  const Prepared<float> p = prepare_cd(W, in.cache);
  CHECK(p.K.size() * sizeof(float) >= 2 * kHugeAdviceBytes);
  Prepared<float> plain = p;  // copies: plain (unadvised) storage, the bits prepare_cd wrote
  plain.K.data = std::vector<float>(p.K.data);
  plain.V.data = std::vector<float>(p.V.data);
  const Output<float> a = decode_cd(W, p, in.step), b = decode_cd(W, plain, in.step);
  CHECK(test::as_array(a.u).data == test::as_array(b.u).data);
  CHECK(a.attn.data == b.attn.data);
  plain.V.data[5] += 0.5f;  // planted: one changed cached value (token 1 of sequence 0, head 0) is caught
  const Output<float> d = decode_cd(W, plain, in.step);
  CHECK(test::as_array(a.u).data != test::as_array(d.u).data);
}
