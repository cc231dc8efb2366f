//===- Mesh.cpp - mesh coordinates and axis groups -----------------------===//

#include "runtime/Mesh.h"

#include <algorithm>
#include <cctype>
#include <climits>

namespace cleave::rt {

bool Mesh::parse(std::string_view text, Mesh &mesh, std::string &error) {
  mesh = Mesh{};
  if (text.empty()) {
    error = "an empty mesh: expected AXIS=SIZE[,AXIS=SIZE...], e.g. dp=2,tp=2";
    return false;
  }
  while (!text.empty()) {
    std::string_view item = text.substr(0, text.find(','));
    text.remove_prefix(std::min(text.size(), item.size() + 1));
    std::size_t eq = item.find('=');
    std::string_view name = item.substr(0, eq);
    bool nameOk = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
    if (eq == std::string_view::npos || !nameOk) {
      error = "'" + std::string(item) + "' is not AXIS=SIZE (e.g. dp=2)";
      return false;
    }
    if (mesh.axisIndex(name) >= 0) {
      error = "axis '" + std::string(name) + "' is named twice";
      return false;
    }
    std::string_view digits = item.substr(eq + 1);
    long long size = 0;
    bool sizeOk = !digits.empty() && digits.size() <= 9 &&
                  std::all_of(digits.begin(), digits.end(),
                              [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    if (sizeOk)
      size = std::stoll(std::string(digits));
    if (!sizeOk || size < 1) {
      error = "axis '" + std::string(name) + "' has size '" + std::string(digits) +
              "': expected a whole number >= 1";
      return false;
    }
    mesh.axisNames.emplace_back(name);
    mesh.shape.push_back(static_cast<int>(size));
  }
  long long product = 1;
  for (int size : mesh.shape)
    if ((product *= size) > INT_MAX) {
      error = "the mesh has more than " + std::to_string(INT_MAX) + " ranks";
      return false;
    }
  return true;
}

std::string Mesh::text() const {
  std::string out;
  for (std::size_t a = 0; a < shape.size(); ++a)
    out += (a ? "," : "") + axisNames[a] + "=" + std::to_string(shape[a]);
  return out;
}

int Mesh::size() const {
  int product = 1;
  for (int size : shape)
    product *= size;
  return product;
}

int Mesh::axisIndex(std::string_view name) const {
  for (std::size_t a = 0; a < axisNames.size(); ++a)
    if (axisNames[a] == name)
      return static_cast<int>(a);
  return -1;
}

std::vector<int> Mesh::coordinates(int rank) const {
  std::vector<int> coords(shape.size());
  for (std::size_t a = shape.size(); a-- > 0;) {
    coords[a] = rank % shape[a];
    rank /= shape[a];
  }
  return coords;
}

GroupPlace groupPlace(const Mesh &mesh, int rank, const std::vector<int> &axisIndices) {
  std::vector<int> coords = mesh.coordinates(rank);
  GroupPlace place;
  for (std::size_t a = 0; a < mesh.shape.size(); ++a) {
    bool inGroup = std::find(axisIndices.begin(), axisIndices.end(), static_cast<int>(a)) !=
                   axisIndices.end();
    if (!inGroup)
      place.group = place.group * mesh.shape[a] + coords[a];
  }
  for (int a : axisIndices) {
    place.index = place.index * mesh.shape[a] + coords[a];
    place.size *= mesh.shape[a];
  }
  return place;
}

std::string launchMismatch(const std::optional<Mesh> &mesh, int ranks) {
  if (!mesh)
    return ranks == 1 ? ""
                      : "is compiled without --mesh, for one rank, but was started on " +
                            std::to_string(ranks) +
                            ": compile it with --mesh dp=" + std::to_string(ranks) +
                            " to train on that many";
  if (mesh->size() == ranks)
    return "";
  return "the program is compiled for " + std::to_string(mesh->size()) + " rank" +
         (mesh->size() == 1 ? "" : "s") + " (mesh " +
         (mesh->axisNames.empty() ? std::string("of no axes") : mesh->text()) +
         ") but was started on " + std::to_string(ranks) + ": run it with cleave run -n " +
         std::to_string(mesh->size());
}

} // namespace cleave::rt
