//===- Passes.td - stepc passes ----------------------------*- tablegen -*-===//

#ifndef STEPC_TRANSFORMS_PASSES_TD
#define STEPC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def StepReport : Pass<"step-report", "mlir::ModuleOp"> {
  let summary = "Print the model report of each loss function as JSON";
  let description = [{
    For every function marked `step.loss`, prints one JSON object:

    - `params`, `param_tensors`, `param_bytes`: the parameters;
    - `matmul_params`: parameters used as a matmul operand (possibly through
      convert/reshape/transpose), the `P_matmul` of the FLOP formula: it
      includes a tied head and excludes positional tables, biases and norms;
    - `forward_flops`, `model_flops_per_step`: summed per-op cost rules
      (passes/lib/FlopCount.cpp): a matmul is 2·M·N·K forward and twice that
      backward; attention is QKᵀ and AV over the full T×T score matrix;
      elementwise ops, norms and the loss are not counted. Recomputation is
      not counted (model FLOPs, as in MFU).

    The IR is unchanged. An op without a cost rule is an error at its
    location.

    ```
    $ stepc-opt --step-report examples/gpt-capstone/model.mlir -o /dev/null
    {"function": "loss", "params": 875264, "matmul_params": 851968, ...,
     "model_flops_per_step": 24159191040, ...}
    ```
  }];
  let options = [
    Option<"output", "output", "std::string", /*default=*/"\"-\"",
           "File to write the JSON to ('-' for standard output)">
  ];
}

def StepDeriveBlocks : Pass<"step-derive-blocks", "mlir::ModuleOp"> {
  let summary = "Mark a model's repeated blocks (its layers) from the IR when no front end did";
  let description = [{
    Block rematerialisation, block outlining and the report's per-block
    figures read the `block N` marker of each `#step.param`. A front end
    that knows the layers sets it (examples/gen_model.py, the PyTorch
    importer); when no parameter of a loss function has one, this pass
    derives them from the IR alone:

    1. parameters are ordered by the forward's first computation with them
       (through views and collectives);
    2. each gets a signature: its type and, for every user, the op, operand
       position and result types;
    3. the longest stretch of that sequence that is one pattern repeated at
       least twice (most parameters covered, then the shortest pattern) is
       the layer stack; its k-th repetition is block k.

    Parameter names are never read, so renaming every parameter changes
    nothing. A model with no repetition (an MLP of distinct layers) gets no
    blocks. Markers a front end set are kept as they are.

    ```mlir
    // before: %w0: ... {step.param = #step.param<"a", normal(0.02)>} ... %w1 like %w0
    // after:  %w0: ... {step.param = #step.param<"a", normal(0.02), block 0>}
    //         %w1: ... {step.param = #step.param<"b", normal(0.02), block 1>}
    ```
  }];
}

def StepRebindBatch : Pass<"step-rebind-batch", "mlir::ModuleOp"> {
  let summary = "Change the batch size a loss function is written for";
  let description = [{
    Shapes are static, so the batch size is part of the model. This pass
    rebinds it: dimension 0 of every input (`step.input`, which must agree
    on it) becomes `batch`, and every op's result type is recomputed in
    order — by shape inference, or for `broadcast`, `reshape` and `convert`
    (whose result type is explicit) by scaling their leading dimension the
    way their operand's changed. With `ranks`, the batch is the global one
    and each rank's step gets `batch / ranks` (an error naming both numbers
    when it does not divide). Parameters are untouched. A model whose
    shapes do not follow (a constant sized by the batch, say) is an error at
    the op that no longer verifies.

    ```mlir
    // --step-rebind-batch=batch=2 on tokens: tensor<8x64xi32> ...
    %x = step.embedding %wte, %tokens : (tensor<512x64xf32>, tensor<2x64xi32>) -> tensor<2x64x64xf32>
    ```
  }];
  let options = [
    Option<"batch", "batch", "int64_t", /*default=*/"0",
           "the new (global) batch size; 0 keeps the model's">,
    Option<"ranks", "ranks", "int64_t", /*default=*/"1",
           "data-parallel ranks the global batch is split over: each rank's "
           "step is rebound to batch / ranks, which must be whole">
  ];
}

