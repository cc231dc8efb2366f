//===- Npy.cpp - NumPy .npy arrays in and out ----------------------------===//

#include "runtime/Npy.h"

#include "runtime/Files.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace cleave::rt {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

struct Descr {
  const char *text;
  DType dtype;
};

// The descr strings numpy writes on little-endian machines.
constexpr Descr kDescrs[] = {
    {"<f4", DType::F32}, {"<f8", DType::F64}, {"<f2", DType::F16}, {"<i8", DType::I64},
    {"<i4", DType::I32}, {"<i2", DType::I16}, {"|i1", DType::I8},  {"|u1", DType::U8},
    {"<u2", DType::U16}, {"<u4", DType::U32}, {"<u8", DType::U64}, {"|b1", DType::Bool},
};

/// The value text after 'key': in a header dictionary, up to the next , or }
/// outside parentheses.
bool headerValue(const std::string &header, const std::string &key, std::string &value) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos)
    return false;
  at = header.find(':', at);
  if (at == std::string::npos)
    return false;
  int depth = 0;
  size_t end = at + 1;
  for (; end < header.size(); ++end) {
    char c = header[end];
    if (c == '(')
      ++depth;
    else if (c == ')')
      --depth;
    else if ((c == ',' || c == '}') && depth == 0)
      break;
  }
  value = header.substr(at + 1, end - at - 1);
  size_t first = value.find_first_not_of(" '");
  size_t last = value.find_last_not_of(" '");
  value = first == std::string::npos ? "" : value.substr(first, last - first + 1);
  return true;
}

} // namespace

bool readNpy(const std::string &path, NpyArray &array, std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open: " + std::string(std::strerror(errno));
    return false;
  }
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, kMagic, 6) != 0) {
    error = "not a .npy file";
    return false;
  }
  uint32_t headerLength = 0;
  if (magic[6] == 1) {
    unsigned char bytes[2];
    in.read(reinterpret_cast<char *>(bytes), 2);
    headerLength = bytes[0] | (bytes[1] << 8);
  } else {
    unsigned char bytes[4];
    in.read(reinterpret_cast<char *>(bytes), 4);
    headerLength = bytes[0] | (bytes[1] << 8) | (bytes[2] << 16) | (uint32_t(bytes[3]) << 24);
  }
  std::string header(headerLength, '\0');
  if (!in || !in.read(header.data(), headerLength)) {
    error = "truncated .npy header";
    return false;
  }
  std::string descr, fortran, shape;
  if (!headerValue(header, "descr", descr) || !headerValue(header, "fortran_order", fortran) ||
      !headerValue(header, "shape", shape)) {
    error = "malformed .npy header";
    return false;
  }
  if (fortran != "False") {
    error = "Fortran-ordered arrays are not supported (save with np.ascontiguousarray)";
    return false;
  }
  bool known = false;
  for (const Descr &d : kDescrs) {
    if (descr == d.text) {
      array.dtype = d.dtype;
      known = true;
    }
  }
  if (!known) {
    error = "element type '" + descr + "' is not supported";
    return false;
  }
  array.shape.clear();
  std::stringstream dims(shape.substr(shape.find('(') + 1));
  std::string dim;
  while (std::getline(dims, dim, ',')) {
    size_t first = dim.find_first_not_of(" )");
    if (first == std::string::npos)
      continue;
    array.shape.push_back(std::stoll(dim.substr(first)));
  }
  int64_t count = 1;
  for (int64_t d : array.shape)
    count *= d;
  array.data.resize(static_cast<size_t>(count) * dtypeSize(array.dtype));
  if (!in.read(array.data.data(), static_cast<std::streamsize>(array.data.size()))) {
    error = "holds fewer elements than its shape says";
    return false;
  }
  return true;
}

std::string npyFileName(const std::string &tensor) {
  std::string name = tensor;
  for (char &c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_'))
      c = '_';
  return name + ".npy";
}

bool writeNpy(const std::string &path, DType dtype, const std::vector<int64_t> &shape,
              const void *data, std::string &error) {
  const char *descr = nullptr;
  for (const Descr &d : kDescrs)
    if (d.dtype == dtype)
      descr = d.text;
  if (!descr) {
    error = std::string(dtypeName(dtype)) + " has no .npy form";
    return false;
  }
  std::string dims;
  int64_t count = 1;
  for (int64_t d : shape) {
    dims += std::to_string(d) + ",";
    count *= d;
  }
  if (shape.size() > 1)
    dims.pop_back();
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic, version, length and header end on a 64-byte boundary, with '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  uint16_t length = static_cast<uint16_t>(header.size());
  char preamble[10] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0,
                       static_cast<char>(length & 0xff), static_cast<char>(length >> 8)};
  size_t bytes = static_cast<size_t>(count) * dtypeSize(dtype);
  return writeFileAtomically(path, {{preamble, 10}, {header.data(), header.size()}, {data, bytes}},
                             error);
}

} // namespace cleave::rt
