// ladder/03-mla/cache.hpp -- stage 03: the KV cache layouts of the rungs, built from one paged cache.
//
// Every rung starts from the same input, the paged compressed cache a serving system keeps (FlashMLA's
// layout, deepseek-ai/FlashMLA): blocks [num_blocks, 64, kv_lora + rope] of rows [c^KV | k^R], a
// block table [B, max_blocks] (token j of sequence b is row j % 64 of block block_table[b, j / 64])
// and the cache length L_b of each sequence. A rung's prepare step (mla.hpp) builds the layout the
// notes' version of it reads, once per sequence state, outside the timed decode step:
//   CC, A_CC, A_CC_ME, AM: gather() -> the contiguous compressed cache [B, Lmax, kv_lora + rope];
//   CD:                    decompress(gather()) -> K [B, H, Lmax, nope + rope] (k^R replicated per
//                          head) and V [B, H, Lmax, v], the notes' "CacheDecompressed";
//   flash_mla:             reads the paged cache in place.
// Rows j >= L_b of the contiguous layouts are NaN, so a rung that reads one token too many returns
// NaN and fails the comparison (the goldens fill unused rows of the paged blocks with NaN likewise).
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

#include "ladder/core/huge_pages.hpp"
#include "ladder/03-mla/gemm.hpp"
#include "ladder/03-mla/model.hpp"

namespace ladder::mla {

inline constexpr int64_t kBlockSize = 64;  // FlashMLA's page size (tokens per block)

template <class T>
struct PagedCache {
  int64_t block_size = kBlockSize;
  Array<T> blocks;               // [num_blocks, block_size, kv_dim]
  Array<int32_t> block_table;    // [B, max_blocks]; entries past a sequence's last block are unused (-1)
  std::vector<int64_t> seqlens;  // [B] cache length L_b >= 1 (the new token's own row included)

  int64_t batch() const { return static_cast<int64_t>(seqlens.size()); }
  int64_t kv_dim() const { return blocks.shape.size() == 3 ? blocks.shape[2] : 0; }
  int64_t max_len() const {
    int64_t m = 0;
    for (int64_t L : seqlens) m = std::max(m, L);
    return m;
  }
  // Row of token j of sequence b (no bounds check: check_paged validated the table up to L_b).
  const T* row(int64_t b, int64_t j) const {
    const int64_t blk = block_table.data[b * block_table.shape[1] + j / block_size];
    return blocks.data.data() + (blk * block_size + j % block_size) * kv_dim();
  }
};

inline int64_t blocks_for(int64_t L, int64_t block_size) { return (L + block_size - 1) / block_size; }

template <class T>
void check_paged(const PagedCache<T>& c, const Config& cfg, const char* who) {
  require(c.block_size >= 1, "mla {}: cache.block_size = {} violates block_size >= 1", who, c.block_size);
  require(c.blocks.shape.size() == 3 && c.blocks.shape[1] == c.block_size && c.blocks.shape[2] == cfg.kv_dim(),
          "mla {}: cache.blocks shape {} violates [num_blocks, block_size = {}, kv_lora + rope = {}]", who,
          shape_str(c.blocks.shape), c.block_size, cfg.kv_dim());
  require(c.batch() >= 1, "mla {}: cache.seqlens.size (batch B) = {} violates B >= 1", who, c.batch());
  require(c.block_table.shape.size() == 2 && c.block_table.shape[0] == c.batch(),
          "mla {}: cache.block_table shape {} violates [B = {}, max_blocks]", who, shape_str(c.block_table.shape),
          c.batch());
  const int64_t num_blocks = c.blocks.shape[0], max_blocks = c.block_table.shape[1];
  for (int64_t b = 0; b < c.batch(); ++b) {
    const int64_t L = c.seqlens[b];
    require(L >= 1, "mla {}: cache.seqlens[{}] = {} violates L >= 1 (a decode step attends its own token)", who, b,
            L);
    require(blocks_for(L, c.block_size) <= max_blocks,
            "mla {}: cache.seqlens[{}] = {} needs {} blocks, violates <= block_table.cols = {}", who, b, L,
            blocks_for(L, c.block_size), max_blocks);
    for (int64_t i = 0; i < blocks_for(L, c.block_size); ++i) {
      const int64_t blk = c.block_table.data[b * max_blocks + i];
      require(blk >= 0 && blk < num_blocks, "mla {}: cache.block_table[{}, {}] = {} violates 0 <= block < {}", who, b,
              i, blk, num_blocks);
    }
  }
}

// Builds a paged cache from each sequence's rows (rows[b] is [L_b, kv_dim]) and a block table; every
// row of `blocks` that no token owns is NaN. num_blocks = 0: just enough blocks.
template <class T>
PagedCache<T> make_paged(const std::vector<Mat<T>>& rows, Array<int32_t> block_table, int64_t num_blocks,
                         int64_t block_size = kBlockSize) {
  require(!rows.empty(), "mla make_paged: rows.size (batch B) = 0 violates B >= 1");
  PagedCache<T> c;
  c.block_size = block_size;
  const int64_t kv_dim = rows[0].cols();
  c.blocks = Array<T>({num_blocks, block_size, kv_dim}, std::numeric_limits<T>::quiet_NaN());
  c.block_table = std::move(block_table);
  for (const Mat<T>& r : rows) c.seqlens.push_back(r.rows());
  for (size_t b = 0; b < rows.size(); ++b) {
    require(rows[b].cols() == kv_dim, "mla make_paged: rows[{}].cols = {} violates == rows[0].cols = {}", b,
            rows[b].cols(), kv_dim);
    const int64_t max_blocks = c.block_table.shape[1];
    for (int64_t j = 0; j < rows[b].rows(); ++j) {
      require(j / block_size < max_blocks, "mla make_paged: sequence {} has {} rows, more than block_table holds", b,
              rows[b].rows());
      const int64_t blk = c.block_table.data[static_cast<int64_t>(b) * max_blocks + j / block_size];
      require(blk >= 0 && blk < num_blocks, "mla make_paged: block_table[{}, {}] = {} violates 0 <= block < {}", b,
              j / block_size, blk, num_blocks);
      std::copy(rows[b].row(j).data(), rows[b].row(j).data() + kv_dim,
                c.blocks.data.data() + (blk * block_size + j % block_size) * kv_dim);
    }
  }
  return c;
}

// The block table of sequences laid out one after another: sequence b owns blocks first_b, first_b + 1, ...
inline Array<int32_t> contiguous_block_table(const std::vector<int64_t>& seqlens, int64_t block_size = kBlockSize) {
  int64_t max_blocks = 1, next = 0;
  for (int64_t L : seqlens) max_blocks = std::max(max_blocks, blocks_for(L, block_size));
  Array<int32_t> t({static_cast<int64_t>(seqlens.size()), max_blocks}, -1);
  for (size_t b = 0; b < seqlens.size(); ++b)
    for (int64_t i = 0; i < blocks_for(seqlens[b], block_size); ++i)
      t.data[static_cast<int64_t>(b) * max_blocks + i] = static_cast<int32_t>(next++);
  return t;
}

// The contiguous compressed cache [B, Lmax, kv_dim] of the CC rungs; rows j >= L_b are NaN.
template <class T>
Array<T> gather(const PagedCache<T>& c) {
  const int64_t B = c.batch(), Lmax = c.max_len(), D = c.kv_dim();
  Array<T> kv({B, Lmax, D}, std::numeric_limits<T>::quiet_NaN());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < c.seqlens[b]; ++j) std::copy(c.row(b, j), c.row(b, j) + D, &kv.data[(b * Lmax + j) * D]);
  return kv;
}

