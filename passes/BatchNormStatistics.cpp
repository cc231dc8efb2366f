//===- BatchNormStatistics.cpp - BatchNorm's running statistics as state --===//

#include "passes/Passes.h"

#include "passes/Collectives.h"

#include "dialects/Cleave/CleaveBuilder.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_BATCHNORMSTATISTICS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// A training-mode BatchNorm's statistics: per channel, shaped 1 x C x 1...
/// so that they broadcast against x, over `count` values per channel.
struct BatchStatistics {
  Value mean, var;
  Value y;
  int64_t count = 0;
};

struct BatchNormStatisticsPass
    : public cleave::impl::BatchNormStatisticsBase<BatchNormStatisticsPass> {
  using BatchNormStatisticsBase::BatchNormStatisticsBase;

  /// The argument behind a running statistic, made model state; null when
  /// the statistic is no parameter (a constant: nothing to update).
  FailureOr<BlockArgument> takeStatistic(func::FuncOp func, BatchNormalizationOp op,
                                         Value statistic) {
    auto arg = dyn_cast<BlockArgument>(statistic);
    StringAttr kind = argumentKind(statistic);
    if (!arg || !kind || kind.getValue() != "param")
      return BlockArgument();
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
    if (!arg.hasOneUse()) {
      op.emitError("running statistic '")
          << (name ? name.getValue() : StringRef("?"))
          << "' is read by other ops too: a training-mode BatchNorm updates it every "
             "microbatch, which would change what they read";
      return failure();
    }
    func.setArgAttr(arg.getArgNumber(), kKindAttr, StringAttr::get(func.getContext(), "state"));
    func.setArgAttr(arg.getArgNumber(), kModelStateAttr, UnitAttr::get(func.getContext()));
    return arg;
  }

  /// Sums of a per-channel partial sum over every dp rank. The loss of a
  /// step is the sum of every rank's, so the gradient of a rank's part is
  /// the sum of every rank's gradient of the total: all-reduced both ways.
  Value sumOverDp(CleaveBuilder &u, const MeshAxes &mesh, Value partial) {
    OpBuilder &b = u.getBuilder();
    auto axis = static_cast<shard::GridAxis>(mesh.dpAxis);
    Value total = shard::AllReduceOp::create(b, u.getLoc(), partial, kMeshName, {axis},
                                             shard::ReductionKind::Sum);
    return AllReduceGradOp::create(b, u.getLoc(), total,
                                   FlatSymbolRefAttr::get(b.getContext(), kMeshName),
                                   b.getDenseI16ArrayAttr({axis}));
  }

  /// The op's normalization with the statistics of the whole global batch:
  /// per-channel sums all-reduced over dp (SyncBatchNorm's), two passes
  /// (the mean, then the centered squares) as the kernel computes them.
  BatchStatistics synchronized(CleaveBuilder &u, const MeshAxes &mesh, BatchNormalizationOp op,
                               ArrayRef<int64_t> axes, int64_t localCount) {
    BatchStatistics s;
    s.count = localCount * mesh.dpSize;
    Value x = op.getX();
    double inverseCount = 1.0 / static_cast<double>(s.count);
    s.mean = u.mul(sumOverDp(u, mesh, u.sum(x, axes, true)), inverseCount);
    Value centered = u.sub(x, s.mean);
    s.var = u.mul(sumOverDp(u, mesh, u.sum(u.mul(centered, centered), axes, true)),
                  inverseCount);
    Value invStd = u.reciprocal(u.sqrt(u.add(s.var, op.getEpsilon().convertToDouble())));
    ArrayRef<int64_t> meanShape = cast<RankedTensorType>(s.mean.getType()).getShape();
    Value scale = u.reshape(op.getScale(), meanShape), bias = u.reshape(op.getBias(), meanShape);
    s.y = u.add(u.mul(u.mul(centered, invStd), scale), bias);
    return s;
  }

  LogicalResult update(func::FuncOp func, BatchNormalizationOp op, const MeshAxes *sync) {
    FailureOr<BlockArgument> mean = takeStatistic(func, op, op.getMean());
    FailureOr<BlockArgument> var = takeStatistic(func, op, op.getVar());
    if (failed(mean) || failed(var))
      return failure();
    ArrayRef<int64_t> shape = cast<RankedTensorType>(op.getX().getType()).getShape();
    SmallVector<int64_t> axes;
    int64_t count = 1;
    for (auto [dim, size] : llvm::enumerate(shape))
      if (dim != 1) {
        axes.push_back(static_cast<int64_t>(dim));
        count *= size;
      }
    if (sync)
      count *= sync->dpSize;
    if (count < 2 && *var)
      return op.emitError("normalizes ")
             << count
             << " value per channel in training mode: its running variance (unbiased, as "
                "PyTorch's) needs at least 2";

    // The new running statistics, PyTorch's model.train(): the op's mean, and
    // its variance with the batch's unbiased variance mixed in (ONNX mixes
    // in the biased one): momentum * var + (1 - momentum) * batch_var * n / (n - 1).
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    double momentum = op.getMomentum().convertToDouble();
    double unbiased = static_cast<double>(count) / static_cast<double>(count - 1);
    OpBuilder b(op);
    CleaveBuilder u(b, op.getLoc());
    Value newMean, newVar;
    if (sync) {
      BatchStatistics s = synchronized(u, *sync, op, axes, count / sync->dpSize);
      ArrayRef<int64_t> channels = cast<RankedTensorType>(op.getMean().getType()).getShape();
      newMean = u.blend(momentum, op.getMean(), 1.0 - momentum, u.reshape(s.mean, channels));
      newVar = u.blend(momentum, op.getVar(), (1.0 - momentum) * unbiased,
                       u.reshape(s.var, channels));
      op.getY().replaceAllUsesWith(s.y);
      op.getRunningMean().replaceAllUsesWith(newMean);
      op.getRunningVar().replaceAllUsesWith(newVar);
    } else {
      b.setInsertionPoint(ret);
      newMean = op.getRunningMean();
      Value kept = u.mul(op.getVar(), momentum);
      newVar = u.add(kept, u.mul(u.sub(op.getRunningVar(), kept), unbiased));
    }
    b.setInsertionPoint(ret);
    if (*mean)
      AssignOp::create(b, op.getLoc(), *mean, newMean);
    if (*var)
      AssignOp::create(b, op.getLoc(), *var, newVar);
    if (sync)
      op.erase();
    return success();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    SmallVector<BatchNormalizationOp> training;
    func.walk([&](BatchNormalizationOp op) {
      if (op.getTrainingMode())
        training.push_back(op);
    });
    if (training.empty())
      return;
    std::optional<MeshAxes> mesh;
    auto module = func->getParentOfType<ModuleOp>();
    if (syncDp && module.lookupSymbol<shard::GridOp>(kMeshName)) {
      FailureOr<MeshAxes> found = getMesh(module);
      if (failed(found))
        return signalPassFailure();
      if (found->dpSize > 1)
        mesh = *found;
    }
    for (BatchNormalizationOp op : training)
      if (failed(update(func, op, mesh ? &*mesh : nullptr)))
        return signalPassFailure();
  }
};

} // namespace
