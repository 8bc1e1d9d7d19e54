//===- StepAttrs.td - step dialect attributes --------------*- tablegen -*-===//

#ifndef STEPC_DIALECT_STEP_IR_STEPATTRS_TD
#define STEPC_DIALECT_STEP_IR_STEPATTRS_TD

include "stepc/Dialect/Step/IR/StepDialect.td"
include "mlir/IR/EnumAttr.td"

def Step_InitKind : I32EnumAttr<"InitKind", "parameter initialiser", [
    I32EnumAttrCase<"Zeros", 0, "zeros">,
    I32EnumAttrCase<"Ones", 1, "ones">,
    I32EnumAttrCase<"Normal", 2, "normal">,
    I32EnumAttrCase<"ScaledNormal", 3, "scaled_normal">
  ]> {
  let cppNamespace = "::stepc::step";
  let genSpecializedAttr = 0;
}

def Step_GeluApproximationAttr : I32EnumAttr<"GeluApproximation",
    "GELU formula", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Tanh", 1, "tanh">
  ]> {
  let cppNamespace = "::stepc::step";
}

def Step_Fp8FormatAttr : I32EnumAttr<"Fp8Format",
    "an 8-bit float format", [
    I32EnumAttrCase<"E4M3", 0, "e4m3">,
    I32EnumAttrCase<"E5M2", 1, "e5m2">
  ]> {
  let cppNamespace = "::stepc::step";
}

def Step_ComparePredicateAttr : I32EnumAttr<"ComparePredicate",
    "elementwise comparison", [
    I32EnumAttrCase<"LT", 0, "lt">,
    I32EnumAttrCase<"LE", 1, "le">,
    I32EnumAttrCase<"GT", 2, "gt">,
    I32EnumAttrCase<"GE", 3, "ge">,
    I32EnumAttrCase<"EQ", 4, "eq">,
    I32EnumAttrCase<"NE", 5, "ne">
  ]> {
  let cppNamespace = "::stepc::step";
}

def Step_Phase : I32EnumAttr<"Phase", "part of a training step an op belongs to", [
    I32EnumAttrCase<"Forward", 0, "forward">,
    I32EnumAttrCase<"Backward", 1, "backward">,
    I32EnumAttrCase<"Optimizer", 2, "optimizer">,
    I32EnumAttrCase<"Collective", 3, "collective">,
    I32EnumAttrCase<"Recompute", 4, "recompute">
  ]> {
  let cppNamespace = "::stepc::step";
  let genSpecializedAttr = 0;
}

def Step_PhaseAttr : EnumAttr<Step_Dialect, Step_Phase, "phase"> {
  let summary = "the part of the training step an op belongs to";
  let description = [{
    Set on every op of a gradient or training-step function as
    `step.phase = #step.phase<...>`: `forward` (copied from the loss
    function), `backward` (built by step-autodiff), `optimizer` (clipping and
    AdamW), `collective` (communication a sharding pass inserted, with its
    padding and scaling) and `recompute` (a forward op step-remat copied into
    the backward). Passes, the report and the memory decisions read it, never
    op positions; an op that replaces others carries their phase.
  }];
  let assemblyFormat = "`<` $value `>`";
}

