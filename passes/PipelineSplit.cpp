//===- PipelineSplit.cpp - one function per pipeline stage ----------------===//
//
// The first step of pipeline parallelism. Which stage each op belongs to
// comes from a stages file, the model's annotations or a balanced cut
// (StageAssigner); the functions are then built from that map alone
// (buildStages), so every way of choosing stages is checked and split the
// same way.
//
//===----------------------------------------------------------------------===//

#include "passes/Collectives.h"
#include "passes/CostModel.h"
#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/GlobPattern.h"

#include <deque>
#include <limits>
#include <set>

namespace cleave {
#define GEN_PASS_DEF_PIPELINESPLIT
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// Whether a gradient can reach `value`: it is a float that a returned
/// float is computed from (through ops with float results, detach
/// excepted), as opposed to one only compared (a causal mask tested
/// against 0). An op with a float result is taken to pass a gradient (a
/// parameter read only through floor would be sent and given a zero one).
/// `known`: the answers so far.
bool reachesFloatResult(Value value, DenseMap<Value, bool> &known) {
  if (auto it = known.find(value); it != known.end())
    return it->second;
  bool reaches = false;
  if (isa<FloatType>(getElementTypeOrSelf(value.getType())))
    for (Operation *user : value.getUsers()) {
      reaches = isa<func::ReturnOp>(user) ||
                (!isa<DetachOp>(user) && llvm::any_of(user->getResults(), [&](Value result) {
                  return reachesFloatResult(result, known);
                }));
      if (reaches)
        break;
    }
  return known[value] = reaches;
}

/// The bytes of a tensor value.
int64_t bytesOf(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  return type.getNumElements() * std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
}

StringRef argName(func::FuncOp func, BlockArgument arg) {
  auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
  return name ? name.getValue() : StringRef("?");
}

/// Decides the stage of every op of @forward that depends on a parameter;
/// the others (functions of the inputs alone) have none and are computed
/// wherever they are read.
class StageAssigner {
public:
  StageAssigner(func::FuncOp func, int64_t stages) : func(func), stages(stages) {
    for (Operation &op : func.getBody().front().without_terminator())
      if (llvm::any_of(op.getOperands(), [&](Value v) { return dependsOnParam(v); })) {
        placed.push_back(&op);
        paramDependent.insert(&op);
      }
  }

  /// The stage of each op, by the first way that applies; an error at the
  /// op or function at fault.
  FailureOr<DenseMap<Operation *, int64_t>> assign(ArrayRef<std::string> stageParams) {
    if (!stageParams.empty()) {
      if (failed(fromStagesFile(stageParams)))
        return failure();
    } else if (llvm::any_of(placed, [](Operation *op) { return annotatedStage(op); })) {
      if (failed(fromAnnotations()))
        return failure();
    } else if (failed(balancedCut())) {
      return failure();
    }
    // tp's sums stay with the products they sum, where
    // cleave-gather-split-products can make those whole: a forward sum over
    // tp (a row-parallel product's) in the stage of what it sums, not the
    // next one receiving partial sums; Megatron's f, the identity forward,
    // whose reverse sums its readers' gradients over tp, in its first
    // reader's stage.
    for (Operation *op : placed) {
      if (isa<shard::AllReduceOp>(op)) {
        if (int64_t summed = latestOperandStage(op); summed >= 0)
          opStage[op] = summed;
      } else if (isa<AllReduceGradOp>(op)) {
        int64_t first = stages;
        for (Operation *user : op->getUsers())
          if (auto it = opStage.find(user); it != opStage.end())
            first = std::min(first, it->second);
        if (first < stages)
          opStage[op] = std::max(opStage[op], first);
      }
    }
    if (failed(checkEveryStageHasAnOp()))
      return failure();
    return opStage;
  }

private:
  func::FuncOp func;
  int64_t stages;
  /// The parameter-dependent ops, in order.
  SmallVector<Operation *> placed;
  llvm::DenseSet<Operation *> paramDependent;
  DenseMap<Operation *, int64_t> opStage;
  /// Which parameters the stages file puts where (for its messages).
  DenseMap<Value, int64_t> paramStage;

  bool dependsOnParam(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return isParameter(arg);
    return paramDependent.contains(v.getDefiningOp());
  }

