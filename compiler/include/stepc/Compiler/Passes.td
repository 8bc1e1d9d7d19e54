//===- Passes.td - target lowering passes of stepc ---------*- tablegen -*-===//
//
// Passes that depend on the target (what its kernels can compute), from the
// `step` training step towards `stepk` kernels. Target-independent
// transforms live in passes/.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_COMPILER_PASSES_TD
#define STEPC_COMPILER_PASSES_TD

include "mlir/Pass/PassBase.td"

def StepFuseElementwise : Pass<"step-fuse-elementwise", "mlir::ModuleOp"> {
  let summary = "Fuse runs of elementwise ops into stepk.fused kernels";
  let description = [{
    In each training step (`step.train_step`), a run of consecutive
    elementwise ops (`ScalarMathOpInterface`, `step.convert`) over the same
    number of elements becomes one `stepk.fused` op: one loop on the CPU,
    one kernel on CUDA. Reshapes between members do not break a run (a
    reshape is the same elements). Values used only inside the run stay in
    registers; the op's results are the values used after it.

      fused(f_1 ... f_k) = (v_j for each v_j used after the run),
      v_i = f_i(inputs, v_<i) elementwise

    A run ends at an op that cannot join: not elementwise, another element
    count, `max-ops` members or `max-inputs` inputs reached. (On CUDA,
    `step-fuse-cuda-kernels` runs first: what a library kernel computes in
    its epilogue is part of its op by then.) Runs of one op stay as they
    are. The fused op sits where the run's last member was; reshapes of its
    results used later move after it.

    Before the runs are found, elementwise ops are placed for them
    (exactly: the ops are pure): a value whose users are all elementwise is
    recomputed beside each user that another kind of kernel separates from
    its first, where what it reads is live there anyway or holds no more
    bytes; an op moves down next to its first user (elementwise, same
    phase, across such a kernel) with the producers only it reads, where
    the inputs kept longer hold no more bytes than its result; the ops
    ending a run (with the producers only they read) rise across such a
    kernel to join the run above that reads a value they read, where all
    they read exists and the bytes held between do not grow. Llama's
    SwiGLU: silu(g) joins the mul with u after u's GEMM, the backward
    recomputes it from g instead of reading it stored in f32, and u's and
    g's gradients are one kernel reading dh, g and u once.

    ```mlir
    // before
    %h = step.add %x, %b : tensor<8x256xf32>
    %g = step.gelu %h : tensor<8x256xf32>
    // after (both %h and %g used later)
    %h, %g = stepk.fused %x, %b : (tensor<8x256xf32>, tensor<8x256xf32>) -> (tensor<8x256xf32>, tensor<8x256xf32>) {
    ^bb0(%a0: tensor<8x256xf32>, %a1: tensor<8x256xf32>):
      %0 = step.add %a0, %a1 : tensor<8x256xf32>
      %1 = step.gelu %0 : tensor<8x256xf32>
      stepk.yield %0, %1 : tensor<8x256xf32>, tensor<8x256xf32>
    }
    ```
  }];
  let dependentDialects = ["::stepc::stepk::StepKDialect"];
  let options = [
    Option<"maxOps", "max-ops", "unsigned", /*default=*/"32",
           "most ops one kernel computes">,
    Option<"maxInputs", "max-inputs", "unsigned", /*default=*/"12",
           "most inputs one kernel reads">
  ];
}

