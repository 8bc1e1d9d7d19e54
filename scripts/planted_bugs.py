#!/usr/bin/env python3
"""Planted bugs: proof that the test suite would catch a wrong stepc.

Each entry below plants one small, plausible bug in one part of stepc (an
autodiff rule, a sharding rule, a schedule, the memory planner, the
optimizer, a checkpoint, the trainer, ...), rebuilds, and runs the tests
of the suite that cover that part. A planted bug the tests do not notice
("survived") is a hole in the suite: the script exits 1 and names it.

    scripts/planted_bugs.py              # every bug, minutes after a build
    scripts/planted_bugs.py --list
    scripts/planted_bugs.py --only adamw-bias-correction,tanh-vjp

It works in this checkout and its build (default build/), not a scratch
clone: a clone would need a build of its own (half an hour on two cores)
where this one rebuilds one file and relinks. So it refuses a working tree
with uncommitted changes, restores each file as it was (also on Ctrl-C),
and rebuilds the clean tree at the end. Each bug is an exact text
replacement; one whose text is gone (the code moved) is reported as
"stale", so a refactor shows here instead of silently testing nothing.
"""

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIT = "/usr/lib/llvm-19/build/utils/lit/lit.py"


@dataclass
class Bug:
    name: str
    part: str
    path: str
    old: str
    new: str
    # lit tests (paths under test/) and commands (run in the build dir)
    lit: list = field(default_factory=list)
    commands: list = field(default_factory=list)


