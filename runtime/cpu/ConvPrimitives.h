//===- ConvPrimitives.h - convolutions as oneDNN primitives ----*- C++ -*-===//
//
// An f32 convolution of 1 to 3 spatial dims, or one of its two adjoints, runs
// as one oneDNN primitive in the layouts oneDNN prefers on this CPU (blocked
// channels, for its AVX-512 direct kernels): the operands are reordered into
// those layouts and the result out of them, through one scratch allocation
// per call, which also holds oneDNN's scratchpad for the primitive (its
// user mode: the library keeps none of its own). The kernel counts that
// scratch, and the compiler predicts it (plan.json's memory.scratch_bytes)
// from the same ConvPrimitive made for the same threads (oneDNN sizes the
// scratchpad for them), so the two agree. A problem
// oneDNN does not take (another element type, more dims) stays with the
// im2col kernels of Conv.cpp. With --precision bf16 the factors are bf16
// (x and w, or y's gradient and one of them) and the result f32, which only
// the primitives compute: bf16 primitives where the CPU multiplies bf16
// faster than f32 (cpu::Context::bf16Primitives, ProductPrimitives.h),
// else the f32 primitive on the factors widened to f32 in the call's
// scratch (the same products, summed in f32 in another order).
//
// A forward whose weights do not change during the run (a parameter of a
// program that trains nothing: cleave-constant-weights) reads them from a
// copy in oneDNN's layout, made on the first call and kept, as the products
// keep theirs (ProductPrimitives.h): reordering a ResNet's 44 MB of weights
// took three times as long as its convolutions at batch 2
// (docs/performance.md). The kept copies are allocations of the program,
// which plan.json's packed_weight_bytes predicts with packedWeightBytes().
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CPU_CONVPRIMITIVES_H
#define CLEAVE_RUNTIME_CPU_CONVPRIMITIVES_H