  /// The stage of a value as the latest-stage rule reads it: a parameter's
  /// from the stages file, an op's own; -1 for the rest.
  int64_t stageOf(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto it = paramStage.find(arg);
      return it == paramStage.end() ? -1 : it->second;
    }
    auto it = opStage.find(v.getDefiningOp());
    return it == opStage.end() ? -1 : it->second;
  }

  int64_t latestOperandStage(Operation *op) {
    int64_t latest = -1;
    for (Value v : op->getOperands())
      latest = std::max(latest, stageOf(v));
    return latest;
  }

  /// The ONNX pipeline_stage the importer kept on the op, if any.
  static std::optional<int64_t> annotatedStage(Operation *op) {
    auto configs = op->getAttrOfType<ArrayAttr>(kDeviceConfigAttr);
    if (!configs)
      return std::nullopt;
    for (auto config : configs.getAsRange<DictionaryAttr>())
      if (auto stage = config.getAs<IntegerAttr>("pipeline_stage"))
        return stage.getInt();
    return std::nullopt;
  }

  LogicalResult fromStagesFile(ArrayRef<std::string> entries) {
    std::deque<std::string> globTexts; // a GlobPattern refers to its text
    SmallVector<std::pair<llvm::GlobPattern, int64_t>> globs;
    for (StringRef entry : entries) {
      size_t eq = entry.rfind('=');
      int64_t stage = -1;
      if (eq == StringRef::npos || entry.substr(eq + 1).getAsInteger(10, stage))
        return func.emitError("stages entry '") << entry << "' is not GLOB=STAGE";
      if (stage < 0 || stage >= stages)
        return func.emitError("stages entry '")
               << entry << "' names stage " << stage << ", but there are " << stages
               << " stages (0 to " << stages - 1 << ")";
      auto glob = llvm::GlobPattern::create(globTexts.emplace_back(entry.substr(0, eq).str()));
      if (!glob) {
        llvm::consumeError(glob.takeError());
        return func.emitError("stages entry '") << entry << "' has a malformed glob";
      }
      globs.emplace_back(std::move(*glob), stage);
    }
    SmallVector<bool> used(globs.size(), false);
    for (BlockArgument arg : func.getArguments()) {
      if (!isParameter(arg))
        continue;
      StringRef name = argName(func, arg);
      for (auto [index, entry] : llvm::enumerate(globs)) {
        if (!entry.first.match(name))
          continue;
        used[index] = true;
        auto [it, inserted] = paramStage.try_emplace(arg, entry.second);
        if (!inserted && it->second != entry.second)
          return func.emitError("parameter '")
                 << name << "' is in two stages of the stages file, " << it->second << " and "
                 << entry.second;
      }
      if (!paramStage.contains(arg))
        return func.emitError("parameter '") << name << "' is in no stage of the stages file";
    }
    for (auto [index, entry] : llvm::enumerate(entries))
      if (!used[index])
        return func.emitError("stages entry '") << entry << "' matches no parameter";
    for (Operation *op : placed)
      opStage[op] = latestOperandStage(op);
    // A parameter must be read in its own stage: one whose readers all
    // wait for a later stage's values sits in a stage before its use.
    for (auto [param, stage] : paramStage) {
      if (param.use_empty())
        continue;
      if (llvm::any_of(param.getUsers(), [&, s = stage](Operation *user) {
            return opStage.lookup(user) == s;
          }))
        continue;
      Operation *reader = *param.getUsers().begin();
      return reader->emitError("parameter '")
             << argName(func, cast<BlockArgument>(param)) << "' is in stage " << stage
             << " of the stages file, but every op that reads it needs values of a later stage "
                "(this one: stage "
             << opStage.lookup(reader) << "): the stages are out of order";
    }
    return success();
  }

  LogicalResult fromAnnotations() {
    for (Operation *op : placed) {
      int64_t latest = latestOperandStage(op);
      std::optional<int64_t> annotated = annotatedStage(op);
      if (!annotated) {
        if (latest < 0)
          return op->emitError("reads a parameter but has no pipeline_stage, and nothing it "
                               "reads has one: give its node a pipeline_stage, or use a "
                               "stages file");
        opStage[op] = latest;
        continue;
      }
      if (*annotated < 0 || *annotated >= stages)
        return op->emitError("has pipeline_stage ")
               << *annotated << ", but there are " << stages << " stages (0 to " << stages - 1
               << ")";
      if (latest > *annotated)
        return op->emitError("has pipeline_stage ")
               << *annotated << " but reads a value of stage " << latest
               << ": the stages are out of order";
      opStage[op] = *annotated;
    }
    return success();
  }

