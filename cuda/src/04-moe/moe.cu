// cuda/src/04-moe/moe.cu -- stage 04 CUDA kernels: gate, permutation, gather, SwiGLU, combine.
//
//   01 softmax     naive -> safe -> online
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM
//   04 moe         gate -> sort -> ragged dot -> unsort + combine          <== this file (+ moe_gemm.cu)
//   05 eplb        balanced packing -> replicate -> hierarchical | global
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// The same algorithm as ladder/04-moe/{gate,dispatch,sorted}.hpp:
//   gate:      one 32-thread block per token; threads compute the E logits (each a dot product in
//              d order, as gate_logits does) and scores into shared memory; after the barrier thread 0
//              runs the selection (group scores, keep topk_group groups, top-k; strict > so the lower
//              id wins ties) exactly as the reference.
//   permute:   (1) block c counts its chunk of keys into a shared histogram with atomics (barrier:
//              zeroed before counting; barrier: complete before written out); (2) one block scans:
//              offsets[key][chunk] = start of key + counts of key in earlier chunks, group_sizes;
//              (3) block c loads its keys into shared memory (barrier) and thread i puts assignment
//              a at offsets[key][c] + (number of equal keys before it in the chunk): a stable scatter,
//              independent of thread order.
//   combine:   block per token, threads over D, the k rows gathered back through `inverse` in j order.
// The checked host API and the pipeline are in moe_host.cpp (fmt lives there, not here).
#include "ladder/cuda/04-moe/moe_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::moe {
namespace {

__global__ void gate_kernel(GateParams p, const float* x, const float* W_gate, const float* bias, int64_t* topk_idx,
                            float* topk_weight) {
  SIMT_DYNAMIC_SHARED(float, smem);
  float* s = smem;                    // [E] unbiased scores
  float* sel = smem + p.n_experts;    // [E] selection scores
  float* gscore = sel + p.n_experts;  // [n_group]
  const int64_t t = blockIdx.x, E = p.n_experts;
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
    float l = 0;
    for (int64_t d = 0; d < p.hidden; ++d) l += x[t * p.hidden + d] * W_gate[e * p.hidden + d];
    if (p.v3) {
      s[e] = 1.0f / (1.0f + expf(-l));
      sel[e] = s[e] + bias[e];
    } else {
      s[e] = l;  // logits; softmax below
    }
  }
  __syncthreads();  // every score is in shared memory before thread 0 selects
  if (threadIdx.x != 0) return;
  if (!p.v3) {
    float m = -INFINITY, den = 0;
    for (int64_t e = 0; e < E; ++e) m = fmaxf(m, s[e]);
    for (int64_t e = 0; e < E; ++e) den += (s[e] = expf(s[e] - m));
    for (int64_t e = 0; e < E; ++e) sel[e] = (s[e] /= den);
  }
  const int64_t per = E / p.n_group;
  for (int64_t g = 0; g < p.n_group; ++g) {
    float best = -INFINITY, second = -INFINITY;
    for (int64_t e = g * per; e < (g + 1) * per; ++e) {
      const float v = sel[e];
      if (v > best) second = best, best = v;
      else if (v > second) second = v;
    }
    gscore[g] = p.v3 ? (per >= 2 ? best + second : best) : best;
  }
  for (int64_t kept = 0; kept < p.topk_group; ++kept) {  // mark kept groups by +inf after taking them
    int64_t arg = -1;
    for (int64_t g = 0; g < p.n_group; ++g)
      if (gscore[g] != INFINITY && gscore[g] != -INFINITY && (arg < 0 || gscore[g] > gscore[arg])) arg = g;
    gscore[arg] = INFINITY;
  }
  float sum = 0;
  for (int64_t j = 0; j < p.top_k; ++j) {
    int64_t arg = -1;
    for (int64_t e = 0; e < E; ++e)
      if (gscore[e / per] == INFINITY && sel[e] != -INFINITY && (arg < 0 || sel[e] > sel[arg])) arg = e;
    topk_idx[t * p.top_k + j] = arg;
    topk_weight[t * p.top_k + j] = s[arg];
    sum += s[arg];
    sel[arg] = -INFINITY;  // taken
  }
  for (int64_t j = 0; j < p.top_k; ++j) {
    float& w = topk_weight[t * p.top_k + j];
    w = (p.v3 ? w / sum : w) * p.route_scale;
  }
}

__global__ void histogram_kernel(const int64_t* keys, int64_t n, int64_t G, int64_t* chunk_counts) {
  SIMT_DYNAMIC_SHARED(int, hist);
  for (int64_t g = threadIdx.x; g <= G; g += blockDim.x) hist[g] = 0;
  __syncthreads();  // zeroed before any thread counts
  const int64_t a = blockIdx.x * (int64_t)kSortChunk + threadIdx.x;
  if (threadIdx.x < kSortChunk && a < n) atomicAdd(&hist[keys[a]], 1);
  __syncthreads();  // complete before it is written out
  for (int64_t g = threadIdx.x; g <= G; g += blockDim.x) chunk_counts[blockIdx.x * (G + 1) + g] = hist[g];
}

