// tests/lab_oracle.cpp -- the reference side of the judge (see lab_oracle.hpp). Compiled with
// -Dladder=ladder_oracle and ref/include only, so every `ladder::` below is `ladder_oracle::`.
#include "lab_oracle.hpp"

#include <fstream>

#include "ladder/core/golden.hpp"
#include "ladder/mla.hpp"
#include "ladder/mla/golden.hpp"
#include "ladder/moe.hpp"
#include "ladder/moe/golden.hpp"
#include "ladder/softmax.hpp"

// The case.json helpers of ref/src/golden.cpp that the stage-03 loaders need. golden.cpp itself is not
// compiled here: its table of stages would pull every stage's generator into this library. The
// writers are never called by the judge (it only reads committed cases).
namespace ladder {
nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  require(in.good(), "{}: cannot open file", path.string());
  return nlohmann::json::parse(in);
}
void write_json(const std::filesystem::path& path, const nlohmann::json&) {
  throw Error("lab_oracle: write_json(" + path.string() + ") is not available in the judge's library");
}
nlohmann::json case_manifest(const std::string& stage, const std::vector<std::string>&, uint64_t, const nlohmann::json&,
                             const nlohmann::json&, const nlohmann::json&) {
  throw Error("lab_oracle: case_manifest(" + stage + ") is not available in the judge's library");
}
// ref/src/case_folder.cpp's digest writer, which the golden writers call last: a writer, so likewise.
void seal_case(const std::filesystem::path& dir) {
  throw Error("lab_oracle: seal_case(" + dir.string() + ") is not available in the judge's library");
}
}  // namespace ladder

namespace lab_oracle {
namespace {

template <class T>
void rows(const std::string& rung, const T* x, T* y, int64_t r, int64_t c) {
  namespace sm = ladder::softmax;
  if (rung == "naive") return sm::naive_rows<T>(x, y, r, c);
  if (rung == "safe") return sm::safe_rows<T>(x, y, r, c);
  if (rung == "online") return sm::online_rows<T>(x, y, r, c);
  throw ladder::Error("lab_oracle: softmax rung = '" + rung + "' is not one of naive, safe, online");
}

template <class T>
Plain<T> plain(const ladder::Array<T>& a) {
  return {a.shape, a.data};
}

template <class T>
MlaOut<T> out(const ladder::mla::Output<T>& o) {
  return {o.u, plain(o.scores), plain(o.attn), plain(o.lse)};
}

}  // namespace

void softmax_rows(const std::string& rung, const float* x, float* y, int64_t r, int64_t c) { rows(rung, x, y, r, c); }
void softmax_rows(const std::string& rung, const double* x, double* y, int64_t r, int64_t c) { rows(rung, x, y, r, c); }

MlaOut<float> mla_cd_baseline(const std::string& model_dir, const std::string& case_dir) {
  namespace mla = ladder::mla;
  const mla::Weights<float> W = mla::load_model(model_dir);
  const mla::Inputs in = mla::load_inputs(case_dir);
  return out(mla::run(mla::reference_rung<float>(mla::Variant::CD), W, in.cache, in.step));
}

MlaPair mla_random_case(const std::vector<int64_t>& cfg, uint64_t weight_seed, const std::vector<int64_t>& seqlens,
                        uint64_t input_seed, bool shuffled, int64_t spare_blocks, bool prefill) {
  namespace mla = ladder::mla;
  if (cfg.size() != 7) throw ladder::Error("lab_oracle: cfg needs 7 dimensions, got " + std::to_string(cfg.size()));
  mla::Config c;
  c.hidden = cfg[0], c.n_heads = cfg[1], c.q_lora_rank = cfg[2], c.kv_lora_rank = cfg[3], c.qk_nope = cfg[4],
  c.qk_rope = cfg[5], c.v_head = cfg[6];
  const mla::Weights<float> W = mla::random_weights(c, weight_seed);
  const mla::Inputs in = mla::make_inputs(W, mla::InputSpec{seqlens, input_seed, shuffled, spare_blocks, prefill});
  return {out(mla::run(mla::reference_rung<float>(mla::Variant::CD), W, in.cache, in.step)),
          out(mla::golden_oracle(W, in))};
}

Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> moe_dense_loop_f32(
    const std::string& case_dir, const std::vector<int64_t>& topk_idx, const std::vector<double>& topk_weight,
    const std::vector<int64_t>& kept) {
  namespace moe = ladder::moe;
  const moe::GoldenCase c = moe::load_case(case_dir);
  const moe::Weights<float> w = c.weights.cast<float>();
  const ladder::Mat<float> x = c.x.cast<float>();
  const int64_t T = x.rows(), k = w.cfg.top_k;
  moe::Routing<float> r{ladder::Array<int64_t>({T, k}), ladder::Array<float>({T, k})};
  r.topk_idx.data = topk_idx;
  r.topk_weight.data.assign(topk_weight.begin(), topk_weight.end());
  return moe::dense_loop(w, x, r, kept.empty() ? nullptr : &kept);
}

}  // namespace lab_oracle