  /// Contiguous stages of `placed`, in order: the smallest largest stage
  /// cost (the estimated FLOPs of a microbatch's forward and backward: an
  /// op's gradients only for the operands computed from parameters) there
  /// is, give or take 5%; within that, the cut
  /// whose stages' memory is most even (each stage's parameters, read
  /// first there, and computed values: what a microbatch keeps there) and
  /// whose boundaries carry the fewest bytes, weighed together as the sum
  /// of each stage's memory squared over the mean stage's, plus the bytes
  /// sent. FLOPs alone leave stages without work when one stage (a
  /// language model's head) bounds the rest.
  LogicalResult balancedCut() {
    const int64_t n = placed.size();
    if (n < stages)
      return func.emitError("has ")
             << n << " ops that depend on parameters, too few to fill " << stages
             << " pipeline stages";
    SmallVector<int64_t> flops(n + 1, 0), memory(n + 1, 0);
    DenseSet<Value> counted;
    for (int64_t i = 0; i < n; ++i) {
      int64_t bytes = 0;
      for (Value result : placed[i]->getResults())
        bytes += bytesOf(result);
      for (Value operand : placed[i]->getOperands())
        if (isParameter(operand) && counted.insert(operand).second)
          bytes += bytesOf(operand);
      const int64_t trained =
          estimateFlops(placed[i]) +
          estimateGradientFlops(placed[i], [&](Value v) { return dependsOnParam(v); });
      flops[i + 1] = flops[i] + std::max<int64_t>(trained, 1);
      memory[i + 1] = memory[i] + bytes;
    }
    auto cost = [&](int64_t from, int64_t to) { return flops[to] - flops[from]; };
    // Whether n ops fit in `stages` stages of cost at most `limit` each
    // (greedily: every stage takes as many as fit).
    auto fits = [&](int64_t limit) {
      int64_t used = 1, start = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (cost(i, i + 1) > limit)
          return false;
        if (cost(start, i + 1) > limit) {
          ++used;
          start = i;
        }
      }
      return used <= stages;
    };
    int64_t low = 1, high = flops[n];
    while (low < high) {
      int64_t mid = low + (high - low) / 2;
      if (fits(mid))
        high = mid;
      else
        low = mid + 1;
    }
    const int64_t limit = low + low / 20;
    const double meanMemory = std::max(1.0, static_cast<double>(memory[n]) / stages);
    auto unevenness = [&](int64_t from, int64_t to) {
      double bytes = static_cast<double>(memory[to] - memory[from]);
      return bytes * bytes / meanMemory;
    };

    // crossing[c]: the bytes of values computed before op c and read at or
    // after it (a cut before op c sends them).
    DenseMap<Operation *, int64_t> index;
    for (int64_t i = 0; i < n; ++i)
      index[placed[i]] = i;
    SmallVector<int64_t> delta(n + 2, 0);
    Operation *terminator = func.getBody().front().getTerminator();
    for (int64_t i = 0; i < n; ++i)
      for (Value result : placed[i]->getResults()) {
        int64_t last = i;
        for (Operation *user : result.getUsers())
          last = std::max(last, user == terminator ? n : index.lookup(user));
        delta[i + 1] += bytesOf(result);
        delta[last + 1] -= bytesOf(result);
      }
    SmallVector<int64_t> crossing(n + 1, 0);
    for (int64_t c = 1; c <= n; ++c)
      crossing[c] = crossing[c - 1] + delta[c];

