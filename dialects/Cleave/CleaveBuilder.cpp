//===- CleaveBuilder.cpp - cleave ops one call at a time -----------------===//

#include "dialects/Cleave/CleaveBuilder.h"

using namespace mlir;
using namespace cleave;

Value CleaveBuilder::transposeLast2(Value v) {
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, typeOf(v).getRank()));
  std::swap(perm[perm.size() - 2], perm[perm.size() - 1]);
  return transpose(v, perm);
}

Value CleaveBuilder::reduceToShape(Value grad, ArrayRef<int64_t> shape) {
  ArrayRef<int64_t> from = typeOf(grad).getShape();
  if (from == shape)
    return grad;
  int64_t lead = static_cast<int64_t>(from.size()) - static_cast<int64_t>(shape.size());
  SmallVector<int64_t> axes;
  for (int64_t i = 0; i < static_cast<int64_t>(from.size()); ++i)
    if (i < lead || (shape[i - lead] == 1 && from[i] != 1))
      axes.push_back(i);
  Value v = axes.empty() ? grad : sum(grad, axes, /*keepdims=*/false);
  return reshape(v, shape);
}

SmallVector<int64_t> CleaveBuilder::keptShape(ArrayRef<int64_t> shape, ArrayRef<int64_t> axes) {
  SmallVector<int64_t> kept(shape);
  for (int64_t axis : axes)
    kept[axis] = 1;
  return kept;
}
