//===- EvalElementwise.cpp - elementwise ops ------------------------------===//

#include "Eval.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace stepc::interp;
using namespace stepc::step;

namespace {

constexpr double kSqrt2OverPi = 0.79788456080286535588; // √(2/π)
constexpr double kInvSqrt2 = 0.70710678118654752440;    // 1/√2
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1/√(2π)

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

double gelu(double x, bool tanhForm) {
  if (tanhForm)
    return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1.0 + std::erf(x * kInvSqrt2));
}

// exact: gelu'(x) = Φ(x) + x·φ(x)
// tanh:  gelu'(x) = ½(1 + t) + ½x(1 - t²)·√(2/π)(1 + 3·0.044715x²),
//        t = tanh(√(2/π)(x + 0.044715x³))
double geluDerivative(double x, bool tanhForm) {
  if (tanhForm) {
    double t = std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) +
           0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * 0.044715 * x * x);
  }
  return 0.5 * (1.0 + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
}

template <typename F>
LogicalResult unary(Operands in, Results out, F f) {
  const std::vector<double> &x = in[0]->data;
  for (size_t i = 0; i < x.size(); ++i)
    out[0].data[i] = f(x[i]);
  return success();
}

template <typename F>
LogicalResult binary(Operands in, Results out, F f) {
  const std::vector<double> &a = in[0]->data, &b = in[1]->data;
  for (size_t i = 0; i < a.size(); ++i)
    out[0].data[i] = f(a[i], b[i]);
  return success();
}

} // namespace

LogicalResult stepc::interp::evalElementwise(Operation *op, Operands in, Results out) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](AddOp) { return binary(in, out, [](double a, double b) { return a + b; }); })
      .Case([&](DivOp) { return binary(in, out, [](double a, double b) { return a / b; }); })
      .Case([&](ErfOp) { return unary(in, out, [](double x) { return std::erf(x); }); })
      .Case([&](ExpOp) { return unary(in, out, [](double x) { return std::exp(x); }); })
      .Case([&](GeluGradOp g) {
        bool t = g.isTanhApproximation();
        return binary(in, out, [t](double dy, double x) { return dy * geluDerivative(x, t); });
      })
      .Case([&](GeluOp g) {
        bool t = g.isTanhApproximation();
        return unary(in, out, [t](double x) { return gelu(x, t); });
      })
      .Case([&](LogOp) { return unary(in, out, [](double x) { return std::log(x); }); })
      .Case([&](MaximumOp) { return binary(in, out, [](double a, double b) { return std::fmax(a, b); }); })
      .Case([&](MinimumOp) { return binary(in, out, [](double a, double b) { return std::fmin(a, b); }); })
      .Case([&](MulOp) { return binary(in, out, [](double a, double b) { return a * b; }); })
      .Case([&](NegOp) { return unary(in, out, [](double x) { return -x; }); })
      .Case([&](ReluGradOp) {
        return binary(in, out, [](double dy, double x) { return x > 0.0 ? dy : 0.0; });
      })
      .Case([&](ReluOp) { return unary(in, out, [](double x) { return x > 0.0 ? x : 0.0; }); })
      .Case([&](RsqrtOp) { return unary(in, out, [](double x) { return 1.0 / std::sqrt(x); }); })
      .Case([&](SigmoidOp) { return unary(in, out, sigmoid); })
      .Case([&](SiluGradOp) {
        // silu'(x) = s·(1 + x·(1 - s)), s = sigmoid(x)
        return binary(in, out, [](double dy, double x) {
          double s = sigmoid(x);
          return dy * s * (1.0 + x * (1.0 - s));
        });
      })
      .Case([&](SiluOp) { return unary(in, out, [](double x) { return x * sigmoid(x); }); })
      .Case([&](SqrtOp) { return unary(in, out, [](double x) { return std::sqrt(x); }); })
      .Case([&](SubOp) { return binary(in, out, [](double a, double b) { return a - b; }); })
      .Case([&](TanhOp) { return unary(in, out, [](double x) { return std::tanh(x); }); })
      .Default([](Operation *other) { return other->emitOpError() << "is not elementwise"; });
}
