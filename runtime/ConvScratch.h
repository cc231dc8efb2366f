//===- ConvScratch.h - the im2col buffer of a convolution kernel -*- C++ -*-===//
//
// The one allocation a compiled program makes outside its arena, weights blob
// and inputs: a convolution that is not pointwise (conv, conv_grad_input,
// conv_grad_weight) unfolds its input into a column buffer. The kernels size
// that buffer here, and the compiler predicts the program's peak from the
// same functions (plan.json's memory.scratch_bytes), so the two agree.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CONVSCRATCH_H
#define CLEAVE_RUNTIME_CONVSCRATCH_H

#include <algorithm>
#include <cstdint>

namespace cleave::rt {

/// What sizes a convolution's column matrices.
struct ConvColumns {
  int64_t images = 0, groups = 1;
  /// Rows of one group's column matrix: channels per group x kernel elements.
  int64_t rows = 0;
  /// Output positions per image, and the extent of the last output dim.
  int64_t positions = 0, lastExtent = 1;
  /// A 1x1 kernel with unit strides and no padding reads x itself.
  bool pointwise = false;
};

/// The CPU kernels unfold a tile of output rows (every output coordinate but
/// the last) at a time, of at most 2^20 elements unless one row is larger.
inline constexpr int64_t kCpuTileElements = int64_t(1) << 20;

inline int64_t cpuTileRows(const ConvColumns &c) {
  return std::clamp<int64_t>(kCpuTileElements / std::max<int64_t>(1, c.rows * c.lastExtent), 1,
                             c.positions / std::max<int64_t>(1, c.lastExtent));
}

/// Elements of the CPU kernels' tile.
inline int64_t cpuScratchElements(const ConvColumns &c) {
  return c.pointwise ? 0 : c.rows * cpuTileRows(c) * c.lastExtent;
}

/// The CUDA kernels unfold whole images, as many as fit 256 MiB (at least
/// one), into columns of `elementBytes` elements: the factors' type (f32
/// or bf16), or f32 where conv_grad_input computes them.
inline constexpr int64_t kCudaWorkspaceBytes = int64_t(256) << 20;

inline int64_t cudaImagesPerChunk(const ConvColumns &c, int64_t elementBytes) {
  int64_t perImage = c.groups * c.rows * c.positions;
  if (perImage <= 0)
    return c.images;
  return std::clamp<int64_t>(kCudaWorkspaceBytes / (perImage * elementBytes), 1,
                             std::max<int64_t>(1, c.images));
}

/// Bytes of the CUDA kernels' workspace.
inline int64_t cudaScratchBytes(const ConvColumns &c, int64_t elementBytes) {
  return c.pointwise
             ? 0
             : cudaImagesPerChunk(c, elementBytes) * c.groups * c.rows * c.positions * elementBytes;
}

} // namespace cleave::rt

#endif