def StepFuseCudaKernels : Pass<"step-fuse-cuda-kernels", "mlir::ModuleOp"> {
  let summary = "Fold what the CUDA library kernels compute into them (stepk.gemm, stepk.attention, stepk.adamw_group)";
  let description = [{
    In each training step, what a CUDA library kernel computes besides its
    op joins it as one stepk op, so that the memory plan and the emitter
    read the decision from the IR. GEMMs (cuBLASLt's epilogues):

      convert_f32(A·B)            => gemm(A, B) -> f32        (bf16 operands)
      A·B + broadcast(b)          => gemm(A, B) bias b        (BIAS)
      gelu_tanh(A·B [+ b])        => gemm ... epilogue gelu   (GELU_AUX[_BIAS]:
                                     also returns the pre-activation)
      gelu_tanh_grad(A·B, x)      => gemm ... aux x epilogue dgelu (DGELU)
      reduce_sum(dy, leading dims) beside dyᵀ·x
                                  => gemm(dy, x) epilogue bgrad (BGRADB:
                                     also returns the bias gradient)

    Attention: every `step.attention` and `step.attention_grad` becomes its
    kernel op, writing f32 when its bf16 results only feed widening converts;
    a forward whose backward follows (same query, key, value and attributes)
    also returns its log-sum-exp, and the backward takes the forward's output
    and log-sum-exp as operands instead of recomputing them.

    Optimizer: each run of consecutive `step.adamw` ops (reshapes between
    them are free) becomes one `stepk.adamw_group` per set of
    hyperparameters (learning rate, step, scale, betas, epsilon, weight
    decay), at the run's end: one multi-tensor launch each. The gradient
    clipping's chain `((0 + Σ g0²) + Σ g1²) + ...` (a mul, a reduce_sum and
    an add per gradient) becomes one `stepk.call "squared_norms"` over
    every gradient, its body the chain without the exact `0 +`; the
    forward's bf16 copies of the parameters (a convert of a parameter each)
    become one `stepk.call "bf16_copies"` at the first of them.

    Loss: a cross_entropy and its gradient become one `stepk.call`
    `cross_entropy_fused` first (as the CPU's step-lower-library-calls
    makes it), reading bf16 logits the mixed-precision pass widened only for
    the two and writing a gradient only rounded in bf16
    (`..._of_bf16_bf16`): the classifier's GEMM then writes bf16 logits. A
    widening whose only reader is a rotation, or a norm's gradient as its
    dy, is left for step-lower-library-calls to fold into that call.

    A GEMM fold needs the fused op to be the GEMM result's sole user (the
    GELU may share it: its pre-activation stays a result), an f32 bias of the
    last dim, and everything the epilogue reads to exist where the GEMM runs;
    a bias gradient's sum (of dy, its widening, or the f32 values the GEMM
    reads rounded: then summed from the rounding, as autocast does) must
    have every user after the GEMM. The kernel op sits at the original op's position; the folded ops go. The
    CUDA pipeline runs it before `step-fuse-elementwise`.

    ```mlir
    // before
    %h = step.matmul %x, %w transpose_b : (tensor<8x64xf32>, tensor<256x64xf32>) -> tensor<8x256xf32>
    %bb = step.broadcast %b : tensor<256xf32> -> tensor<8x256xf32>
    %a = step.add %h, %bb : tensor<8x256xf32>
    %g = step.gelu %a approximate tanh : tensor<8x256xf32>
    // after
    %g, %a = stepk.gemm %x, %w bias %b epilogue gelu {shared_rhs, transpose_b}
        : (tensor<8x64xf32>, tensor<256x64xf32>, tensor<256xf32>) -> (tensor<8x256xf32>, tensor<8x256xf32>)
    ```
  }];
  let dependentDialects = ["::stepc::stepk::StepKDialect"];
}

