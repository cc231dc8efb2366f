//===- Mesh.h - a device mesh: named axes over the ranks of a job -*- C++ -*-===//
//
// Ranks are laid out row-major over the mesh, the last axis fastest: in a
// dp=2,tp=2 mesh rank 1 is (dp 0, tp 1) and rank 2 is (dp 1, tp 0). The
// group of an axis is the ranks that share every other coordinate: tp's
// groups are {0, 1} and {2, 3}, dp's {0, 2} and {1, 3}.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_MESH_H
#define CLEAVE_RUNTIME_MESH_H

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cleave::rt {

struct Mesh {
  std::vector<std::string> axisNames;
  std::vector<int> shape;

  /// A mesh of one axis spanning `ranks`.
  static Mesh line(std::string axisName, int ranks) { return {{std::move(axisName)}, {ranks}}; }
  /// Parses "dp=2,tp=2" (axis names: letters, digits, '_'; sizes >= 1, each
  /// name once).
  static bool parse(std::string_view text, Mesh &mesh, std::string &error);
  /// "dp=2,tp=2".
  std::string text() const;

  /// The number of ranks: the product of the shape (1 for no axes).
  int size() const;
  /// The index of the axis named `name`, or -1.
  int axisIndex(std::string_view name) const;
  /// `rank`'s coordinate along every axis.
  std::vector<int> coordinates(int rank) const;
};

/// Where a rank lies among the groups that span some axes of a mesh: which
/// group (ranks agreeing on every other axis), its index in it (row-major
/// over the group's axes, in the order given, the last fastest) and the
/// group's size.
struct GroupPlace {
  int group = 0;
  int index = 0;
  int size = 1;
};

/// The place of `rank` in the groups spanning the axes at `axisIndices`
/// (distinct, in range).
GroupPlace groupPlace(const Mesh &mesh, int rank, const std::vector<int> &axisIndices);

/// Why a training program compiled for `mesh` (none: compiled without --mesh,
/// for one rank) cannot run on `ranks` ranks, and what would; empty when it
/// can. The program says it as it starts, and `cleave run -n` before it
/// launches a job (once one rank exits, mpirun may drop the others' lines).
std::string launchMismatch(const std::optional<Mesh> &mesh, int ranks);

} // namespace cleave::rt

#endif