// Decompression through kv_b (notes "CacheCompressed": kv = kv_b_proj(compressed_kv)), the CD layout:
//   K[b, h, j] = [W_UK(h) c_j | k^R_j]  (k^R replicated per head),  V[b, h, j] = W_UV(h) c_j,
// for j < L_b (rows past L_b are NaN). One GEMM per sequence: [L_b, kv_lora] x kv_b^T. CD's prepare
// runs it once; CC runs it inside every decode step.
template <class T>
void decompress(const Weights<T>& W, const Array<T>& kv, const std::vector<int64_t>& seqlens, Array<T>& K,
                Array<T>& V) {
  const Config& c = W.cfg;
  const int64_t B = kv.shape[0], Lmax = kv.shape[1], D = c.kv_dim(), H = c.n_heads, dk = c.q_head();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  // The decompressed cache is what CD streams every step (2.7 GB at L = 16384): huge pages (core/huge_pages.hpp).
  K.shape = {B, H, Lmax, dk};
  V.shape = {B, H, Lmax, c.v_head};
  assign_advised(K.data, static_cast<size_t>(numel(K.shape)), nan);
  assign_advised(V.data, static_cast<size_t>(numel(V.shape)), nan);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t L = seqlens[b];
    const ConstMatMap<T> rows(&kv.data[b * Lmax * D], L, D);
    Mat<T> kvb(L, H * c.kv_b_rows());  // [k^C_1 | v_1 | k^C_2 | v_2 | ...] per token
    gemm_nt<T>(rows.leftCols(c.kv_lora_rank), W.kv_b, kvb);
#pragma omp parallel for schedule(static) if (L * H > 4096)
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t j = 0; j < L; ++j) {
        T* k = &K.data[((b * H + h) * Lmax + j) * dk];
        const T* src = &kvb(j, h * c.kv_b_rows());
        std::copy(src, src + c.qk_nope, k);
        const T* k_pe = rows.row(j).data() + c.kv_lora_rank;
        std::copy(k_pe, k_pe + c.qk_rope, k + c.qk_nope);
        std::copy(src + c.qk_nope, src + c.kv_b_rows(), &V.data[((b * H + h) * Lmax + j) * c.v_head]);
      }
    }
  }
}

}  // namespace ladder::mla
