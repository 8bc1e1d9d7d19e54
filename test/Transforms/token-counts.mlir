// A cross_entropy with ignore_index divides by the counted targets; when the
// batch is split, each part's loss must divide by the whole batch's count
// (over the number of parts) or the mean would weigh the parts equally.
// RUN: stepc-opt %s --step-rebind-batch="ranks=2" | FileCheck %s --check-prefix=REBIND
// RUN: stepc-opt %s --step-rebind-batch="ranks=2" -step-autodiff -step-shard-data-parallel="ranks=2" | FileCheck %s --check-prefix=DDP
// RUN: stepc-opt %s -step-autodiff -step-micro-batch="count=2" | FileCheck %s --check-prefix=MICRO

// Rebinding marks a count of this rank's targets with the number of parts.
// REBIND-LABEL: func.func @loss
// REBIND: %[[N:.*]] = step.token_count %{{.*}} ignore_index -100 {step.rank_rows = 2 : i64} : (tensor<2x3xi32>) -> tensor<f32>
// REBIND: step.cross_entropy %{{.*}}, %{{.*}} count %[[N]] ignore_index -100

// Data parallel: the count is summed over the ranks, then halved; the loss
// and its gradient divide by it.
// DDP-LABEL: func.func @loss_grad
// DDP: %[[N:.*]] = step.token_count %{{.*}} ignore_index -100 {{.*}}: (tensor<2x3xi32>) -> tensor<f32>
// DDP-NEXT: %[[SUM:.*]] = mesh.all_reduce %[[N]] on @world mesh_axes = [0]
// DDP-NEXT: %[[HALF:.*]] = step.constant dense<5.000000e-01>
// DDP-NEXT: %[[SHARE:.*]] = step.mul %[[SUM]], %[[HALF]]
// DDP: step.cross_entropy %{{.*}}, %{{.*}} count %[[SHARE]] ignore_index -100
// DDP: step.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} count %[[SHARE]] ignore_index -100

// Micro-batches: both micro-batches' counts before the first runs.
// MICRO-LABEL: func.func @loss_grad
// MICRO: %[[T0:.*]] = step.slice %[[TARGETS:.*]] offsets [0, 0] sizes [2, 3]
// MICRO-NEXT: %[[N0:.*]] = step.token_count %[[T0]] ignore_index -100
// MICRO-NEXT: %[[T1:.*]] = step.slice %[[TARGETS]] offsets [2, 0] sizes [2, 3]
// MICRO-NEXT: %[[N1:.*]] = step.token_count %[[T1]] ignore_index -100
// MICRO-NEXT: %[[N:.*]] = step.add %[[N0]], %[[N1]]
// MICRO-NEXT: %[[HALF:.*]] = step.constant dense<5.000000e-01>
// MICRO-NEXT: %[[SHARE:.*]] = step.mul %[[N]], %[[HALF]]
// MICRO: step.cross_entropy %{{.*}}, %{{.*}} count %[[SHARE]] ignore_index -100
// MICRO: step.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} count %[[SHARE]]
// MICRO: step.cross_entropy %{{.*}}, %{{.*}} count %[[SHARE]] ignore_index -100
// MICRO-NOT: step.token_count
func.func @loss(%w: tensor<4x5xf32> {step.param = #step.param<"w", normal(1.0)>},
                %x: tensor<4x3x4xf32> {step.input = "x"},
                %targets: tensor<4x3xi32> {step.input = "targets"}) -> tensor<f32> attributes {step.loss} {
  %logits = step.matmul %x, %w : (tensor<4x3x4xf32>, tensor<4x5xf32>) -> tensor<4x3x5xf32>
  %l = step.cross_entropy %logits, %targets ignore_index -100 : (tensor<4x3x5xf32>, tensor<4x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
