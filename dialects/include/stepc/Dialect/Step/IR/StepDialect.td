//===- StepDialect.td - the step dialect -------------------*- tablegen -*-===//
//
// The `step` dialect: the model level of stepc. A model is a `func.func`
// marked `step.loss` that returns the scalar loss; its arguments are
// parameters (`step.param`) and inputs (`step.input`).
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_DIALECT_STEP_IR_STEPDIALECT_TD
#define STEPC_DIALECT_STEP_IR_STEPDIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Step_Dialect : Dialect {
  let name = "step";
  let cppNamespace = "::stepc::step";
  let summary = "Model-level ops for neural-network training steps";
  let description = [{
    The `step` dialect describes the forward computation of a model on
    statically shaped builtin tensors. A model is a `func.func` carrying the
    unit attribute `step.loss` and returning a scalar `tensor<f32>`. Each of its
    arguments is either a parameter, marked
    `step.param = #step.param<"name", init>`, or an input, marked
    `step.input = "name"`. A parameter used twice (a tied embedding and head)
    is one argument used twice.

    ```mlir
    func.func @loss(%wte: tensor<512x64xf32> {step.param = #step.param<"wte", normal(0.02)>},
                    %tokens: tensor<8x64xi32> {step.input = "tokens"},
                    %targets: tensor<8x64xi32> {step.input = "targets"})
        -> tensor<f32> attributes {step.loss} {
      %x = step.embedding %wte, %tokens : (tensor<512x64xf32>, tensor<8x64xi32>) -> tensor<8x64x64xf32>
      %logits = step.matmul %x, %wte transpose_b : (tensor<8x64x64xf32>, tensor<512x64xf32>) -> tensor<8x64x512xf32>
      %loss = step.cross_entropy %logits, %targets : (tensor<8x64x512xf32>, tensor<8x64xi32>) -> tensor<f32>
      return %loss : tensor<f32>
    }
    ```

    Composite ops (attention, norms, softmax, cross_entropy) stay composite
    through the pipeline: they get fused forward and backward kernels.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 0;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Unit attribute marking the loss function of a model.
    static constexpr llvm::StringLiteral kLossAttrName = "step.loss";
    /// Argument attribute (a `#step.param`) marking a parameter.
    static constexpr llvm::StringLiteral kParamAttrName = "step.param";
    /// Argument attribute (a string) marking an input.
    static constexpr llvm::StringLiteral kInputAttrName = "step.input";
    /// Argument attribute (a `#step.state`) marking optimizer state.
    static constexpr llvm::StringLiteral kStateAttrName = "step.state";
    /// Argument attribute (a dictionary {metric, rate}) on a frozen
    /// parameter: after the optimizer the training step moves it by
    /// rate · sign(1/E − m) with m the E-element metric `metric` (DeepSeek-V3's
    /// load balancing without an auxiliary loss: an expert's routing bias
    /// rises while it takes less than its share of the routed pairs).
    static constexpr llvm::StringLiteral kBalanceAttrName = "step.balance";
    /// Argument attribute (a `#step.hyper`) marking a runtime hyperparameter.
    static constexpr llvm::StringLiteral kHyperAttrName = "step.hyper";
    /// Argument attribute (an integer): the argument is a dim-0 shard of a
    /// tensor of this many rows (step-shard-fully).
    static constexpr llvm::StringLiteral kShardOfAttrName = "step.shard_of";
    /// Argument attribute (a dictionary {dim, segments} and optionally
    /// axis): the argument is this rank's part of a tensor split along
    /// `dim` over the mesh axis `axis` (default: the tp axis), whose global
    /// segment sizes along it are `segments` (step-shard-tensor; with
    /// `axis`, step-shard-experts' expert weights).
    static constexpr llvm::StringLiteral kTpShardAttrName = "step.tp_shard";
    /// Op attribute (an integer): the op computes a cross-entropy over this
    /// many target positions in pieces (step-shard-tensor's
    /// vocabulary-parallel loss), counted as tokens by the report.
    static constexpr llvm::StringLiteral kLossTokensAttrName = "step.loss_tokens";
    /// Op attribute (an integer, a mesh axis): the op's result is this
    /// rank's part of the logits of a vocabulary-parallel cross-entropy,
    /// split along its last dimension over that axis (step-eval-step
    /// gathers them for the eval entry's logits).
    static constexpr llvm::StringLiteral kVocabLogitsAttrName = "step.vocab_logits";
    /// Op attribute (an integer) on the step's `mesh.mesh`: its
    /// tensor-parallel axis (step-shard-tensor), so that a consumer reads
    /// the mesh's roles from the IR, not from the driver's flags.
    static constexpr llvm::StringLiteral kTpAxisAttrName = "step.tp_axis";
    /// Op attribute (an integer) on the step's `mesh.mesh`: its
    /// expert-parallel axis (step-shard-experts), the last of the data axes.
    static constexpr llvm::StringLiteral kEpAxisAttrName = "step.ep_axis";
    /// Op attributes (positive integers) on a `step.dropout` whose rows a
    /// batch split divided (step-rebind-batch across the data-parallel
    /// ranks; step-micro-batch across micro-batches): its rows per part,
    /// until the pass that knows the part's index offsets its rows by it.
    static constexpr llvm::StringLiteral kRankRowsAttrName = "step.rank_rows";
    static constexpr llvm::StringLiteral kMicroRowsAttrName = "step.micro_rows";
    /// Pipeline parallelism (step-pipeline-stages). Op attributes (i64)
    /// between step-micro-batch{pipeline} and it: an op's micro-batch, and
    /// the position of the forward op it copies or differentiates.
    static constexpr llvm::StringLiteral kMicroBatchAttrName = "step.micro_batch";
    static constexpr llvm::StringLiteral kOriginAttrName = "step.origin";
    /// Op attribute (i64) on a mesh.send / mesh.recv: the transfer's tag.
    static constexpr llvm::StringLiteral kTransferAttrName = "step.transfer";
    /// Argument attributes of a stage's gradient function: a copy of a
    /// parameter another stage is home to (unit), a parameter's place among
    /// the model's (i64); function attribute (i64): how many the model has.
    static constexpr llvm::StringLiteral kPpReplicaAttrName = "step.pp_replica";
    static constexpr llvm::StringLiteral kPpIndexAttrName = "step.pp_index";
    static constexpr llvm::StringLiteral kPpParamsAttrName = "step.pp_params";
    /// mesh.mesh attributes: the stages' axis (i64) and the pipeline's
    /// layout and prediction (a dictionary, for the report).
    static constexpr llvm::StringLiteral kPpAxisAttrName = "step.pp_axis";
    /// Module attribute (i64) on each builtin.module step-pipeline-stages
    /// nests in the model's: the pipeline rank whose step it holds.
    static constexpr llvm::StringLiteral kPpStageAttrName = "step.pp_stage";
    static constexpr llvm::StringLiteral kPipelineAttrName = "step.pipeline";
    /// Result attribute (a `#step.result`): the result's typed role.
    static constexpr llvm::StringLiteral kResultAttrName = "step.result";
    /// Function attribute (a symbol reference) marking a function built by
    /// step-autodiff: the loss function it differentiates, so that later
    /// passes find the pair by the IR, not by names.
    static constexpr llvm::StringLiteral kGradientAttrName = "step.gradient";
    /// Unit attribute marking a function built by step-optimizer.
    static constexpr llvm::StringLiteral kTrainStepAttrName = "step.train_step";
    /// Unit attribute marking the forward-only step built by step-eval-step.
    static constexpr llvm::StringLiteral kEvalStepAttrName = "step.eval_step";
    /// Unit attribute marking the one-row forward step built by
    /// step-sample-step (what a sampler runs).
    static constexpr llvm::StringLiteral kSampleStepAttrName = "step.sample_step";
    /// Op attribute (a `#step.phase`): the part of the step the op is in.
    static constexpr llvm::StringLiteral kPhaseAttrName = "step.phase";
    /// Function attribute (a dictionary): what step-remat decided.
    static constexpr llvm::StringLiteral kRematAttrName = "step.remat";
    /// Function attribute (a dictionary): the step's memory plan, written
    /// by step-plan-memory (the arena's buffers and size; on CUDA also the
    /// target's layout around them). The emitters print it, never redo it.
    static constexpr llvm::StringLiteral kMemoryPlanAttrName = "step.memory_plan";
    /// Op attribute (array<i64>, one per result): the plan's arena buffer
    /// of each result, -1 for none.
    static constexpr llvm::StringLiteral kBufferAttrName = "step.buffer";
    /// Op attribute (array<i64>, one per result): the function argument a
    /// result lives in (a reshape of it, an update in place), -1 for none.
    static constexpr llvm::StringLiteral kInArgAttrName = "step.in_arg";
    /// Op attribute (i64): a collective's slot in the step's array of
    /// requests (step-plan-memory numbers them in order), which its start
    /// fills and its wait reads.
    static constexpr llvm::StringLiteral kRequestAttrName = "step.request";
    /// Op attribute (i64): the block run an op of a planned step belongs
    /// to (step-outline-blocks: consecutive ops computing for one block).
    static constexpr llvm::StringLiteral kBlockRunAttrName = "step.block_run";
    /// Function attribute (array<i64>, one per block run): the outlined
    /// function each run calls; runs of equal structure share one.
    static constexpr llvm::StringLiteral kBlockFunctionsAttrName = "step.block_functions";
    /// Function attribute (i64) on a private func.func step-outline-blocks
    /// made: the block function's number in its step.
    static constexpr llvm::StringLiteral kBlockFunctionAttrName = "step.block_function";
    /// Attribute (an array with one dictionary per op of the callee's body)
    /// on a func.call of a block function: the plan of that call's ops
    /// (their step.buffer, step.in_arg, step.request, step.transfer) and
    /// their locations (`loc`: the op's, then its body's in order), which
    /// differ from call to call.
    static constexpr llvm::StringLiteral kRunPlanAttrName = "step.run_plan";
    /// Attribute (a string) on a func.call of a block function: the block
    /// the run computes for ("block 3"), as its first op's parameters, their
    /// moments or gradients say (the emitted call's comment).
    static constexpr llvm::StringLiteral kRunBlockAttrName = "step.run_block";
    /// Op attribute (a string) of a planned step: the block an op's result
    /// is computed for (stepc::computedForBlocks: a forward op its block's,
    /// a backward one the block whose gradient comes next; absent for
    /// none), which the report and --profile's trace name. A block
    /// function's ops have theirs in each call's step.run_plan.
    static constexpr llvm::StringLiteral kComputedForAttrName = "step.computed_for";

    void registerAttributes();
  }];
}

#endif // STEPC_DIALECT_STEP_IR_STEPDIALECT_TD
