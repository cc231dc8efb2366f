//===- CreateMesh.cpp - the module's device mesh as shard.grid @mesh -----===//
//
// The one pass that reads the mesh option: every later pass finds the mesh
// in the module (passes/Collectives.h, getMesh).
//
//===----------------------------------------------------------------------===//

#include "passes/Collectives.h"
#include "passes/Passes.h"
#include "runtime/Mesh.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace cleave {
#define GEN_PASS_DEF_CREATEMESH
#include "passes/Passes.h.inc"

namespace {

struct CreateMeshPass : public impl::CreateMeshBase<CreateMeshPass> {
  using CreateMeshBase::CreateMeshBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    rt::Mesh parsed;
    std::string error;
    if (!rt::Mesh::parse(llvm::join(mesh, ","), parsed, error)) {
      module.emitError("mesh: ") << error;
      return signalPassFailure();
    }
    if (parsed.axisIndex("dp") < 0) {
      module.emitError("the mesh has no 'dp' axis");
      return signalPassFailure();
    }
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    ArrayAttr axes =
        b.getStrArrayAttr(SmallVector<StringRef>(parsed.axisNames.begin(), parsed.axisNames.end()));
    SmallVector<int64_t> shape(parsed.shape.begin(), parsed.shape.end());
    if (auto existing = module.lookupSymbol<shard::GridOp>(kMeshName)) {
      if (existing->getAttr(kAxesAttr) != axes || existing.getShape() != ArrayRef(shape)) {
        existing.emitError("the module's mesh differs from the one asked for");
        return signalPassFailure();
      }
      return;
    }
    auto grid = shard::GridOp::create(b, module.getLoc(), kMeshName, shape);
    grid->setAttr(kAxesAttr, axes);
    if (wholeSums)
      grid->setAttr(kWholeSumsAttr, b.getUnitAttr());
  }
};

} // namespace
} // namespace cleave