def StepAutodiff : Pass<"step-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode autodiff of each loss function";
  let description = [{
    For every function `@f` marked `step.loss`, adds `@f_grad`, marked
    `step.gradient`, with the same arguments and the results

    `(loss, d loss/d p_0, ..., d loss/d p_n)`

    for the trained parameters `p_i` in argument order (results marked
    `#step.result<loss>` and `#step.result<grad, "<param name>">`); a
    `frozen` parameter gets no result. The forward ops are copied, then
    each op's VJP (`AutodiffOpInterface`, dialects/lib/Step/Autodiff/) is
    applied in reverse order, seeded with `d loss = 1`; the cotangents of a
    value used several times are added; integer operands get none. A
    parameter the loss does not depend on (unused, or read only through a
    mask or `stop_gradient`) is marked `frozen` with a warning and gets no
    result, as PyTorch's optimizers skip a parameter whose gradient is None
    (no update, no weight decay, no state). A rule builds every operand's
    cotangent, so the backward ops nothing returns are erased at the end: a
    frozen weight's gradient product, an input's, and the whole backward
    below the first trained parameter. An op on the path from a parameter
    to the loss without a rule is an error at its location, as is a loss
    function whose parameters are all frozen.

    ```mlir
    func.func @loss(%w {step.param = ...}, %x {step.input = "x"}) -> tensor<f32>
    // becomes, in addition,
    func.func @loss_grad(%w {step.param = ...}, %x {step.input = "x"})
        -> (tensor<f32> {step.result = #step.result<loss>}, tensor<..> {step.result = #step.result<grad, "w">})
    ```
  }];
}

def StepMicroBatch : Pass<"step-micro-batch", "mlir::ModuleOp"> {
  let summary = "Gradient accumulation: each gradient function over M micro-batches";
  let description = [{
    Runs after step-autodiff. Each gradient function's forward and backward
    run `count` times, each over the next 1/count of the batch (rows of
    every input along dimension 0, which must divide), and the function
    returns the means of the micro-batches' losses and gradients:

    `loss = (l_1 + ... + l_M) · 1/M`, `g = (g_1 + ... + g_M) · 1/M`

    the full batch's mean loss and its gradient, up to float reassociation.
    Each micro-batch's gradient is added to its sum right after the op that
    makes it, so only one micro-batch's activations are live at a time (the
    memory plan's activation peak falls by about M) and its gradients die
    as they are made, not at the end of its backward. The micro-batch's
    gradient is the loss function rebound to batch/M (as step-rebind-batch)
    and differentiated (as step-autodiff), inlined M times on `step.slice`s
    of the inputs. The loss
    function itself (the forward-only evaluation) keeps the whole batch. Its
    metrics (`#step.result<metric>`) are averaged as the loss is. A batch
    that does not split, or a loss function with outputs (`#step.result<output>`)
    besides the loss, is an error.

    ```mlir
    // count=2 on tokens: tensor<8x64xi32>
    %t0 = step.slice %tokens offsets [0, 0] sizes [4, 64] ...
    ... the forward and backward of rows 0-3, then of rows 4-7 ...
    %g = step.add %g0, %g1 ...
    %mean = step.mul %g, %half ...
    ```
  }];
  let options = [
    Option<"count", "count", "int64_t", /*default=*/"1",
           "micro-batches per step (1: none)">,
    Option<"pipeline", "pipeline", "bool", /*default=*/"false",
           "mark each op with its micro-batch and forward origin for "
           "step-pipeline-stages (runs at count 1 too)">
  ];
}

def StepPipelineStages : Pass<"step-pipeline-stages", "mlir::ModuleOp"> {
  let summary = "Each pipeline rank's share of the micro-batched gradient, one nested module per rank (pp:P)";
  let description = [{
    Runs after step-micro-batch with `pipeline=true`. The model becomes
    `stages` nested modules, `@stage0` to `@stage<P-1>`, each a copy marked
    `step.pp_stage = r` (the passes after this one run on each). The model's
    blocks are cut into `stages` contiguous stages (`stages`·V chunks for
    `interleaved:V`, chunk c on rank c mod stages; the cut that balances the
    blocks' predicted time unless `firsts` gives it; the embedding with the
    first, the final norm and head with the last); in module r the gradient
    function becomes rank r's: its parameters' gradients, computed by its share
    of the forward and backward ops of every micro-batch, in the order of
    the schedule's passes for its rank (checked for deadlock first;
    zero-bubble splits each backward into the input gradient other stages
    wait for and the weight gradient). The schedule, timed on the stages'
    predicted costs, is recorded on the mesh (`step.pipeline`: first
    blocks, stage seconds, predicted idle per rank, stash). Activations and their gradients cross
    stages through `mesh.send` / `mesh.recv` on the world mesh (tagged
    `step.transfer`, the transfer's place in one order every stage
    computes); a parameter used on two stages (a tied embedding) is held by
    both, its gradient summed at its home stage and sent to the other
    (marked `step.pp_replica`, counted once by the clipping norm); the loss
    is the last stage's, summed over the mesh so every rank has it. The
    loss function stays whole, for the report's model FLOPs (evaluation is
    the training step's forward, step-eval-step keeps the forward sends).

    ```mlir
    module @stage0 attributes {step.pp_stage = 0 : i64} {
    // stage 0 of 2, micro-batch 0: ... the embedding and blocks 0-1 ...
    %s = mesh.send %h on @world mesh_axes = [0] destination = [1] {step.transfer = 0 : i64} ...
    // ... later, its backward:
    %g = mesh.recv %z on @world mesh_axes = [0] source = [1] {step.transfer = 3 : i64} ...
    ```
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"2", "pipeline ranks P">,
    Option<"axis", "axis", "int64_t", /*default=*/"-1",
           "the mesh axis the stages lie along (-1: the last)">,
    Option<"scheduleName", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "gpipe, 1f1b, interleaved:V (stages·V chunks, chunk c on rank c mod "
           "stages) or zero-bubble (backward split into input and weight "
           "gradients)">,
    ListOption<"firsts", "firsts", "int64_t",
               "the first block of each stage (chunk) after the first (default: even)">,
    ListOption<"meshShape", "mesh-shape", "int64_t",
               "the world mesh (default: [stages]; its axis `axis` the stages')">
  ];
  let dependentDialects = ["mlir::mesh::MeshDialect"];
}

