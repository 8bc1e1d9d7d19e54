// The reference interpreter runs calls (an outlined step's block
// functions), and refuses one that recurses before it exhausts the stack.
// RUN: not stepc-interp %s --function=f 2>&1 | FileCheck %s
// CHECK: error: 'func.call' op nests calls more than 16 deep (a recursive call?)
func.func @f(%a: tensor<f32>) -> tensor<f32> {
  %b = call @f(%a) : (tensor<f32>) -> tensor<f32>
  return %b : tensor<f32>
}
