//===- Npy.cpp - NumPy .npy arrays in and out ----------------------------===//

#include "runtime/Npy.h"

#include "runtime/Files.h"
#include "runtime/Plan.h"

#include <cctype>
#include <charconv>
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

bool readNpy(std::istream &in, uint64_t size, NpyArray &array, std::string &error) {
  char magic[8];
  if (size < 10 || !in.read(magic, 8) || std::memcmp(magic, kMagic, 6) != 0) {
    error = "not a .npy file";
    return false;
  }
  if (magic[6] < 1 || magic[6] > 3) {
    error = "is .npy version " + std::to_string(static_cast<int>(magic[6])) + ", not 1, 2 or 3";
    return false;
  }
  const uint64_t preamble = magic[6] == 1 ? 10 : 12;
  unsigned char bytes[4] = {0, 0, 0, 0};
  if (size < preamble || !in.read(reinterpret_cast<char *>(bytes), preamble - 8)) {
    error = "truncated .npy header";
    return false;
  }
  const uint32_t headerLength =
      bytes[0] | (bytes[1] << 8) | (bytes[2] << 16) | (uint32_t(bytes[3]) << 24);
  if (headerLength > size - preamble) {
    error = "truncated .npy header (it claims " + std::to_string(headerLength) +
            " bytes, the file holds " + std::to_string(size - preamble) + " after the preamble)";
    return false;
  }
  if (headerLength > kMaxNpyHeaderBytes) {
    error = ".npy header of " + std::to_string(headerLength) + " bytes, more than the " +
            std::to_string(kMaxNpyHeaderBytes) + " read";
    return false;
  }
  std::string header(headerLength, '\0');
  if (!in.read(header.data(), headerLength)) {
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
  if (shape.empty() || shape.front() != '(' || shape.back() != ')') {
    error = "malformed .npy header: shape '" + shape + "' is not a tuple";
    return false;
  }
  // Dims: non-negative decimal integers, their product (in bytes) no more
  // than the file holds, checked before anything is allocated.
  array.shape.clear();
  const uint64_t dataBytes = size - preamble - headerLength;
  uint64_t count = 1;
  std::stringstream dims(shape.substr(1, shape.size() - 2));
  std::string dim;
  while (std::getline(dims, dim, ',')) {
    size_t first = dim.find_first_not_of(' '), last = dim.find_last_not_of(' ');
    if (first == std::string::npos)
      continue;
    const std::string digits = dim.substr(first, last - first + 1);
    int64_t value = 0;
    auto [end, problem] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (problem != std::errc() || end != digits.data() + digits.size() || value < 0) {
      error = "malformed .npy header: dim '" + digits + "' is not an integer >= 0";
      return false;
    }
    array.shape.push_back(value);
    if (value != 0 && count > dataBytes / static_cast<uint64_t>(value))
      count = dataBytes + 1; // more than the file holds, whatever the rest
    else
      count *= static_cast<uint64_t>(value);
  }
  if (count > dataBytes / dtypeSize(array.dtype)) {
    error = "holds fewer elements than its shape " + shapeText(array.shape) + " says";
    return false;
  }
  array.data.resize(static_cast<size_t>(count) * dtypeSize(array.dtype));
  if (!in.read(array.data.data(), static_cast<std::streamsize>(array.data.size()))) {
    error = "holds fewer elements than its shape " + shapeText(array.shape) + " says";
    return false;
  }
  return true;
}

bool readNpy(const std::string &path, NpyArray &array, std::string &error) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    error = "cannot open: " + std::string(std::strerror(errno));
    return false;
  }
  const std::streamoff size = in.tellg();
  in.seekg(0);
  if (size < 0) {
    error = "cannot read its size";
    return false;
  }
  return readNpy(in, static_cast<uint64_t>(size), array, error);
}

std::string npyFileName(const std::string &tensor) {
  std::string name = tensor;
  for (char &c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_'))
      c = '_';
  return name + ".npy";
}

namespace {

/// The preamble and header of a version 1 .npy file of `shape` x `dtype`.
bool npyHeader(DType dtype, const std::vector<int64_t> &shape, std::string &header,
               std::string &error) {
  const char *descr = nullptr;
  for (const Descr &d : kDescrs)
    if (d.dtype == dtype)
      descr = d.text;
  if (!descr) {
    error = std::string(dtypeName(dtype)) + " has no .npy form";
    return false;
  }
  std::string dims;
  for (int64_t d : shape)
    dims += std::to_string(d) + ",";
  if (shape.size() > 1)
    dims.pop_back();
  std::string dict =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic, version, length and header end on a 64-byte boundary, with '\n'.
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  uint16_t length = static_cast<uint16_t>(dict.size());
  const char preamble[10] = {'\x93',
                             'N',
                             'U',
                             'M',
                             'P',
                             'Y',
                             1,
                             0,
                             static_cast<char>(length & 0xff),
                             static_cast<char>(length >> 8)};
  header = std::string(preamble, 10) + dict;
  return true;
}

size_t npyDataBytes(DType dtype, const std::vector<int64_t> &shape) {
  size_t count = 1;
  for (int64_t d : shape)
    count *= static_cast<size_t>(d);
  return count * dtypeSize(dtype);
}

} // namespace

bool stageNpy(FileSet &files, const std::string &path, DType dtype,
              const std::vector<int64_t> &shape, const void *data, std::string &error) {
  std::string header;
  return npyHeader(dtype, shape, header, error) &&
         files.stage(path, {{header.data(), header.size()}, {data, npyDataBytes(dtype, shape)}},
                     error);
}

bool writeNpy(const std::string &path, DType dtype, const std::vector<int64_t> &shape,
              const void *data, std::string &error) {
  std::string header;
  return npyHeader(dtype, shape, header, error) &&
         writeFileAtomically(
             path, {{header.data(), header.size()}, {data, npyDataBytes(dtype, shape)}}, error);
}

} // namespace cleave::rt
