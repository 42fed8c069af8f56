// bench/onednn_peer.hpp -- oneDNN's matmul as the peer a bench program times ladder's GEMMs against, in the
// same run (issue 40 deliverable 5: s8 x s8 -> s32 and bf16 x bf16 -> f32; issue 44: f32 x f32 -> f32).
// Built with oneDNN (LADDER_HAVE_ONEDNN, bench/CMakeLists.txt) the peer is a matmul primitive created once
// (its JIT kernel chosen then) and run on row-major operands; without it `available()` is false and
// `missing_reason()` says why, so a program registers the same benchmarks either way and each peer
// benchmark skips with that message.
//   OnednnMatmul mm(m, k, n, OnednnMatmul::Type::s8s8s32);  mm.run(a, b, c);   // c [m x n] = a [m x k] b [k x n]
//   OnednnMatmul mt(m, k, n, OnednnMatmul::Type::f32, true);  // b stored [n x k] row-major: c = a b^T (S = Q K^T)
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#ifdef LADDER_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace ladder::bench {

class OnednnMatmul {
 public:
  // s8s8s32: int8 x int8 -> int32; bf16f32: bf16 x bf16 (uint16_t codes) -> float32; f32: float32 throughout.
  enum class Type { s8s8s32, bf16f32, f32 };

  static bool available() {
#ifdef LADDER_HAVE_ONEDNN
    return true;
#else
    return false;
#endif
  }
  static std::string missing_reason() {
    return "oneDNN not built in (Debian libdnnl-dev; scripts/setup installs it, then reconfigure)";
  }
  // "oneDNN 2.6.3 (cpu isa: ...)" or the reason it is missing.
  static std::string version() {
#ifdef LADDER_HAVE_ONEDNN
    const dnnl_version_t* v = dnnl_version();
    return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
#else
    return missing_reason();
#endif
  }

  OnednnMatmul(int64_t m, int64_t k, int64_t n, Type t, bool b_transposed = false) {
#ifdef LADDER_HAVE_ONEDNN
    using dt = dnnl::memory::data_type;
    const dt in = t == Type::s8s8s32 ? dt::s8 : t == Type::bf16f32 ? dt::bf16 : dt::f32;
    const dt out = t == Type::s8s8s32 ? dt::s32 : dt::f32;
    const auto ab = dnnl::memory::format_tag::ab;
    s_ = std::make_unique<State>();
    s_->a = dnnl::memory::desc({m, k}, in, ab);
    s_->b = dnnl::memory::desc({k, n}, in, b_transposed ? dnnl::memory::format_tag::ba : ab);
    s_->c = dnnl::memory::desc({m, n}, out, ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(s_->a, s_->b, s_->c), s_->eng);
    s_->impl = pd.impl_info_str();
    s_->prim = dnnl::matmul(pd);
#else
    (void)m, (void)k, (void)n, (void)t, (void)b_transposed;
#endif
  }

  // c = a b (row-major, dense). Blocks until done.
  void run(const void* a, const void* b, void* c) {
#ifdef LADDER_HAVE_ONEDNN
    dnnl::memory A(s_->a, s_->eng, const_cast<void*>(a)), B(s_->b, s_->eng, const_cast<void*>(b)),
        C(s_->c, s_->eng, c);
    s_->prim.execute(s_->strm, {{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}, {DNNL_ARG_DST, C}});
    s_->strm.wait();
#else
    (void)a, (void)b, (void)c;
#endif
  }

  // The implementation oneDNN chose (e.g. "brg:avx512_core_vnni"), "" without oneDNN.
  std::string impl() const {
#ifdef LADDER_HAVE_ONEDNN
    return s_->impl;
#else
    return "";
#endif
  }

 private:
#ifdef LADDER_HAVE_ONEDNN
  struct State {
    dnnl::engine eng{dnnl::engine::kind::cpu, 0};
    dnnl::stream strm{eng};
    dnnl::memory::desc a, b, c;
    dnnl::matmul prim;
    std::string impl;
  };
  std::unique_ptr<State> s_;
#endif
};

}  // namespace ladder::bench