    // best[k][i]: the least unevenness plus bytes sent of cutting ops
    // [0, i) into k + 1 stages within the limit; from[k][i] the start of
    // its last stage.
    constexpr double kNone = std::numeric_limits<double>::infinity();
    std::vector<std::vector<double>> best(stages, std::vector<double>(n + 1, kNone));
    std::vector<std::vector<int64_t>> from(stages, std::vector<int64_t>(n + 1, -1));
    for (int64_t i = 1; i <= n; ++i)
      if (cost(0, i) <= limit)
        best[0][i] = unevenness(0, i);
    for (int64_t k = 1; k < stages; ++k)
      for (int64_t i = k + 1; i <= n; ++i)
        for (int64_t j = i - 1; j >= k && cost(j, i) <= limit; --j) {
          double total = best[k - 1][j] + static_cast<double>(crossing[j]) + unevenness(j, i);
          if (total < best[k][i]) {
            best[k][i] = total;
            from[k][i] = j;
          }
        }
    assert(best[stages - 1][n] != kNone && "the limit admits a cut");
    for (int64_t k = stages - 1, end = n; k >= 0; --k) {
      int64_t start = k == 0 ? 0 : from[k][end];
      for (int64_t i = start; i < end; ++i)
        opStage[placed[i]] = k;
      end = start;
    }
    return success();
  }

  LogicalResult checkEveryStageHasAnOp() {
    SmallVector<bool> hasOp(stages, false);
    for (auto [op, stage] : opStage)
      hasOp[stage] = true;
    for (int64_t stage = 0; stage < stages; ++stage)
      if (!hasOp[stage]) {
        InFlightDiagnostic diag = func.emitError("pipeline stage ")
                                  << stage << " of " << stages << " has no op";
        if (!paramStage.empty())
          diag << " (no parameter of the stages file is read there)";
        return diag;
      }
    return success();
  }
};