def StepShardExperts : Pass<"step-shard-experts", "mlir::ModuleOp"> {
  let summary = "Expert parallelism: each rank holds E/ep experts, tokens reach them by all-to-all";
  let description = [{
    Runs on the loss function, before step-autodiff, so the backward follows
    from the collectives' gradients. The ep ranks split the batch (they are
    data-parallel ranks for the rest of the model); each holds experts
    `[i·E/ep, (i+1)·E/ep)` of every mixture-of-experts layer. Per layer:

    - `step.moe_dispatch` gets `groups ep`: its rows become ep blocks of
      N·K rows, block i the pairs routed to rank i's experts (zeros after
      them). Dropless and static: a block holds every pair at worst.
    - `mesh.all_to_all` over the ep axis sends block i to rank i, and the
      counts (`[ep, E/ep]`) with them: each rank receives every source's
      rows for its experts, and how many each expert got from each.
    - The grouped products read the received rows with the received counts
      (`[ep, E/ep]`: one block per source) and this rank's part of each
      expert weight (`[E/ep, ...]`, argument attribute
      `step.tp_shard = {dim = 0, segments = [E], axis}`); the ops between
      them take the new row count.
    - A second `mesh.all_to_all` returns the products' rows to the ranks
      their tokens came from, and `step.moe_combine` with `groups ep` reads
      them where the grouped dispatch put them.

    The expert weights' gradients are then this rank's experts' over every
    rank's tokens: step-shard-data-parallel averages them over the other
    data axes only. Creates the mesh `@world` of shape `mesh-shape` with its
    ep axis in `step.ep_axis`. An expert count ep does not divide, an expert
    weight used outside its layer's grouped products, or a layer whose
    rows reach anything but grouped products and elementwise ops between
    dispatch and combine are errors at the op.
  }];
  let options = [
    Option<"ep", "ep", "int64_t", /*default=*/"1", "expert-parallel ranks">,
    Option<"axis", "axis", "int64_t", /*default=*/"0", "the mesh axis ep runs along">,
    ListOption<"meshShape", "mesh-shape", "int64_t", "the mesh's shape (default: [ep])">,
  ];
  let dependentDialects = ["mlir::mesh::MeshDialect"];
}