def Step_ParamAttr : AttrDef<Step_Dialect, "Param"> {
  let mnemonic = "param";
  let summary = "a parameter: its name, initialiser, block and whether it trains";
  let description = [{
    Marks an argument of the loss function as a parameter. `name` is the
    parameter's stable name (PyTorch's, e.g. `h.0.attn.c_attn.weight`): it keys
    checkpoints, `ReadParam` and the comparison with PyTorch. The initialiser
    is one of

    - `zeros`, `ones`;
    - `normal(std)`: N(0, std²);
    - `scaled_normal(std, layers)`: N(0, (std / sqrt(2·layers))²), GPT-2's
      initialiser for the projections that feed the residual stream.

    ```mlir
    %w: tensor<192x64xf32> {step.param = #step.param<"h.0.attn.c_attn.weight", normal(0.02)>}
    %p: tensor<64x64xf32> {step.param = #step.param<"h.0.attn.c_proj.weight", scaled_normal(0.02, 2)>}
    %b: tensor<64xf32> {step.param = #step.param<"h.0.attn.c_proj.bias", zeros>}
    ```

    An optional `block N` (N >= 0) says the parameter belongs to the model's
    N-th repeated block (a transformer layer). Block rematerialisation,
    outlining and the report's per-block figures read it, never the name:
    a front end sets it (examples/gen_model.py, the PyTorch importer), or
    step-derive-blocks derives it from the IR when no parameter has one.

    ```mlir
    %w: tensor<192x64xf32> {step.param = #step.param<"blk_0_qkv_w", normal(0.02), block 0>}
    ```

    An optional `frozen` marks a parameter that the step holds but does not
    train (a pretrained base under LoRA, a frozen embedding): the runtime
    initialises, loads, shards and checkpoints it like any parameter, but
    step-autodiff computes no gradient for it (so no weight-gradient
    products), the optimizer keeps no state for it and the training step
    leaves it unchanged. At least one parameter must train.

    ```mlir
    %w: tensor<768x768xf32> {step.param = #step.param<"h.0.attn.c_proj.weight", normal(0.02), block 0, frozen>}
    ```

    Optional `weight_decay W` and `lr_scale S` give the parameter its own
    optimizer settings, as a `torch.optim` parameter group does: decay `W`
    instead of the optimizer's rule (`--optimizer-options=weight-decay`,
    applied to parameters of rank >= 2), and a learning rate of `S` times
    the schedule's. The PyTorch importer writes them from the optimizer's
    groups.

    ```mlir
    %b: tensor<768xf32> {step.param = #step.param<"h.0.ln_1.bias", zeros, block 0, weight_decay 0.01, lr_scale 0.1>}
    ```
  }];
  let parameters = (ins
    StringRefParameter<"parameter name">:$name,
    "InitKind":$init,
    "llvm::APFloat":$std,
    "int64_t":$layers,
    DefaultValuedParameter<"int64_t", "-1">:$block,
    DefaultValuedParameter<"bool", "false">:$frozen,
    DefaultValuedParameter<"llvm::APFloat", "llvm::APFloat(-1.0)">:$weightDecay,
    DefaultValuedParameter<"llvm::APFloat", "llvm::APFloat(1.0)">:$lrScale
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The standard deviation the initialiser draws with (0 for zeros/ones).
    double getEffectiveStd() const;
    /// Whether the parameter is marked as part of a repeated block.
    bool hasBlock() const { return getBlock() >= 0; }
    /// This attribute with its block marker set to `block` (-1: none).
    ParamAttr withBlock(int64_t block) const;
    /// This attribute with its `frozen` marker set to `frozen`.
    ParamAttr withFrozen(bool frozen) const;
    /// Whether the step trains the parameter (it is not `frozen`).
    bool isTrained() const { return !getFrozen(); }
    /// Whether the parameter sets its own weight decay; the decay and the
    /// learning-rate scale as numbers.
    bool hasWeightDecay() const { return getWeightDecayValue() >= 0.0; }
    double getWeightDecayValue() const { return getWeightDecay().convertToDouble(); }
    double getLrScaleValue() const { return getLrScale().convertToDouble(); }
  }];
}

def Step_Moment : I32EnumAttr<"Moment", "an AdamW moment", [
    I32EnumAttrCase<"ExpAvg", 0, "exp_avg">,
    I32EnumAttrCase<"ExpAvgSq", 1, "exp_avg_sq">
  ]> {
  let cppNamespace = "::stepc::step";
  let genSpecializedAttr = 0;
}

def Step_StateAttr : AttrDef<Step_Dialect, "State"> {
  let mnemonic = "state";
  let summary = "optimizer state: which moment, of which parameter";
  let description = [{
    Marks an argument of a training step as optimizer state, typed: the
    moment and the name of the parameter it belongs to (so a consumer never
    parses a name). Its external name (checkpoints, `--inputs`, the runtime's
    argument table) is `<moment>.<param>`, PyTorch's optimizer state key.

    ```mlir
    %m: tensor<64x64xf32> {step.state = #step.state<exp_avg, "h.0.mlp.c_fc.weight">}
    %v: tensor<64x64xf32> {step.state = #step.state<exp_avg_sq, "h.0.mlp.c_fc.weight">}
    ```
  }];
  let parameters = (ins
    EnumParameter<Step_Moment>:$moment,
    StringRefParameter<"parameter name">:$param
  );
  let assemblyFormat = "`<` $moment `,` $param `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// `<moment>.<param>`, e.g. "exp_avg.wte".
    std::string getQualifiedName() const;
  }];
}

