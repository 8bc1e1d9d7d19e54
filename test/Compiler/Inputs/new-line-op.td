// A line op that is not in the dialect, added after it: stepc-tblgen
// declares its kernels from this definition alone.
include "stepc/Dialect/Step/IR/StepOps.td"

def Step_ScaledDiffOp : Step_LineOp<"scaled_diff"> {
  let summary = "a test line op of two operands";
  let arguments = (ins Step_FloatTensor:$lhs, Step_FloatTensor:$rhs, I64Attr:$dim);
  let results = (outs Step_FloatTensor:$diff);
}
