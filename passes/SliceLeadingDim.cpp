//===- SliceLeadingDim.cpp - tp slices along dim 0 --------------------------===//
//
// shard-partition slices a value that arrives whole where an op reads it
// split (`shard.all_slice`, no communication) along the dim the op splits.
// The runtime slices, and autodiff gathers back, along dim 0 only: a slice of
// `x` along dim a becomes one along dim 0 of `x` with its P parts of dim a
// moved to the front (a reshape, one transpose, a reshape), which is this
// rank's part in the same layout. The slice's gradient, an all-gather along
// dim 0, then goes back through the same transpose.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_SLICELEADINGDIM
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

struct SliceLeadingDimPass : public cleave::impl::SliceLeadingDimBase<SliceLeadingDimPass> {
  using SliceLeadingDimBase::SliceLeadingDimBase;

  /// `slice` of dim a > 0 as a slice of dim 0.
  static void moveToLeadingDim(shard::AllSliceOp slice) {
    auto in = cast<RankedTensorType>(slice.getInput().getType());
    auto out = cast<RankedTensorType>(slice.getResult().getType());
    int64_t dim = slice.getSliceAxis().getSExtValue();
    int64_t local = out.getDimSize(dim), parts = in.getDimSize(dim) / local;
    OpBuilder b(slice);
    Location loc = slice.getLoc();
    // [.., P x L, ..] -> [.., P, L, ..] -> [P, .., L, ..] -> [P x d0, .., L, ..]
    SmallVector<int64_t> byPart(in.getShape());
    byPart[dim] = local;
    byPart.insert(byPart.begin() + dim, parts);
    SmallVector<int64_t> perm{dim};
    for (int64_t d = 0; d < static_cast<int64_t>(byPart.size()); ++d)
      if (d != dim)
        perm.push_back(d);
    SmallVector<int64_t> stacked(out.getShape());
    stacked[0] *= parts;
    Value value = ReshapeOp::create(b, loc, slice.getInput(), b.getDenseI64ArrayAttr(byPart));
    value = TransposeOp::create(b, loc, value, b.getDenseI64ArrayAttr(perm));
    value = ReshapeOp::create(b, loc, value, b.getDenseI64ArrayAttr(stacked));
    Value leading =
        shard::AllSliceOp::create(b, loc, out, value, slice.getGrid(), slice.getGridAxes(), 0);
    slice.replaceAllUsesWith(leading);
    slice.erase();
  }

  void runOnOperation() override {
    SmallVector<shard::AllSliceOp> slices;
    getOperation().walk([&](shard::AllSliceOp slice) {
      if (slice.getSliceAxis().getSExtValue() != 0)
        slices.push_back(slice);
    });
    for (shard::AllSliceOp slice : slices)
      moveToLeadingDim(slice);
  }
};

} // namespace
