// ref/src/case_folder.cpp -- case folders (case.json + .npy files) and their sha256 digest.
//
// `ladder golden` and `ladder oracle` write a digest of every file into case.json; `ladder check`
// refuses a folder whose files no longer match it, so an expected output that is unrelated to its
// inputs cannot pass a wrong candidate. SHA-256 as in FIPS 180-4.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <sstream>

#include "ladder/core/contract.hpp"
#include "ladder/core/golden.hpp"

namespace ladder {
namespace fs = std::filesystem;

std::string sha256_hex(const std::string& msg) {
  static constexpr std::array<uint32_t, 64> K = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
      0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
      0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
      0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
      0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
      0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
      0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
      0xc67178f2};
  std::array<uint32_t, 8> h = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  auto rotr = [](uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
  std::string m = msg;
  const uint64_t bits = static_cast<uint64_t>(msg.size()) * 8;
  m.push_back(static_cast<char>(0x80));
  while (m.size() % 64 != 56) m.push_back(0);
  for (int i = 7; i >= 0; --i) m.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  for (size_t off = 0; off < m.size(); off += 64) {
    std::array<uint32_t, 64> w{};
    for (int i = 0; i < 16; ++i)
      for (int b = 0; b < 4; ++b) w[i] = (w[i] << 8) | static_cast<unsigned char>(m[off + 4 * i + b]);
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::array<uint32_t, 8> v = h;
    for (int i = 0; i < 64; ++i) {
      const uint32_t S1 = rotr(v[4], 6) ^ rotr(v[4], 11) ^ rotr(v[4], 25);
      const uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
      const uint32_t t1 = v[7] + S1 + ch + K[i] + w[i];
      const uint32_t S0 = rotr(v[0], 2) ^ rotr(v[0], 13) ^ rotr(v[0], 22);
      const uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
      const uint32_t t2 = S0 + maj;
      v = {t1 + t2, v[0], v[1], v[2], v[3] + t1, v[4], v[5], v[6]};
    }
    for (int i = 0; i < 8; ++i) h[i] += v[i];
  }
  std::string hex;
  for (uint32_t x : h) hex += fmt::format("{:08x}", x);
  return hex;
}

namespace {

std::string file_bytes(const fs::path& p) {
  require(fs::is_regular_file(p), "{}: no such file (or not a regular file)", p.string());
  std::ifstream in(p, std::ios::binary);
  require(in.good(), "{}: cannot open file", p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A field of case.json with its type checked; names the file and the field on error.
template <class T>
T field(const nlohmann::json& j, const char* key, const fs::path& file, const char* type, T fallback) {
  if (!j.contains(key)) return fallback;
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(fmt::format("{}: field \"{}\" = {} violates type {}", file.string(), key, j.at(key).dump(), type));
  }
}

}  // namespace

void seal_case(const fs::path& dir) {
  const fs::path cj = dir / "case.json";
  nlohmann::json j = read_json(cj);
  const auto files = field<std::vector<std::string>>(j, "files", cj, "list of file names", {});
  nlohmann::json digest = nlohmann::json::object();
  for (const std::string& f : files) digest[f] = "sha256:" + sha256_hex(file_bytes(dir / f));
  j["digest"] = digest;
  write_json(cj, j);
}

nlohmann::json rules_json(const Contract& c, const nlohmann::json& names) {
  nlohmann::json rules = nlohmann::json::object();
  for (const OutputSpec& o : c.outputs) {
    if (!names.is_null() && !(names.is_array() ? std::find(names.begin(), names.end(), o.name) != names.end()
                                                 : names.contains(o.name)))
      continue;
    nlohmann::json r = {{"rule", rule_name(o.rule)}, {"why", o.why}};
    if (o.rule == Rule::max_abs || o.rule == Rule::elementwise) {  // exact and bound take no k
      r["k"] = o.k;
      r["floor_ulps"] = o.floor_ulps;
      if (o.slice_axes > 0) r["slice_axes"] = o.slice_axes;
      if (!o.judged_with.empty()) r["judged_with"] = o.judged_with;
      if (o.device_rel > 0) r["device_rel"] = o.device_rel;
    }
    rules[o.name] = r;
  }
  if (!c.baseline_doc.empty()) rules["baseline"] = c.baseline_doc;
  return rules;
}

void write_case(const Contract& c, const fs::path& dir, const Tensors& inputs, const nlohmann::json& params,
                const Tensors& outputs, nlohmann::json extra) {
  require(!fs::exists(dir) || fs::is_directory(dir), "--out {}: exists and is not a folder", dir.string());
  fs::create_directories(dir);
  nlohmann::json files = nlohmann::json::array(), in_names = nlohmann::json::array(),
                 out_names = nlohmann::json::array(), rules = nlohmann::json::object();
  for (const auto& [name, d] : inputs) {
    write_npy(dir / (name + ".npy"), d.dtype, d.shape, d.bytes.data());
    files.push_back(name + ".npy"), in_names.push_back(name);
  }
  for (const auto& [name, d] : outputs) {
    write_npy(dir / (name + ".npy"), d.dtype, d.shape, d.bytes.data());
    files.push_back(name + ".npy"), out_names.push_back(name);
  }
  rules = rules_json(c, out_names);
  nlohmann::json j = {{"format_version", kGoldenFormatVersion},
                      {"stage", c.stage},
                      {"generator", std::string("ladder ") + kVersion},
                      {"params", params.is_null() ? nlohmann::json::object() : params},
                      {"inputs", in_names},
                      {"outputs", out_names},
                      {"tolerance", rules},
                      {"oracle", c.oracle_doc},
                      {"files", files}};
  for (auto& [k, v] : extra.items()) j[k] = v;
  write_json(dir / "case.json", j);
  seal_case(dir);
}

CaseFolder read_case(const Contract& c, const fs::path& dir) {
  require(fs::is_directory(dir), "CASE_DIR {}: not a folder", dir.string());
  const fs::path cj = dir / "case.json";
  require(fs::is_regular_file(cj), "{}: no case.json (write one with `ladder golden` or `ladder oracle`)", dir.string());
  CaseFolder cf;
  cf.manifest = read_json(cj);
  require(cf.manifest.is_object(), "{}: violates a JSON object at the top level", cj.string());
  const auto stage = field<std::string>(cf.manifest, "stage", cj, "string", "");
  require(stage == c.stage, "{}: field \"stage\" = '{}' where '{}' is checked", cj.string(), stage, c.stage);
  const auto stored = field<std::string>(cf.manifest, "stored", cj, "string", "full");
  require(stored == "full",
          "{}: this case is committed as a sample; write it whole with `ladder golden {} --case {} --out DIR`",
          dir.string(), c.stage, field<std::string>(cf.manifest, "case", cj, "string", "NAME"));
  cf.params = cf.manifest.contains("params") ? cf.manifest.at("params") : nlohmann::json::object();
  require(cf.params.is_object(), "{}: field \"params\" = {} violates type object", cj.string(), cf.params.dump());

  const bool sealed = cf.manifest.contains("digest");
  nlohmann::json digest = sealed ? cf.manifest.at("digest") : nlohmann::json::object();
  require(digest.is_object(), "{}: field \"digest\" violates type object", cj.string());
  for (const auto& [f, h] : digest.items()) {
    require(h.is_string(), "{}: digest of {} = {} violates type string", cj.string(), f, h.dump());
    // A digest key names a file IN the folder: a path ("../x", "/etc/passwd", "sub/y.npy") would make
    // `check` read (and hash) files outside the case folder.
    require(!f.empty() && f != "." && f != ".." && f.find_first_of("/\\") == std::string::npos,
            "{}: digest key '{}' violates a plain file name in the case folder (no '/', '\\', '..')",
            cj.string(), f);
    const std::string got = "sha256:" + sha256_hex(file_bytes(dir / f));
    require(got == h.get<std::string>(),
            "{}: sha256 differs from case.json's digest (the folder was changed after it was written); "
            "regenerate it with `ladder golden` or `ladder oracle`",
            (dir / f).string());
  }
  auto load = [&](const std::string& name) {
    const std::string f = name + ".npy";
    require(!sealed || digest.contains(f), "{}: not covered by case.json's digest", (dir / f).string());
    return read_npy(dir / f);
  };
  for (const TensorSpec& s : c.inputs)
    if (fs::exists(dir / (s.name + ".npy"))) cf.inputs[s.name] = load(s.name);
  // Inputs shared by several cases (a model's weights) live in a sibling folder that case.json names as
  // "model"; they are read from there, checked against THAT folder's digest.
  if (cf.manifest.contains("model")) {
    const auto model = field<std::string>(cf.manifest, "model", cj, "string", "");
    require(!model.empty() && model != "." && model != ".." && model.find_first_of("/\\") == std::string::npos,
            "{}: field \"model\" = '{}' violates the plain name of a sibling case folder", cj.string(), model);
    fs::path self = fs::absolute(dir).lexically_normal();
    if (!self.has_filename()) self = self.parent_path();  // "case/" -> "case"
    const fs::path mdir = self.parent_path() / model;
    bool needed = false;
    for (const TensorSpec& s : c.inputs) needed = needed || !cf.inputs.count(s.name);
    if (needed) {
      require(fs::is_regular_file(mdir / "case.json"), "{}: names model '{}', but {} has no case.json", cj.string(),
              model, mdir.string());
      const nlohmann::json mj = read_json(mdir / "case.json");
      require(mj.is_object() && mj.contains("digest") && mj.at("digest").is_object(),
              "{}: has no digest (the shared inputs cannot be trusted)", (mdir / "case.json").string());
      const nlohmann::json& md = mj.at("digest");
      for (const TensorSpec& s : c.inputs) {
        if (cf.inputs.count(s.name) || !fs::exists(mdir / (s.name + ".npy"))) continue;
        const std::string f = s.name + ".npy";
        require(md.contains(f) && md.at(f).is_string(), "{}: not covered by its case.json's digest",
                (mdir / f).string());
        require("sha256:" + sha256_hex(file_bytes(mdir / f)) == md.at(f).get<std::string>(),
                "{}: sha256 differs from its case.json's digest (the folder was changed after it was written)",
                (mdir / f).string());
        cf.inputs[s.name] = read_npy(mdir / f);
      }
    }
  }
  if (sealed) {
    for (const OutputSpec& o : c.outputs)
      if (fs::exists(dir / (o.name + ".npy"))) cf.expected[o.name] = load(o.name);
  } else {
    cf.expected = run_oracle(c, cf.inputs, cf.params);
    cf.note = "case.json has no digest: the expected outputs were recomputed from the inputs by the fp64 oracle";
  }
  return cf;
}

}  // namespace ladder