#include "runtime/Allocations.h"
#include "runtime/ConvScratch.h"
#include "runtime/Tensor.h"
#include "runtime/cpu/ProductPrimitives.h"

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace cleave::rt::cpu {

/// What a call computes: y from x and w, x's gradient from y's and w, or
/// w's gradient from y's and x.
enum class ConvPass { Forward, GradInput, GradWeight };

/// One call's problem: the shapes of x (N x C x in...), w (M x C/group x
/// kernel...) and y (N x M x out...) whichever of them the pass computes, the
/// attributes with their defaults filled in, and the type of the two
/// operands the pass reads (f32, or bf16 factors whose products are summed
/// in f32: --precision bf16); what it writes, and the bias, are f32.
struct ConvProblem {
  ConvPass pass = ConvPass::Forward;
  DType factors = DType::F32;
  Dims x, w, y;
  Dims strides, padBegin, padEnd, dilations;
  int64_t group = 1;
  bool bias = false;
  /// What the forward applies to its result as the primitive writes it
  /// (a oneDNN post-op).
  Activation activation = Activation::None;
  /// The forward's w does not change during the run: it is read from a
  /// kept copy in oneDNN's layout (ConvPrimitives::keptWeights), not
  /// reordered into the scratch on every call.
  bool constantWeights = false;
};

/// The problem of a convolution with ONNX's attributes (empty: the
/// defaults; pads as begins then ends).
ConvProblem convProblem(ConvPass pass, const Dims &x, const Dims &w, const Dims &y,
                        const Dims &strides, const Dims &pads, const Dims &dilations, int64_t group,
                        bool bias, DType factors = DType::F32,
                        Activation activation = Activation::None, bool constantWeights = false);

/// Every field of `problem` as a list of numbers: equal for equal problems,
/// what ConvPrimitives keeps primitives (and kept weights) by.
std::vector<int64_t> convProblemKey(const ConvProblem &problem);

/// The column matrices of the im2col kernels (Conv.cpp), which run what
/// oneDNN does not take, for `problem` (runtime/ConvScratch.h sizes their
/// tile from them).
ConvColumns im2colColumns(const ConvProblem &problem);

/// The matrix product the im2col kernels run for one tile of `pass`: a
/// group's `mg` x `kdim` weights against `columns` of the `positions`
/// output positions (a kdim x columns column matrix, or pointwise the
/// input group itself), f32 (f64's, through OpenBLAS, has the same shape).
ProductProblem im2colProduct(ConvPass pass, int64_t mg, int64_t kdim, int64_t positions,
                             int64_t columns);

/// Every distinct product the im2col kernels run for `problem`: a whole
/// tile's and, where the output rows do not divide into whole tiles, the
/// last tile's. Their oneDNN scratchpads are the kernels' (plan.json's
/// memory.product_scratchpad_bytes counts them).
std::vector<ProductProblem> im2colProducts(const ConvProblem &problem);

/// The problem a convolution of `problem` runs as a primitive: with bf16
/// factors widened to f32 where they do not run as bf16 primitives
/// (`bf16Primitives` false), else `problem` itself.
ConvProblem primitiveProblem(const ConvProblem &problem, bool bf16Primitives);

/// Where a call of `problem` that runs as `runs` (primitiveProblem's) keeps
/// the f32 copies of its two factors (x and w for the forward, y's gradient
/// and w for GradInput, y's gradient and x for GradWeight) in its scratch
/// where it widens them: `first` and `second` elements, the first's at 0,
/// the second's at `secondOffset` bytes, both 64-byte aligned, `bytes` in
/// all (the primitive's scratch follows); all 0 where it does not.
struct WidenedFactors {
  int64_t first = 0, second = 0, secondOffset = 0, bytes = 0;
};
WidenedFactors widenedFactors(const ConvProblem &problem, const ConvProblem &runs);

/// One problem's oneDNN primitive and the reorders around it.
class ConvPrimitive {
public:
  /// The primitive of `problem` laid out for `threads` threads, or null
  /// when oneDNN does not take the problem (bf16 factors: on a CPU without
  /// bf16 instructions).
  static std::unique_ptr<ConvPrimitive> create(const ConvProblem &problem, int threads);
  ~ConvPrimitive();
  ConvPrimitive(const ConvPrimitive &) = delete;
  ConvPrimitive &operator=(const ConvPrimitive &) = delete;

  /// Bytes of a call's scratch: the operands' copies in oneDNN's layouts
  /// (constant weights' not among them) and oneDNN's scratchpad.
  int64_t scratchBytes() const;

  /// Bytes of the kept copy of constant weights in oneDNN's layout: 0 when
  /// the problem's weights are not constant or oneDNN reads them as they
  /// are.
  int64_t packedWeightBytes() const;

  /// Writes `w` into `packed` (packedWeightBytes(), 64-byte aligned) in the
  /// layout the primitive reads constant weights in.
  void packWeights(int threads, const void *w, void *packed) const;

  /// Runs the pass on `threads` threads: reads `a` and `b` (x and w for the
  /// forward, y's gradient and w for GradInput, y's gradient and x for
  /// GradWeight; constant weights as packWeights wrote them where
  /// packedWeightBytes() is not 0) and `bias` (the forward's, or null),
  /// overwrites `out`; `scratch` holds scratchBytes(), 64-byte aligned.
  void run(int threads, const void *a, const void *b, const void *bias, void *out,
           void *scratch) const;

  struct Impl;

private:
  explicit ConvPrimitive(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

/// What a program's convolutions keep for the run: their primitives, each
/// made on its problem's first call (making one takes about a tenth of a
/// millisecond, more than running a small one), and one workspace for every
/// kernel call's scratch, the widened factors of low-precision products'
/// too (Support.h's Scratch; fresh memory each call costs more than a small
/// convolution: page faults, and a 2 MB reorder ran at half speed).
class ConvPrimitives {
public:
  ConvPrimitives() = default;
  ConvPrimitives(const ConvPrimitives &) = delete;
  ConvPrimitives &operator=(const ConvPrimitives &) = delete;

  /// The primitive of `problem` on `threads` threads, or null when oneDNN
  /// does not take it.
  const ConvPrimitive *find(const ConvProblem &problem, int threads);

  /// The copy of constant weights `w` that `primitive` reads, packed on
  /// first need and kept for the run, counted in `meter` (when not null);
  /// `w` itself when the primitive reads them as they are; null when there
  /// is no memory for it.
  const void *keptWeights(const ConvPrimitive &primitive, const void *w, int threads,
                          AllocationMeter *meter);

  /// At least `bytes` of 64-byte aligned scratch, or null when there is no
  /// memory for them. It grows to the largest call's, counted in `meter`
  /// (when not null) for as long as it is held, so the run's peak counts the
  /// largest scratch once, as plan.json predicts it.
  void *workspace(int64_t bytes, AllocationMeter *meter);

private:
  /// By problem and thread count; null where oneDNN refused.
  std::map<std::vector<int64_t>, std::unique_ptr<ConvPrimitive>> made;
  /// Constant weights' copies, by their address and the primitive that
  /// reads them; freed with the primitives.
  std::map<std::pair<const void *, const ConvPrimitive *>, std::unique_ptr<KeptBuffer>> kept;
  GrowingBuffer scratch;
};

} // namespace cleave::rt::cpu

#endif
