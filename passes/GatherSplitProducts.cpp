//===- GatherSplitProducts.cpp - tp's partial products made whole ---------===//
//
// A product that sums over a dim split over tp (Megatron's row-parallel
// forward, a column-parallel layer's input gradient) makes each rank's
// partial sum, which shard.all_reduce adds: the same terms as one device's
// product, in another association, so the result can differ in the last
// bit. With --deterministic every rank gathers the product's two factors
// whole instead and computes one device's product, which one device's
// kernel sums in its own order; the all-reduce goes. A tree of adds and
// reshapes of such products (the gradients of q, k and v added before their
// sum over tp) is rewritten leaf by leaf, so the adds run on whole values as
// on one device.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "passes/Collectives.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_GATHERSPLITPRODUCTS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// The dims of a product's two factors that it sums over, or none for an
/// op that is not a product.
std::optional<std::pair<int64_t, int64_t>> summedDims(Operation *op) {
  if (auto gemm = dyn_cast<GemmOp>(op)) {
    if (gemm.getC())
      return std::nullopt; // c added to each rank's part would count P times
    return std::make_pair<int64_t, int64_t>(gemm.getTransA() ? 0 : 1, gemm.getTransB() ? 1 : 0);
  }
  if (auto matmul = dyn_cast<MatMulOp>(op)) {
    int64_t lhs = cast<RankedTensorType>(matmul.getLhs().getType()).getRank();
    int64_t rhs = cast<RankedTensorType>(matmul.getRhs().getType()).getRank();
    return std::make_pair(lhs == 1 ? 0 : lhs - (matmul.getTransA() ? 2 : 1),
                          rhs == 1 ? 0 : rhs - (matmul.getTransB() ? 1 : 2));
  }
  return std::nullopt;
}

/// The blocks of the parameter `value` is read from through shape ops (a
/// fused q, k, v projection split blockwise), 1 for any other value.
int64_t blocksOf(Value value) {
  while (Operation *op = value.getDefiningOp()) {
    if (!isa<TransposeOp, ReshapeOp, AllReduceGradOp>(op))
      return 1;
    value = op->getOperand(0);
  }
  auto arg = cast<BlockArgument>(value);
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  auto blocks =
      func ? func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), kSplitBlocksAttr) : nullptr;
  return blocks ? blocks.getInt() : 1;
}

/// A lookup's part of a table split by rows: its rows or zeros
/// (vocabularyParallelGather), whose sum over tp is exact.
bool isMaskedLookup(Operation *op) {
  auto mul = dyn_cast<MulOp>(op);
  return mul && llvm::any_of(mul->getOperands(),
                             [](Value v) { return isa_and_present<GatherOp>(v.getDefiningOp()); });
}

struct GatherSplitProductsPass
    : public cleave::impl::GatherSplitProductsBase<GatherSplitProductsPass> {
  /// The ops whose results `value`'s tree of adds and reshapes adds up, each
  /// node of the tree read by the tree alone; false where a node is read
  /// elsewhere too.
  static bool collectLeaves(Value value, SmallVectorImpl<Operation *> &leaves) {
    Operation *op = value.getDefiningOp();
    if (!op || !value.hasOneUse())
      return false;
    if (isa<AddOp>(op))
      return collectLeaves(op->getOperand(0), leaves) && collectLeaves(op->getOperand(1), leaves);
    if (isa<ReshapeOp>(op))
      return collectLeaves(op->getOperand(0), leaves);
    leaves.push_back(op);
    return true;
  }

  void runOnOperation() override {
    FailureOr<MeshAxes> mesh = getMesh(getOperation());
    if (failed(mesh))
      return signalPassFailure();
    const int64_t parts = mesh->tpSize;
    auto rewrite = [&](func::FuncOp func, int64_t tpAxis) {
      SmallVector<shard::AllReduceOp> sums;
      func.walk([&](shard::AllReduceOp sum) {
        if (sum.getGridAxes() == ArrayRef<int16_t>{static_cast<int16_t>(tpAxis)})
          sums.push_back(sum);
      });
      for (shard::AllReduceOp sum : sums) {
        SmallVector<Operation *> leaves;
        bool tree = collectLeaves(sum.getInput(), leaves);
        if (tree && llvm::all_of(leaves, isMaskedLookup))
          continue;
        if (!tree || !llvm::all_of(leaves, [](Operation *op) { return summedDims(op); })) {
          sum.emitWarning("--deterministic: this sum over tp adds partial results other than "
                          "products whose factors can be gathered: not bit for bit with one "
                          "device");
          continue;
        }
        for (Operation *product : leaves) {
          auto [lhsDim, rhsDim] = *summedDims(product);
          Value lhs = product->getOperand(0), rhs = product->getOperand(1);
          int64_t blocks = std::max(blocksOf(lhs), blocksOf(rhs));
          OpBuilder b(product);
          product->setOperand(
              0, gatherWhole(b, product->getLoc(), lhs, lhsDim, blocks, sum.getGridAxes(), parts));
          product->setOperand(
              1, gatherWhole(b, product->getLoc(), rhs, rhsDim, blocks, sum.getGridAxes(), parts));
        }
        sum.replaceAllUsesWith(sum.getInput());
        sum.erase();
      }
    };
    if (failed(forEachFunctionOver(getOperation(), SplitAxis::TensorParallel, rewrite)))
      signalPassFailure();
  }
};

} // namespace
