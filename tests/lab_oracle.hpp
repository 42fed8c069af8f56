// tests/lab_oracle.hpp -- the judge's side of the tests: the baselines of the tolerance rule and the
// in-process fp64 oracles, compiled from the REFERENCE sources even in a lab build.
//
// In a course lab (scripts/lab, cmake -DLADDER_LAB=<starter>) the student's copies of some reference
// headers are found first, so everything compiled through ladder_ref runs the student's code. The
// functions declared here are compiled by tests/lab_oracle.cmake from ref/include alone (never the
// starter folder) with the identifier `ladder` renamed to `ladder_oracle` (-Dladder=ladder_oracle):
// the reference's inline functions and templates then live in another namespace, so they cannot be
// merged at link time with the student's same-named ones (an ODR clash would silently pick either).
// The interface uses only std and Eigen types, which are the same on both sides.
// In the normal build the same library is the reference too, so the tests behave identically.
#pragma once
#include "ladder/core/eigen.hpp"
#include <cstdint>
#include <string>
#include <vector>

namespace lab_oracle {

template <class T>
struct Plain {  // an Array's shape and row-major data
  std::vector<int64_t> shape;
  std::vector<T> data;
};

// Stage 01: the reference rows functions ("naive" | "safe" | "online") at float and double.
void softmax_rows(const std::string& rung, const float* x, float* y, int64_t rows, int64_t cols);
void softmax_rows(const std::string& rung, const double* x, double* y, int64_t rows, int64_t cols);

// Stage 03: the reference CD rung's outputs (u [B, hidden], scores, attn [B, H, Lmax]).
template <class T>
struct MlaOut {
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> u;
  Plain<T> scores, attn, lse;
};
// CD at float32 (the baseline) on a committed case: model from model_dir, inputs from case_dir.
MlaOut<float> mla_cd_baseline(const std::string& model_dir, const std::string& case_dir);
// CD at float32 (baseline) and at float64 (oracle) on random_weights(cfg, weight_seed) and
// make_inputs(W, {seqlens, input_seed, shuffled, spare_blocks, prefill}); cfg as {hidden, n_heads,
// q_lora, kv_lora, qk_nope, qk_rope, v_head}.
struct MlaPair {
  MlaOut<float> baseline;
  MlaOut<double> oracle;
};
MlaPair mla_random_case(const std::vector<int64_t>& cfg, uint64_t weight_seed, const std::vector<int64_t>& seqlens,
                        uint64_t input_seed, bool shuffled, int64_t spare_blocks, bool prefill);

// Stage 04: the reference dense_loop<float> (the tolerance baseline of the layer output) on the
// committed case in case_dir (its model and x), with the routing given as topk_idx / topk_weight
// [T * k] and, for a dropping case, the kept mask [T * k] (empty: every assignment).
Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> moe_dense_loop_f32(
    const std::string& case_dir, const std::vector<int64_t>& topk_idx, const std::vector<double>& topk_weight,
    const std::vector<int64_t>& kept);

}  // namespace lab_oracle
