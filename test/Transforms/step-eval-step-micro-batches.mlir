// RUN: stepc-opt %s --stepc-pipeline="until=train-step micro-batches=2" -step-eval-step | FileCheck %s

// Micro-batches (step-micro-batch): one cross-entropy per micro-batch, each
// of its rows of the targets; the eval step returns their logits joined in
// row order, the whole batch's.
// CHECK-LABEL: func.func @loss_eval_step
// CHECK-SAME: -> (tensor<f32> {step.result = #step.result<loss>}, tensor<4x3xf32> {step.result = #step.result<logits>})
// CHECK-DAG: %[[Y0:.*]] = step.slice %arg{{[0-9]+}} offsets [0] sizes [2]
// CHECK-DAG: %[[Y1:.*]] = step.slice %arg{{[0-9]+}} offsets [2] sizes [2]
// CHECK-DAG: step.cross_entropy %[[L0:.*]], %[[Y0]]
// CHECK-DAG: step.cross_entropy %[[L1:.*]], %[[Y1]]
// CHECK: %[[ALL:.*]] = step.concat %[[L0]], %[[L1]] dim 0
// CHECK: return %{{.*}}, %[[ALL]]
func.func @loss(%w: tensor<3x5xf32> {step.param = #step.param<"w", normal(0.1)>},
                %x: tensor<4x5xf32> {step.input = "x"},
                %y: tensor<4xi32> {step.input = "y"}) -> tensor<f32> attributes {step.loss} {
  %logits = step.matmul %x, %w transpose_b : (tensor<4x5xf32>, tensor<3x5xf32>) -> tensor<4x3xf32>
  %loss = step.cross_entropy %logits, %y : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