__global__ void scan_kernel(const int64_t* chunk_counts, int64_t chunks, int64_t G, int64_t* offsets,
                            int64_t* group_sizes) {
  SIMT_DYNAMIC_SHARED(int64_t, total);  // [G + 1] per-key totals, then their exclusive scan
  for (int64_t g = threadIdx.x; g <= G; g += blockDim.x) {
    int64_t s = 0;
    for (int64_t c = 0; c < chunks; ++c) s += chunk_counts[c * (G + 1) + g];
    total[g] = s;
    if (g < G) group_sizes[g] = s;
  }
  __syncthreads();  // every total before the scan
  if (threadIdx.x == 0) {
    int64_t run = 0;
    for (int64_t g = 0; g <= G; ++g) {
      const int64_t v = total[g];
      total[g] = run;
      run += v;
    }
  }
  __syncthreads();  // the scan before it is read
  for (int64_t g = threadIdx.x; g <= G; g += blockDim.x) {
    int64_t run = total[g];
    for (int64_t c = 0; c < chunks; ++c) {
      offsets[g * chunks + c] = run;
      run += chunk_counts[c * (G + 1) + g];
    }
  }
}

__global__ void scatter_kernel(const int64_t* keys, int64_t n, int64_t chunks, const int64_t* offsets,
                               int64_t* sort_idx, int64_t* inverse) {
  __shared__ int64_t k[kSortChunk];
  const int64_t base = blockIdx.x * (int64_t)kSortChunk, i = threadIdx.x, a = base + i;
  if (i < kSortChunk) k[i] = a < n ? keys[a] : -1;
  __syncthreads();  // the chunk's keys are in shared memory before ranks are counted
  if (i >= kSortChunk || a >= n) return;
  int64_t rank = 0;
  for (int64_t j = 0; j < i; ++j) rank += k[j] == k[i];
  const int64_t pos = offsets[k[i] * chunks + blockIdx.x] + rank;
  sort_idx[pos] = a;
  inverse[a] = pos;
}

__global__ void gather_kernel(const float* x, int64_t D, const int64_t* sort_idx, int64_t k, int64_t n, float* xs) {
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x)
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) xs[i * D + d] = x[(sort_idx[i] / k) * D + d];
}

__global__ void swiglu_kernel(float* h1, const float* h3, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float v = h1[i];
    h1[i] = v / (1.0f + expf(-v)) * h3[i];
  }
}

__global__ void combine_kernel(const float* o, const int64_t* inverse, const float* topk_weight, int64_t k, int64_t D,
                               float* y, bool accumulate) {
  const int64_t t = blockIdx.x;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0;
    for (int64_t j = 0; j < k; ++j) acc += topk_weight[t * k + j] * o[inverse[t * k + j] * D + d];
    y[t * D + d] = accumulate ? y[t * D + d] + acc : acc;
  }
}

unsigned grid_for(int64_t n, int64_t per_block) {
  const int64_t b = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 4096 ? 4096 : b));
}

}  // namespace

namespace detail {

void launch_gate(const GateParams& p, const float* x, const float* W_gate, const float* bias, int64_t* topk_idx,
                 float* topk_weight) {
  if (p.tokens == 0) return;
  simt::launch(gate_kernel, dim3(static_cast<unsigned>(p.tokens)), dim3(kGateThreads),
               static_cast<size_t>(2 * p.n_experts + p.n_group) * sizeof(float), p, x, W_gate, bias, topk_idx,
               topk_weight);
}

void launch_permute(const int64_t* keys, int64_t n, int64_t G, int64_t* chunk_counts, int64_t* offsets,
                    int64_t* group_sizes, int64_t* sort_idx, int64_t* inverse) {
  const int64_t chunks = n == 0 ? 1 : (n + kSortChunk - 1) / kSortChunk;
  simt::launch(histogram_kernel, dim3(static_cast<unsigned>(chunks)), dim3(kSortChunk),
               static_cast<size_t>(G + 1) * sizeof(int), keys, n, G, chunk_counts);
  simt::launch(scan_kernel, dim3(1), dim3(kThreads), static_cast<size_t>(G + 1) * sizeof(int64_t), chunk_counts,
               chunks, G, offsets, group_sizes);
  if (n > 0)
    simt::launch(scatter_kernel, dim3(static_cast<unsigned>(chunks)), dim3(kSortChunk), 0, keys, n, chunks, offsets,
                 sort_idx, inverse);
}

void launch_gather(const float* x, int64_t D, const int64_t* sort_idx, int64_t k, int64_t n, float* xs) {
  if (n > 0) simt::launch(gather_kernel, dim3(grid_for(n, 1)), dim3(128), 0, x, D, sort_idx, k, n, xs);
}

void launch_swiglu(float* h1, const float* h3, int64_t n) {
  if (n > 0) simt::launch(swiglu_kernel, dim3(grid_for(n, kThreads)), dim3(kThreads), 0, h1, h3, n);
}

void launch_combine(const float* o, const int64_t* inverse, const float* topk_weight, int64_t T, int64_t k, int64_t D,
                    float* y, bool accumulate) {
  if (T > 0)
    simt::launch(combine_kernel, dim3(static_cast<unsigned>(T)), dim3(128), 0, o, inverse, topk_weight, k, D, y,
                 accumulate);
}

}  // namespace detail
}  // namespace ladder::cuda::moe