def Step_Role : I32EnumAttr<"Role", "what a step function's result is", [
    I32EnumAttrCase<"Loss", 0, "loss">,
    I32EnumAttrCase<"GradNorm", 1, "grad_norm">,
    I32EnumAttrCase<"Logits", 2, "logits">,
    I32EnumAttrCase<"Grad", 3, "grad">,
    I32EnumAttrCase<"Param", 4, "param">,
    I32EnumAttrCase<"Moment", 5, "moment">,
    I32EnumAttrCase<"Output", 6, "output">,
    I32EnumAttrCase<"Metric", 7, "metric">
  ]> {
  let cppNamespace = "::stepc::step";
  let genSpecializedAttr = 0;
}

def Step_ResultAttr : AttrDef<Step_Dialect, "Result"> {
  let mnemonic = "result";
  let summary = "a function result's role: loss, norm, logits, gradient, updated state, output";
  let description = [{
    Marks a result of a step function with its typed role, so that passes,
    emitters and tools select results by role and parameter, never by
    parsing a name:

    - `loss`, `grad_norm`, `logits`: the scalar loss, the clipping norm, the
      eval entry's logits;
    - `grad, "p"`: the gradient of parameter `p` (step-autodiff);
    - `param, "p"`, `exp_avg, "p"`, `exp_avg_sq, "p"`: the updated
      parameter `p` and its AdamW moments (step-optimizer; the last two have
      role `moment`);
    - `output, "name"`: a loss function's extra output (what the runtime
      reads through the eval entry: probabilities, accuracy counts);
    - `metric, "name"`: a loss function's measure of the batch (an expert's
      share of the routed tokens, an auxiliary loss), which every training
      step returns, reduced over data-parallel ranks, micro-batches and
      pipeline stages as the loss is (its mean over the batch), for the
      trainer to log.

    Its external name (`--save-outputs` files, the interpreter's .npy
    files) is `<role>.<name>`, e.g. `grad.wte` or `exp_avg.wte`.

    ```mlir
    func.func @loss(...) -> (tensor<f32>, tensor<64x4xf32> {step.result = #step.result<output, "probabilities">})
    func.func @loss_grad(...) -> (tensor<f32> {step.result = #step.result<loss>},
                                  tensor<7x4xf32> {step.result = #step.result<grad, "wte">})
    ```
  }];
  let parameters = (ins
    EnumParameter<Step_Role>:$role,
    EnumParameter<Step_Moment>:$moment,
    StringRefParameter<"parameter or output name">:$name
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "Role":$role, CArg<"llvm::StringRef", "{}">:$name), [{
      return $_get($_ctxt, role, Moment::ExpAvg, name);
    }]>,
    AttrBuilder<(ins "Moment":$moment, "llvm::StringRef":$param), [{
      return $_get($_ctxt, Role::Moment, moment, param);
    }]>
  ];
  let extraClassDeclaration = [{
    /// Whether the role names a parameter or an output.
    static bool roleHasName(Role role);
    /// `loss`, `grad.<p>`, `exp_avg.<p>`, `output.<name>`, ...
    std::string getQualifiedName() const;
  }];
}

def Step_Hyper : I32EnumAttr<"Hyper", "a runtime hyperparameter", [
    I32EnumAttrCase<"Lr", 0, "lr">,
    I32EnumAttrCase<"Step", 1, "step">,
    I32EnumAttrCase<"Seed", 2, "seed">
  ]> {
  let cppNamespace = "::stepc::step";
  let genSpecializedAttr = 0;
}

def Step_HyperAttr : EnumAttr<Step_Dialect, Step_Hyper, "hyper"> {
  let summary = "a runtime hyperparameter argument: the learning rate, the step number or the seed";
  let description = [{
    `step.hyper = #step.hyper<lr>` marks the scalar the runtime sets to the
    scheduled learning rate each step, `#step.hyper<step>` the one it sets to
    the step number (from 1, for Adam's bias correction and dropout's key),
    `#step.hyper<seed>` the i32 scalar it sets to the run's seed (dropout's
    key; present only in a step with dropout).
  }];
  let assemblyFormat = "`<` $value `>`";
}

#endif // STEPC_DIALECT_STEP_IR_STEPATTRS_TD