def StepFoldWideningGemms : Pass<"step-fold-widening-gemms", "mlir::ModuleOp"> {
  let summary = "bf16 GEMMs write f32 where it is read as f32, bf16 where loops read it, with their bias (stepk.gemm; the CPU's)";
  let description = [{
    In each training and eval step, a `step.matmul` or `step.batch_matmul`
    of bf16 operands whose every user is a `step.convert` to f32 becomes
    one `stepk.gemm` writing f32: the library GEMM accumulates in f32 and
    writes its sum once, instead of rounding it to bf16 for a loop that
    widens it again (half the bytes written, one loop less, and the f32
    sum kept). A GEMM whose bf16 result another GEMM reads stays bf16 (the
    next GEMM takes it as it is). Such a GEMM whose only user adds a bias
    broadcast along its rows (f32, `[N]`) takes the bias (oneDNN adds it to
    the f32 sum), and where that sum's every use narrows it to bf16 —
    directly or through slices, as the packed QKV projection's q, k and v —
    it writes bf16 itself. A GEMM whose f32 result only elementwise ops
    read (a pre-activation, a residual branch, the gradient into a GELU)
    then writes bf16 after all, each reader widening it just before itself
    (`step-fuse-elementwise` joins the widening to the reader's loop): half
    the bytes, with the rounding the step's bf16 GEMM has. And first, an
    f32 value otherwise only rounded to bf16 (directly or through reshapes)
    and summed (`step.reduce_sum`: a bias gradient beside the weight
    gradient's GEMM operand) is summed from its rounding, widened, so the
    f32 value is never stored. An f32 `step.matmul` (an fp32 step) whose
    only user adds such a bias becomes an f32 `stepk.gemm` with the bias
    too: the sum plus the bias rounded once, as the add rounds it, without
    the add's pass over the output. The CPU pipeline runs it before
    `step-lower-library-calls`; on CUDA `step-fuse-cuda-kernels` folds the
    widening with the epilogues.

    ```mlir
    // before
    %y = step.matmul %x, %w transpose_b : (tensor<8x64xbf16>, tensor<256x64xbf16>) -> tensor<8x256xbf16>
    %f = step.convert %y : tensor<8x256xbf16> -> tensor<8x256xf32>
    // after
    %f = stepk.gemm %x, %w {shared_rhs, transpose_b} : (tensor<8x64xbf16>, tensor<256x64xbf16>) -> tensor<8x256xf32>
    // a biased projection only narrowed: after
    %q = stepk.gemm %x, %w bias %b {shared_rhs, transpose_b} : (tensor<8x64xbf16>, tensor<256x64xbf16>, tensor<256xf32>) -> tensor<8x256xbf16>
    // fp32: x·Wᵀ + b
    %h = stepk.gemm %x, %w bias %b {shared_rhs, transpose_b} : (tensor<8x64xf32>, tensor<256x64xf32>, tensor<256xf32>) -> tensor<8x256xf32>
    ```
  }];
  let dependentDialects = ["::stepc::stepk::StepKDialect"];
}

def StepLowerLibraryCalls : Pass<"step-lower-library-calls", "mlir::ModuleOp"> {
  let summary = "Lower composite ops to calls of the kernel library (stepk.call)";
  let description = [{
    In each training step, an op the runtime's kernel library computes in
    one call becomes a `stepk.call` holding it: the callee, the scalar
    arguments in the signature's order and (target cuda) the scratch the
    kernel needs, from one table (`compiler/lib/LowerLibraryCalls.cpp`)
    that both back ends print from, with the ids the kernel checks (an
    embedding's ids, a cross-entropy's targets). Covered: cross_entropy,
    embedding, layer_norm, rms_norm, softmax, rotary and their gradients,
    the reductions (sum, max, mean, max's gradient) and transpose. On the
    CPU, an attention on three last-dim slices of one [B, T, 3C] tensor
    becomes `attention_packed` on that tensor (read in place), and its
    gradient's zero-pads and adds back into [B, T, 3C] one
    `attention_grad_packed` writing the three parts
    (`compiler/lib/PackedAttention.cpp`); a cross_entropy and the
    cross_entropy_grad of the same logits and targets one
    `cross_entropy_fused` with both results (`FusedCrossEntropy.cpp`);
    an attention the other forms do not cover and its gradient
    `attention[_grad][_bf16]` (CUDA's attention is `stepk.attention`, from
    `step-fuse-cuda-kernels`). On CUDA also: a rotation reads a widened bf16
    input and writes a bf16 result only rounded (`rotary_of_bf16_bf16`); a
    norm's gradient reads a widened bf16 dy (`..._grad_of_bf16`), writes
    the add of its input gradient into the residual stream's gradient and
    that sum's bf16 rounding (`..._grad_add_rounded`), or beside dx its
    rounding where the stream starts (`..._grad_rounded`); a norm of a
    residual add computes the add and writes it beside the norm
    (`..._norm_add[_of_bf16][_bf16]`; `_of_repeated`: the other side a
    table of rows broadcast along leading dims alone, read in place, row r
    adding row r % period, the period after the norm's scalars); a sum of a
    value's squares squares as it reads (`reduce` kind 3, the gradient
    norm's). Every `step.matmul` and `step.batch_matmul`
    the target's earlier passes left (nothing folded into it) becomes a
    `stepk.gemm` without epilogue, so each emitter prints one GEMM op; and
    what the foldings left unread is erased. Other ops stay as they are.
    Under fp8 on CUDA: a value's two roundings (rows and columns) are one
    `quantize_fp8_rows_columns` pass (with its bias gradient: `_dbias`); a
    GEMM whose operands' tiles hold cuBLASLt's scaling blocks is marked
    `fp8`; and a pair that only fp8 GEMMs read (a linear layer's input, its
    output gradient) becomes the pass that packs both their operands
    (`pack_fp8_rows_columns`: `stepk.pack_fp8` bytes and block scales,
    read by the GEMMs through `lhs_scales` / `rhs_scales`), no rounded copy
    stored; so does a weight's rounding (`pack_fp8_blocks...`: 128x128
    blocks as stored and transposed).

    ```mlir
    // before
    %y = step.softmax %x dim 2 : (tensor<8x64x64xf32>) -> tensor<8x64x64xf32>
    // after
    %y = stepk.call "softmax"(%x) {scalars = [512, 64, 1]} : (tensor<8x64x64xf32>) -> tensor<8x64x64xf32> {
    ^bb0(%a: tensor<8x64x64xf32>):
      %0 = step.softmax %a dim 2 : (tensor<8x64x64xf32>) -> tensor<8x64x64xf32>
      stepk.yield %0 : tensor<8x64x64xf32>
    }
    ```
  }];
  let dependentDialects = ["::stepc::stepk::StepKDialect"];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "cpu or cuda (whose kernels may need scratch)">
  ];
}

def StepPlanMemory : Pass<"step-plan-memory", "mlir::ModuleOp"> {
  let summary = "Plan each step's memory into the IR, and check the budget on it";
  let description = [{
    The last pass of the pipeline. For the training step and the
    forward-only step it assigns every value an arena buffer at a fixed
    offset (`planMemory`: liveness over the op order, aliasing, in-place
    reuse, greedy placement; what a kernel reads or writes is an operand or
    result of its op, so the plan needs nothing but the IR) and records the
    plan in the IR:
    `step.memory_plan` on the function (the buffers as
    (offset, bytes, first op, last op) quadruples, the arena, the planned
    peak: arguments + arena; on CUDA the layout around the buffers: status
    word, cuBLASLt workspace, the kernels' scratch),
    `step.buffer` on each op (the buffer of each result, -1 none) and
    `step.in_arg` where a result lives in an argument; and each
    collective's request slot (`step.request`, in order: the step's array
    of in-flight requests, which its start fills and its wait reads). The
    emitters print this plan; nothing recomputes it.

    With a `budget`, a training step whose planned peak exceeds it is an
    error at the step: the budget is checked on the plan that is emitted.

    ```mlir
    func.func @train_step(...) attributes {step.memory_plan = {arena_bytes = 4352 : i64,
        buffers = array<i64: 0, 2048, 0, 3, 2048, 2048, 1, 2, ...>, planned_peak_bytes = ...}} {
      %0 = step.matmul %a, %b {step.buffer = array<i64: 0>} : ...
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "cpu or cuda (whose arena adds a layout around the plan)">,
    Option<"budget", "budget", "int64_t", /*default=*/"0",
           "Planned peak bytes the training step must fit (0: none)">
  ];
}

def StepFitMemoryBudget : Pass<"step-fit-memory-budget", "mlir::ModuleOp"> {
  let summary = "Remat and lower the step until the emitted plan fits the budget";
  let description = [{
    The end of the pipeline under `--remat=auto` and a memory budget:
    step-remat chooses recomputation against the step's plan before target
    lowering, but the lowered step's plan (step-plan-memory: fused kernels'
    buffers kept apart, the kernels' scratch) can need more. This pass runs
    the rest of the pipeline (step-remat with its budget, the eval step,
    target lowering, step-plan-memory) on a candidate copy of the module;
    when the candidate's planned peak is over the budget it tightens
    step-remat's budget by the overshoot and tries again from the module as
    it was (at most `attempts` times). The module becomes the first
    candidate that fits; if none does, the last attempt's error stands.
  }];
  // The dialects the passes it runs create ops of.
  let dependentDialects = ["::stepc::stepk::StepKDialect", "mlir::mesh::MeshDialect"];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "cpu or cuda">,
    Option<"budget", "budget", "int64_t", /*default=*/"0",
           "Planned peak bytes the training step must fit">,
    Option<"fuseElementwise", "fuse-elementwise", "bool", /*default=*/"true",
           "Fuse runs of elementwise ops (step-fuse-elementwise)">,
    Option<"attempts", "attempts", "unsigned", /*default=*/"4",
           "Candidates tried before the budget is declared unmet">
  ];
}

def StepOutlineBlocks : Pass<"step-outline-blocks", "mlir::ModuleOp"> {
  let summary = "Outline each planned step's block runs into functions, one per distinct run";
  let description = [{
    After `step-plan-memory`. In the training and the forward-only step, a
    *block run* is a stretch of consecutive ops computing for one block: it
    starts at an op reading (or making) a value of a parameter marked
    `block N` (#step.param; its moments and gradient count too) and takes
    the ops after it up to the next op of another block. An op of no block
    joins the run before it, unless it reads the step's arguments and
    nothing the run made (the next micro-batch's input slices); ops after
    such an op join only if an op of the run's block follows them. Ops of
    parameters outside the blocks stay in the step. Runs share a function
    when their structure is equal, compared on
    - the ops in order: names, attributes (the plan's aside), result types,
      bodies, and how operands connect (inside the run, or the k-th value
      from outside, with its type);
    - the plan: which values share storage (one pointer per address, so an
      update in place reads and writes one), and which pairs of values'
      storage overlaps (a kernel's choices depend on it);
    - the collectives: whether an op is the first reader of a collective's
      result (it waits for it there).
    Each function becomes a private `func.func @<step>_block<F>`
    (`step.block_function = F`): the body of its first run, taking the
    values the run reads from outside and returning those any of its runs'
    successors read. Each run becomes a `func.call` whose `step.run_plan`
    holds, per op of the body, what differs from call to call: the op's
    place in the memory plan (`step.buffer`, `step.in_arg`), its request
    slot and transfer tag, and its locations. A deep model's IR, source and
    compile time stay those of one block.

    ```mlir
    %h:8 = call @loss_train_step_block0(%x, %arg2, ...) {step.run_plan = [{loc = [...], step.buffer = array<i64: 2>}, ...]}
    func.func private @loss_train_step_block0(...) attributes {step.block_function = 0 : i64}
    ```

    The emitters print one C++/CUDA function per block function, called
    per run with that run's storage, and check that every run of a
    function prints the same code (a run that does not gets a function of
    its own).
  }];
}

def StepInlineBlocks : Pass<"step-inline-blocks", "mlir::ModuleOp"> {
  let summary = "Put each call of a block function back in its step, with its plan";
  let description = [{
    The inverse of `step-outline-blocks`, for readers that walk a step in
    execution order (the report, the memory plot, the emitters, tests):
    each call's body is inlined with that call's `step.run_plan` on its ops
    and `step.block_run = R` (the R-th call), the step gets
    `step.block_functions` (the function of each run), and the block
    functions are erased.
  }];
}

#endif // STEPC_COMPILER_PASSES_TD
