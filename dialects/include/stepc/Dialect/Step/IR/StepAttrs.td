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
  let summary = "a trainable parameter: its name and initialiser";
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
  }];
  let parameters = (ins
    StringRefParameter<"parameter name">:$name,
    "InitKind":$init,
    "llvm::APFloat":$std,
    "int64_t":$layers
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The standard deviation the initialiser draws with (0 for zeros/ones).
    double getEffectiveStd() const;
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

def Step_Hyper : I32EnumAttr<"Hyper", "a runtime hyperparameter", [
    I32EnumAttrCase<"Lr", 0, "lr">,
    I32EnumAttrCase<"Step", 1, "step">
  ]> {
  let cppNamespace = "::stepc::step";
  let genSpecializedAttr = 0;
}

def Step_HyperAttr : EnumAttr<Step_Dialect, Step_Hyper, "hyper"> {
  let summary = "a runtime hyperparameter argument: the learning rate or the step number";
  let description = [{
    `step.hyper = #step.hyper<lr>` marks the scalar the runtime sets to the
    scheduled learning rate each step, `#step.hyper<step>` the one it sets to
    the step number (from 1, for Adam's bias correction).
  }];
  let assemblyFormat = "`<` $value `>`";
}

#endif // STEPC_DIALECT_STEP_IR_STEPATTRS_TD