/// The functions @stage0 ... of `forward` from the stage of each op. With
/// `sendTiedWeights`, a parameter read in several stages is the first one's
/// and goes to the others each microbatch as a computed value does, so that
/// its gradient comes back and is added where one device adds it.
LogicalResult buildStages(ModuleOp module, func::FuncOp forward,
                          const DenseMap<Operation *, int64_t> &opStage, int64_t stages,
                          bool sendTiedWeights) {
  Block &body = forward.getBody().front();
  // A dropout's masks follow its seed: every stage draws one device's masks.
  seedUnseededDropouts(body);
  Operation *terminator = body.getTerminator();
  auto readers = [&](Operation *user) -> int64_t {
    return user == terminator ? stages - 1 : opStage.lookup(user);
  };
  // Every value that crosses a boundary, with its message to each later
  // stage that reads it, in order of definition. A value that several
  // later stages read goes from reader to reader, each passing on what it
  // received, so that its gradient comes back the same way and each stage
  // adds its own reads' gradients to what the later ones sent, in the order
  // one device adds them all.
  struct Message {
    int64_t tag, from;
  };
  llvm::MapVector<std::pair<Value, int64_t>, Message> messages;
  auto addMessages = [&](Value value, int64_t from) {
    std::set<int64_t> later;
    for (Operation *user : value.getUsers())
      if (int64_t stage = readers(user); stage > from)
        later.insert(stage);
    for (int64_t stage : later) {
      messages.insert({{value, stage}, {static_cast<int64_t>(messages.size()), from}});
      from = stage;
    }
  };
  // The first stage that reads each sent parameter holds it; one that no
  // gradient can reach (a mask of booleans, or of floats only compared) is
  // read where it is needed, untrained as on one device.
  DenseMap<Value, int64_t> holder;
  DenseMap<Value, bool> trainable;
  if (sendTiedWeights)
    for (BlockArgument arg : forward.getArguments()) {
      if (!isParameter(arg) || arg.use_empty() || !reachesFloatResult(arg, trainable))
        continue;
      int64_t first = stages;
      for (Operation *user : arg.getUsers())
        first = std::min(first, readers(user));
      holder[arg] = first;
      addMessages(arg, first);
    }
  for (Operation &op : body.without_terminator())
    if (auto it = opStage.find(&op); it != opStage.end())
      for (Value result : op.getResults())
        addMessages(result, it->second);
  if (static_cast<int64_t>(messages.size()) > kTiedGradientTagBase)
    return forward.emitError("sends ")
           << messages.size() << " values between pipeline stages, more than the "
           << kTiedGradientTagBase << " tags they have";

  auto dependsOnStagedOp = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def ? opStage.contains(def) : isParameter(v);
  };

  OpBuilder b(module.getContext());
  b.setInsertionPointAfter(forward);
  for (int64_t stage = 0; stage < stages; ++stage) {
    // The ops this stage runs: its own and what they need of the
    // parameter-free ones, in @forward's order.
    llvm::SetVector<Operation *> needed;
    SmallVector<Operation *> worklist;
    auto need = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (def && !opStage.contains(def) && needed.insert(def))
        worklist.push_back(def);
    };
    for (Operation &op : body.without_terminator())
      if (auto it = opStage.find(&op); it != opStage.end() && it->second == stage) {
        needed.insert(&op);
        worklist.push_back(&op);
      }
    // The last stage computes @forward's results; each stage before it
    // returns those that depend on no parameter too (the loss's count, which
    // its step divides by) and zeros for the others (the loss's sum).
    const bool last = stage == stages - 1;
    auto computedHere = [&](Value v) { return last || !dependsOnStagedOp(v); };
    for (Value v : terminator->getOperands())
      if (computedHere(v))
        need(v);
    while (!worklist.empty())
      for (Value v : worklist.pop_back_val()->getOperands())
        need(v);

    // Its arguments: those its ops (and, last, the results) read.
    llvm::SetVector<unsigned> argNumbers;
    auto useArg = [&](Value v) {
      auto arg = dyn_cast<BlockArgument>(v);
      if (arg && (!holder.contains(arg) || holder.lookup(arg) == stage))
        argNumbers.insert(arg.getArgNumber());
    };
    for (Operation *op : needed)
      llvm::for_each(op->getOperands(), useArg);
    for (Value v : terminator->getOperands())
      if (computedHere(v))
        useArg(v);
    SmallVector<unsigned> args(argNumbers.begin(), argNumbers.end());
    llvm::sort(args);

    SmallVector<Type> argTypes, resultTypes;
    for (unsigned number : args)
      argTypes.push_back(forward.getArgument(number).getType());
    resultTypes.assign(forward.getResultTypes().begin(), forward.getResultTypes().end());
    auto func = func::FuncOp::create(b, forward.getLoc(), ("stage" + Twine(stage)).str(),
                                     b.getFunctionType(argTypes, resultTypes));
    func->setAttr(kStageAttr, b.getI64IntegerAttr(stage));
    for (auto [index, number] : llvm::enumerate(args))
      func.setArgAttrs(index, forward.getArgAttrDict(number));
    for (unsigned i = 0; i < forward.getNumResults(); ++i)
      func.setResultAttrs(i, forward.getResultAttrDict(i));

    OpBuilder inner = OpBuilder::atBlockBegin(func.addEntryBlock());
    IRMapping mapping;
    for (auto [index, number] : llvm::enumerate(args))
      mapping.map(forward.getArgument(number), func.getArgument(index));
    for (auto [key, message] : messages) {
      auto [value, to] = key;
      if (to == stage)
        mapping.map(value, PipelineRecvOp::create(inner, value.getLoc(), value.getType(),
                                                  message.from, message.tag));
    }
    for (Operation &op : body.without_terminator())
      if (needed.contains(&op))
        inner.clone(op, mapping);
    for (auto [key, message] : messages) {
      auto [value, to] = key;
      if (message.from == stage)
        PipelineSendOp::create(inner, value.getLoc(), mapping.lookup(value), to, message.tag);
    }
    SmallVector<Value> results;
    for (Value v : terminator->getOperands())
      results.push_back(computedHere(v) ? mapping.lookup(v)
                                        : splatConstant(inner, terminator->getLoc(),
                                                        cast<RankedTensorType>(v.getType()), 0.0));
    func::ReturnOp::create(inner, terminator->getLoc(), results);
    b.setInsertionPointAfter(func);
  }
  forward.erase();
  return success();
}

struct PipelineSplitPass : public cleave::impl::PipelineSplitBase<PipelineSplitPass> {
  using PipelineSplitBase::PipelineSplitBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<MeshAxes> mesh = getMesh(module);
    if (failed(mesh))
      return signalPassFailure();
    if (virtualStages < 1) {
      module.emitError("virtual-stages must be 1 or more, not ") << virtualStages.getValue();
      return signalPassFailure();
    }
    const int64_t stages = mesh->ppSize * virtualStages;
    if (stages == 1 && stageParams.empty())
      return;
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward || forward.isExternal() || !forward.getBody().hasOneBlock()) {
      module.emitError("has no @forward of one block to split into pipeline stages");
      return signalPassFailure();
    }
    StageAssigner assigner(forward, stages);
    FailureOr<DenseMap<Operation *, int64_t>> opStage = assigner.assign(stageParams);
    if (failed(opStage))
      return signalPassFailure();
    if (failed(buildStages(module, forward, *opStage, stages, sendTiedWeights)))
      return signalPassFailure();
  }
};

} // namespace
