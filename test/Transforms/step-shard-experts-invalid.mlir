// step-shard-experts refuses, at the op, what it cannot shard.
// RUN: not stepc-opt %s -step-shard-experts=ep=2 --split-input-file 2>&1 | FileCheck %s
// An expert weight also used outside its layer's products.
// CHECK: error: 'step.add' op uses an expert weight outside its layer's grouped products: expert parallelism cannot shard it
func.func @shared_weight(%x: tensor<6x4xf32> {step.input = "x"},
    %wr: tensor<4x4xf32> {step.param = #step.param<"wr", normal(0.02)>},
    %w1: tensor<4x4x4xf32> {step.param = #step.param<"w1", normal(0.02)>}) -> tensor<f32> attributes {step.loss} {
  %logits = step.matmul %x, %wr transpose_b : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %gate, %expert = step.top_k %logits k 2 : (tensor<6x4xf32>) -> (tensor<6x2xf32>, tensor<6x2xi32>)
  %rows, %counts = step.moe_dispatch %x, %expert experts 4 : (tensor<6x4xf32>, tensor<6x2xi32>) -> (tensor<12x4xf32>, tensor<4xi32>)
  %h = step.grouped_matmul %rows, %w1, %counts transpose_b : (tensor<12x4xf32>, tensor<4x4x4xf32>, tensor<4xi32>) -> tensor<12x4xf32>
  %y = step.moe_combine %h, %gate, %expert experts 4 : (tensor<12x4xf32>, tensor<6x2xf32>, tensor<6x2xi32>) -> tensor<6x4xf32>
  %w = step.add %w1, %w1 : tensor<4x4x4xf32>
  %s = step.reduce_sum %y dims [0, 1] : (tensor<6x4xf32>) -> tensor<f32>
  %t = step.reduce_sum %w dims [0, 1, 2] : (tensor<4x4x4xf32>) -> tensor<f32>
  %u = step.add %s, %t : tensor<f32>
  return %u : tensor<f32>
}

// -----

// Rows that leave the layer other than through its combine.
// CHECK: error: 'step.reduce_sum' op reads an expert's rows between moe_dispatch and moe_combine: expert parallelism passes them only through grouped products and elementwise ops
func.func @rows_escape(%x: tensor<6x4xf32> {step.input = "x"},
    %wr: tensor<4x4xf32> {step.param = #step.param<"wr", normal(0.02)>},
    %w1: tensor<4x4x4xf32> {step.param = #step.param<"w1", normal(0.02)>}) -> tensor<f32> attributes {step.loss} {
  %logits = step.matmul %x, %wr transpose_b : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %gate, %expert = step.top_k %logits k 2 : (tensor<6x4xf32>) -> (tensor<6x2xf32>, tensor<6x2xi32>)
  %rows, %counts = step.moe_dispatch %x, %expert experts 4 : (tensor<6x4xf32>, tensor<6x2xi32>) -> (tensor<12x4xf32>, tensor<4xi32>)
  %h = step.grouped_matmul %rows, %w1, %counts transpose_b : (tensor<12x4xf32>, tensor<4x4x4xf32>, tensor<4xi32>) -> tensor<12x4xf32>
  %y = step.moe_combine %h, %gate, %expert experts 4 : (tensor<12x4xf32>, tensor<6x2xf32>, tensor<6x2xi32>) -> tensor<6x4xf32>
  %s = step.reduce_sum %y dims [0, 1] : (tensor<6x4xf32>) -> tensor<f32>
  %t = step.reduce_sum %h dims [0, 1] : (tensor<12x4xf32>) -> tensor<f32>
  %u = step.add %s, %t : tensor<f32>
  return %u : tensor<f32>
}

// -----

// A product that groups the rows by counts other than their dispatch's.
// CHECK: error: 'step.grouped_matmul' op groups the dispatched rows by other counts than their dispatch's: expert parallelism cannot exchange them
func.func @other_counts(%x: tensor<6x4xf32> {step.input = "x"}, %c: tensor<4xi32> {step.input = "c"},
    %wr: tensor<4x4xf32> {step.param = #step.param<"wr", normal(0.02)>},
    %w1: tensor<4x4x4xf32> {step.param = #step.param<"w1", normal(0.02)>}) -> tensor<f32> attributes {step.loss} {
  %logits = step.matmul %x, %wr transpose_b : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %gate, %expert = step.top_k %logits k 2 : (tensor<6x4xf32>) -> (tensor<6x2xf32>, tensor<6x2xi32>)
  %rows, %counts = step.moe_dispatch %x, %expert experts 4 : (tensor<6x4xf32>, tensor<6x2xi32>) -> (tensor<12x4xf32>, tensor<4xi32>)
  %h = step.grouped_matmul %rows, %w1, %c transpose_b : (tensor<12x4xf32>, tensor<4x4x4xf32>, tensor<4xi32>) -> tensor<12x4xf32>
  %y = step.moe_combine %h, %gate, %expert experts 4 : (tensor<12x4xf32>, tensor<6x2xf32>, tensor<6x2xi32>) -> tensor<6x4xf32>
  %s = step.reduce_sum %y dims [0, 1] : (tensor<6x4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A grouped product of other rows by the dispatch's counts: the received
// counts would not describe them, this rank's own would not match the
// experts it holds.
// CHECK: error: 'step.grouped_matmul' op reads the dispatch's counts: expert parallelism passes the received ones to the layer's grouped products and this rank's own to what is outside its experts
func.func @counts_elsewhere(%x: tensor<6x4xf32> {step.input = "x"},
    %other: tensor<12x4xf32> {step.input = "other"},
    %wr: tensor<4x4xf32> {step.param = #step.param<"wr", normal(0.02)>},
    %w1: tensor<4x4x4xf32> {step.param = #step.param<"w1", normal(0.02)>},
    %w2: tensor<4x4x4xf32> {step.param = #step.param<"w2", normal(0.02)>}) -> tensor<f32> attributes {step.loss} {
  %logits = step.matmul %x, %wr transpose_b : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %gate, %expert = step.top_k %logits k 2 : (tensor<6x4xf32>) -> (tensor<6x2xf32>, tensor<6x2xi32>)
  %rows, %counts = step.moe_dispatch %x, %expert experts 4 : (tensor<6x4xf32>, tensor<6x2xi32>) -> (tensor<12x4xf32>, tensor<4xi32>)
  %h = step.grouped_matmul %rows, %w1, %counts transpose_b : (tensor<12x4xf32>, tensor<4x4x4xf32>, tensor<4xi32>) -> tensor<12x4xf32>
  %y = step.moe_combine %h, %gate, %expert experts 4 : (tensor<12x4xf32>, tensor<6x2xf32>, tensor<6x2xi32>) -> tensor<6x4xf32>
  %g = step.grouped_matmul %other, %w2, %counts transpose_b : (tensor<12x4xf32>, tensor<4x4x4xf32>, tensor<4xi32>) -> tensor<12x4xf32>
  %s = step.reduce_sum %y dims [0, 1] : (tensor<6x4xf32>) -> tensor<f32>
  %t = step.reduce_sum %g dims [0, 1] : (tensor<12x4xf32>) -> tensor<f32>
  %u = step.add %s, %t : tensor<f32>
  return %u : tensor<f32>
}