def StepShardDataParallel : Pass<"step-shard-data-parallel", "mlir::ModuleOp"> {
  let summary = "Make each gradient function data parallel over N ranks (DDP)";
  let description = [{
    Each rank runs the gradient function on its slice of the global batch
    (rebind the batch to B/N first, `step-rebind-batch`). This pass adds the
    mesh `@world` of N ranks and, before the function returns, replaces the
    loss and every gradient g by its mean over the ranks (small gradients are
    flattened and concatenated into buckets of about `bucket-bytes`, one
    all-reduce per bucket, in the order the gradients become final):

    `g ← all_reduce_sum(g) · (1/N)`

    (SUM then scale: the gradient of the global-batch mean loss for equal
    shards; a backend's AVG is never trusted). Everything after — clipping on
    the global norm, AdamW — then runs on identical values on every rank.
    Collectives are `mesh.all_reduce` from MLIR's upstream mesh dialect.

    ```mlir
    %r = mesh.all_reduce %g on @world mesh_axes = [0] : tensor<64x64xf32> -> tensor<64x64xf32>
    %m = step.mul %r, %inv : tensor<64x64xf32>
    ```
  }];
  let dependentDialects = ["mlir::mesh::MeshDialect"];
  let options = [
    Option<"ranks", "ranks", "int64_t", /*default=*/"1", "data-parallel ranks">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"4194304",
           "gradients smaller than this share one all-reduce per bucket of about "
           "this size (0: one all-reduce per gradient)">
  ];
}

def StepShardTensor : Pass<"step-shard-tensor", "mlir::ModuleOp"> {
  let summary = "Tensor parallelism over the last mesh axis (Megatron column/row linears)";
  let description = [{
    Runs on the loss function, before step-autodiff, so the backward follows
    from two collectives' gradients. A sharding state is propagated through
    the function, one rule per op kind (docs/design/sharding.md has the
    table): a value is replicated, split along its last dimension over the
    `tp` ranks (in segments: a fused QKV projection splits each of Q, K and
    V), or a partial sum.

    - A matmul `x · Wᵀ` whose weight is a parameter used once is
      *column-parallel* when `x` is replicated: `W`'s rows are split and
      `x` enters through `step.copy_to_parallel` (its gradient is summed
      over the tp ranks). It is *row-parallel* when `x` is split: `W`'s
      columns are split, and the partial result is `mesh.all_reduce`d.
    - Attention splits its heads: Q heads and, when tp divides them, K/V
      heads; a single K/V head (multi-query) is replicated. A bias added to
      a split value is split like it. Elementwise ops, slices on segment
      boundaries and rotary keep a split.
    - Any other op (norms, embeddings, the loss) needs its operands whole;
      a column-parallel choice whose output would have to be gathered for
      one is undone, so the head and the embedding stay replicated.

    With `sequence-parallel` (Megatron's sequence parallelism) the values
    between the tp regions are split along the sequence instead of
    replicated: a row-parallel result is reduce-scattered, a value entering
    a column-parallel region all-gathered (its gradient reduce-scattered),
    norms and residual adds run on this rank's positions, and the weights
    they read have their gradients summed over tp.

    Heads, kv heads, features, the vocabulary or (with sequence
    parallelism) the sequence that `tp` does not divide are errors naming
    both numbers. A split parameter is this rank's part, with argument
    attribute `step.tp_shard = {dim, segments}` (the global segment sizes
    along `dim`); the pass creates the mesh `@world` of shape `mesh-shape`,
    whose last axis is tp.

    ```mlir
    %xin = step.copy_to_parallel %x mesh @world axes [1] : tensor<4x64x64xf32>
    %qkv = step.matmul %xin, %w_qkv transpose_b : (tensor<4x64x64xf32>, tensor<96x64xf32>) -> tensor<4x64x96xf32>
    ...
    %part = step.matmul %att, %w_proj transpose_b : (tensor<4x64x32xf32>, tensor<64x32xf32>) -> tensor<4x64x64xf32>
    %out = mesh.all_reduce %part on @world mesh_axes = [1] : tensor<4x64x64xf32> -> tensor<4x64x64xf32>
    ```
  }];
  let dependentDialects = ["mlir::mesh::MeshDialect"];
  let options = [
    Option<"tp", "tp", "int64_t", /*default=*/"1", "tensor-parallel ranks (the last mesh axis)">,
    ListOption<"meshShape", "mesh-shape", "int64_t",
               "the whole mesh, tp last (default: [tp])">,
    Option<"sequenceParallel", "sequence-parallel", "bool", /*default=*/"false",
           "split the regions between the tp regions (norms, residual adds, "
           "biases) along the sequence (dimension 1): reduce-scatter after a "
           "row-parallel matmul instead of all-reduce, all-gather before a "
           "column-parallel one">
  ];
}

def StepShardFully : Pass<"step-shard-fully", "mlir::ModuleOp"> {
  let summary = "Shard parameters, gradients and optimizer state over N ranks (FSDP)";
  let description = [{
    ZeRO-3 on the gradient function, each rank on its slice of the global
    batch (`step-rebind-batch` first). A parameter `p` of shape `[d0, ...]`
    becomes this rank's shard `[s, ...]`, `s = ceil(d0/N)` (the last rank's
    rows past `d0` are zero padding; argument attribute `step.shard_of = d0`).
    Before its first forward use it is all-gathered (and sliced back to
    `d0` rows); with `reshard` (the default) it is gathered again before its
    first backward use, so the full parameter need not live from forward to
    backward (`reshard=false` is ZeRO-2's behaviour). Each gradient is padded
    to `N·s` rows, reduce-scattered and scaled by 1/N; the loss is averaged
    over the ranks. A tied parameter stays one sharded tensor. The optimizer
    then runs on shards (`step-optimizer` with `mesh=world` sums the clipping
    norm over the ranks).

    The shards lie along the last data axis; the axes before it
    (`replica-shape`: hsdp's R groups, ep's ranks beside fsdp or hsdp) hold
    replicas of each shard, whose gradients are summed over them. An expert
    weight (`step.tp_shard` naming one of those axes) holds other experts on
    each rank of that axis, so its gradient is summed over the others only.

    ```mlir
    %full = mesh.all_gather %w on @world mesh_axes = [0] gather_axis = 0 : tensor<96x64xf32> -> tensor<192x64xf32>
    %gs = mesh.reduce_scatter %g on @world mesh_axes = [0] scatter_axis = 0 : tensor<192x64xf32> -> tensor<96x64xf32>
    ```
  }];
  let dependentDialects = ["mlir::mesh::MeshDialect"];
  let options = [
    Option<"ranks", "ranks", "int64_t", /*default=*/"1", "ranks sharing each parameter">,
    Option<"replicas", "replicas", "int64_t", /*default=*/"1",
           "hsdp: replica groups of `ranks` ranks each; gradient shards are "
           "all-reduced across the groups">,
    ListOption<"replicaShape", "replica-shape", "int64_t",
               "the data axes before the shards' (default: [replicas]); hsdp beside "
               "ep: [R, ep], an expert weight's gradient summed over R only">,
    Option<"reshard", "reshard", "bool", /*default=*/"true",
           "gather parameters again for backward (ZeRO-3) instead of keeping them (ZeRO-2)">
  ];
}

def StepScheduleCollectives : Pass<"step-schedule-collectives", "mlir::ModuleOp"> {
  let summary = "Place collectives so that communication overlaps compute";
  let description = [{
    On every function with collectives (collectives are asynchronous: each
    is waited for at the first use of its result):

    - parameter all-gathers are prefetched: the gather of the k-th parameter
      (in order of first use) is issued just before the first use of the
      (k-1)-th, i.e. while the previous layer computes; the slice that drops
      padding rows moves down to its first user, so it does not force the
      wait early;
    - gradient reductions (reduce-scatter, all-reduce, with the pad, reshape
      and concat feeding them) are issued as soon as their operands are
      final, right after the op defining the last of them.

    ```mlir
    // before: gather(w1) at the top of the step, waited for at once
    // after:  gather(w1) issued before layer 0's first use of w0
    ```
  }];
  let dependentDialects = ["mlir::mesh::MeshDialect"];
}

def StepOptimizer : Pass<"step-optimizer", "mlir::ModuleOp"> {
  let summary = "Append global-norm clipping and the optimizer: the training step";
  let description = [{
    For every `@f_grad` marked `step.gradient`, adds `@f_train_step`, marked
    `step.train_step`:

    ```
    (params..., frozen..., exp_avg..., exp_avg_sq..., inputs..., lr, step)
      -> (loss, grad_norm, params'..., exp_avg'..., exp_avg_sq'...)
    norm  = sqrt(Σ_i Σ g_i²)                         pre-clip global norm
    scale = min(1, max_grad_norm / (norm + 1e-6))    (1 when clipping is off)
    p_i', m_i', v_i' = adamw(p_i, g_i, m_i, v_i, lr, step, scale)
    ```

    with weight decay only on parameters of rank >= 2 (none on biases, norm
    vectors). The `frozen` parameters (`#step.param<..., frozen>`) follow the
    trained ones as arguments and are read as they are: no state, no update,
    no result. `lr` and `step` (counted from 1) are runtime scalars (argument
    marks `step.hyper = #step.hyper<lr>` / `#step.hyper<step>`), so a
    schedule never recompiles. The moments are arguments marked
    `step.state = #step.state<exp_avg, "<name>">` / `<exp_avg_sq, ...>`
    (typed: no consumer parses a name) and results marked
    `#step.result<exp_avg, "<name>">` / `<exp_avg_sq, ...>` (`step.result`); each new
    parameter and moment may be written over its old buffer (in-place update,
    docs/design/training-step.md).

    `algorithm` chooses the update (each PyTorch's, on the clipped
    gradient): `adamw` (above), `adam` (`step.adamw` with
    `decoupled_weight_decay = false`: the decay is an L2 term of the
    gradient), `sgd` (`step.sgd`: momentum, optionally Nesterov; L2 weight
    decay; its momentum buffer is the `exp_avg` state) and `lion`
    (`step.lion`: sign of the β1 interpolation, decoupled decay; one
    `exp_avg` state). sgd and lion keep no `exp_avg_sq`. `muon` is the
    hybrid of torch.optim.Muon on the matrices of the repeated blocks
    (`#step.param<..., block N>` of rank 2: momentum, Newton-Schulz
    orthogonalisation in step ops, decoupled decay; one `exp_avg` state, the
    momentum buffer) and AdamW on every other parameter; under fsdp/hsdp
    each matrix is orthogonalised whole by one owner rank of the shard axis
    (all-to-alls bring it the rows and return them), under ddp
    (`replica-axis`) by one owner rank of that axis (an all-gather returns
    the results); under tp its parts are gathered first.
  }];
  let options = [
    Option<"algorithm", "algorithm", "std::string", /*default=*/"\"adamw\"",
           "adamw, adam, sgd, lion or muon">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW/Adam/Lion β1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.95", "AdamW/Adam/Lion β2">,
    Option<"epsilon", "epsilon", "double", /*default=*/"1e-8", "AdamW/Adam ε">,
    Option<"momentum", "momentum", "double", /*default=*/"0.9", "SGD momentum">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false", "SGD with Nesterov momentum">,
    Option<"muonMomentum", "muon-momentum", "double", /*default=*/"0.95",
           "Muon momentum (its matrices; AdamW's options rule the rest)">,
    Option<"muonNesterov", "muon-nesterov", "bool", /*default=*/"true",
           "Muon with Nesterov momentum">,
    Option<"nsSteps", "ns-steps", "int64_t", /*default=*/"5",
           "Muon's Newton-Schulz iterations">,
    Option<"adjustLr", "adjust-lr", "std::string", /*default=*/"\"match-rms-adamw\"",
           "Muon's step size per matrix: original (lr·√max(1, rows/cols)) or "
           "match-rms-adamw (lr·0.2·√max(rows, cols): AdamW's update RMS, one lr for both)">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.1",
           "weight decay on parameters of rank >= 2 (decoupled for adamw and lion, "
           "an L2 term for adam and sgd)">,
    Option<"maxGradNorm", "max-grad-norm", "double", /*default=*/"1.0",
           "global-norm clipping threshold (0 disables clipping)">,
    Option<"mesh", "mesh", "std::string", /*default=*/"\"\"",
           "mesh whose ranks hold gradient shards: the squared norm is summed over it">,
    Option<"meshAxis", "mesh-axis", "int64_t", /*default=*/"0",
           "the mesh axis along which gradients are sharded (-1: none)">,
    Option<"ppAxis", "pp-axis", "int64_t", /*default=*/"-1",
           "the mesh's pipeline axis: each stage's squares, at their places "
           "among the model's parameters (step.pp_index), are summed over it "
           "(and over mesh-axis when gradients are sharded) (-1: none)">,
    Option<"tpAxis", "tp-axis", "int64_t", /*default=*/"-1",
           "the mesh's tensor-parallel axis: the squares of tp-split gradients "
           "(step.tp_shard) are summed over it, replicated ones are not (-1: none)">,
    Option<"replicaAxis", "replica-axis", "int64_t", /*default=*/"-1",
           "the world mesh's axis whose ranks hold every parameter whole and equal "
           "(ddp): Muon's matrices are dealt out to owners along it and their "
           "orthogonalised updates all-gathered (-1: none)">
  ];
}

def StepEvalStep : Pass<"step-eval-step", "mlir::ModuleOp"> {
  let summary = "Add the forward-only step: the loss of the training step, nothing else";
  let description = [{
    For every `@f_train_step` marked `step.train_step`, adds `@f_eval_step`,
    marked `step.eval_step`: the same arguments (so a runtime passes both
    the same buffers), the loss (and, when the loss is one f32
    cross-entropy, its logits as a second result, `#step.result<logits>`:
    what a sampler reads; under `step-micro-batch`, whose step holds one
    cross-entropy per micro-batch, each on its slice of the targets' rows,
    their logits joined in row order; then the loss function's own outputs,
    role `output`),
    and only the ops these depend on:

    ```
    eval_step(args...) = loss(train_step(args...))
                       = the backward slice of the loss in train_step
    ```

    The slice is the forward (`#step.phase<forward>`) and the collectives
    that feed it: under fsdp the parameters' forward gathers, under ddp the
    loss's all-reduce. Gradients, recomputation and the optimizer are not in
    it, so the step's state is never written. The function is planned and
    emitted on its own (its own, smaller arena).

    ```mlir
    // before: func @loss_train_step(...) -> (loss, grad_norm, params'...)
    // after, also:
    func.func @loss_eval_step(<the same arguments>)
        -> (tensor<f32> {step.result = #step.result<loss>}, tensor<8x64x512xf32> {step.result = #step.result<logits>})
        attributes {step.eval_step}
    ```
  }];
}

def StepSampleStep : Pass<"step-sample-step", "mlir::ModuleOp"> {
  let summary = "Add the one-row forward step a sampler runs";
  let description = [{
    A sampler draws each token from one row's logits, and the forward-only
    step computes every row of the batch for it. For every `@f_eval_step`
    that returns `[batch, seq, vocab]` logits, adds `@f_sample_step`, marked
    `step.sample_step`: the eval step with its inputs rebound to one row
    (the same rule as `step-rebind-batch`: every value whose leading
    dimension is the batch takes one row, collectives scale like their
    operands), the same arguments otherwise (parameters are shared; a
    runtime passes one-row input buffers) and the same results, the loss of
    that row and its logits `[1, seq, vocab]`: about 1/batch of the eval
    step's work. Its logits are those the eval step gives a row when no op
    of the forward mixes the rows of a batch; the pass checks that no
    reduction the logits depend on runs over dimension 0 (a batch
    statistic) and builds none otherwise. Rows mixed another way (a
    transpose moving the batch before a reduction) are not detected.

    A pipeline stage's eval step (it sends or receives activations) gets
    none, nor one whose inputs have no common batch dimension or with an
    op the batch cannot be rebound through (no shape rule): a sampler then
    runs the eval step.

    ```mlir
    func.func @loss_sample_step(..., %tokens: tensor<1x64xi32> {step.input = "tokens"},
                                %targets: tensor<1x64xi32> {step.input = "targets"})
        -> (tensor<f32> {step.result = #step.result<loss>},
            tensor<1x64x512xf32> {step.result = #step.result<logits>})
        attributes {step.sample_step}
    ```
  }];
}

def StepFp8 : Pass<"step-fp8", "mlir::ModuleOp"> {
  let summary = "Round the linear layers' products to fp8 by tiles (emulated exactly)";
  let description = [{
    On each loss function (before step-autodiff), every `matmul` whose
    right operand is a rank-2 parameter (an `nn.Linear` weight) that no
    embedding reads (not the embedding or a head tied to it) and whose
    result is not the loss's logits (not an untied head) becomes an fp8
    product, DeepSeek-V3's recipe: its input rounded to e4m3 in [1, 128]
    tiles, its weight to e4m3 in [128, 128] blocks (`step.quantize_fp8`:
    power-of-two scales, so the rounding is the only error), and its
    output's gradient to e5m2 in [1, 128] tiles before the products that
    make the input's and weight's gradients (`step.quantize_grad_fp8`).
    Embeddings, the head, norms, attention, the router and the optimizer
    stay as they are (`--precision=fp8` runs step-mixed-precision after:
    bf16 holds every fp8 value exactly).

    ```mlir
    %xq = step.quantize_fp8 %x format e4m3 tile [1, 128] : tensor<8x64x64xf32>
    %wq = step.quantize_fp8 %w format e4m3 tile [128, 128] : tensor<256x64xf32>
    %y = step.matmul %xq, %wq transpose_b : (tensor<8x64x64xf32>, tensor<256x64xf32>) -> tensor<8x64x256xf32>
    %yq = step.quantize_grad_fp8 %y format e5m2 tile [1, 128] : tensor<8x64x256xf32>
    ```

    `scaling=matrix` gives each matrix one scale instead (each weight, each
    sequence's activations and gradients): the coarser scaling the tiles
    are measured against.
  }];
  let options = [
    Option<"scaling", "scaling", "std::string", /*default=*/"\"tile\"",
           "tile ([1, 128] tiles, [128, 128] weight blocks) or matrix (one scale each)">
  ];
}

def StepFp8WeightGrads : Pass<"step-fp8-weight-grads", "mlir::ModuleOp"> {
  let summary = "Round a weight gradient's operands to fp8 along the tokens";
  let description = [{
    After step-autodiff, under `--precision=fp8` with tiles: a linear
    layer's weight gradient `dW = dYᵀ·X` sums over the tokens, and the
    operands step-fp8 rounded in [1, 128] tiles along the features cross a
    new tile (and scale) at every token of that sum. DeepSeek-V3's recipe
    rounds them again for this product: the unrounded input and output
    gradient, flattened to [tokens, features], each in [128, 1] tiles (128
    tokens of one feature), same format. Each operand of a backward
    `matmul` that is contracted along its rows (lhs with `transpose_a`,
    rhs without `transpose_b`) and is a row-tiled `step.quantize_fp8`
    (through reshapes) is replaced so. Then every product of a linear
    layer has its operands' tiles along its K: what the fp8 GEMMs'
    per-block scales take (CUDA: cuBLASLt's block scaling).

    ```mlir
    %dyq = step.quantize_fp8 %dy2 format e5m2 tile [128, 1] : tensor<512x256xf32>
    %xq = step.quantize_fp8 %x2 format e4m3 tile [128, 1] : tensor<512x64xf32>
    %dw = step.matmul %dyq, %xq transpose_a : (tensor<512x256xf32>, tensor<512x64xf32>) -> tensor<256x64xf32>
    ```
  }];
}

def StepMixedPrecision : Pass<"step-mixed-precision", "mlir::ModuleOp"> {
  let summary = "Compute GEMMs and attention in bf16, everything else in f32";
  let description = [{
    Mixed precision on the training step (a function marked
    `step.train_step`, so after `step-optimizer`): every `matmul`,
    `batch_matmul`, `attention` and `attention_grad` — forward and backward —
    reads bf16 copies of its f32 operands (one `convert` per value, made at
    its first such use and shared by the later ones) and its results are
    converted back to f32 at once. Parameters stay f32 (the master copy),
    as do the AdamW moments, the loss, every reduction, norm and
    elementwise op, and the gradients the optimizer sees; the GEMMs still
    accumulate in f32 (the CUDA back end asks cuBLASLt for f32 compute and
    writes the widened result directly, so the converts after a GEMM cost
    nothing). This is what `torch.autocast(dtype=torch.bfloat16)` does to a
    model with f32 parameters.

    ```mlir
    %xb = step.convert %x : tensor<8x64x64xf32> -> tensor<8x64x64xbf16>
    %wb = step.convert %w : tensor<192x64xf32> -> tensor<192x64xbf16>
    %yb = step.matmul %xb, %wb transpose_b : (tensor<8x64x64xbf16>, tensor<192x64xbf16>) -> tensor<8x64x192xbf16>
    %y = step.convert %yb : tensor<8x64x192xbf16> -> tensor<8x64x192xf32>
    ```
  }];
}

def StepRemat : Pass<"step-remat", "mlir::ModuleOp"> {
  let summary = "Recompute forward values in the backward to meet a memory budget";
  let description = [{
    Rematerialisation on the training step (a function marked
    `step.train_step`). A *candidate* is a value of a forward op
    (`#step.phase<forward>`) that a backward op reads: by default it stays
    in memory from the forward to the backward. A recomputed candidate is
    instead computed again, by a copy of its op (`#step.phase<recompute>`)
    placed before its first backward reader, from kept candidates,
    arguments and other recomputed values; forward values no backward op
    reads are recomputed with it when it needs them. On the CPU target the
    copy computes the same bits, so losses and parameters are unchanged.

    Under fsdp a gathered parameter (an `all_gather` of a parameter shard
    and the slice dropping its padding) is a candidate too: kept from the
    forward to the backward, or gathered again (its copy) before its first
    backward reader, costed by the bytes it receives (`flops-per-comm-byte`).
    The same search weighs it against recomputing activations; `stepc`
    with a memory budget has step-shard-fully keep every gathered parameter
    (reshard=false) and leaves the re-gathers to this pass.

    - `mode=block`: keep only each block's inputs (values a later block
      reads) and everything outside the blocks; recompute the rest (torch
      `checkpoint` around every block).
    - `mode=selective`: recompute the values whose recomputation needs no
      matmul or attention, keep the rest (Megatron's selective
      recomputation); a recomputed value's nearest kept candidates stay kept,
      so no chain of recomputation grows across blocks.
    - `mode=auto`: the least recompute cost the search finds whose planned
      peak (step-level `planMemory` + argument bytes + `extra-bytes`) fits
      `budget`. Cost: FLOPs + `flops-per-byte` × bytes written (memory-bound
      ops costed by bytes). The search: a peak-driven greedy (recompute what
      is live at the plan's busiest op and saves the most peak bytes per
      cost, each option planned) with an exchange step, block
      checkpointing, and everything recomputed, each refined by keeping
      values again while the plan fits; the cheapest wins. Needs a budget.
      `search=exhaustive` instead tries every subset of at most 16
      candidates: the optimum the greedy search is tested against
      (test/Transforms/remat-optimality.test).

    With `budget` > 0, a peak above the budget is an error, whatever the
    mode, that names the smallest budget the search meets and what occupies
    it (arguments, arena, back-end workspace). The greedy search is a
    heuristic: docs/design/remat.md gives its measured gap to the optimum.
    The decision is recorded on the step as `step.remat = {budget,
    candidates, cost, mode, planned_peak, recomputed}` (bytes; cost in
    FLOPs + flops-per-byte × bytes written).

    ```mlir
    // mode=block: the GELU of block 0, recomputed before its backward reader
    %g = step.gelu %fc {step.phase = #step.phase<recompute>} : tensor<8x64x256xf32>
    %dW = step.matmul %dy, %g transpose_a {step.phase = #step.phase<backward>} : ...
    ```
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"auto\"",
           "none, block, selective, auto, or given (the candidates `recompute` lists)">,
    ListOption<"recomputeList", "recompute", "int64_t",
               "with mode=given: the candidates to recompute, by their index in "
               "graph-json's candidate list (an external solver's decision)">,
    Option<"budget", "budget", "int64_t", /*default=*/"0",
           "bytes the planned peak may reach per rank (0: no budget)">,
    Option<"extraBytes", "extra-bytes", "int64_t", /*default=*/"0",
           "bytes the back end adds to the plan (the CUDA GEMM workspace)">,
    Option<"flopsPerByte", "flops-per-byte", "double", /*default=*/"20.0",
           "cost of one byte written, in FLOPs (the machine balance)">,
    Option<"flopsPerCommByte", "flops-per-comm-byte", "double", /*default=*/"200.0",
           "cost of one byte a re-gather receives, in FLOPs">,
    Option<"search", "search", "std::string", /*default=*/"\"greedy\"",
           "how auto searches: greedy, or exhaustive (every subset of at most 16 "
           "candidates: the optimum the greedy search is measured against)">,
    Option<"graphJson", "graph-json", "std::string", /*default=*/"\"\"",
           "write the forward graph the decision is over (ops, FLOPs, bytes, "
           "candidates) to this JSON file, for an exact external solver">
  ];
}

#endif // STEPC_TRANSFORMS_PASSES_TD
