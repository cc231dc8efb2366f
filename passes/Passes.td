//===- Passes.td - Cleave's passes -------------------------*- tablegen -*-===//

#ifndef CLEAVE_PASSES_TD
#define CLEAVE_PASSES_TD

include "mlir/Pass/PassBase.td"

def CreateMesh : Pass<"cleave-create-mesh", "mlir::ModuleOp"> {
  let summary = "Add the device mesh a training step is partitioned over";
  let description = [{
    Adds `shard.grid @mesh` with the axes of `mesh` in order (their names in
    `cleave.axes`); ranks are laid out row-major over it, the last axis
    fastest. The one pass that reads a mesh option: the distribution passes
    (cleave-annotate-sharding, cleave-build-train-step with ZeRO,
    cleave-data-parallel) find the mesh in the module. A module that has a
    mesh already keeps it if it is the same one.
    Errors: an entry that is not NAME=SIZE with SIZE >= 1, an axis named
    twice, a mesh without a `dp` axis, another mesh in the module.
    With `whole-sums` the mesh carries `cleave.whole_sums`, which
    shard-partition's rules read (they cannot take an option): a
    cross-entropy over split classes gathers its scores and computes one
    device's loss, and Megatron's f is made once per reader, so that the
    readers' gradients are added as one device adds them.
  }];
  let options = [
    ListOption<"mesh", "mesh", "std::string",
               "Mesh axes in order, NAME=SIZE each (a dp axis among them), e.g. dp=2,tp=2">,
    Option<"wholeSums", "whole-sums", "bool", /*default=*/"false",
           "Mark the mesh cleave.whole_sums (--deterministic): shard-partition then "
           "computes a cross-entropy over classes split over tp on the whole scores and "
           "makes Megatron's f once per reader">,
  ];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def AppendLoss : Pass<"cleave-append-loss", "mlir::func::FuncOp"> {
  let summary = "Append a loss over one of the function's outputs";
  let description = [{
    For models exported without their loss. `kind=cross_entropy` takes the
    output `output` as logits (N x C, or N x ... x C with the classes last, as
    language models produce them) and a new i64 input `target` holding class
    indices of the logits' shape without the class dim; the loss is ONNX's
    SoftmaxCrossEntropyLoss with mean reduction (ignore_index -100, as
    PyTorch's default). `kind=mse` takes a new input `target` of the output's
    type; the loss is the mean of the squared differences. The loss is
    appended to the results as `loss`; the new input follows the existing ones.
  }];
  let options = [
    Option<"kind", "kind", "std::string", /*default=*/"\"cross_entropy\"",
           "cross_entropy or mse">,
    Option<"output", "output", "std::string", /*default=*/"\"\"",
           "The output the loss reads (its cleave.name)">,
    Option<"target", "target", "std::string", /*default=*/"\"\"",
           "Name of the new input holding labels or targets">,
  ];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def IndexRanges : Pass<"cleave-index-ranges", "mlir::func::FuncOp"> {
  let summary = "Record which values each data input may hold where ops index with it";
  let description = [{
    An index out of range (a token id past an embedding table, a class
    target past the logits) is an error only a kernel sees, mid-step, with
    no name for the sample that held it. This pass follows each input
    (`cleave.kind = "input"`) through the ops that move its values without
    changing them (reshape, flatten, squeeze, unsqueeze, identity, transpose,
    expand) to the ops that index with them: a gather's indices take
    [-rows, rows) of its table's axis; a softmax cross-entropy's or negative
    log-likelihood's targets take [0, classes), or their ignore_index. It
    records on the argument `cleave.index_range = {low, high, ignored,
    reader}`: the values every such op takes (the ranges intersected; the
    ignored value only where every op takes it) and the kinds of ops that
    read it (not their nodes' names: locations do not survive printed IR).
    The plan writer puts it in plan.json, and the program checks every
    sample of the data it is given against it before the first step.
  }];
}

def UnmergeBatchDims : Pass<"cleave-unmerge-batch-dims", "mlir::func::FuncOp"> {
  let summary = "Run batched ops on the two dims a reshape merged into one";
  let description = [{
    Older Hugging Face attentions (OPT, BART, Marian, Whisper) reshape
    [batch, heads, seq, dim] to [batch * heads, seq, dim] around the scores'
    products and softmax and back after. With the heads split over tp the
    merged dim has no sharding upstream's partition can express. This pass
    finds each reshape that merges its input's first two dims (and keeps the
    rest) and moves it past the ops that read the merged dim as a batch:
    a transpose that keeps dim 0, a batched matmul of two such merges of the
    same leading dims (in a product of matrices the merged dim is a row or
    the contracted dim, not a batch), a softmax or log-softmax over another
    dim, and an elementwise op one of whose operands is a merge of the
    result's shape (GPT-NeoX's and BLOOM's baddbmm: the scores scaled and
    added to zeros or to ALiBi biases), whose other operands broadcast along
    the dims after the merged one as they are and are otherwise reshaped to
    the unmerged dims (a constant folds). Each becomes the
    same op on the unmerged dims, followed by the merge; a reshape of a merge
    becomes a reshape of what was merged (none, when it restores its shape),
    and the merges nothing reads go. The same arithmetic on the same numbers.
  }];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def SplitLoss : Pass<"cleave-split-loss", "mlir::func::FuncOp"> {
  let summary = "Replace the results by the loss as a sum and a count";
  let description = [{
    Training reduces losses as sums with counts and divides by the global
    count once (over microbatches, and later over data-parallel ranks), so a
    step with gradient accumulation equals the step on the whole batch even
    when ignored targets are spread unevenly. This pass finds the loss (the
    result named `loss`, or the only scalar float result) and makes the
    function return two scalars instead of its results: `loss.sum` and
    `loss.count`, with loss = sum / count:
    - SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss with mean
      reduction: the same op with sum reduction, and the count of targets
      that are not ignore_index (their class weights' sum when weighted);
    - ReduceMean: ReduceSum over the same axes, and the number of elements
      each output element averages;
    - any other loss: the loss itself, counting 1, so microbatches are
      averaged (equal to the whole batch when their counts are equal).
    `loss.sum` carries the loss's name as `cleave.loss`. Ops only the other
    results needed are erased.
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"\"",
           "Name (cleave.name) of the loss result; default: the only scalar float result">,
  ];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def Autodiff : Pass<"cleave-autodiff", "mlir::func::FuncOp"> {
  let summary = "Append the gradient of the loss for every parameter to the results";
  let description = [{
    Reverse-mode differentiation of a function with a scalar loss result.
    Gradients flow from the loss back through every op that implements
    VjpOpInterface, in reverse program order, and are summed where a value has
    several readers. Each parameter argument (`cleave.kind = "param"`, float)
    that the loss depends on gets its gradient appended to the results, named
    `grad:<parameter>` (`cleave.grad_of = <parameter>`); a parameter the loss
    does not depend on gets none (it stays a constant, e.g. a causal mask), and
    so does one whose name matches a `freeze` glob.
    An op between a parameter and the loss without a rule is an error.
    On a pipeline stage's function (`cleave.stage`, from
    cleave-pipeline-split) each received float value
    (`cleave.pipeline_recv`) is differentiated too, and its gradient (zeros
    when the loss does not depend on it) sent back to its stage by a
    `cleave.pipeline_send gradient` of the same tag. A stage before the last
    has no loss: it differentiates the sum over its float sends of the value
    times the gradient that comes back for it (`cleave.pipeline_recv
    gradient`, received after its sends), so each value's gradient is the
    one returned. An error when such a stage sends no float value.
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"\"",
           "Name (cleave.name) of the result to differentiate; default: the only scalar float result">,
    ListOption<"freeze", "freeze", "std::string",
               "Globs of parameter names to leave out (frozen: no gradient, no update)">,
    Option<"lossScale", "loss-scale", "double", /*default=*/"0.0",
           "Dynamic loss scaling's initial scale S (0: none): the loss is differentiated "
           "times S * 2^e, e the scalar state cleave.loss_scale_exponent it adds">,
  ];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def BatchNormStatistics : Pass<"cleave-batchnorm-statistics", "mlir::func::FuncOp"> {
  let summary = "Make a training-mode BatchNorm's running statistics state the step updates";
  let description = [{
    A BatchNormalization in training mode normalizes with the batch's
    statistics and mixes them into its running mean and variance, which
    ONNX holds as float initializers: parameters to the rest of the step.
    For each such op whose running statistics are parameter arguments, this
    pass makes them model state (`cleave.kind = "state"`,
    `cleave.model_state`: no gradient, no optimizer slot, saved and exported
    with the parameters) and assigns them their new values at the end of the
    function, so every microbatch updates them as PyTorch's `model.train()`
    does: the mean as the op computes it, the variance with the batch's
    unbiased variance (ONNX mixes in the biased one):
    momentum * var + (1 - momentum) * batch_var * n / (n - 1), n the values
    per channel.
    With `sync-dp` on a mesh whose dp axis has more than one rank, the
    statistics are those of every dp rank's microbatch together
    (PyTorch's SyncBatchNorm): the op becomes its formula, with the
    per-channel sum and then the sum of centered squares all-reduced over dp
    (`shard.all_reduce`, and `cleave.all_reduce_grad` so that each rank's
    gradient of them is summed over dp too: the step's loss is the sum of
    every rank's).
    Run before cleave-autodiff (after shard-partition with a tp axis): the
    assignments are no part of the loss, and the statistics, now state, get
    no gradient.
    Errors: a running statistic that other ops read too (updating it would
    change what they read), and a variance over fewer than 2 values per
    channel.
  }];
  let options = [
    Option<"syncDp", "sync-dp", "bool", /*default=*/"false",
           "Normalize with the statistics of every dp rank's microbatch together">,
  ];
  let dependentDialects = ["cleave::CleaveDialect", "mlir::shard::ShardDialect"];
}

def BuildTrainStep : Pass<"cleave-build-train-step", "mlir::ModuleOp"> {
  let summary = "Turn a differentiated @forward into a microbatch step and an @apply update";
  let description = [{
    Runs after cleave-split-loss and cleave-autodiff, whose @forward returns
    `loss.sum`, `loss.count` and one gradient per trained parameter. Gradient
    accumulation and the division by the global count live here:
    - @forward (one microbatch) gets one `cleave.kind = "state"` argument per
      gradient (`grad:<parameter>`) and for the loss sum and count
      (`cleave.loss_sum`, `cleave.loss_count`), adds its values into them with
      `cleave.assign`, and returns nothing;
    - a new @apply takes the trained parameters, those accumulators, one state
      argument per optimizer slot and parameter (`<slot>:<parameter>`, zero
      before the first step) and two scalar f32 inputs, `cleave.lr` (this
      step's learning rate) and `cleave.step` (the 1-based step number). It
      divides the sums by the count once, clips, updates every parameter and
      slot with `cleave.assign`, zeroes the accumulators and returns the
      step's loss (sum / count) under the loss's name.
    Accumulator arguments carry `cleave.accumulator` in both functions.

    With `zero` 1 or 2 (ZeRO) on a mesh whose dp axis has N ranks, the
    trained parameters form one flat f32 buffer `flat:params` (each at a
    64-byte aligned element offset, `cleave.flat_member` /
    `cleave.flat_offset` on the per-parameter arguments, the total padded to
    a multiple of 16 N) and every rank updates only its 1/N of it: @apply
    reduce-scatters the gradients over dp (`shard.reduce_scatter`), takes its
    slice of the parameters (`shard.all_slice`), keeps its optimizer slots
    for that slice only (`<slot>:flat`, 1/N of the buffer), and all-gathers
    the updated slices (`shard.all_gather`) into `flat:params`; parameters
    split over tp come first in it. Clipping counts each element once: the
    sums of squares of what is split over tp are all-reduced over tp (in the
    flat buffer, told apart by comparing the slice's flat indices with the
    end of the split parameters), and with ZeRO the slices' sums over dp.
    Stage 1 accumulates whole
    gradients per parameter (`flat:grads`, reduce-scattered once a step);
    stage 2 reduce-scatters every microbatch's gradients in @forward and
    accumulates only the rank's slice (`flat:grads.slice`). The loss sum and
    count stay accumulators for cleave-data-parallel.
    Stage 3 keeps each parameter as this rank's 1/N of its flattened
    elements (padded to 16 N; `cleave.zero3_elements` and
    `cleave.zero3_shape` on the argument): @forward all-gathers it before its
    first forward reader and again before its first backward reader (so each
    whole copy lives only as long as its readers), reduce-scatters each
    microbatch's gradient of it into a slice accumulator, and @apply updates
    the slices; nothing is gathered there.
    With `sliced-masters` (mixed precision, `--precision` bf16 or fp16),
    ZeRO 1 and 2 keep their parameters as stage 3 does, as this rank's
    slices only (the f32 master weights), but gather each once a step: the
    gather before its first reader in @forward is marked
    `cleave.gather_once`, and cleave-autocast makes it in @narrow_weights,
    of the slice's narrow copy where a product reads it (the ZeRO paper's
    2 + 12/N bytes of parameters and optimizer state per parameter, with
    Adam). Stage 2 reduce-scatters every microbatch's gradients as stage 3
    does; stage 1 accumulates them whole and reduce-scatters each once in
    @apply.
    The rules follow PyTorch's: sgd (weight decay added to the gradient;
    momentum, optionally Nesterov, with a velocity buffer), adagrad (a running
    sum of squared gradients), adam (L2 weight decay added to the gradient,
    bias-corrected moments) and adamw (decoupled decay: p -= lr *
    weight_decay * p before the Adam step).
    With `loss-scale` S > 0 (dynamic loss scaling, as PyTorch's GradScaler
    does it), @forward's gradients are of the loss times the scale
    (cleave-autodiff's `loss-scale`), and @apply keeps the scale
    (`cleave.dynamic_loss_scale`, S before the first step:
    `cleave.initial_value`), the steps since the scale last changed and the
    steps skipped as scalar f32 state: it divides the gradients by the
    scale with the count, and when any gradient element is inf or NaN on
    any rank (each element times 0, summed and all-reduced over tp, pp and
    with ZeRO dp: 0, or NaN) it updates nothing, multiplies the scale by
    `loss-scale-backoff` and counts the step skipped; otherwise it updates,
    and after `loss-scale-window` such steps in a row multiplies the scale by
    `loss-scale-growth` where that stays finite. Adam's bias
    corrections count the steps taken, not the skipped. @apply also returns
    the scale it used (`cleave.loss_scale`) and 1 for a skipped step, else 0
    (`cleave.skipped_step`). With `clip-grad-norm` it returns the gradients'
    global 2-norm before clipping last (`cleave.grad_norm`, the total norm
    PyTorch's clip_grad_norm_ returns): on a pipeline every stage does,
    one that trains no parameter too (its 0 in the sum over pp).
    On a pipeline stage with ZeRO 1/2, a parameter other stages train too
    (`cleave.other_stages`: tied) stays out of the flat buffer, whose dp
    slices each stage lays out its own way: it keeps a whole accumulator
    and update, as without ZeRO, and its squares join the clip's sum after
    the slices' sum over dp.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"sgd\"",
           "sgd, momentum, adagrad, adam or adamw">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "Adam's first-moment decay">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "Adam's second-moment decay">,
    Option<"epsilon", "eps", "double", /*default=*/"1e-8",
           "Adam's and Adagrad's denominator term">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0",
           "L2 (sgd, momentum, adam) or decoupled (adamw) weight decay">,
    Option<"momentum", "momentum", "double", /*default=*/"0.9",
           "Velocity decay of the momentum optimizer">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false", "Nesterov momentum">,
    Option<"clipGradNorm", "clip-grad-norm", "double", /*default=*/"0.0",
           "When positive, scale all gradients by min(1, X / (global norm + 1e-6)) first">,
    Option<"zero", "zero", "int", /*default=*/"0",
           "ZeRO stage: 1 shards the optimizer state over dp, 2 the gradients too, 3 the parameters too">,
    Option<"slicedMasters", "sliced-masters", "bool", /*default=*/"false",
           "ZeRO 1/2 keep only each parameter's dp slice, gathered once a step (mixed precision)">,
    Option<"lossScale", "loss-scale", "double", /*default=*/"0.0",
           "Dynamic loss scaling's initial scale (0: none), as cleave-autodiff's">,
    Option<"lossScaleWindow", "loss-scale-window", "int64_t", /*default=*/"2000",
           "Steps without inf or NaN gradients after which the loss scale grows">,
    Option<"lossScaleGrowth", "loss-scale-growth", "double", /*default=*/"2.0",
           "What the loss scale is multiplied by when it grows">,
    Option<"lossScaleBackoff", "loss-scale-backoff", "double", /*default=*/"0.5",
           "What the loss scale is multiplied by after a step with inf or NaN gradients">,
  ];
  let dependentDialects = ["cleave::CleaveDialect", "mlir::shard::ShardDialect"];
}

def AnnotateSharding : Pass<"cleave-annotate-sharding", "mlir::ModuleOp"> {
  let summary = "Check a tensor-parallel plan and annotate @forward's arguments with shardings";
  let description = [{
    Runs on the forward, before autodiff, and before upstream
    sharding-propagation and shard-partition, which split it over the mesh's
    tp axis (the cleave ops' ShardingInterface: dialects/Cleave/
    CleaveSharding.cpp). Each `plan` entry GLOB=DIMS gives the parameters
    whose name matches GLOB a layout, one of `-` (whole), `tp` (split over
    tp) or `tp:B` (B equal blocks, each split over tp, for a fused
    projection such as q, k and v in one weight) per dim; without a plan,
    the model's ONNX sharding specs (`cleave.device_config`) are the plan.
    Every tensor argument of @forward gets `shard.shard ... annotate_for_users`
    with its sharding (replicated unless split), every tensor result a
    replicated one. Split parameters carry `cleave.split_dim`,
    `cleave.split_blocks` and `cleave.split_axis` (for the weights blobs).
    A value split in blocks is a plain split to upstream; only ops that
    treat the blocks alike may read it, up to a `cleave.split` into its
    blocks, which gets `cleave.blockwise`.
    Errors, before anything changes: a plan entry that is malformed, names
    another axis, matches no parameter, has the wrong rank, or splits a dim
    that does not divide; a plan on a mesh without tp; another reader of a
    value split in blocks.
  }];
  let options = [
    ListOption<"plan", "plan", "std::string",
               "Parameter layouts, GLOB=DIM/DIM/... with DIM one of -, tp, tp:BLOCKS">,
  ];
  let dependentDialects = ["cleave::CleaveDialect", "mlir::shard::ShardDialect"];
}

def CheckSharding : Pass<"cleave-check-sharding", "mlir::func::FuncOp"> {
  let summary = "Refuse reshardings sharding-propagation asks for, before shard-partition";
  let description = [{
    Runs between upstream sharding-propagation and shard-partition. A
    `shard.shard` of a `shard.shard` with another sharding asks
    shard-partition for a resharding. A value that arrives whole where an op
    reads it split is sliced by shard-partition (`shard.all_slice`: each
    rank keeps its part; the gradient gathers the parts), unless it is a
    parameter, which the plan should split. Every other resharding is an
    error at the op that reads the value: no tensor-parallel rule keeps the
    operand split as it arrives (the error names the split parameter it
    comes from), or the op runs whole where the operand arrives split, or
    the function returns a split value. So is a split dim that does not
    divide into the tp ranks. A `cleave.gather` from a
    table split by rows, a `cleave.softmax_cross_entropy_loss` over split
    classes or a training `cleave.dropout` of a split value (whose draws are
    keyed by the whole tensor's element index) gets the rank's tp
    coordinate as an argument (`cleave.tp_rank`, an i64 state slot marked
    `cleave.tp_coordinate`).
  }];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def SliceLeadingDim : Pass<"cleave-slice-leading-dim", "mlir::func::FuncOp"> {
  let summary = "Turn a tp slice along another dim into one along dim 0";
  let description = [{
    Runs after shard-partition, before autodiff. shard-partition slices a
    value that arrives whole where an op reads it split over tp
    (`shard.all_slice`: each rank keeps its part, no communication), along
    the dim the op splits; the runtime slices, and the slice's gradient
    gathers (`shard.all_gather`), along dim 0 only. A slice along dim a > 0
    becomes a reshape that puts the P parts of dim a in a dim of their own,
    a transpose that moves it to the front, a reshape that merges it into
    dim 0, and a slice along dim 0: the same part in the same layout.
  }];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def GatherSplitProducts : Pass<"cleave-gather-split-products", "mlir::ModuleOp"> {
  let summary = "Make tp's partial products whole, as one device sums them (--deterministic)";
  let description = [{
    Runs after autodiff, on each function of a module with a tp axis of more
    than one rank. A `shard.all_reduce` over tp adds the ranks' partial sums
    of a product that sums over a split dim (a row-parallel layer's forward,
    a column-parallel layer's input gradient): the same terms as one
    device's product in another association. Where the all-reduce's operand
    is a tree of `cleave.add` and `cleave.reshape` (each node read there
    alone) whose leaves are such products (a matmul, or a gemm without c),
    each product instead reads its two factors gathered whole over tp
    (`shard.all_gather` along dim 0, moved into place; a factor read from a
    parameter split in B blocks is put back in the whole's order) and the
    all-reduce goes: every rank computes one device's product, summed in
    its kernel's order, and the tree adds whole values as one device does.
    A sum of a lookup's rows in a table split by rows is exact and stays.
    Any other sum over tp stays, with a warning that it is not bit for bit
    with one device. Costs: each such product computed whole on every tp
    rank, its factors' gathers in place of its result's sum.
  }];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def PipelineSplit : Pass<"cleave-pipeline-split", "mlir::ModuleOp"> {
  let summary = "Split @forward into one function per pipeline stage";
  let description = [{
    Runs on the forward, after cleave-split-loss and any tensor-parallel
    partitioning, before autodiff, on the module's mesh: with a `pp` axis of
    P ranks and `virtual-stages` V, @forward becomes N = P x V functions
    @stage0 ... @stage<N-1> (`cleave.stage`; stage k runs on pp rank k mod
    P), each with the ops of its stage, the arguments they read, and the
    last one with @forward's results. A value computed in one stage and read
    in a later one leaves its stage by a `cleave.pipeline_send` at the end of
    that stage's function and enters each later stage that reads it by a
    `cleave.pipeline_recv` at the start, with one tag per value and
    destination; a value that several later stages read goes from reader
    to reader (each stage passes on what it received), so that its
    gradient comes back the same way and each stage adds its own reads'
    gradients to the later stages' sum, in the order one device adds them. Ops that depend on no parameter (masks, positions, the
    loss's count: functions of the inputs alone) are computed again in each
    stage that reads them rather than sent. A parameter read in several
    stages (tied weights) is an argument of each; with `send-tied-weights`
    (`cleave compile --deterministic`) it is the first one's, sent to the
    others each microbatch as a computed value is, so that its gradient
    comes back each microbatch and is added where one device adds it (not
    one no gradient reaches: booleans, or floats only compared, which stay
    arguments, untrained as on one device).

    Where the ops go: with `stage-params` (GLOB=STAGE entries, a stages
    file), each parameter is in the stage of the entry its name matches and
    each op in the latest stage of what it reads; else, when ops carry the
    ONNX `pipeline_stage` of their node (`cleave.device_config`), there, and
    an op without one in the latest stage of what it reads; else the ops, in
    order, are cut into N contiguous stages whose largest estimated FLOPs
    (passes/CostModel.h) is as small as it can be within 5%, and among
    those cuts the one whose stages' memory is most even (each stage's
    parameters and computed values) while it sends the fewest bytes: the
    least sum of each stage's bytes squared over the mean stage's plus the
    bytes sent. Then tp's sums stay with the products they sum: a
    `shard.all_reduce` moves to the stage of what it sums, and Megatron's f
    (`cleave.all_reduce_grad`, an identity forward whose reverse sums over
    tp) to the stage of its first reader.
    Errors, before anything changes: a malformed entry, a stage outside
    [0, N), a glob that matches no parameter, a parameter in no stage or in
    two, a parameter whose readers all need a later stage's values or an
    annotated op that reads a later stage's value (stages out of order), a
    parameter-dependent op with no stage to take, a stage with no op.
  }];
  let options = [
    Option<"virtualStages", "virtual-stages", "int64_t", /*default=*/"1",
           "Stages per pipeline rank (interleaved schedules)">,
    ListOption<"stageParams", "stage-params", "std::string",
               "The stage of each parameter, GLOB=STAGE (from a stages file)">,
    Option<"sendTiedWeights", "send-tied-weights", "bool", /*default=*/"false",
           "Send a parameter read in several stages from the first each microbatch">,
  ];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def PipelineSchedule : Pass<"cleave-pipeline-schedule", "mlir::ModuleOp"> {
  let summary = "Give every pipeline rank its static list of actions";
  let description = [{
    Runs after cleave-pipeline-split, on its stage functions. Writes
    `cleave.pipeline_schedule` on the module: {kind, microbatches, ranks,
    estimated_flops}, with ranks[r] the actions rank r runs in order, each "F<m>@<s>" (the
    forward of microbatch m through stage s), "B<m>@<s>" (its backward), or
    with zb-h1 "I<m>@<s>" and "W<m>@<s>" (the backward split into the
    gradients of the stage's inputs and of its parameters, as the
    zero-bubble paper splits it). The lists come from simulating the step
    (passes/PipelineSimulator.h) with each stage's estimated FLOPs,
    `estimated_flops` = {forward, input_grad, weight_grad}, one each per
    stage: its ops' forward, the gradients of every operand computed from
    a received value (I), and those of the parameters and what is computed
    from them alone (W), an operand's gradient costing its op's forward
    (passes/CostModel.h); the first stage has no I. gpipe runs all forwards, then all backwards; 1f1b lets rank r hold
    P - r microbatches between forward and backward; interleaved is
    Megatron's interleaved 1F1B over V stages per rank (M a multiple of P);
    zb-h1 is 1f1b with the backward split, each rank taking the gradients of
    its inputs first and filling its waits with the weight gradients, at
    most P - 1 behind. The schedule is then verified as
    cleave-verify-pipeline-schedule does.
    Errors: an unknown schedule; M < 1; M < P for 1f1b and zb-h1; M not a
    multiple of P or V = 1 for interleaved, V > 1 for the others; and
    every error of cleave-verify-pipeline-schedule.
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "gpipe, 1f1b, interleaved or zb-h1">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "Microbatches a step (the gradient accumulation)">,
  ];
}

def PipelineSelectStage : Pass<"cleave-pipeline-select-stage", "mlir::ModuleOp"> {
  let summary = "Keep one pipeline stage's function as the program's @forward";
  let description = [{
    Runs after cleave-pipeline-schedule, when each pipeline stage becomes a
    program of its own (`cleave compile --mesh ...,pp=P` compiles one per
    stage): the function of stage `stage` becomes @forward, with its
    `cleave.stage` and every data input any stage reads (so that every
    stage's program gathers the same microbatches from the same data), and
    the other stages' functions are erased. The module
    keeps `cleave.pipeline_schedule`, every rank's actions, for plan.json.
    Errors: a module without stage functions, no function of that stage.
  }];
  let options = [
    Option<"stage", "stage", "int64_t", /*default=*/"0", "The stage to keep">,
  ];
}

def PipelineTiedGradients : Pass<"cleave-pipeline-tied-gradients", "mlir::ModuleOp"> {
  let summary = "Sum a tied weight's gradients over the pipeline stages that hold it";
  let description = [{
    Runs after cleave-build-train-step on a pipeline stage's program (before
    cleave-data-parallel, whose all-reduce then comes first). A parameter
    that other stages read too (`cleave.other_stages`, from
    cleave-pipeline-select-stage: an embedding the output head reads again)
    is held and trained by each of them, as Megatron does: @apply starts by
    sending its gradient accumulator to each holder on another pp rank
    (`cleave.pipeline_send gradient`, tag kTiedGradientTagBase + the
    parameter's place among the stage's tied parameters by name) and
    receiving theirs, and every later read takes the sum, added in stage
    order so that every copy stays equal bit for bit. Holders on one rank
    (the interleaved schedule) exchange no message: the driver adds their
    accumulators before @apply runs, so only a rank's first holder sends
    (the rank's sum), each holder receives from every other rank's first,
    and the sum adds the ranks' sums in the order of their first holders.
    Global-norm clipping counts it in the first stage that holds it
    (cleave-build-train-step).
    Error: a module without a stage's @forward and @apply.
  }];
}

def SplitBackward : Pass<"cleave-split-backward", "mlir::ModuleOp"> {
  let summary = "Split a pipeline stage's microbatch step into its forward and its backward";
  let description = [{
    Runs after cleave-build-train-step on a pipeline stage's program, whose
    @forward runs one microbatch's forward and backward. A pipeline
    schedule runs them apart (all forwards before any backward in gpipe), so
    @forward keeps what its forward sends (`cleave.pipeline_send` of a value)
    and assigns (the loss's sum and count, model state) with what they read,
    and a new @backward takes the rest: the gradients it receives and sends
    and the gradient accumulators it assigns. Every value the forward
    computes (or reads from a data input) that the backward reads is a
    stash: a result of @forward (`cleave.kind = "stash"`, named `stash:<i>`)
    that the driver keeps for the microbatch until its backward, where it
    is the argument of the same name. Constants, and transposes and
    reshapes of parameters (a tied head's transposed embedding, folded into
    the products that read it) or of their mixed-precision copies, are
    made again rather than stashed; parameters and state are read from the
    weights in both.
    With `split-weight-gradients` (the zb-h1 schedule), @backward is split
    the same way once more: it keeps the gradients of the stage's inputs
    (what it sends back, which the earlier stage waits for), and a new
    @backward_weight takes the weights' gradients (the accumulators it
    assigns), reading what @backward computed for them from a second stash
    (`wstash:<i>`) and the forward's stash as @backward does.
    Errors: a function without @forward, an op with no result that is not a
    send or an assign, a forward that needs a received gradient.
  }];
  let options = [
    Option<"splitWeightGradients", "split-weight-gradients", "bool", /*default=*/"false",
           "Split the backward into the inputs' and the weights' gradients (zb-h1)">,
  ];
}

def VerifyPipelineSchedule : Pass<"cleave-verify-pipeline-schedule", "mlir::ModuleOp"> {
  let summary = "Prove a pipeline schedule runs every action once and cannot deadlock";
  let description = [{
    Checks the module's stage functions and its `cleave.pipeline_schedule`
    (passes/PipelineStages.h): stage functions @stage0 ... in order, a whole
    number per pp rank; every `cleave.pipeline_send` met by one
    `cleave.pipeline_recv` of the same tag in the stage it names, from the
    sending stage, of the same type, and every receive by a send; every
    action of every microbatch and stage exactly once, on the rank of its
    stage, B or else I and W; and, simulating every rank's list in order
    (a send never waits, a receive waits for its send), that every action
    runs: no rank waits for something its own order or another's puts after
    it. Each error names the ranks and actions at fault. Collectives inside
    a stage are issued in the same order by every rank of that stage's dp
    and tp groups, which run the same function in the same list.
  }];
}

def DataParallel : Pass<"cleave-data-parallel", "mlir::ModuleOp"> {
  let summary = "Reduce a training step's accumulators over the data-parallel mesh axis";
  let description = [{
    Runs after cleave-build-train-step, on the module's mesh (made by
    cleave-create-mesh). When its `dp` axis has more than one rank, it
    starts @apply with a `shard.all_reduce` (sum over
    `dp`) of every argument marked `cleave.accumulator`: the gradients, loss
    sum and loss count of the rank's microbatches. Every later read uses the
    reduced value, so the division by the global count, clipping and the
    update are the same on every rank and equal one device's step on the
    whole global batch. Each rank's @forward already reads its own slice of
    the batch (the importer binds the data inputs to the per-rank
    micro-batch).
    Errors: a module without a mesh or without @apply.
  }];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def NarrowGradientSums : Pass<"cleave-narrow-gradient-sums", "mlir::ModuleOp"> {
  let summary = "Sum the gradients over dp in bf16 (--grad-reduce-dtype bf16)";
  let description = [{
    Runs after cleave-data-parallel. With `type` bf16, marks each sum of
    f32 gradients over the module's `dp` axis with `cleave.sum_type = bf16`:
    @apply's `shard.all_reduce` of every accumulator named `grad:*` and every
    `shard.reduce_scatter` over dp (ZeRO 1-3 reduce-scatter only gradients).
    The runtime then rounds each rank's part to bf16, adds the parts in f32
    in rank order and rounds the sum to bf16 once (runtime/comm/
    Communicator.h): half the bytes on the wire, as Megatron's bf16
    gradient reduction. The loss's sum and count, clipping's norms and
    loss scaling's flags keep their types, and so do sums over tp and pp.
    `type` fp32 (the default) changes nothing.
    Errors: an unknown type; a module without a mesh.
  }];
  let options = [
    Option<"type", "type", "std::string", "\"fp32\"", "fp32 or bf16">,
  ];
}

def NarrowGradientAccumulators : Pass<"cleave-narrow-gradient-accumulators", "mlir::ModuleOp"> {
  let summary = "Keep the gradient accumulators in bf16 (--grad-accum-dtype bf16)";
  let description = [{
    Runs after cleave-narrow-gradient-sums. With `type` bf16, every f32
    gradient accumulator (state named `grad:*`, in every function: @forward's
    slots and @apply's reads, whole or ZeRO's slices) is kept in bf16, as
    DeepSpeed's `grad_accum_dtype` and the ZeRO paper's 2 bytes of gradient
    a parameter: @forward widens the slot, adds the microbatch's f32
    gradient in f32 and rounds the sum to bf16 (round to nearest even) as it
    assigns it; @apply reads one widened f32 copy (so every collective and
    the update after it are as before) and assigns bf16 zeros. A sum over
    dp that moves in bf16 (cleave-narrow-gradient-sums) reads the bf16
    accumulator itself instead, in place, and its result is widened: its
    bf16 parts are what the f32 copy would have been rounded to, so the
    sums are the same bit for bit, with no f32 copy before them, and
    cleave-overlap-gradients can start them during the backward. A
    reduce-scatter in f32 (ZeRO's) reads it too, its parts widened to its
    f32 result as it sums them (shard.reduce_scatter's conversion to the
    result's type). `type` fp32 (the default) changes nothing.
    Errors: an unknown type; an accumulator in ZeRO 1/2's flat f32 buffer
    (`cleave.flat_member`: cleave-build-train-step without sliced masters).
  }];
  let options = [
    Option<"type", "type", "std::string", "\"fp32\"", "fp32 or bf16">,
  ];
}

def Recompute : Pass<"cleave-recompute", "mlir::ModuleOp"> {
  let summary = "Make forward values again in the backward instead of keeping them";
  let description = [{
    Runs after cleave-build-train-step, on a training step's @forward (the
    forward up to the op whose result goes into the loss sum, then the
    backward). The backward reads some of the forward's values; those that
    `mode` lets go are no longer kept from the forward to the backward but
    made again by a copy of their op (and of the ops they need, made again
    too) just before the backward first reads them:
      - `selective` (Megatron's selective recomputation, generalized): what
        is cheap to make again and costly to keep: elementwise ops,
        softmax, dropout (a copy draws the same masks from its seed) and
        data movement; products, convolutions, normalizations, reductions,
        gathers and collectives are kept;
      - `full`: everything inside a block of the model, keeping only each
        block's inputs: a block is the first part of the ONNX node names
        ("/blocks.0/attn/MatMul" is in "blocks.0"), and a value is a block's
        input when a forward op of another block reads it;
      - `none`: nothing.
    A value is made again only from function arguments, constants, values
    the backward keeps anyway and values made again themselves, so nothing
    the backward did not read before is kept for it. The copies compute
    what the originals computed, with the same kernels on the same
    operands: results are unchanged bit for bit. In a pipeline stage's
    microbatch step (`cleave.stage`, before cleave-split-backward) the
    forward is what the stage's sends and its loss need, as that split
    keeps it, so what is made again moves to @backward and its stash
    shrinks. Errors: an unknown mode, a @forward with no loss sum, a
    stage's effect that is neither a send nor an assign.
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"none\"", "none, selective or full">,
  ];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def Autocast : Pass<"cleave-autocast", "mlir::ModuleOp"> {
  let summary = "Multiply in bf16 or f16: products on low-precision operands, summed in f32";
  let description = [{
    Mixed precision (`cleave compile --precision`). Runs after
    cleave-build-train-step (and cleave-data-parallel), on every function:
    each matmul and gemm on f32 operands gets its two factors in `precision`
    (bf16 or fp16) and still gives f32, its products summed in f32; gemm's
    c is added in f32. Everything else (elementwise ops, softmax,
    normalizations, losses, reductions, collectives, the optimizer and the
    parameters it updates) stays in f32. A value is cast once per function,
    just before the first product that reads it, and its copy is shared by
    the rest (an activation's forward product and its weight gradient); a
    parameter's copy is state of the weights blob ("bf16:W" for W, marked
    `cleave.weight_copy`), made once a step by a new function
    @narrow_weights, which the driver runs before the step's first
    microbatch (or before a run's first alone, cleave-update-weight-copies),
    and read by every function the step runs instead of
    rounding the parameter again each microbatch; a factor that only moves
    another value's elements (transpose, reshape, flatten, squeeze,
    unsqueeze, slice, and shard.all_gather, so that ZeRO 3 gathers narrow
    slices) is moved in the narrow type instead, from the narrow copy of
    that value, and the f32 move goes when nothing else reads it.
    A ZeRO 1/2 master slice's gather (its all_gather, slice and reshape,
    marked `cleave.gather_once` by cleave-build-train-step's
    `sliced-masters`) is made in @narrow_weights instead: of the slice's
    narrow copy where products read the parameter ("bf16:W"), in f32 where
    other ops do ("f32:W"); the copies carry `cleave.whole_state`, and the
    step reads them and gathers nothing.
    Convolutions (conv, conv_grad_input, conv_grad_weight) multiply the same
    way, their two factors x and w, the gradient and w, the gradient and x:
    in bf16, on 1 to 3 spatial dims, they take the bf16 copies themselves
    and give f32 like the products (the CPU's oneDNN kernels, CUDA's cuBLAS
    ones); otherwise (fp16, more than 3 spatial dims) the factors are rounded to `precision`
    and widened back to f32 for the f32 kernels, one rounded copy per value
    shared like the casts. The bias is added in f32.
    `precision` = fp32 changes nothing. Errors: an unknown precision.
  }];
  let options = [
    Option<"precision", "precision", "std::string", "\"fp32\"", "fp32, bf16 or fp16">,
  ];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def UpdateWeightCopies : Pass<"cleave-update-weight-copies", "mlir::ModuleOp"> {
  let summary = "@apply rounds each weight it updates to its low-precision copy";
  let description = [{
    Runs after cleave-autocast. @narrow_weights rounds each parameter a
    product reads to its copy ("bf16:W") before every step; the update
    writes the parameter anyway. When every copy @narrow_weights makes is
    a cast of a parameter that either nothing writes (frozen) or only one
    assignment of the whole parameter in @apply's body does (not ZeRO 1/2's
    gathered copies, which a step must gather again; the pass runs before
    cleave-sink-widened-sums, which then splits an update and its rounding
    into chunks alike), @apply rounds each new value to its copy too, the
    cast right after the value (cleave-fuse-elementwise then rounds it in
    the update's own pass over memory) and its assignment at the end, and
    @narrow_weights is marked `cleave.run_once`: the driver runs it once,
    before a run's first step, and the copies then always hold the
    parameters rounded. A skipped fp16 step's update keeps the old
    parameter, and so its copy. Otherwise nothing changes.
  }];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def FoldTransposes : Pass<"cleave-fold-transposes", "mlir::ModuleOp"> {
  let summary = "Matrix transposes read by products become the products' flags";
  let description = [{
    Runs on every program before cleave-accumulate-into-products. A matrix
    product never needs its factor transposed in memory: oneDNN's and
    cuBLAS's products read either layout at the same speed. So
      - a matmul whose rhs is a transposed matrix (a Linear layer's weight
        as exported with a Transpose node), or of two matrices one of which
        is transposed, becomes a gemm with that factor's flag set, its lhs's
        batch folded into the rows (reshapes, which move nothing);
      - a gemm factor that is a transposed matrix is read untransposed with
        its flag flipped, and so is a matmul operand that is a batch of
        transposed matrices (a transpose of the last two dims only: the
        gradients of an attention's batched products);
      - the transpose of a gemm without c that nothing else reads (a
        weight's gradient, transposed back to the weight's layout) is the
        gemm of its factors swapped with both flags flipped, (op(A) op(B))^T
        = op(B)^T op(A)^T, which cleave-accumulate-into-products can then
        add into the accumulator as it writes;
    and the transposes nothing reads any more go. The same products of the
    same numbers, summed by the same kernels.
  }];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def FoldBiasAdds : Pass<"cleave-fold-bias-adds", "mlir::ModuleOp"> {
  let summary = "A row added to a gemm's result becomes the gemm's c, added as it writes";
  let description = [{
    Runs on every program after cleave-fold-transposes (which makes a
    Linear layer's MatMul a gemm) and before cleave-fuse-activations.
    `add(gemm(a, b), bias)` (either operand order, the gemm's result
    possibly reshaped back to the batch's dims, a reshape that keeps the
    rows' length), where the gemm has no c, alpha 1, no activation and an
    f32 result, nothing else reads it, and the bias is one row of f32
    values as long as the gemm's (a Linear layer's bias, as PyTorch exports
    a Linear on a batch of sequences: MatMul then Add), becomes the gemm
    with the bias as its c and beta 1: oneDNN adds it as it writes the
    result (cuBLAS: the row broadcast into the result, then the product
    added). The same f32 sums, (a b) + bias, in one pass over the result
    instead of two. An activation reading the add can then be fused too.
  }];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def FuseActivations : Pass<"cleave-fuse-activations", "mlir::ModuleOp"> {
  let summary = "An activation that alone reads a convolution or gemm, applied as it writes";
  let description = [{
    Runs on every program after autodiff (a fused op has no gradient rule),
    before cleave-fuse-elementwise. The activation goes, and its producer
    gets `activation`, which its kernel applies as it writes the result (a
    oneDNN post-op on the CPU): one pass over the result fewer, and no
    buffer for the value before it. Taken:
      - a `cleave.relu` of a `cleave.conv` or `cleave.gemm` that nothing
        else reads ("relu");
      - GELU's erf form of a `cleave.gemm` as exporters spell it,
        (x (erf(x / sqrt 2) + 1)) 0.5, where the gemm is read by that
        chain alone and each value of the chain by the next ("gelu").
    In a training step this holds for a ReLU, whose gradient gates on its
    result, and not for GELU, whose gradient reads the gemm's result.
  }];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def FuseSoftmax : Pass<"cleave-fuse-softmax", "mlir::ModuleOp"> {
  let summary = "The attention's scale, bias, mask and softmax as one op, and their gradients as another";
  let description = [{
    Runs on every program after autodiff (the fused ops have no gradient
    rule), before cleave-fuse-elementwise. Along the last dim of f32
    scores, where each value of a chain is read by the next alone:
      - `softmax(where(mask, fill, add(mul(x, scale), bias)))` becomes
        `cleave.scaled_masked_softmax x mask(m) bias(b)`; `div(x, scale)`
        the same with `divide`; `where(mask, value, fill)` (a mask of the
        positions kept, as transformers' GPT-2 spells it) with
        `mask_keeps`; the bias (an additive mask, as BERT and Llama export
        theirs, or T5's position bias; either operand of the add) is any
        value that broadcasts to the scores; the product, the bias or the
        mask may be missing (scale 1; no operand);
      - its gradient, `mul(where(mask, 0, softmax_grad(y, g)), scale)`,
        becomes `cleave.scaled_masked_softmax_grad y, g, mask`, alike;
    where `scale`, `fill` and 0 are scalar float constants. One pass over
    the scores in place of up to four forward and three back, with the same
    roundings. The backward has no bias: the gradient of `add` passes the
    scores' gradient through.
  }];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def ConstantWeights : Pass<"cleave-constant-weights", "mlir::ModuleOp"> {
  let summary = "Products and convolutions whose weights the program never changes, marked for a kept layout";
  let description = [{
    Runs on every program after cleave-fold-transposes. In a program that
    assigns nothing (a forward, whose parameters keep the values the run
    loaded), each f32 `cleave.matmul` and `cleave.gemm` whose second factor
    is a parameter, a matrix, and each f32 `cleave.conv` whose weights are
    a parameter, gets `cleave.constant_weights`: its CPU kernel then reads
    a copy of that factor in the layout oneDNN prefers, made on the first
    call and kept for the run (runtime/cpu/ProductPrimitives.h,
    ConvPrimitives.h), which plan.json counts in
    `memory.packed_weight_bytes`. A training step changes its parameters
    every step and is left as it is.
  }];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def AccumulateIntoProducts : Pass<"cleave-accumulate-into-products", "mlir::ModuleOp"> {
  let summary = "Gradient accumulators added by the products that make the gradients";
  let description = [{
    Runs after cleave-fold-transposes, on every program (a program without
    gradient accumulators has nothing it takes). An accumulation assigned back to its
    slot, `cleave.assign (cleave.add %slot, %g) to %slot` (either operand
    order, no broadcast), where %g is a gemm without c or a matmul of two
    matrices that nothing else reads (a weight's gradient), becomes that
    product with the slot as its c and beta 1: the kernel adds the
    accumulator as it writes the result, and cleave-memory-plan writes it
    straight into the slot. One pass over the accumulator instead of two (the
    product's result, then the add), and the same f32 sums, (a b) + slot:
    oneDNN's and cuBLAS's products add c after the products' sum. A bf16
    slot (cleave-narrow-gradient-accumulators: `cleave.assign (cleave.cast
    (cleave.add (cleave.cast %slot to f32), %g) to bf16) to %slot`), added to
    by a product of bf16 factors, likewise: the gemm then writes bf16, the
    f32 sum plus the slot rounded once, as the cast did, and the product's
    f32 result (a weight's size) is no longer made.

    Such a product that a step's microbatch reaches before anything else
    uses its slot (nothing earlier in its function, in @forward, @backward,
    @backward_weight order, uses the argument of that name), in a module whose
    @apply zeroes the slot as its last use of it, is marked
    `cleave.first_call_writes` and the zeroing dropped: the kernel takes beta
    as 0 on its function's first call in a step (the driver says which call
    is), writing the slot where it would have added to its zeros. A pass
    over every accumulator less a step, and the first microbatch's products
    read no accumulator. An accumulation that stays an add,
    `cleave.assign (cleave.add %slot, %g) to %slot` (no broadcast), where no
    elementwise chain makes %g (a bias's column sum, ZeRO 2's and 3's
    reduce-scattered slices, the loss's sum), is marked the same way when it
    is the first use of its slot and the update zeroes the slot, with the
    slot as its lhs: it copies %g on its function's first call in a step
    and adds after (cleave-fuse-elementwise keeps it out of chains). An
    accumulator that is a member of a flat buffer (ZeRO 1's gradients,
    `cleave.flat_member`), which @apply zeroes whole, likewise: the buffer's
    zeroing becomes one of each member that nothing writes on its first
    call (a `cleave.elements` of the buffer), none when every member is
    written so, and its padding, which nothing writes, keeps the zeros it
    starts with.
  }];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def FuseElementwise : Pass<"cleave-fuse-elementwise", "mlir::ModuleOp"> {
  let summary = "Fuse chains of f32 elementwise ops into one pass over memory each";
  let description = [{
    Runs last before the memory plan, on every function. Groups chains of
    add, sub, mul, div, neg, sqrt, exp, tanh and erf on f32 values of one
    shape (each operand of that shape or of one element) into
    `cleave.fused_elementwise` ops (compiled into one loop each on the CPU,
    runtime/cpu/FusedChain.h, and one kernel each on CUDA,
    runtime/cuda/FusedChain.cuh), which read each input
    once and write each output (a value read outside the chain) once, computing
    what the chain computed bit for bit. A cast from bf16 to f32 may start
    a chain (its bf16 value an input the kernel widens as it reads it) and
    a cast from f32 to bf16 end one (a bf16 output the kernel rounds as it
    writes it); a cast to bf16 and back within a chain splits it, since
    the kernel's registers keep f32. An op joins the chains of its
    operands' producers unless an op outside reads one of their values
    before it; a chain holds at most 48 inputs and ops and 8 outputs. An
    accumulator's add marked `cleave.first_call_writes` (it copies on its
    function's first call) joins none.
    First, an add, sub, mul or div of a value x and one element read by an
    elementwise op after a kernel that is not one (GELU's x / sqrt 2 in the
    backward) is made again there, once for the readers after that kernel,
    where x is read after that kernel anyway: the later chain computes it
    from x in registers instead of reading it back, and the earlier one no
    longer writes it.
  }];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def MemoryPlan : Pass<"cleave-memory-plan", "mlir::ModuleOp"> {
  let summary = "Place every tensor of the module's functions in one arena or the weights blob";
  let description = [{
    Parameters and optimizer state (arguments of kind "param" or "state") get
    one slot of the weights blob per name, shared by every function that
    reads them (@forward and @apply of a training step), the gradient
    accumulators first, in the order @forward finishes them (for
    cleave-overlap-gradients' buckets); other arguments are
    inputs, numbered by name the same way (`cleave.input_index`); each
    function's results are numbered after the previous function's
    (`cleave.first_output`).

    In each function, every buffer's live range runs from the op that defines
    it to its last use (through the views that alias it: reshape, flatten,
    squeeze, unsqueeze, identity, `cleave.elements`, and `shard.all_slice`,
    the rank's part, at an offset the run knows). Buffers are placed first fit at 64-byte
    aligned offsets of one arena, reusing space only after the last use of
    what was there, so an op never writes over its own inputs. Non-splat
    constants go to the weights blob instead. The functions run one after
    another, so they share the arena.

    Sets `cleave.arena_offsets` (one per result) on each op that needs arena
    space, `cleave.weights_offset` on constants and stored arguments,
    `cleave.arena_bytes` on each function, and `cleave.arena_bytes` (the
    largest function's: the predicted peak of intermediate memory) and
    `cleave.weights_bytes` on the module.
  }];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def OverlapGradients : Pass<"cleave-overlap-gradients", "mlir::ModuleOp"> {
  let summary = "Sum the data-parallel gradients in buckets while the last microbatch's backward runs";
  let description = [{
    Runs after cleave-memory-plan, on a training step whose @apply begins
    with cleave-data-parallel's in-place `shard.all_reduce` of each
    accumulator over the `dp` axis. It cuts those accumulators into
    buckets, as PyTorch's DDP buckets its gradients: taken in the order the
    backward finishes them (their last writes in a microbatch: in @forward,
    or in a pipeline stage's @backward or @backward_weight, whichever a
    microbatch runs last of those that write it), each joins the open
    bucket while that holds fewer than `bucket-bytes` (-1: a quarter of all
    of them, from 4 KiB to 25 MiB), was written in the same function and
    lies next to the bucket in the weights blob, so that every bucket is one
    contiguous span. In that function, each bucket gets a
    `cleave.all_reduce_start` of its accumulators right after the last of
    them is written; at run time the step's last microbatch queues the
    bucket's sum on the background collectives' thread there, while its
    backward goes on. @apply's all-reduces are marked `cleave.started` and
    move down to just before the first op that reads each (they are their
    accumulators' buffers, so the memory plan does not change): each only
    waits for the bucket that holds its accumulator (`all_reduce_wait`), so
    the updates of the buckets summed first run while the later ones move.
    The sums are the same calls on the same values, so the step's results
    do not change.
    The gradient of a weight tied between pipeline stages is left where it
    is: it is summed with the other stages' copies before its sum over dp.

    Under ZeRO 1, whose @apply reduce-scatters one flat buffer of f32
    accumulators over dp (cleave-build-train-step), the buffer's members are
    cut into buckets the same way, and each gets a
    `cleave.reduce_scatter_owned_start` after its last write: the part of
    the bucket's span in each rank's slice of the buffer is summed into that
    rank's own place. @apply's `shard.reduce_scatter` of the buffer is
    marked `cleave.summed_in_buckets`: it waits for every bucket and copies
    this rank's slice. Only with `bucket-bytes` above 0 (auto leaves ZeRO 1
    unbucketed: docs/performance.md measured it no faster on a CPU, where
    the background thread takes the compute's cores); left as it is where a
    member is written in no microbatch function.

    Under ZeRO 2 with f32 gradients each microbatch function packs its
    gradients into a `cleave.concat` whose parts the memory plan makes in
    place (`cleave.parts_in_place`) and reduce-scatters it over dp into its
    slice accumulator: its parts are cut into buckets the same way (in the
    order they are made, each a run of the concat's operands), each part's
    reshapes move up to where it is made and a filled part (the padding) to
    where the part before it is, and each bucket gets a
    `cleave.reduce_scatter_owned_start` of its parts right after they are
    made, which the runtime queues on every call; the concat's
    `shard.reduce_scatter`, marked `cleave.summed_in_buckets`, waits for
    them and copies this rank's slice. Only with `bucket-bytes` above 0, as
    for ZeRO 1; a concat of one gradient and its padding (ZeRO 3's, and
    mixed precision ZeRO 2's, per parameter) is left as it is.

    Does nothing with `bucket-bytes` 0, without a dp axis of more than one
    rank, or when @apply sums no gradient over dp and no microbatch packs
    any (ZeRO 2 with mixed precision and ZeRO 3 reduce-scatter each
    gradient as it is made, `cleave-overlap-reduce-scatters`; the loss's
    count and sum alone are left where they are). Errors: an accumulator
    @apply all-reduces that no microbatch function writes.
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "0",
           "Bytes of gradients per bucket; -1: auto (a quarter of all, 4 KiB to 25 MiB; none "
           "under ZeRO 1 and 2); 0: none, the sums run in @apply">,
  ];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def OrderUpdates : Pass<"cleave-order-updates", "mlir::ModuleOp"> {
  let summary = "Put @apply's parameter updates in the order the backward finishes their gradients";
  let description = [{
    Runs after cleave-fuse-elementwise, before cleave-memory-plan. Where
    each gradient's in-place sum over dp in @apply (cleave-data-parallel's
    all-reduce of a `grad:` accumulator) is read by one op that reads no
    other gradient's sum (the optimizer's fused update), those ops move,
    after the last of them, into the order a microbatch finishes the
    gradients (their accumulators' last writes in @forward, or in a
    pipeline stage's @backward and @backward_weight): the order in which
    cleave-overlap-gradients' buckets are started, so that @apply updates
    the parameters whose sums arrived first while the later ones move. The
    updates are independent, so results do not change. Does nothing where
    an op reads several sums (the clip's norm, fp16's overflow check), a
    sum is read by more than one op, or an update's result is read before
    the last update.
  }];
}

def SinkWidenedSums : Pass<"cleave-sink-widened-sums", "mlir::ModuleOp"> {
  let summary = "Sum each widened copy of an argument over the mesh where its sum is first read, a large one in chunks";
  let description = [{
    Runs after cleave-fuse-elementwise, before cleave-memory-plan. A
    `shard.all_reduce` of an argument's widened copy that nothing else reads
    (@apply's f32 sum of a bf16 gradient accumulator,
    cleave-narrow-gradient-accumulators with f32 sums) moves, with the cast
    that widens it, down to just before the first op that reads the sum (an
    optimizer's fused update): the memory plan then holds one parameter's
    f32 sum at a time where the updates read each sum alone, instead of every
    sum from the first all-reduce to the last update. Where something reads
    every sum first (the gradient norm of `--clip-grad-norm`, fp16's overflow
    check), they all stay alive as before. A sum is not moved past an
    assignment to its argument, and all ranks run the same order. Every
    other op stays where it is.

    A sum of more elements than a quarter of the function's parameters' (a
    dominant weight's, an embedding's) that an elementwise fused update alone
    reads (each other operand a scalar or an argument of its shape, each
    result only assigned) is then widened, summed and updated in chunks of
    at most that many elements, a multiple of 32: each chunk's copy, sum and
    update read `cleave.elements` views of the arguments, and each chunk's
    results are assigned to the same elements of the targets (which the
    memory plan writes in place). The f32 sums then take at most Psi bytes
    at once, half of the 2 Psi bytes that bf16 accumulators save; every
    element is computed as before.
  }];
}

def PrefetchGathers : Pass<"cleave-prefetch-gathers", "mlir::ModuleOp"> {
  let summary = "Start ZeRO 3's parameter gathers one compute segment before the ops that read them";
  let description = [{
    Runs before cleave-memory-plan. In each function, the `shard.all_gather`s
    of stored parameter slices over the `dp` axis (ZeRO 3's, and the f32
    ones of ZeRO 1/2's master weights in @narrow_weights) fall into
    segments: the gathers between two compute ops (any op but a gather, a
    constant, and the reshapes, slices and casts of gathered values). Each
    segment's gathers move up to just after the previous segment's, marked
    `cleave.started`: at run time they are queued there on the background
    collectives' thread (runtime/comm/BackgroundCollectives.h) and move
    while the previous segment's compute runs, as DeepSpeed's ZeRO 3
    prefetches the next module's parameters. Where a gather was, a
    `cleave.collective_wait` waits for it; the ops that read the gather read
    the wait. A function's first segment stays where it is.

    The gathers are the same calls on the same values, so results do not
    change; the memory plan keeps each gathered parameter from its start, so
    the peak grows by at most a segment's gathered parameters. Does nothing
    without a dp axis of more than one rank, or in a function with fewer
    than two such gathers. A gather of a value made in the function, or of
    an argument the function writes, stays where it is.
  }];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def OverlapReduceScatters : Pass<"cleave-overlap-reduce-scatters", "mlir::ModuleOp"> {
  let summary = "Reduce-scatter ZeRO's gradients while the backward makes the next one";
  let description = [{
    Runs before cleave-memory-plan. In each function, each `shard.reduce_scatter`
    over the `dp` axis (ZeRO 3's, and ZeRO 2's with sliced masters: a
    gradient summed into this rank's slice as soon as it is made) is marked
    `cleave.started`: at run time it is queued where it is on the background
    collectives' thread (runtime/comm/BackgroundCollectives.h). The ops that
    read its result (the slice added into its accumulator and assigned)
    move, after a `cleave.collective_wait` for it, down to just before the
    first such reduce-scatter after the next matrix product (the next
    layer's gradient), or to the end of the function, so that the sum moves
    while the backward computes that gradient, as DeepSpeed's ZeRO overlaps
    its gradients' reduce-scatters. The memory plan keeps each gradient
    alive until its wait: a layer's gradients more.

    The sums are the same calls on the same values: results do not change
    (with `--deterministic`, bit for bit). Does nothing without a dp axis
    of more than one rank. A reduce-scatter stays where it is when what
    reads its result does more than accumulate it (an op with effects, a
    return) or something else reads the accumulator before its wait, and
    where no product follows (the last layer's, and ZeRO 2's one
    reduce-scatter of its flat buffer at the end of the backward).
  }];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def OverlapTpSums : Pass<"cleave-overlap-tp-sums", "mlir::ModuleOp"> {
  let summary = "Sum tensor parallelism's partial sums while the compute goes on";
  let description = [{
    Runs before cleave-memory-plan. In each function, each `shard.all_reduce`
    over the `tp` axis of a value made for it alone (a product's partial sums,
    through reshapes: it sums them in their buffer) whose first reader comes
    after a matrix product that does not read it is marked `cleave.started`:
    at run time it is queued where it is on the background collectives'
    thread (runtime/comm/BackgroundCollectives.h), and a
    `cleave.collective_wait` for it goes just before its first reader, which
    reads the wait's result, as every later reader does. In a Megatron
    layer's backward that is the input gradient's sum over tp, which then
    moves while the weight gradient's product computes, as Megatron-LM
    overlaps them (its asynchronous tensor-parallel all-reduce).

    The sums are the same calls on the same values: results do not change
    (with `--deterministic`, bit for bit). Does nothing without a tp axis of
    more than one rank; a sum stays where it is when no product comes before
    its first reader (the forward's row-parallel outputs, read at once).
  }];
  let dependentDialects = ["cleave::CleaveDialect"];
}

def LowerToEmitC : Pass<"cleave-lower-to-emitc", "mlir::ModuleOp"> {
  let summary = "Lower a memory-planned @forward and @apply to EmitC calls into the runtime";
  let description = [{
    Replaces `func.func @forward` with `emitc.func @cleave_forward(ctx, arena,
    weights, inputs, outputs)` and `@apply` (a training step's update) with
    `emitc.func @cleave_apply` of the same arguments; a module without @apply
    gets an empty one, so every program defines both. Every tensor becomes a
    `cleave::rt::Tensor` view of the arena, the weights blob or an input at
    its planned offset, and every op a call to the kernel of the same name in
    the target's namespace (`cleave::rt::cpu` or `cleave::rt::cuda`). Needs
    cleave-memory-plan first. `entry-prefix` renames the entry points
    (`cleave_stage3_forward`, ...). With `phased-apply`, each of @apply's
    sums over the pp axis (of a scalar every stage adds to: the clip's
    squares, the loss scale's overflow flag) begins a phase: the call of
    `cleave_apply` in phase k (`StepContext::applyPhase`) runs only the
    kernels between the k-th sum and the next, and leaves the next sum's
    operand in `StepContext::stagePartial`, so that the driver adds the
    rank's stages' operands before any stage sums over pp.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "Kernel backend: cpu or cuda">,
    Option<"entryPrefix", "entry-prefix", "std::string", /*default=*/"\"cleave_\"",
           "What the entry points' names begin with: cleave_, or, for a stage of an "
           "interleaved pipeline, whose rank links several stages into one program, "
           "cleave_stage<S>_">,
    Option<"phasedApply", "phased-apply", "bool", /*default=*/"false",
           "@apply runs in phases split at its sums over pp (a stage of an interleaved "
           "pipeline, whose rank adds its stages' scalars first)">,
  ];
  let dependentDialects = ["mlir::emitc::EmitCDialect"];
}

#endif
