// cuda/src/03-mla/mla_flash.cu -- stage 03 CUDA rung flash_mla: the fused split-KV decode kernel and the
// combine kernel (the algorithm of ladder/03-mla/flash.hpp).
//
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM   (+ flash_mla)       <== this file (flash_mla)
//
// flash_split: a block of 256 threads per (head group of G = kFlashHeads = 32 heads, split s, sequence
// b); grid (ceil(H / 32), splits, B), the head groups of one (s, b) next to each other in launch order,
// so the blocks that read the same pages tend to run at the same time (their second reads can hit L2).
// The split's tokens (a whole number of 64-row pages, never past L_b) are taken one page at a time: a
// tile is T = 64 rows of one page, found through the block table, n = min(64, L_b - j) rows of it used.
// Every row loaded serves the group's 32 heads -- the 2 G FLOPs per cached element that make MLA
// compute-bound on a GPU once the heads share the rows (FlashMLA keeps 64 heads per block). At
// DeepSeek-V2 shapes (H = 128) that is H / G = 4 passes over the cache per step; the previous schedule
// (4 heads per block) made 32. Per tile:
//   1. S [32, 64] = Q_g tile^T as a register-tiled product: D (576) in chunks of KT = kFlashK = 32 dims
//      through shared memory, Ks [32 dims][64 + 4] (the tile, k-major) and Qs [32 dims][32 + 4] (q of
//      the group: 73.7 KB per tile at V2, so it is streamed as well, from L2), two buffers, and a chunk
//      costs one barrier. The copy is staged through registers: chunk c + 1's global loads are issued
//      before chunk c's products and stored to the other buffer after them, so their latency (L2 or
//      DRAM) hides behind the products -- a load followed at once by its shared-memory store stalls
//      the warp for the whole latency (that schedule made the full step 1.31x slower on an H200,
//      bench/gpu/h200-2026-11-27.md). Thread tid owns
//      a 4 x 4 sub-tile (heads 4 sr.., tokens 4 sc..) over half of each chunk's dims (threads 0-127
//      dims 0-15, 128-255 dims 16-31): per dim two 128-bit loads for 16 FMAs;    barrier per chunk
//   2. the halves' partial sums side by side, S0 and P [64 tokens][32 + 4]; V chunk 0 copied;  barrier
//   3. online softmax, 8 lanes per head (tokens sp + 8 i), reduced by 8-lane shuffles; the 8 lanes keep
//      the head's m and l in registers: m' = max(m, max_t S), P = e^{S - m'} (0 for t >= n),
//      l = l e^{m - m'} + sum P, alpha = e^{m - m'} to shared memory;              barrier
//   4. o = alpha o + P V, V = the first kv_lora dims of the same rows (K = V), read from global memory a
//      second time (L1/L2: the block read these rows in step 1), kFlashVTokens = 8 rows per chunk, two
//      buffers, staged through registers like the score chunks. o [32, 512] lives in registers: thread
//      tid owns heads 8 tr.. (tr = lane / 8) and columns 4 tc.. and 256 + 4 tc.. (tc = 8 warp +
//      lane % 8), 8 x 8 = 64 accumulators; per token four 128-bit loads (P of its 8 heads, its 2
//      column quads) for 64 FMAs;                                                   barrier per chunk
// A full tile is 28 barriers at V2 (18 + 1 + 1 + 8) and 4.46 MFLOP (32 x 64 x (576 + 512) x 2).
// Then o_s = o / l and lse_s = m + log l. A split that starts past L_b leaves before any barrier.
// flash_combine: a block per (b, h) merges the splits: lse = log sum_s e^{lse_s},
// o^lat = sum_s e^{lse_s - lse} o_s.
//
// Shared memory per block (flash_split_smem_bytes(kv_lora)): one region the phases take in turn,
// max(2 x 32 x (68 + 36) = 6,656 floats of score chunks, 2 x 8 x ldv V chunks, 8 ldv + 64 x 36 for V
// chunk 0 beside S0), ldv = kv_lora rounded up to 4; then P [64][36], alpha and l [32]. At V2
// (kv_lora = 512): 8,192 + 2,304 + 64 floats = 42,240 bytes, under the 48 KiB a launch gets without an
// opt-in, and independent of D (the score step streams it). Registers: __launch_bounds__(256, 2)
// holds ptxas to 128 per thread, so 2 blocks (16 warps) fit an SM's 64 K registers; the staged copies
// (12 floats per score chunk, 16 per V chunk, beside o's 64) cost 36-40 bytes of spills (sm_90 / sm_80;
// none without them), measured and kept: the 1.31x above includes them. Also prefetching the next
// tile's chunk 0 during the last V chunk spilled 144 bytes and was not kept. ncu on an H200: 62 % of
// issue slots busy, the FMA pipe 40 %, occupancy 25 % (limited by registers). The 2 blocks' shared
// memory, 2 x (42,240 + 1 KiB reserved), is 86 KB of an H100's 228 KiB. Every 64 FMAs of o take 4
// warp-wide 128-bit loads and every 16 of S take 2: with one wavefront each (below), shared memory is
// busy 25 % and 50 % of the FMA pipe's time.
// Banks (CUDA C Programming Guide, shared-memory banks: word a is in bank a mod 32; a warp access is
// one wavefront when no bank holds two different words; tests/03-mla/test_mla_cuda.cpp computes each):
//   step 1 reads: a warp holds 4 sr x 8 sc: q words kk 36 + 4 sr .. + 3 (16 consecutive words, each
//     broadcast to 8 lanes) and tile words kk 68 + 4 sc .. + 3 (32 consecutive words): one each;
//   step 1 copies: lane l of a warp stores dim lk = l % 8 (+ 8 w) of row lr = l / 8 (+ const), word
//     lk 68 + lr = 4 lk + lr (mod 32): 32 banks (without the 4 floats of padding, stride 64 = 0 mod 32
//     put a row's 8 dims in one bank: 8-way); Qs likewise with 36 = 4 (mod 32). Global side: 8 lanes
//     read 32 contiguous bytes (one sector) of a row;
//   step 2 stores: 16 per thread per tile, 4-way (words (4 sc + t) 36 + 4 sr + i) -- against 2 x 16 x 18
//     loads per thread in step 1, left as is;
//   step 3: lane (sg, sp) reads word (sp + 8 i) 36 + sg = 4 sp + sg (mod 32): 32 banks;
//   step 4: P words t 36 + 8 tr .. + 3 for 4 tr (banks 8 tr ..), V words t ldv + 4 tc .. + 3 for 8
//     consecutive tc (32 consecutive words): one wavefront each; the V copy stores consecutive words.
#include <math.h>

