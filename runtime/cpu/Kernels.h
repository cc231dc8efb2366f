//===- Kernels.h - the CPU backend ------------------------------*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_CPU_KERNELS_H
#define CLEAVE_RUNTIME_CPU_KERNELS_H

#include "runtime/StepContext.h"
#include "runtime/Tensor.h"

namespace cleave::rt::cpu {

/// What CPU kernels share for one run: nothing global, no hidden threads
/// (BLAS runs with the thread count it is given).
class ConvPrimitives;
class ProductPrimitives;

/// Whether products and convolutions of bf16 factors run as oneDNN's bf16
/// primitives on this CPU, rather than widened to f32: where it multiplies
/// bf16 faster than f32 (ProductPrimitives.h). What a Context starts with,
/// and what the compiler predicts their scratch with.
bool bf16PrimitivesByDefault();

/// Makes the calling thread and `threads` OpenMP threads of the kernels
/// flush subnormal numbers to zero, results and operands (MXCSR's FTZ and
/// DAZ bits; threads started afterwards inherit them): `--flush-subnormals`.
/// False where the CPU has no such mode.
bool flushSubnormals(int threads);

struct Context : StepContext {
  int threads = 1;
  /// Where the convolutions keep their oneDNN primitives for the run
  /// (runtime/cpu/ConvPrimitives.h), owned by the backend; null: each call
  /// makes its own.
  ConvPrimitives *convolutions = nullptr;
  /// Where bf16 products keep theirs (runtime/cpu/ProductPrimitives.h);
  /// null: each call makes its own.
  ProductPrimitives *products = nullptr;
  /// Whether products and convolutions of bf16 factors run as oneDNN's
  /// bf16 primitives (true only where bf16Instructions()) or on their
  /// factors widened to f32: the same products summed in f32, in another
  /// order. Kernel tests set both.
  bool bf16Primitives = bf16PrimitivesByDefault();
};

#define CLEAVE_KERNEL(name, ...) void name(Context &ctx, __VA_ARGS__);
#include "runtime/Kernels.def"
#undef CLEAVE_KERNEL

} // namespace cleave::rt::cpu

#endif