BUGS = [
    Bug("tanh-vjp", "autodiff rule",
        "dialects/lib/Step/Autodiff/ElementwiseGrad.cpp",
        "g.sub(g.splat(1.0, y.getType()), g.mul(y, y))",
        "g.sub(g.splat(1.0, y.getType()), y)",
        lit=["Transforms/step-autodiff-gradcheck.mlir"]),
    Bug("moe-dispatch-vjp", "autodiff rule (mixture of experts)",
        "dialects/lib/Step/Autodiff/MoeGrad.cpp",
        "b.getFloatAttr(element, 1.0)", "b.getFloatAttr(element, 0.5)",
        lit=["Transforms/step-autodiff-gradcheck.mlir"]),
    Bug("tp-row-parallel-sum", "sharding rule (tensor parallelism)",
        "passes/lib/ShardTensor.cpp",
        "      partial.replaceAllUsesExcept(sum.getResult(), sum);\n      sums.push_back(sum);",
        "      sums.push_back(sum);",
        lit=["Transforms/step-shard-tensor.mlir"]),
    Bug("ddp-mean", "sharding rule (data parallelism)",
        "passes/lib/ShardDataParallel.cpp",
        "b.getFloatAttr(type.getElementType(), 1.0 / ranks)",
        "b.getFloatAttr(type.getElementType(), 1.0 / (ranks + 1))",
        lit=["Transforms/step-shard-data-parallel.mlir"]),
    Bug("hsdp-replica-sum", "sharding rule (FSDP/HSDP)",
        "passes/lib/ShardFully.cpp",
        "      if (!replicaAxes.empty())",
        "      if (false && !replicaAxes.empty())",
        lit=["Transforms/step-shard-fully.mlir", "Transforms/step-shard-experts.mlir"]),
    Bug("ep-counts-exchange", "sharding rule (expert parallelism)",
        "passes/lib/ShardExperts.cpp",
        "Value counts = exchange(b, loc, b.create<ReshapeOp>(loc, countsType, grouped.getCounts()));",
        "Value counts = b.create<ReshapeOp>(loc, countsType, grouped.getCounts());",
        lit=["Transforms/step-shard-experts.mlir"]),
    Bug("micro-batch-mean", "gradient accumulation",
        "passes/lib/MicroBatch.cpp",
        "b.getFloatAttr(type.getElementType(), 1.0 / count)",
        "b.getFloatAttr(type.getElementType(), 1.0 / (count + 1))",
        lit=["Transforms/step-micro-batch.mlir"]),
    Bug("collective-early-start", "collective schedule",
        "passes/lib/ScheduleCollectives.cpp",
        "    else if (latest->getNextNode() != op)\n      op->moveAfter(latest);",
        "    else if (latest->getNextNode() != op)\n      (void)latest;",
        lit=["Transforms/step-schedule-collectives.mlir"]),
    Bug("remat-chain", "rematerialisation",
        "passes/lib/Remat.cpp",
        "      if (!kept(w))\n        map.map(w, materialize(w, before));",
        "      if (false && !kept(w))\n        map.map(w, materialize(w, before));",
        lit=["Transforms/step-remat.mlir"]),
    Bug("fuse-convert-across-reduce", "elementwise fusion",
        "compiler/lib/FuseElementwise.cpp",
        "auto convert = dyn_cast_or_null<step::ConvertOp>(op.getNextNode());",
        "step::ConvertOp convert;",
        lit=["Compiler/step-fuse-elementwise.mlir"]),
    Bug("1f1b-warmup", "pipeline schedule",
        "passes/lib/PipelineSchedule.cpp",
        "int warmup = v == 1 ? ranks - rank - 1 :",
        "int warmup = v == 1 ? ranks - rank :",
        lit=["Tools/pipeline-schedule.test"]),
    Bug("stage-labels", "pipeline stages (one module)",
        "passes/lib/PipelineStages.cpp",
        "nested->setAttr(StepDialect::kPpStageAttrName, b.getI64IntegerAttr(stage));",
        "nested->setAttr(StepDialect::kPpStageAttrName, b.getI64IntegerAttr(stages - 1 - stage));",
        lit=["Compiler/step-outline-blocks.test"]),
    Bug("liveness-last-use", "memory planner",
        "passes/lib/MemoryPlan.cpp",
        "      int64_t at = isa<func::ReturnOp>(user) ? n : index[user];",
        "      int64_t at = isa<func::ReturnOp>(user) ? n : index[user] - 1;",
        lit=["Compiler/step-plan-memory.mlir"]),
    Bug("adamw-bias-correction", "optimizer kernel",
        "runtime/kernels/cpu/optimizer.cc",
        "std::sqrt(1.0 - std::pow(beta2, t))",
        "std::sqrt(1.0 - std::pow(beta2, t + 1))",
        lit=["Runtime/adamw-torch.test"]),
    Bug("moe-capacity", "mixture-of-experts routing kernel",
        "runtime/kernels/moe_routing.h",
        "keep = seen[e]++ < capacity;", "keep = seen[e]++ <= capacity;",
        lit=["Runtime/moe-capacity.test"]),
    Bug("checkpoint-step", "checkpoint",
        "runtime/session/session_checkpoint.cc",
        '      meta["step"] = steps_;', '      meta["step"] = steps_ - 1;',
        lit=["Runtime/checkpoint.test"]),
    Bug("cache-key-sources", "compile cache",
        "compiler/lib/Toolchain.cpp",
        "return CompileCache::key(identity, preprocessed, linkedFiles(command.link));",
        "return CompileCache::key(identity, {}, linkedFiles(command.link));",
        lit=["Compiler/compile-cache.test"]),
    Bug("cache-key-libraries", "compile cache",
        "compiler/lib/Toolchain.cpp",
        "          if (std::string path = dir + \"/lib\" + a.str() + kind; llvm::sys::fs::exists(path))",
        "          if (std::string path = dir + \"/lib\" + a.str() + kind; false)",
        lit=["Compiler/compile-cache.test"]),
    Bug("warmup-schedule", "trainer (learning-rate schedule)",
        "runtime/train/schedule.cc",
        "return lr * step / warmup;", "return lr * (step - 1) / warmup;",
        commands=["bin/runtime_test --gtest_filter=LearningRate.*"]),
    Bug("outline-ignores-storage", "block functions (step-outline-blocks)",
        "compiler/lib/OutlineBlocks.cpp",
        '    os << "s" << it->second;',
        "    (void)it;",
        lit=["Compiler/outline-blocks.test"]),
    Bug("fold-misses-call-results", "CPU emitter (broadcasts folded across block calls)",
        "compiler/lib/StepInOrder.cpp",
        "if (auto result = dyn_cast<OpResult>(v); result && call < 0)",
        "if (auto result = dyn_cast<OpResult>(v); result && false)",
        lit=["Compiler/outline-blocks.test"]),
    Bug("report-misses-call-arguments", "report (values across block calls)",
        "compiler/lib/StepInOrder.cpp",
        "argument && isa<func::FuncOp>(argument.getOwner()->getParentOp())) {",
        "argument && false) {",
        lit=["Compiler/stepc-report.test"]),
    Bug("stop-leaves-old-plot", "trainer (observers on a stop signal)",
        "runtime/train/observers/plot_writer.cc",
        "absl::Status Stopping(JobState& job, int64_t) override { return Write(job); }",
        "absl::Status Stopping(JobState& job, int64_t) override { return absl::OkStatus(); }",
        lit=["Runtime/interrupt.test"]),
    Bug("packed-grad-columns", "CUDA packed attention",
        "runtime/kernels/cuda/attention.cu",
        "grad + q_offset * out_bytes, grad + k_offset * out_bytes,",
        "grad + q_offset * out_bytes, grad + v_offset * out_bytes,",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*CudaAttention*"]),
    Bug("fused-loss-target-lane", "CUDA fused cross-entropy",
        "runtime/kernels/cuda/loss.cu",
        "(j + i == t ? c : 0.0f)", "(j == t ? c : 0.0f)",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*FusedCrossEntropy*"]),
    Bug("fp8-pack-block-scale", "fp8 GEMM's 128x128 block scale layout",
        "runtime/kernels/cuda/fp8.cu",
        "scales[(n0 / kFp8Block) * scale_ld + k0 / kFp8Block] = 1.0f / s;",
        "scales[(k0 / kFp8Block) * scale_ld + n0 / kFp8Block] = 1.0f / s;",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*Fp8*"]),
    Bug("fp8-quantize-warp-amax", "CUDA fp8 rounding's tile maximum across the warp",
        "runtime/kernels/cuda/fp8.cu",
        "i % width));\n    for (int o = 16; o > 0; o >>= 1)\n      amax = MaxMagnitude(",
        "i % width));\n    for (int o = 16; o > 1; o >>= 1)\n      amax = MaxMagnitude(",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*QuantizeFp8*"]),
    Bug("fp8-gemm-formats", "the fp8 GEMMs' operand formats",
        "compiler/lib/Fp8Gemms.cpp",
        "gemm.setFp8(ArrayRef<int32_t>{lhs->first, rhs->first, rhsBlocks ? 0 : 1});",
        "gemm.setFp8(ArrayRef<int32_t>{rhs->first, lhs->first, rhsBlocks ? 0 : 1});",
        lit=["Cuda/fp8-gemms.test"]),
    Bug("fp8-weight-grad-tiles", "the weight gradients' fp8 tiles along the tokens",
        "passes/lib/Fp8WeightGrads.cpp",
        "b.getDenseI64ArrayAttr({128, 1})", "b.getDenseI64ArrayAttr({1, 128})",
        lit=["Transforms/step-fp8-weight-grads.mlir", "Cuda/fp8-gemms.test"]),
    Bug("fp8-pack-columns", "fp8 packing of an operand stored [K, rows]",
        "runtime/kernels/cuda/fp8.cu",
        "? Load(x, c * rows + r) : 0.0f;", "? Load(x, r * k + c) : 0.0f;",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*Fp8*"]),
    Bug("fp8-quantize-column-scale", "CUDA fp8 rounding of [128, 1] column tiles",
        "runtime/kernels/cuda/fp8.cu",
        "const float s = scale[e % kColumnPanel];", "const float s = scale[e / kColumnPanel % kColumnPanel];",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*QuantizeFp8*"]),
    Bug("place-elementwise-recompute-bigger", "elementwise recompute that keeps bigger inputs",
        "compiler/lib/PlaceElementwise.cpp",
        "extraBytesAt({op}, user, block) > bytesOf(result))",
        "extraBytesAt({op}, user, block) > 2 * bytesOf(result))",
        lit=["Compiler/step-fuse-elementwise.mlir"]),
    Bug("bias-grad-sum-read-early", "bias gradient folded into a GEMM after its first reader",
        "compiler/lib/FuseCudaKernels.cpp",
        "return at && gemm->isBeforeInBlock(at);", "return at != nullptr;",
        lit=["Compiler/step-fuse-cuda-kernels.mlir"]),
    Bug("bgrad-emulated-sums", "the emulated BGRADB epilogue's sums",
        "runtime/kernels/cuda/emulated/gemm.cc",
        "for (int64_t j = 0; j < cols; ++j) auxf[j] += second[t * cols + j];",
        "for (int64_t j = 0; j < cols; ++j) auxf[j] += second[j];",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*BiasGrad*"]),
    Bug("norm-grad-last-warp", "the one-pass norm gradient's weight sums",
        "runtime/kernels/cuda/norm.cu",
        "for (int v = 1; v < kRowsPerBlock; ++v) acc += shared[v * kTables * d + c];",
        "for (int v = 1; v + 1 < kRowsPerBlock; ++v) acc += shared[v * kTables * d + c];",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*NormsForward*"]),
    Bug("norm-grad-dy-sum-third-term", "a norm gradient's dy summed from bf16 terms",
        "runtime/kernels/cuda/norm.cu",
        "    LoadSome(t2 + at, i, k, u);",
        "    LoadSome(t1 + at, i, k, u);",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*NormsForward*"]),
    Bug("norm-grad-dy-sum-order", "the order of a summed dy's bf16 terms",
        "compiler/lib/LowerLibraryCalls.cpp",
        "sum.terms = {lhs.getInput(), rhs.getInput()};",
        "sum.terms = {rhs.getInput(), lhs.getInput()};",
        lit=["Compiler/step-lower-library-calls.mlir"]),
    Bug("sibling-join-holds-more", "an elementwise kernel rising to join its sibling's",
        "compiler/lib/PlaceElementwise.cpp",
        "    if (extra > 0)\n      continue;\n    Operation *after = anchor;",
        "    if (extra > 4096)\n      continue;\n    Operation *after = anchor;",
        lit=["Compiler/step-fuse-elementwise.mlir"]),
    Bug("attention-mma-rescale-row", "the register-resident attention forward's rescale",
        "runtime/kernels/cuda/attention_tc.cu",
        "      for (int e = 0; e < 4; ++e) o[nd][e] *= rescale[e / 2];",
        "      for (int e = 0; e < 4; ++e) o[nd][e] *= rescale[e % 2];",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*CudaAttention*"]),
    Bug("attention-mma-dk-pass-columns", "the register-resident dK's query-column passes",
        "runtime/kernels/cuda/attention_tc.cu",
        "FragmentsTimes<kDh / 8, kCols / 16>(dsa, qb, kLd, c0, dk_acc);",
        "FragmentsTimes<kDh / 8, kCols / 16>(dsa, qb, kLd, 0, dk_acc);",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*CudaAttention*"]),
    Bug("attention-mma-fetch-buffer", "the forward's double-buffered V tiles",
        "runtime/kernels/cuda/attention_tc.cu",
        "vs + (i % 2) * kTile;\n    float s[kR / 8][4] = {};  // this warp's",
        "vs + ((i + 1) % 2) * kTile;\n    float s[kR / 8][4] = {};  // this warp's",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*CudaAttention*"]),
    Bug("prepare-launches-own-attention", "a preparing attention call launching our kernels",
        "runtime/kernels/cuda/attention.cu",
        "  if (ctx->prepare) return 0;  // our kernels need nothing built ahead\n",
        "",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*PreparedAttention*"]),
    Bug("prepare-misses-attention-grad", "stepc_prepare_v1 without the backward's calls",
        "compiler/lib/CudaEmitter.cpp",
        "  call(a, text([&](Value v) { return this->ptr(v); }));\n"
        "  prepareCall(a, text([&](Value v) { return noBuffer(v); }));\n  return success();",
        "  call(a, text([&](Value v) { return this->ptr(v); }));\n  return success();",
        lit=["Cuda/emulated-step.test"]),
    Bug("norm-add-repeated-span-rows", "the position table's repeat counted in rows",
        "runtime/kernels/cuda/norm.cu",
        "return LayerNorm(ctx, NormIn<float>{a, b, sum, period * d}, w, bias, rows, d, eps, y);",
        "return LayerNorm(ctx, NormIn<float>{a, b, sum, period}, w, bias, rows, d, eps, y);",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*Norms*"]),
    Bug("attention-mma-mask-key-grad", "the mask in the tensor-core dK/dV kernel",
        "runtime/kernels/cuda/attention_tc.cu",
        "            if constexpr (kMasked) x += a.Bias(b, h, i0 + col, keys[e / 2]) * kLog2e;\n",
        "",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*MaskedAttention*"]),
    Bug("attention-mma-mask-forward", "the mask in the tensor-core forward",
        "runtime/kernels/cuda/attention_tc.cu",
        "        else if (kMasked)\n          x += a.Bias(b, h, rows[e / 2], j) * kLog2e;\n",
        "",
        lit=["Cuda/emulated-step.test"]),
    Bug("attention-mma-masked-row-lse", "a fully masked row's log-sum-exp",
        "runtime/kernels/cuda/attention_tc.cu",
        "l[r] == 0.0f ? INFINITY : m[r] * kLn2 + logf(l[r]);",
        "m[r] * kLn2 + logf(l[r]);",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*MaskedAttention*"]),
    Bug("cross-entropy-kept-row-short", "the fused loss's row kept in shared memory",
        "runtime/kernels/cuda/loss.cu",
        "if (keep) StoreEight(keep + j + a * step, v[a]);  // exact: the values are T's",
        "if (keep && j > 0) StoreEight(keep + j + a * step, v[a]);",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*FusedCrossEntropy*"]),
    Bug("fp8-pair-gelu-form", "the fp8 rounding passes' GELU",
        "runtime/kernels/cuda/fp8.cu",
        "if (gelu == 1 || gelu == 2) v[i] = stepc_gelu<float>(v[i], gelu == 2);",
        "if (gelu == 1 || gelu == 2) v[i] = stepc_gelu<float>(v[i], gelu == 1);",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*RowsAndColumns*"]),
    Bug("fp8-pair-dbias-half", "the fp8 rounding passes' bias gradient",
        "runtime/kernels/cuda/fp8.cu",
        "= p.column_sum[0][cc] + p.column_sum[1][cc];",
        "= p.column_sum[0][cc];",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*RowsAndColumns*"]),
    Bug("fp8-rows-columns-scale", "CUDA fp8 roundings of a value by rows and columns in one pass",
        "runtime/kernels/cuda/fp8.cu",
        "const float sr = p.row_scale[half + 2 * i], sc = p.column_scale[cc];",
        "const float sr = p.row_scale[cc], sc = p.column_scale[cc];",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*RowsAndColumnsInOnePass*"]),
    Bug("fp8-pack-row-scale-index", "the fp8 packing pass's row scales",
        "runtime/kernels/cuda/fp8.cu",
        "row_scales[(c0 / kPairPanel) * rows + r0 + cc] = 1.0f / p.row_scale[cc];",
        "row_scales[(r0 / kPairPanel) * rows + c0 + cc] = 1.0f / p.row_scale[cc];",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*PackFp8RowsAndColumns*"]),
    Bug("fp8-pack-column-bytes-scale", "the fp8 packing pass's column bytes",
        "runtime/kernels/cuda/fp8.cu",
        "static_cast<uint8_t>(stepc_fp8_bits<float>(v[i] * p.column_scale[cc], format));",
        "static_cast<uint8_t>(stepc_fp8_bits<float>(v[i] * p.row_scale[rr], format));",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*PackFp8RowsAndColumns*"]),
    Bug("fp8-pack-gelu-grad-form", "the fp8 packing pass's GELU gradient",
        "runtime/kernels/cuda/fp8.cu",
        "                                    gelu == 4);",
        "                                    gelu == 3);",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*OfTheGeluGrad*"]),
    Bug("fp8-gelu-grad-operands-swapped", "the GELU gradient a packing pass computes",
        "compiler/lib/Fp8Gemms.cpp",
        "  map.map(inputs[0], body->getArgument(0));\n  map.map(inputs[1], body->getArgument(1));",
        "  map.map(inputs[0], body->getArgument(1));\n  map.map(inputs[1], body->getArgument(0));",
        lit=["Compiler/fp8-packed-interp.test"]),
    Bug("fp8-gelu-grad-call-inputs-swapped", "the inputs of a packing pass that computes the GELU gradient",
        "compiler/lib/Fp8Gemms.cpp",
        "  SmallVector<Value> inputs{ofBf16 ? dyWide.getInput() : gg.getGrad(),\n"
        "                            ofBf16 ? preWide.getInput() : gg.getInput()};",
        "  SmallVector<Value> inputs{ofBf16 ? preWide.getInput() : gg.getInput(),\n"
        "                            ofBf16 ? dyWide.getInput() : gg.getGrad()};",
        lit=["Runtime/fp8-step.test"]),
    Bug("fp8-pack-rows-transposed", "an eval step's input packed along its rows",
        "runtime/kernels/cuda/fp8.cu",
        "  return PackFp8Rows(ctx, x, STEPC_CUDA_F32, rows, cols, /*stored_kr=*/false, format, bytes,",
        "  return PackFp8Rows(ctx, x, STEPC_CUDA_F32, rows, cols, /*stored_kr=*/true, format, bytes,",
        lit=["Cuda/fp8-gemms.test"]),
    Bug("fp8-pack-rows-of-bf16-transposed", "an eval step's bf16 attention output packed",
        "runtime/kernels/cuda/fp8.cu",
        "  return PackFp8Rows(ctx, x, STEPC_CUDA_BF16, rows, cols, /*stored_kr=*/false, format, bytes,",
        "  return PackFp8Rows(ctx, x, STEPC_CUDA_BF16, rows, cols, /*stored_kr=*/true, format, bytes,",
        lit=["Cuda/fp8-gemms.test"]),
    Bug("cudnn-attention-f32-output", "an attention cuDNN may run writing f32",
        "compiler/lib/FuseCudaKernels.cpp",
        "if (convert && (readsBf16Itself(convert) || cudnnMayRun(&op)))",
        "if (convert && readsBf16Itself(convert))",
        lit=["Compiler/step-fuse-cuda-kernels.mlir", "Cuda/fp8-gemms.test"]),
    Bug("fp8-swiglu-gate-grad-operand", "the gate's gradient in its packing pass",
        "runtime/kernels/cuda/fp8.cu",
        "in ? Load(pre, r * cols + c) * Load(third, r * cols + c) : 0.0f, v[i]);",
        "in ? Load(pre, r * cols + c) * Load(pre, r * cols + c) : 0.0f, v[i]);",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*Swiglu*"],
        lit=["Cuda/fp8-gemms.test"]),
    Bug("fp8-swiglu-operands-swapped", "SwiGLU's product absorbed into its packing pass",
        "compiler/lib/Fp8Gemms.cpp",
        "        inputs = {gate, other};",
        "        inputs = {other, gate};",
        lit=["Compiler/fp8-packed-interp.test", "Cuda/fp8-gemms.test"]),
    Bug("fp8-pack-transposed-stride", "the fp8 packing pass's transposed bytes",
        "runtime/kernels/cuda/fp8.cu",
        "uint8_t* out = col_bytes + (c0 + col) * rows + r0 + r4;",
        "uint8_t* out = col_bytes + (c0 + col) * cols + r0 + r4;",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*PackFp8RowsAndColumns*"]),
    Bug("fp8-unpack-scale-index", "a packed operand unpacked for the bf16 GEMM",
        "runtime/kernels/cuda/fp8.cu",
        ": scales[(kk / kFp8Block) * lines + line];",
        ": scales[line * ((k + kFp8Block - 1) / kFp8Block) + kk / kFp8Block];",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*MatmulFp8OfPackedOperands*"]),
    Bug("fp8-packed-interp-scale", "the interpreter's packed fp8 GEMM operands",
        "dialects/lib/Step/Interpreter/EvalMatmul.cpp",
        ": scales.data[(kk / 128) * lines + line];",
        ": scales.data[(kk % 128) * lines + line];",
        lit=["Compiler/fp8-packed-interp.test"]),
    Bug("fp8-pack-blocks-transposed-scale", "a weight's fp8 blocks packed transposed",
        "runtime/kernels/cuda/fp8.cu",
        "if (t_scales) t_scales[(c0 / kFp8Block) * ld_rows + r0 / kFp8Block] = 1.0f / s;",
        "if (t_scales) t_scales[(r0 / kFp8Block) * ld_rows + c0 / kFp8Block] = 1.0f / s;",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*PackFp8Blocks*"]),
    Bug("fp8-weight-layouts-swapped", "the layouts a weight is packed in",
        "compiler/lib/Fp8Gemms.cpp",
        "(gemm.getTransposeB() ? asStored : transposed).push_back(gemm);",
        "(gemm.getTransposeB() ? transposed : asStored).push_back(gemm);",
        lit=["Compiler/fp8-packed-interp.test", "Cuda/fp8-gemms.test"]),
    Bug("fp8-interp-blocks-scale", "the interpreter's weight packed in fp8 blocks",
        "dialects/lib/Step/Interpreter/EvalFp8.cpp",
        "scales.data[(l0 / 128) * ld + i0 / 128] = 1.0 / s;",
        "scales.data[(i0 / 128) * ld + l0 / 128] = 1.0 / s;",
        lit=["Compiler/fp8-packed-interp.test"]),
    Bug("fp8-pack-reads-rows", "the packing of a pair's rows and columns",
        "compiler/lib/Fp8Gemms.cpp",
        "    SmallVector<PackedRead> columnReads = packedReads(pair.getResult(1), true);",
        "    SmallVector<PackedRead> columnReads = packedReads(pair.getResult(1), false);",
        lit=["Compiler/fp8-packed-interp.test", "Cuda/fp8-gemms.test"]),
    Bug("squared-norms-last-tensor", "the multi-tensor squared norm's total",
        "runtime/kernels/cuda/layout.cu",
        "for (int t = 1; t < count; ++t) total += sums[t];",
        "for (int t = 1; t + 1 < count; ++t) total += sums[t];",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*SquaredNorms*"]),
    Bug("bf16-copies-table-short", "the parameters' multi-tensor bf16 copies",
        "runtime/kernels/cuda/layout.cu",
        "const int here = std::min(count - first, kBf16CopiesPerLaunch);",
        "const int here = std::min(count - first, kBf16CopiesPerLaunch - 1);",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*Bf16Copies*"]),
    Bug("rotary-table-sine", "CUDA rotary table",
        "runtime/kernels/cuda/norm.cu",
        "s = table[len * half + t * half + i];", "s = table[t * half + i];",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*Rotary*"]),
    Bug("norm-grad-residual-add", "CUDA norm gradient into the residual stream",
        "runtime/kernels/cuda/norm.cu",
        "for (int j = 0; j < k; ++j) v[j] += a[j];",
        "for (int j = 0; j < k; ++j) v[j] -= a[j];",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*Norms*"]),
    Bug("norm-residual-add-sum", "CUDA residual add in the norm's kernel",
        "runtime/kernels/cuda/norm.cu",
        "    if (x.sum) StoreSome(x.sum + row * d, i, k, xv);\n    LoadSome(w, i, k, wv);\n    LoadSome(b, i, k, bv);",
        "    LoadSome(w, i, k, wv);\n    LoadSome(b, i, k, bv);",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*Norms*"]),
    Bug("grad-norm-squares", "CUDA sum of squares (gradient norm)",
        "runtime/kernels/cuda/layout.cu",
        "      if (kind == 3) x *= x;\n      acc = kind == 1",
        "      acc = kind == 1",
        commands=["bin/cuda_kernels_emulated_test --gtest_filter=*Reductions*"]),
    Bug("elementwise-last-vector", "CUDA emitter (16-byte elementwise loops)",
        "compiler/lib/CudaEmitter.cpp",
        'threadIdx.x; v < n / 8;\\n"', 'threadIdx.x; v < n / 8 - 1;\\n"',
        lit=["Cuda/emulated-step.test"]),
    Bug("targets-shift", "trainer (data loader)",
        "runtime/formats/data.cc",
        "targets[b * seq + t] = tokens_[start + t + 1];",
        "targets[b * seq + t] = tokens_[start + t];",
        commands=["bin/runtime_test --gtest_filter=TokenData.*"]),
]


def run(cmd, cwd, log):
    """Runs `cmd`; returns its exit status, its output appended to `log`."""
    with open(log, "a") as out:
        out.write(f"\n$ {cmd}\n")
        out.flush()
        return subprocess.run(cmd, shell=True, cwd=cwd, stdout=out, stderr=subprocess.STDOUT).returncode


def plant(bug, build, jobs, log):
    """Plants `bug`, rebuilds and runs its tests: 'killed', 'survived',
    'stale' (its text is not in the file once) or 'did not build'."""
    path = os.path.join(ROOT, bug.path)
    text = open(path).read()
    if text.count(bug.old) != 1:
        return "stale"
    try:
        with open(path, "w") as f:
            f.write(text.replace(bug.old, bug.new))
        if run(f"ninja -j{jobs}", build, log) != 0:
            return "did not build"
        failed = False
        for test in bug.lit:
            failed |= run(f"/usr/bin/python3 {LIT} -q test/{test}", build, log) != 0
        for command in bug.commands:
            failed |= run(command, build, log) != 0
        return "killed" if failed else "survived"
    finally:
        with open(path, "w") as f:
            f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--only", default="", help="comma-separated bug names")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    a = ap.parse_args()
    if a.list:
        for bug in BUGS:
            print(f"{bug.name:24} {bug.part:38} {bug.path}")
        return 0
    names = [n for n in a.only.split(",") if n]
    unknown = set(names) - {b.name for b in BUGS}
    if unknown:
        sys.exit(f"planted_bugs: no bug named {', '.join(sorted(unknown))} (see --list)")
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    if dirty:
        sys.exit("planted_bugs: the working tree has uncommitted changes; commit or stash "
                 "them first (each bug is planted and undone in place)\n" + dirty)
    # Ctrl-C unwinds through plant()'s finally, which restores the file.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    log = os.path.join(a.build, "planted_bugs.log")
    open(log, "w").close()
    results = []
    try:
        for bug in BUGS:
            if names and bug.name not in names:
                continue
            start = time.time()
            print(f"planting {bug.name} ({bug.part}) ...", flush=True)
            outcome = plant(bug, a.build, a.jobs, log)
            results.append((bug, outcome, time.time() - start))
            print(f"  {outcome} in {time.time() - start:.0f} s", flush=True)
    finally:
        print("rebuilding the clean tree ...", flush=True)
        run(f"ninja -j{a.jobs}", a.build, log)
    print(f"\n{'bug':24} {'part':38} {'tests':44} result")
    for bug, outcome, _ in results:
        tests = ", ".join(bug.lit + [c.split()[0] for c in bug.commands])
        print(f"{bug.name:24} {bug.part:38} {tests[:44]:44} {outcome}")
    killed = sum(1 for _, o, _ in results if o == "killed")
    print(f"planted_bugs: {killed} of {len(results)} killed (log: {log})")
    return 0 if killed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