#include "ladder/cuda/03-mla/mla_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::mla {
namespace {

constexpr int G = kFlashHeads, T = kFlashTileTokens, KT = kFlashK, TV = kFlashVTokens, NT = kFlashThreads;
constexpr int LQ = kFlashQStride, LK = kFlashKStride, kPage = 64, kHalfR = kFlashMaxR / 2;
static_assert(T == kPage, "flash_split: a tile is one page of the block table");

struct alignas(16) F4 {  // four consecutive floats of shared memory, one 128-bit load (ld.shared.v4)
  float x, y, z, w;
};
__device__ __forceinline__ F4 ld4(const float* p) { return *reinterpret_cast<const F4*>(p); }

// Score chunk d0 of the tile, in two halves so that the global loads of chunk c + 1 are in flight
// while chunk c is multiplied (registers, not shared memory, hold them meanwhile):
// fetch_score_chunk reads Ks[kk][t] = tile row t, dim d0 + kk (0 for t >= n or past D) and
// Qs[kk][g] = q of head h0 + g, dim d0 + kk (0 for g >= gh) into registers, store_score_chunk writes
// them to buf. Thread tid copies dim kk = lk of rows lr + 8 l (8 lanes read 32 contiguous bytes of a
// row): krow, qrow point at row lr, dim lk; kn = n - lr and qn = gh - lr rows are valid from there.
struct ScoreChunk {
  float k[T / 8], q[G / 8];
};
__device__ __forceinline__ void fetch_score_chunk(ScoreChunk& r, const float* krow, const float* qrow, int D, int d0,
                                                  int kn, int qn, int lk) {
  const bool dim = d0 + lk < D;
  for (int l = 0; l < T / 8; ++l) r.k[l] = dim && 8 * l < kn ? krow[8 * l * D + d0] : 0.0f;
  for (int l = 0; l < G / 8; ++l) r.q[l] = dim && 8 * l < qn ? qrow[8 * l * D + d0] : 0.0f;
}
__device__ __forceinline__ void store_score_chunk(float* buf, const ScoreChunk& r, int lk, int lr) {
  float* Ks = buf + lk * LK + lr;
  float* Qs = buf + KT * LK + lk * LQ + lr;
  for (int l = 0; l < T / 8; ++l) Ks[8 * l] = r.k[l];
  for (int l = 0; l < G / 8; ++l) Qs[8 * l] = r.q[l];
}

// V chunk c of the tile, likewise in two halves: rows c TV + tt < n, columns r < ldv (0 past R) into
// buf [TV][ldv]; thread tid holds columns tid and tid + NT of each row (ldv <= 2 NT).
static_assert(kFlashMaxR <= 2 * NT, "a V row is at most two columns per thread");
struct VChunk {
  float v[TV][2];
};
__device__ __forceinline__ void fetch_v_chunk(VChunk& r, const float* page, int D, int R, int c, int n) {
  const int rows = n - c * TV < TV ? n - c * TV : TV, col = threadIdx.x;
  for (int tt = 0; tt < TV; ++tt) {
    const float* row = page + (c * TV + tt) * D;
    r.v[tt][0] = tt < rows && col < R ? row[col] : 0.0f;
    r.v[tt][1] = tt < rows && col + NT < R ? row[col + NT] : 0.0f;
  }
}
__device__ __forceinline__ void store_v_chunk(float* buf, const VChunk& r, int ldv, int c, int n) {
  const int rows = n - c * TV < TV ? n - c * TV : TV, col = threadIdx.x;
  for (int tt = 0; tt < rows; ++tt) {
    if (col < ldv) buf[tt * ldv + col] = r.v[tt][0];
    if (col + NT < ldv) buf[tt * ldv + col + NT] = r.v[tt][1];
  }
}

__global__ void __launch_bounds__(kFlashThreads, 2)
    flash_split(const float* Q, const float* blocks, const int32_t* block_table, int64_t max_blocks,
                const int64_t* seqlens, int64_t H, int R, int D, int ldv, int U,
                int64_t split_blocks, float scale, float* o_parts, float* lse_parts) {
  // ldv = flash_v_stride(R), U = flash_union_floats(R): from the host (plain C++ header functions).
  // D, R and offsets within a page (64 D) are 32-bit: the host checks 64 D < 2^31.
  SIMT_DYNAMIC_SHARED(float, smem);
  float* Ps = smem + U;         // [T][LQ]: half 1's partial scores, then P
  float* a_s = Ps + T * LQ;     // [G] this tile's rescale e^{m - m'}
  float* l_s = a_s + G;         // [G] the final denominators
  float* S0 = smem + TV * ldv;  // [T][LQ]: half 0's partial scores, in V chunk 1's place
  const int64_t h0 = (int64_t)blockIdx.x * G, s = blockIdx.y, b = blockIdx.z, B = gridDim.z;
  const int64_t L = seqlens[b], j0 = s * split_blocks * kPage;
  if (j0 >= L) return;  // sequence b has fewer splits: the whole block leaves before any barrier
  const int64_t j1 = L < j0 + split_blocks * kPage ? L : j0 + split_blocks * kPage;
  const int gh = (int)(H - h0 < G ? H - h0 : G);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  // scores: heads 4 sr.., tokens 4 sc.., dims [16 half, 16 half + 16) of every chunk
  const int half = warp / 4, sr = lane / 8 + 4 * (warp % 2), sc = lane % 8 + 8 * (warp / 2 % 2);
  // chunk copies: dim lk of rows lr + 8 l
  const int lk = (tid & 7) + 8 * ((tid >> 5) & 3), lr = ((tid >> 3) & 3) + 4 * (tid >> 7);
  // o: heads 8 tr.., columns 4 tc.. and 256 + 4 tc..
  const int tr = lane / 8, tc = warp * 8 + lane % 8;
  const bool o_rows = tr * 8 < gh, quad0 = 4 * tc < R, quad1 = kHalfR + 4 * tc < R;
  // softmax: head sg = tid / 8, tokens sp + 8 i; the 8 lanes of a head keep its m and l in registers
  const int sg = tid / 8, sp = tid % 8;
  float m = -INFINITY, l = 0.0f;
  const float* qrow = Q + (b * H + h0 + lr) * D + lk;
  float o[8][8];
  for (int i = 0; i < 8; ++i)
    for (int c = 0; c < 8; ++c) o[i][c] = 0.0f;
  const int nc = (int)((D + KT - 1) / KT);

  for (int64_t j = j0; j < j1; j += T) {
    const int n = (int)(j1 - j < T ? j1 - j : T);
    const float* page = blocks + (int64_t)block_table[b * max_blocks + j / kPage] * kPage * D;
    const float* krow = page + lr * D + lk;
    // 1. S = Q_g tile^T, D in chunks of KT through two shared buffers
    float acc[4][4];
    for (int i = 0; i < 4; ++i)
      for (int c = 0; c < 4; ++c) acc[i][c] = 0.0f;
    ScoreChunk next;
    fetch_score_chunk(next, krow, qrow, D, 0, n - lr, gh - lr, lk);
    store_score_chunk(smem, next, lk, lr);
    __syncthreads();  // chunk 0 is complete before anyone multiplies it
    for (int c = 0; c < nc; ++c) {
      float* buf = smem + (c & 1) * KT * (LK + LQ);
      if (c + 1 < nc)  // chunk c + 1's loads in flight during chunk c's products
        fetch_score_chunk(next, krow, qrow, D, (c + 1) * KT, n - lr, gh - lr, lk);
      if (4 * sr < gh && 4 * sc < n) {
        const float* qs = buf + KT * LK + (KT / 2) * half * LQ + 4 * sr;  // dims [16 half, 16 half + 16)
        const float* ks = buf + (KT / 2) * half * LK + 4 * sc;
        for (int kk = 0; kk < KT / 2; ++kk) {
          const F4 a = ld4(qs + kk * LQ), k = ld4(ks + kk * LK);
          const float av[4] = {a.x, a.y, a.z, a.w}, kv[4] = {k.x, k.y, k.z, k.w};
          for (int i = 0; i < 4; ++i)
            for (int t = 0; t < 4; ++t) acc[i][t] += av[i] * kv[t];
        }
      }
      if (c + 1 < nc)  // into the other buffer, last read in chunk c - 1, before the barrier that ended it
        store_score_chunk(smem + ((c + 1) & 1) * KT * (LK + LQ), next, lk, lr);
      __syncthreads();  // chunk c + 1 is written, and chunk c read by all before chunk c + 2 overwrites it
    }
    // 2. the two k halves' partial sums side by side; V chunk 0 loads meanwhile
    {
      float* part = half ? Ps : S0;
      for (int i = 0; i < 4; ++i)
        for (int t = 0; t < 4; ++t) part[(4 * sc + t) * LQ + 4 * sr + i] = acc[i][t];
    }
    VChunk vnext;
    fetch_v_chunk(vnext, page, D, R, 0, n);
    store_v_chunk(smem, vnext, ldv, 0, n);
    __syncthreads();  // both halves are written (and V chunk 0) before the softmax adds them
    // 3. online softmax, 8 lanes per head: m' = max(m, max_t S), P = e^{S - m'}, l = l e^{m - m'} + sum P
    {
      float sv[T / 8], mx = -INFINITY;
      for (int i = 0; i < T / 8; ++i) {
        const int t = sp + 8 * i;
        sv[i] = t < n ? scale * (S0[t * LQ + sg] + Ps[t * LQ + sg]) : -INFINITY;
        mx = fmaxf(mx, sv[i]);
      }
      for (int off = 4; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float m_new = fmaxf(m, mx);  // finite: n >= 1 and every score is finite
      float sum = 0.0f;
      for (int i = 0; i < T / 8; ++i) {
        const float p = expf(sv[i] - m_new);  // 0 for t >= n
        Ps[(sp + 8 * i) * LQ + sg] = p;
        sum += p;
      }
      for (int off = 4; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      const float alpha = expf(m - m_new);  // 0 on the first tile (m = -inf)
      l = l * alpha + sum;
      m = m_new;
      if (sp == 0) a_s[sg] = alpha;
    }
    __syncthreads();  // P and alpha are written before o is rescaled and updated
    // 4. o = alpha o + P V, V = the first R dims of the tile's rows, TV rows per chunk, two buffers
    if (o_rows)
      for (int i = 0; i < 8; ++i) {
        const float alpha = a_s[8 * tr + i];
        for (int c = 0; c < 8; ++c) o[i][c] *= alpha;
      }
    const int nv = (n + TV - 1) / TV;
    for (int c = 0; c < nv; ++c) {
      if (c + 1 < nv) fetch_v_chunk(vnext, page, D, R, c + 1, n);  // in flight during chunk c's products
      const float* V = smem + (c & 1) * TV * ldv;
      const int rows = n - c * TV < TV ? n - c * TV : TV;
      if (o_rows && quad0)
        for (int t = 0; t < rows; ++t) {
          const float* p = Ps + (c * TV + t) * LQ + 8 * tr;
          const F4 p0 = ld4(p), p1 = ld4(p + 4), v = ld4(V + t * ldv + 4 * tc);
          const float pv[8] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w}, vv[4] = {v.x, v.y, v.z, v.w};
          for (int i = 0; i < 8; ++i)
            for (int cc = 0; cc < 4; ++cc) o[i][cc] += pv[i] * vv[cc];
          if (quad1) {
            const F4 w = ld4(V + t * ldv + kHalfR + 4 * tc);
            const float wv[4] = {w.x, w.y, w.z, w.w};
            for (int i = 0; i < 8; ++i)
              for (int cc = 0; cc < 4; ++cc) o[i][4 + cc] += pv[i] * wv[cc];
          }
        }
      if (c + 1 < nv)  // chunk 1's buffer held S0, read before the softmax barrier; later ones, chunk c - 1
        store_v_chunk(smem + ((c + 1) & 1) * TV * ldv, vnext, ldv, c + 1, n);
      __syncthreads();  // chunk c + 1 is written, and chunk c and P read by all before they are overwritten
    }
  }
  if (sp == 0) {
    l_s[sg] = l;
    if (sg < gh) lse_parts[(s * B + b) * H + h0 + sg] = m + logf(l);
  }
  __syncthreads();  // every l is in l_s before o_s = o / l
  if (o_rows)
    for (int i = 0; i < 8 && 8 * tr + i < gh; ++i) {
      const float lg = l_s[8 * tr + i];
      float* out = o_parts + ((s * B + b) * H + h0 + 8 * tr + i) * R;
      for (int c = 0; c < 4; ++c) {
        const int64_t r0 = 4 * tc + c, r1 = kHalfR + 4 * tc + c;
        if (r0 < R) out[r0] = o[i][c] / lg;
        if (r1 < R) out[r1] = o[i][4 + c] / lg;
      }
    }
}

// A block per (b, h): the splits of sequence b merged by log-sum-exp.
__global__ void flash_combine(const float* o_parts, const float* lse_parts, const int64_t* seqlens, int64_t H,
                              int64_t R, int64_t split_blocks, float* o_lat, float* lse) {
  const int64_t b = blockIdx.x, h = blockIdx.y, B = gridDim.x;
  const int64_t pages = (seqlens[b] + kPage - 1) / kPage, splits = (pages + split_blocks - 1) / split_blocks;
  float mx = -INFINITY;
  for (int64_t s = 0; s < splits; ++s) mx = fmaxf(mx, lse_parts[(s * B + b) * H + h]);
  float sum = 0.0f;
  for (int64_t s = 0; s < splits; ++s) sum += expf(lse_parts[(s * B + b) * H + h] - mx);
  const float total = mx + logf(sum);
  for (int64_t r = threadIdx.x; r < R; r += blockDim.x) {
    float acc = 0.0f;
    for (int64_t s = 0; s < splits; ++s)
      acc += expf(lse_parts[(s * B + b) * H + h] - total) * o_parts[((s * B + b) * H + h) * R + r];
    o_lat[(b * H + h) * R + r] = acc;
  }
  if (threadIdx.x == 0) lse[b * H + h] = total;
}

}  // namespace

namespace detail {

void launch_flash_split(const float* Q, const float* blocks, const int32_t* block_table, int64_t max_blocks,
                        const int64_t* seqlens, int64_t B, int64_t H, int64_t R, int64_t D, int64_t split_blocks,
                        int64_t max_splits, float scale, float* o_parts, float* lse_parts) {
  const size_t smem = (size_t)flash_split_smem_bytes(R);
  // the head groups of one (split, sequence) are neighbours in launch order: they read the same pages
  const dim3 grid((unsigned)((H + G - 1) / G), (unsigned)max_splits, (unsigned)B);
  simt::launch(flash_split, grid, dim3(kFlashThreads), smem, Q, blocks, block_table, max_blocks, seqlens, H, (int)R,
               (int)D, (int)flash_v_stride(R), (int)flash_union_floats(R), split_blocks, scale, o_parts, lse_parts);
}

void launch_flash_combine(const float* o_parts, const float* lse_parts, const int64_t* seqlens, int64_t B,
                          int64_t H, int64_t R, int64_t split_blocks, float* o_lat, float* lse) {
  simt::launch(flash_combine, dim3((unsigned)B, (unsigned)H), dim3(128), 0, o_parts, lse_parts, seqlens, H, R,
               split_blocks, o_lat, lse);
}

}  // namespace detail
}  // namespace ladder::cuda::mla
