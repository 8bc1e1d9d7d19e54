// RUN: stepc-opt %s -step-autodiff "-step-micro-batch=count=2 pipeline=true" "-step-pipeline-stages=stages=2 schedule=gpipe" > %t.mlir
// RUN: FileCheck %s --check-prefix=STAGE0 < %t.mlir
// RUN: FileCheck %s --check-prefix=STAGE1 < %t.mlir
// RUN: FileCheck %s --check-prefix=MODULE < %t.mlir
// RUN: not stepc-opt %s -step-autodiff "-step-micro-batch=count=2 pipeline=true" "-step-pipeline-stages=stages=3" 2>&1 | FileCheck %s --check-prefix=TOO-MANY
// RUN: not stepc-opt %t.mlir "-step-pipeline-stages=stages=2" 2>&1 | FileCheck %s --check-prefix=TWICE

// One module holds the pipeline: a module per stage, in rank order, each a
// copy of the model with its rank's gradient.
// MODULE: module {
// MODULE-NEXT: module @stage0 attributes {step.pp_stage = 0 : i64} {
// MODULE: module @stage1 attributes {step.pp_stage = 1 : i64} {
// MODULE-NOT: module

// Two blocks on two stages, two micro-batches, GPipe (every forward, then
// every backward). Stage 0 keeps block 0's parameter (step.pp_index: its
// place in the model) and sends each micro-batch's activation to stage 1
// right after computing it; it receives each activation gradient where its
// backward reads it. Each transfer's step.transfer tag is its place in one
// order both stages compute alike (0, 2 the forwards; 1, 3 the backwards).
// STAGE0-LABEL: module @stage0
// STAGE0: mesh.mesh @world(shape = 2) {step.pipeline =
// STAGE0-LABEL: func.func @loss_grad
// STAGE0-SAME: {step.param = #step.param<"w0", normal(1.0), block 0>, step.pp_index = 0 : i64}
// STAGE0-NOT: "w1"
// STAGE0: step.slice %{{.*}} offsets [0, 0] sizes [1, 4]
// STAGE0: mesh.send %{{.*}} on @world mesh_axes = [0] destination = [1] {{{.*}}step.transfer = 0 : i64}
// STAGE0: step.slice %{{.*}} offsets [1, 0] sizes [1, 4]
// STAGE0: mesh.send %{{.*}} destination = [1] {{{.*}}step.transfer = 2 : i64}
// STAGE0: %[[G0:.*]] = mesh.recv %{{.*}} source = [1] {{{.*}}step.transfer = 1 : i64}
// STAGE0: step.mul %[[G0]]
// STAGE0: %[[G1:.*]] = mesh.recv %{{.*}} source = [1] {{{.*}}step.transfer = 3 : i64}
// STAGE0: step.mul %[[G1]]
// The loss is the last stage's: summed over the pipeline axis.
// STAGE0: %[[LOSS:.*]] = mesh.all_reduce %{{.*}} on @world mesh_axes = [0]
// STAGE0: return %[[LOSS]], %{{.*}} : tensor<f32>, tensor<4x4xf32>
// STAGE0-NOT: func.func @loss_micro
// STAGE0: module @stage1

// Stage 1 holds block 1: receives each activation before its forward,
// sends each input gradient back as its backward makes it.
// STAGE1-LABEL: module @stage1
// STAGE1: mesh.mesh @world(shape = 2) {step.pipeline =
// STAGE1-LABEL: func.func @loss_grad
// STAGE1-SAME: {step.param = #step.param<"w1", normal(1.0), block 1>, step.pp_index = 1 : i64}
// STAGE1: %[[A0:.*]] = mesh.recv %{{.*}} source = [0] {{{.*}}step.transfer = 0 : i64}
// STAGE1-NEXT: step.matmul %[[A0]], %{{.*}} {step.phase = #step.phase<forward>}
// STAGE1: %[[A1:.*]] = mesh.recv %{{.*}} source = [0] {{{.*}}step.transfer = 2 : i64}
// STAGE1-NEXT: step.matmul %[[A1]], %{{.*}} {step.phase = #step.phase<forward>}
// STAGE1: %[[D0:.*]] = step.matmul %{{.*}} transpose_b {step.phase = #step.phase<backward>}
// STAGE1-NEXT: mesh.send %[[D0]] on @world mesh_axes = [0] destination = [0] {{{.*}}step.transfer = 1 : i64}
// STAGE1: %[[D1:.*]] = step.matmul %{{.*}} transpose_b {step.phase = #step.phase<backward>}
// STAGE1-NEXT: mesh.send %[[D1]] {{.*}} destination = [0] {{{.*}}step.transfer = 3 : i64}
// STAGE1: mesh.all_reduce

// TWICE: step-pipeline-stages: the module already holds stages

// TOO-MANY: has 2 repeated block(s): a pipeline of 3 stages needs at least one block per stage

func.func @loss(%w0: tensor<4x4xf32> {step.param = #step.param<"w0", normal(1.0), block 0>},
                %w1: tensor<4x4xf32> {step.param = #step.param<"w1", normal(1.0), block 1>},
                %x: tensor<2x4xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %a = step.matmul %x, %w0 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %h = step.tanh %a : tensor<2x4xf32>
  %b = step.matmul %h, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %s = step.reduce_sum %b dims [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
