// ref/src/npy.cpp -- the .npy parser and writer (format in ladder/core/npy.hpp).
#include "ladder/core/npy.hpp"

#include <cstring>
#include <fstream>
#include <sstream>

namespace ladder {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::F4: return "<f4";
    case DType::F8: return "<f8";
    case DType::I4: return "<i4";
    case DType::I8: return "<i8";
    case DType::U1: return "|u1";
  }
  return "?";
}
size_t dtype_size(DType d) { return d == DType::U1 ? 1 : (d == DType::F4 || d == DType::I4) ? 4 : 8; }

namespace {

// Value of `key` in the header dict: the text after "'key':" up to the next top-level ',' or '}'.
std::string dict_value(const std::string& h, const std::string& key, const std::string& what) {
  const std::string k = "'" + key + "'";
  size_t p = h.find(k);
  require(p != std::string::npos, "{}: header has no {} entry", what, k);
  p = h.find(':', p + k.size());
  require(p != std::string::npos, "{}: header entry {} has no value", what, k);
  ++p;
  while (p < h.size() && h[p] == ' ') ++p;
  size_t e = p;
  if (e < h.size() && h[e] == '(') {
    e = h.find(')', e);
    require(e != std::string::npos, "{}: header shape tuple is not closed", what);
    return h.substr(p, e - p + 1);
  }
  while (e < h.size() && h[e] != ',' && h[e] != '}') ++e;
  std::string v = h.substr(p, e - p);
  while (!v.empty() && v.back() == ' ') v.pop_back();
  return v;
}

DType parse_descr(std::string v, const std::string& what) {
  require(v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front(),
          "{}: descr {} is not a quoted string", what, v);
  v = v.substr(1, v.size() - 2);
  require(v.size() == 3, "{}: unsupported dtype '{}' (supported: <f4 <f8 <i4 <i8 |u1)", what, v);
  require(v[0] == '<' || v[0] == '|' || v[0] == '=',
          "{}: byte order '{}' in dtype '{}' is not supported (little-endian only)", what, v[0], v);
  const std::string t = v.substr(1);
  if (t == "f4") return DType::F4;
  if (t == "f8") return DType::F8;
  if (t == "i4") return DType::I4;
  if (t == "i8") return DType::I8;
  if (t == "u1") return DType::U1;  // one byte: no byte order ('|', numpy's, or '<' / '=')
  throw Error(what + ": unsupported dtype '" + v + "' (supported: <f4 <f8 <i4 <i8 |u1)");
}

Shape parse_shape(const std::string& v, const std::string& what) {
  require(v.size() >= 2 && v.front() == '(' && v.back() == ')', "{}: shape {} is not a tuple", what, v);
  Shape s;
  std::string inner = v.substr(1, v.size() - 2);
  std::stringstream ss(inner);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    if (a == std::string::npos) continue;  // trailing comma of a 1-tuple
    item = item.substr(a, b - a + 1);
    require(!item.empty() && item.find_first_not_of("0123456789") == std::string::npos && item.size() <= 15,
            "{}: shape entry '{}' is not a non-negative integer", what, item);
    s.push_back(std::stoll(item));
  }
  return s;
}

}  // namespace

NpyData parse_npy(const std::string& f, const std::string& what) {
  static const char magic[] = "\x93NUMPY";
  require(f.size() >= 10, "{}: truncated file ({} bytes; a .npy header needs at least 10)", what, f.size());
  require(std::memcmp(f.data(), magic, 6) == 0, "{}: wrong magic (not a .npy file)", what);
  const int major = static_cast<unsigned char>(f[6]);
  require(major >= 1 && major <= 3, "{}: unsupported .npy format version {}", what, major);
  size_t hlen = 0, off = 0;
  if (major == 1) {
    hlen = static_cast<unsigned char>(f[8]) | (static_cast<unsigned char>(f[9]) << 8);
    off = 10;
  } else {
    require(f.size() >= 12, "{}: truncated header", what);
    for (int i = 0; i < 4; ++i) hlen |= static_cast<size_t>(static_cast<unsigned char>(f[8 + i])) << (8 * i);
    off = 12;
  }
  require(f.size() >= off + hlen, "{}: truncated header ({} header bytes declared, {} present)", what, hlen,
          f.size() - off);
  const std::string h = f.substr(off, hlen);
  require(h.find('{') != std::string::npos && h.find('}') != std::string::npos, "{}: header is not a dict", what);

  NpyData d;
  d.dtype = parse_descr(dict_value(h, "descr", what), what);
  const std::string fo = dict_value(h, "fortran_order", what);
  require(fo == "False", "{}: fortran_order = {} (only C order is supported)", what, fo);
  d.shape = parse_shape(dict_value(h, "shape", what), what);

  // Guard the size computation against overflow before trusting the shape.
  __int128 n = 1;
  for (auto s : d.shape) {
    n *= s;
    require(n <= (int64_t{1} << 40), "{}: shape {} is implausibly large", what, shape_str(d.shape));
  }
  const size_t want = static_cast<size_t>(n) * dtype_size(d.dtype);
  const size_t have = f.size() - off - hlen;
  require(have == want, "{}: data is {} bytes but shape {} of {} needs {}", what, have, shape_str(d.shape),
          dtype_name(d.dtype), want);
  d.bytes.assign(f.begin() + static_cast<std::ptrdiff_t>(off + hlen), f.end());
  return d;
}

NpyData read_npy(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  require(in.good(), "{}: cannot open file", path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_npy(ss.str(), path.string());
}

void write_npy(const std::filesystem::path& path, DType dtype, const Shape& shape, const void* data) {
  std::string shp = "(";
  for (size_t i = 0; i < shape.size(); ++i) shp += std::to_string(shape[i]) + (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
  shp += ")";
  std::string h = std::string("{'descr': '") + dtype_name(dtype) + "', 'fortran_order': False, 'shape': " + shp + ", }";
  const size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  require(out.good(), "{}: cannot open for writing", path.string());
  out.write("\x93NUMPY\x01\x00", 8);
  const unsigned char len[2] = {static_cast<unsigned char>(h.size() & 0xff), static_cast<unsigned char>(h.size() >> 8)};
  out.write(reinterpret_cast<const char*>(len), 2);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(numel(shape) * dtype_size(dtype)));
  require(out.good(), "{}: write failed", path.string());
}

}  // namespace ladder
