//===- cleave-opt.cpp - replay any stage of the cleave pipeline ----------===//
//
// MlirOptMain with the cleave dialect and the upstream dialects and passes
// Cleave builds on, so any IR the compiler writes can be parsed, verified and
// transformed on its own.
//
//===----------------------------------------------------------------------===//

#include "dialects/Cleave/CleaveDialect.h"
#include "dialects/Cleave/CleaveOps.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<cleave::CleaveDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::scf::SCFDialect, mlir::tensor::TensorDialect,
                  mlir::shard::ShardDialect, mlir::emitc::EmitCDialect>();
  cleave::registerExternalModels(registry);
  mlir::registerTransformsPasses();
  cleave::registerCleavePasses();
  cleave::registerCleavePipelines();
  mlir::shard::registerShardPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Cleave optimizer driver\n", registry));
}
