// ref/src/03-mla/golden.cpp -- stage 03 golden cases (data/golden/03-mla/<case>/); layout in ladder/03-mla/golden.hpp.
//
// Cache lengths 1, 63, 64, 65 (one page, one row short of it, exactly full, one row into a second
// page) and 1000 (16 pages, shuffled), and a batch of four sequences of different lengths with a
// shuffled block table and spare NaN pages (flash_mla's paged path; the other rungs gather it). The chunk
// cases: s_q = 2 and 4 query tokens per sequence (MTP's verify), and a ragged prefill chunk (prefixes 0, 64,
// 37; q_len 7, 1, 13).
#include "ladder/03-mla/golden.hpp"

#include "ladder/core/contract.hpp"
#include "ladder/core/golden.hpp"
#include "ladder/core/npy.hpp"
#include "ladder/03-mla/golden_cases.hpp"
#include "ladder/03-mla/mla.hpp"

namespace ladder::mla {
namespace fs = std::filesystem;
namespace {

const std::vector<std::pair<const char*, Mat<float> Weights<float>::*>> kMatrices = {
    {"W_DQ", &Weights<float>::W_DQ},   {"W_UQ", &Weights<float>::W_UQ}, {"W_QR", &Weights<float>::W_QR},
    {"W_DKV", &Weights<float>::W_DKV}, {"kv_b", &Weights<float>::kv_b}, {"W_O", &Weights<float>::W_O}};
const std::vector<std::pair<const char*, Vec<float> Weights<float>::*>> kGains = {
    {"q_norm", &Weights<float>::q_norm}, {"kv_norm", &Weights<float>::kv_norm}};

nlohmann::json config_json(const Config& c) {
  return {{"hidden", c.hidden},       {"n_heads", c.n_heads}, {"q_lora_rank", c.q_lora_rank},
          {"kv_lora_rank", c.kv_lora_rank}, {"qk_nope", c.qk_nope}, {"qk_rope", c.qk_rope},
          {"v_head", c.v_head},       {"rope_theta", c.rope_theta}, {"rms_eps", c.rms_eps},
          {"softmax_scale", c.scale()}};
}

Array<int64_t> int_array(const std::vector<int64_t>& v) {
  Array<int64_t> a({static_cast<int64_t>(v.size())});
  a.data = v;
  return a;
}

void write_model(const fs::path& dir) {
  const Weights<float> W = golden_model();
  nlohmann::json shapes, dtypes, files = nlohmann::json::array();
  for (const auto& [name, m] : kMatrices) {
    save_npy(dir / (std::string(name) + ".npy"), Array<float>::from(W.*m));
    shapes[name] = {(W.*m).rows(), (W.*m).cols()};
  }
  for (const auto& [name, g] : kGains) {
    Array<float> a({(W.*g).size()});
    std::copy((W.*g).data(), (W.*g).data() + (W.*g).size(), a.data.begin());
    save_npy(dir / (std::string(name) + ".npy"), a);
    shapes[name] = {(W.*g).size()};
  }
  for (const auto& [name, s] : shapes.items()) dtypes[name] = "<f4", files.push_back(name + ".npy");
  nlohmann::json j = case_manifest(kStage, {}, kModelSeed, shapes, dtypes, nullptr);
  j["case"] = kModelCase;
  j["description"] = "the weights every 03-mla case runs on: small_config(), N(0, 1/fan_in) entries, U(0.5, 1.5) gains";
  j["config"] = config_json(W.cfg);
  j["layout"] = "nn.Linear [out, in]; kv_b head h: rows h*(nope+v) .. +nope = W_UK, next v rows = W_UV (mla/model.hpp)";
  j["files"] = files;
  write_json(dir / "case.json", j);
  seal_case(dir);
}

// The chunk case `c` (golden.hpp): inputs from make_chunk_inputs, the expected outputs from the contract's oracle.
void write_chunk_case(const ChunkCase& c, const fs::path& dir, bool whole) {
  const Weights<float> W = golden_model();
  ChunkInputs ci = make_chunk_inputs(W, c.spec);
  const std::vector<int64_t> q_pos = chunk_positions(c.spec.prefix, c.spec.q_lens);
  for (size_t b = 0; b < c.spec.q_lens.size(); ++b) ci.cache.seqlens[b] = c.spec.prefix[b] + c.spec.q_lens[b];
  if (!c.prefill) write_chunk_rows(W, ci.cache, c.spec.q_lens, ci.chunk.h, q_pos);  // a decode step's cache
  Tensors in{{"h", to_npy(Array<float>::from(ci.chunk.h))}, {"q_pos", to_npy(int_array(q_pos))},
             {"q_lens", to_npy(int_array(c.spec.q_lens))},  {"seqlens", to_npy(int_array(ci.cache.seqlens))},
             {"block_table", to_npy(ci.cache.block_table)}, {"blocks", to_npy(ci.cache.blocks)}};
  std::vector<std::string> names{"h", "q_pos", "q_lens", "seqlens", "block_table", "blocks"};
  if (c.prefill) in["prefix"] = to_npy(int_array(c.spec.prefix)), names.push_back("prefix");
  const size_t n_case_inputs = names.size();
  for (const auto& [name, m] : kMatrices) in[name] = to_npy(Array<float>::from(W.*m)), names.push_back(name);
  for (const auto& [name, g] : kGains) {
    Array<float> a({(W.*g).size()});
    std::copy((W.*g).data(), (W.*g).data() + (W.*g).size(), a.data.begin());
    in[name] = to_npy(a), names.push_back(name);
  }
  const Tensors out = contract(kStage).oracle(in, nlohmann::json::object());
  if (!whole) names.resize(n_case_inputs);  // the committed cases share model_small
  for (const std::string o : {"u", "scores", "lse", "kv_rows"})
    if (out.count(o)) in[o] = out.at(o), names.push_back(o);
  nlohmann::json shapes = nlohmann::json::object(), dtypes = nlohmann::json::object(), files = nlohmann::json::array();
  for (const std::string& n : names) {
    const NpyData& d = in.at(n);
    write_npy(dir / (n + ".npy"), d.dtype, d.shape, d.bytes.data());
    shapes[n] = d.shape, dtypes[n] = dtype_name(d.dtype), files.push_back(n + ".npy");
  }
  const std::vector<std::string> rungs{"CD", "CC", "A_CC", "A_CC_ME", "AM", "flash_mla", kPrefillRung, kChunkAbsorbedRung};
  nlohmann::json j = case_manifest(kStage, rungs, c.spec.seed, shapes, dtypes, rules_json(contract(kStage), shapes));
  j["case"] = c.name;
  j["description"] = c.what;
  if (!whole) j["model"] = kModelCase;
  if (whole) j["params"] = {{"rope_theta", W.cfg.rope_theta}, {"rms_eps", W.cfg.rms_eps}, {"softmax_scale", W.cfg.scale()}};
  j["prefix"] = c.spec.prefix;
  j["q_lens"] = c.spec.q_lens;
  j["block_size"] = ci.cache.block_size;
  j["oracle"] = "CD at float64 on the float32 inputs, one decode step per query token (token i of sequence b over "
                "seqlens - q_lens + i + 1 rows)" + std::string(c.prefill ? ", after writing the chunk's rows from h; "
                "kv_rows = those rows at float64" : "") + "; lse from the scores";
  j["input"] = "mla::make_chunk_inputs (ladder/03-mla/synthetic.hpp); q_pos = prefix + i" +
               std::string(c.prefill ? "; rows past each prefix NaN (the step writes them)"
                                     : "; the chunk's rows written by write_chunk_rows (prefill.hpp) at float32");
  j["files"] = files;
  write_json(dir / "case.json", j);
  seal_case(dir);
}

}  // namespace

const std::vector<ChunkCase>& chunk_cases() {
  static const std::vector<ChunkCase> cases = [] {
    std::vector<ChunkCase> v;
    auto add = [&v](const char* name, std::vector<int64_t> prefix, std::vector<int64_t> q_lens, uint64_t seed,
                    bool prefill, const char* what) {
      ChunkCase c;
      c.name = name;
      c.spec.prefix = std::move(prefix);
      c.spec.q_lens = std::move(q_lens);
      c.spec.seed = seed;
      c.spec.shuffled = true;
      c.spec.spare_blocks = 1;
      c.prefill = prefill;
      c.what = what;
      v.push_back(std::move(c));
    };
    add("s_q_2", {63, 100}, {2, 2}, 3107, false,
        "decode of s_q = 2 tokens per sequence (MTP verify): B = 2, prefixes 63 (the chunk crosses a page) and 100");
    add("s_q_4", {1, 61, 200}, {4, 4, 4}, 3108, false,
        "decode of s_q = 4 tokens per sequence: B = 3, prefixes 1, 61 (crosses a page), 200");
    add("prefill_ragged", {0, 64, 37}, {7, 1, 13}, 3109, true,
        "prefill chunk: B = 3, prefixes 0, 64, 37 and q_len 7, 1, 13; the step writes the chunk's rows");
    return v;
  }();
  return cases;
}

const std::vector<GoldenCase>& golden_cases() {
  // Built case by case: g++ 12 misreports a braced list of nested vectors as maybe-uninitialised.
  static const std::vector<GoldenCase> cases = [] {
    std::vector<GoldenCase> v;
    auto add = [&v](const char* name, std::vector<int64_t> seqlens, uint64_t seed, bool shuffled, int64_t spare,
                    const char* what) {
      GoldenCase c;
      c.name = name;
      c.spec.seqlens = std::move(seqlens);
      c.spec.seed = seed;
      c.spec.shuffled = shuffled;
      c.spec.spare_blocks = spare;
      c.what = what;
      v.push_back(std::move(c));
    };
    add("L_1", {1}, 3101, false, 0, "B = 1, L = 1: the new token attends only itself (a = 1)");
    add("L_63", {63}, 3102, false, 0, "B = 1, L = 63: one page, its last row NaN");
    add("L_64", {64}, 3103, false, 0, "B = 1, L = 64: exactly one full page");
    add("L_65", {65}, 3104, false, 0, "B = 1, L = 65: one row into a second page (63 NaN rows)");
    add("L_1000", {1000}, 3105, true, 0, "B = 1, L = 1000: 16 pages in shuffled order, 24 NaN rows");
    add("batch_ragged", {1, 64, 65, 100}, 3106, true, 1,
        "B = 4, L = 1, 64, 65, 100: shuffled block table, one spare NaN page");
    return v;
  }();
  return cases;
}

const GoldenCase& golden_case(const std::string& name) {
  for (const GoldenCase& c : golden_cases())
    if (c.name == name) return c;
  throw Error("03-mla: no golden case '" + name + "'");
}

Weights<float> golden_model() { return random_weights(small_config(), kModelSeed); }

Inputs golden_inputs(const GoldenCase& c) { return make_inputs(golden_model(), c.spec); }

Output<double> golden_oracle(const Weights<float>& W, const Inputs& in) {
  Output<double> o = oracle(W.cast<double>(), cast_cache<double>(in.cache), cast_step<double>(in.step));
  o.lse = logsumexp_rows(o.scores, in.cache.seqlens);
  return o;
}

Weights<float> load_model(const fs::path& dir) {
  const nlohmann::json cfg = read_json(dir / "case.json").at("config");
  Weights<float> W;
  W.cfg = small_config();
  W.cfg.hidden = cfg.at("hidden"), W.cfg.n_heads = cfg.at("n_heads"), W.cfg.q_lora_rank = cfg.at("q_lora_rank");
  W.cfg.kv_lora_rank = cfg.at("kv_lora_rank"), W.cfg.qk_nope = cfg.at("qk_nope"), W.cfg.qk_rope = cfg.at("qk_rope");
  W.cfg.v_head = cfg.at("v_head"), W.cfg.rope_theta = cfg.at("rope_theta"), W.cfg.rms_eps = cfg.at("rms_eps");
  W.cfg.softmax_scale = cfg.at("softmax_scale");
  for (const auto& [name, m] : kMatrices) {
    const Array<float> a = load_npy<float>(dir / (std::string(name) + ".npy"));
    require(a.shape.size() == 2, "{}: {}.npy has shape {}, a matrix is required", dir.string(), name,
            shape_str(a.shape));
    W.*m = a.mat();
  }
  for (const auto& [name, g] : kGains) {
    const Array<float> a = load_npy<float>(dir / (std::string(name) + ".npy"));
    W.*g = Eigen::Map<const Vec<float>>(a.data.data(), a.size());
  }
  check_weights(W, "load_model");
  return W;
}

Inputs load_inputs(const fs::path& dir) {
  Inputs in;
  const Array<float> h = load_npy<float>(dir / "h.npy");
  require(h.shape.size() == 2, "{}: h.npy has shape {}, [B, hidden] is required", dir.string(), shape_str(h.shape));
  in.step.h = h.mat();
  in.step.q_pos = load_npy<int64_t>(dir / "q_pos.npy").data;
  in.cache.seqlens = load_npy<int64_t>(dir / "seqlens.npy").data;
  in.cache.block_table = load_npy<int32_t>(dir / "block_table.npy");
  in.cache.blocks = load_npy<float>(dir / "blocks.npy");
  in.cache.block_size = in.cache.blocks.shape.size() == 3 ? in.cache.blocks.shape[1] : 0;
  return in;
}

Output<double> load_oracle(const fs::path& dir) {
  Output<double> o;
  o.u = load_npy<double>(dir / "u.npy").mat();
  o.scores = load_npy<double>(dir / "scores.npy");
  o.attn = Array<double>(o.scores.shape, 0.0);  // softmax of the stored scores, as the oracle computed it
  const std::vector<int64_t> seqlens = load_npy<int64_t>(dir / "seqlens.npy").data;
  require(o.scores.shape.size() == 3 && o.scores.shape[0] == static_cast<int64_t>(seqlens.size()),
          "{}: scores.npy has shape {}, [B, H, Lmax] is required", dir.string(), shape_str(o.scores.shape));
  const int64_t H = o.scores.shape[1], Lmax = o.scores.shape[2];
  for (int64_t r = 0; r < o.scores.rows(); ++r)
    softmax::safe_row(&o.scores.data[r * Lmax], &o.attn.data[r * Lmax], seqlens[r / H]);
  o.lse = load_npy<double>(dir / "lse.npy");
  return o;
}

std::vector<std::string> golden_case_names() {
  std::vector<std::string> n{kModelCase};
  for (const GoldenCase& c : golden_cases()) n.push_back(c.name);
  for (const ChunkCase& c : chunk_cases()) n.push_back(c.name);
  return n;
}

void write_golden_case(const std::string& name, const fs::path& dir, bool whole) {
  fs::create_directories(dir);
  if (name == kModelCase) return write_model(dir);
  for (const ChunkCase& c : chunk_cases())
    if (c.name == name) return write_chunk_case(c, dir, whole);
  const GoldenCase& c = golden_case(name);
  const Weights<float> W = golden_model();
  const Inputs in = golden_inputs(c);
  const Output<double> o = golden_oracle(W, in);
  save_npy(dir / "h.npy", Array<float>::from(in.step.h));
  save_npy(dir / "q_pos.npy", int_array(in.step.q_pos));
  save_npy(dir / "seqlens.npy", int_array(in.cache.seqlens));
  save_npy(dir / "block_table.npy", in.cache.block_table);
  save_npy(dir / "blocks.npy", in.cache.blocks);
  save_npy(dir / "u.npy", Array<double>::from(o.u));
  save_npy(dir / "scores.npy", o.scores);
  save_npy(dir / "lse.npy", o.lse);
  const nlohmann::json shapes = {{"h", Shape{in.step.h.rows(), in.step.h.cols()}},
                                 {"q_pos", Shape{static_cast<int64_t>(in.step.q_pos.size())}},
                                 {"seqlens", Shape{static_cast<int64_t>(in.cache.seqlens.size())}},
                                 {"block_table", in.cache.block_table.shape},
                                 {"blocks", in.cache.blocks.shape},
                                 {"u", Shape{o.u.rows(), o.u.cols()}},
                                 {"scores", o.scores.shape},
                                 {"lse", o.lse.shape}};
  const nlohmann::json dtypes = {{"h", "<f4"},      {"q_pos", "<i8"},  {"seqlens", "<i8"},
                                 {"block_table", "<i4"}, {"blocks", "<f4"}, {"u", "<f8"},
                                 {"scores", "<f8"}, {"lse", "<f8"}};
  nlohmann::json j = case_manifest(kStage, {"CD", "CC", "A_CC", "A_CC_ME", "AM", "flash_mla"}, c.spec.seed, shapes,
                                   dtypes, rules_json(contract(kStage), shapes));
  j["case"] = name;
  j["description"] = c.what;
  j["model"] = kModelCase;
  j["seqlens"] = c.spec.seqlens;
  j["block_size"] = in.cache.block_size;
  j["shuffled_block_table"] = c.spec.shuffled;
  j["spare_blocks"] = c.spec.spare_blocks;
  j["oracle"] = "CD at float64 on the float32 inputs; lse = log sum_j e^{scores_j}, j < L_b; the attention "
                "weights are softmax(scores) over j < L_b (not stored: recompute them in float64)";
  // The header path as the committed case.json files spell it (the header is now ladder/03-mla/synthetic.hpp; the
  // goldens stay byte-identical until the next change of their contents rewrites them).
  j["input"] = "mla::make_inputs (ladder/mla/synthetic.hpp): h ~ N(0, 1), cache rows = kv_entries of N(0, 1) "
               "history, the last row from h itself; q_pos = L - 1";
  j["files"] = {"h.npy", "q_pos.npy", "seqlens.npy", "block_table.npy", "blocks.npy",
                "u.npy", "scores.npy", "lse.npy"};
  if (whole) {
    // `ladder golden 03-mla --case NAME --out DIR`: the folder stands alone for `ladder check` (the
    // contract's inputs include the weights); the committed cases share model_small instead.
    for (const auto& [wname, m] : kMatrices) {
      save_npy(dir / (std::string(wname) + ".npy"), Array<float>::from(W.*m));
      j["files"].push_back(std::string(wname) + ".npy");
    }
    for (const auto& [wname, g] : kGains) {
      Array<float> a({(W.*g).size()});
      std::copy((W.*g).data(), (W.*g).data() + (W.*g).size(), a.data.begin());
      save_npy(dir / (std::string(wname) + ".npy"), a);
      j["files"].push_back(std::string(wname) + ".npy");
    }
    j.erase("model");
    j["params"] = {{"rope_theta", W.cfg.rope_theta}, {"rms_eps", W.cfg.rms_eps}, {"softmax_scale", W.cfg.scale()}};
  }
  write_json(dir / "case.json", j);
  seal_case(dir);  // digest of every file: `ladder check` refuses a changed folder
}

}  // namespace ladder::mla
