// The CUDA kernels' tile math, run on the host against the reference
// interpreter (step.attention and step.attention_grad): flash-attention's
// tiling, causal tile skipping, online softmax and lse-based backward give
// the interpreter's results for MHA, GQA and MQA, causal or not, with tile
// sizes that do not divide the sequence.

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "runtime/kernels/cuda/flash_attention_host.h"
#include "runtime/kernels/cuda/tile_math.h"
#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Dialect/Step/Interpreter/Interpreter.h"

namespace stepc::tile {
namespace {

std::string Type(int b, int t, int c) {
  return "tensor<" + std::to_string(b) + "x" + std::to_string(t) + "x" + std::to_string(c) +
         "xf32>";
}

// max |a - b| / max |b| over a tensor.
double RelErr(const std::vector<float>& a, const std::vector<double>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

struct Case {
  int batch, t, heads, kv_heads, dh;
  bool causal;
  int q_tile, k_tile;
};

class FlashAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(FlashAttentionTest, MatchesTheInterpreter) {
  const Case c = GetParam();
  const std::string q = Type(c.batch, c.t, c.heads * c.dh), kv = Type(c.batch, c.t, c.kv_heads * c.dh);
  const std::string attrs = " heads " + std::to_string(c.heads) + " kv_heads " +
                            std::to_string(c.kv_heads) + " head_dim " + std::to_string(c.dh) +
                            (c.causal ? " causal" : "");
  const std::string text =
      "func.func @fwd(%q: " + q + ", %k: " + kv + ", %v: " + kv + ") -> " + q + " {\n"
      "  %o = step.attention %q, %k, %v" + attrs + " : (" + q + ", " + kv + ", " + kv + ") -> " + q + "\n"
      "  return %o : " + q + "\n}\n"
      "func.func @bwd(%do: " + q + ", %q: " + q + ", %k: " + kv + ", %v: " + kv + ") -> (" + q +
      ", " + kv + ", " + kv + ") {\n"
      "  %g:3 = step.attention_grad %do, %q, %k, %v" + attrs + " : (" + q + ", " + q + ", " + kv +
      ", " + kv + ") -> (" + q + ", " + kv + ", " + kv + ")\n"
      "  return %g#0, %g#1, %g#2 : " + q + ", " + kv + ", " + kv + "\n}\n";
  mlir::DialectRegistry registry;
  registry.insert<step::StepDialect, mlir::func::FuncDialect>();
  mlir::MLIRContext context(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  ASSERT_TRUE(module) << text;
  auto fwd = module->lookupSymbol<mlir::func::FuncOp>("fwd");
  auto bwd = module->lookupSymbol<mlir::func::FuncOp>("bwd");

  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto draw = [&](int n) {
    std::vector<float> x(n);
    for (float& e : x) e = normal(rng);
    return x;
  };
  const int nq = c.batch * c.t * c.heads * c.dh, nk = c.batch * c.t * c.kv_heads * c.dh;
  std::vector<float> qv = draw(nq), kvk = draw(nk), vv = draw(nk), dout = draw(nq);
  auto tensor = [](const std::vector<float>& x, llvm::ArrayRef<int64_t> shape) {
    interp::Tensor t;
    t.shape.assign(shape.begin(), shape.end());
    t.data.assign(x.begin(), x.end());
    return t;
  };
  const int64_t qs[] = {c.batch, c.t, c.heads * c.dh}, ks[] = {c.batch, c.t, c.kv_heads * c.dh};
  interp::Interpreter interpreter(/*exactF64=*/true);
  auto expected = interpreter.run(fwd, {tensor(qv, qs), tensor(kvk, ks), tensor(vv, ks)});
  ASSERT_TRUE(mlir::succeeded(expected));
  auto expected_grads = interpreter.run(
      bwd, {tensor(dout, qs), tensor(qv, qs), tensor(kvk, ks), tensor(vv, ks)});
  ASSERT_TRUE(mlir::succeeded(expected_grads));

  AttentionShape s{c.batch, c.t, c.heads, c.kv_heads, c.dh, c.causal,
                   1.0f / std::sqrt(static_cast<float>(c.dh)), c.q_tile, c.k_tile};
  std::vector<float> out(nq), lse(c.batch * c.heads * c.t), dq(nq), dk(nk), dv(nk);
  FlashForward(s, qv.data(), kvk.data(), vv.data(), out.data(), lse.data());
  FlashBackward(s, qv.data(), kvk.data(), vv.data(), out.data(), lse.data(), dout.data(),
                dq.data(), dk.data(), dv.data());
  // f32 tile math against the f64 interpreter: a few f32 ulps of each sum.
  EXPECT_LT(RelErr(out, (*expected)[0].data), 1e-5);
  EXPECT_LT(RelErr(dq, (*expected_grads)[0].data), 1e-5);
  EXPECT_LT(RelErr(dk, (*expected_grads)[1].data), 1e-5);
  EXPECT_LT(RelErr(dv, (*expected_grads)[2].data), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FlashAttentionTest,
    ::testing::Values(Case{2, 37, 4, 2, 8, true, 16, 16},   // GQA, ragged last tile
                      Case{1, 64, 4, 4, 16, true, 32, 16},  // MHA, Br != Bc
                      Case{2, 19, 6, 1, 4, false, 8, 8},    // MQA, not causal
                      Case{1, 33, 3, 3, 12, true, 8, 32},   // a tile larger than a row block
                      Case{1, 1, 2, 1, 8, true, 16, 16}));  // a single position

TEST(CausalTile, ClassifiesEveryTileLikeTheElementMask) {
  for (int q0 = 0; q0 < 40; q0 += 8)
    for (int k0 = 0; k0 < 40; k0 += 4) {
      const int q1 = q0 + 8, k1 = k0 + 4;
      int visible = 0;
      for (int i = q0; i < q1; ++i)
        for (int j = k0; j < k1; ++j) visible += CausalVisible(i, j);
      TileMask m = CausalTile(q0, q1, k0, k1);
      if (visible == 0) EXPECT_EQ(m, TileMask::kSkip) << q0 << " " << k0;
      else if (visible == (q1 - q0) * (k1 - k0)) EXPECT_EQ(m, TileMask::kFull) << q0 << " " << k0;
      else EXPECT_EQ(m, TileMask::kPartial) << q0 << " " << k0;
    }
}

TEST(OnlineSoftmax, TileSizeDoesNotChangeTheResult) {
  // One row of 50 scores and values, folded in tiles of 1, 7 and 50.
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> s(50), v(50 * 2);
  for (float& x : s) x = normal(rng);
  for (float& x : v) x = normal(rng);
  s[10] = -INFINITY;  // a masked position
  std::vector<float> reference;
  float reference_lse = 0;
  for (int tile : {50, 7, 1}) {
    RowState st = RowStart();
    float acc[2] = {0, 0}, out[2];
    for (int j0 = 0; j0 < 50; j0 += tile) {
      int n = std::min(tile, 50 - j0);
      RowUpdate(st, s.data() + j0, n, v.data() + 2 * j0, 2, 2, acc);
    }
    float lse = RowFinish(st, acc, 2, out);
    if (reference.empty()) {
      reference = {out[0], out[1]};
      reference_lse = lse;
    }
    EXPECT_NEAR(out[0], reference[0], 1e-5f * std::fabs(reference[0]) + 1e-6f);
    EXPECT_NEAR(out[1], reference[1], 1e-5f * std::fabs(reference[1]) + 1e-6f);
    EXPECT_NEAR(lse, reference_lse, 1e-5f);
  }
  // And the lse is log Σ exp(s).
  double sum = 0;
  for (float x : s) sum += std::exp(static_cast<double>(x));
  EXPECT_NEAR(reference_lse, std::log(sum), 1e-5);
}

// Evaluates `text`'s function @f on `args` with the interpreter (f64).
std::vector<interp::Tensor> Interpret(const std::string& text,
                                      std::vector<interp::Tensor> args) {
  mlir::DialectRegistry registry;
  registry.insert<step::StepDialect, mlir::func::FuncDialect>();
  mlir::MLIRContext context(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  EXPECT_TRUE(module) << text;
  if (!module) return {};
  auto results = interp::Interpreter(true).run(module->lookupSymbol<mlir::func::FuncOp>("f"), args);
  EXPECT_TRUE(mlir::succeeded(results));
  return mlir::succeeded(results) ? *results : std::vector<interp::Tensor>{};
}

interp::Tensor Tensor(const std::vector<float>& x, std::vector<int64_t> shape) {
  interp::Tensor t;
  t.shape.assign(shape.begin(), shape.end());
  t.data.assign(x.begin(), x.end());
  return t;
}

TEST(FusedCrossEntropy, MatchesTheInterpreterInOnePassPerRow) {
  const int rows = 6, v = 37;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> logits(rows * v);
  for (float& x : logits) x = normal(rng);
  std::vector<float> targets = {0, 36, 5, 5, 20, 1};
  const std::string l = "tensor<6x37xf32>", t = "tensor<6xi32>";
  auto expected = Interpret(
      "func.func @f(%l: " + l + ", %t: " + t + ", %d: tensor<f32>) -> (tensor<f32>, " + l + ") {\n"
      "  %loss = step.cross_entropy %l, %t : (" + l + ", " + t + ") -> tensor<f32>\n"
      "  %g = step.cross_entropy_grad %d, %l, %t : (tensor<f32>, " + l + ", " + t + ") -> " + l + "\n"
      "  return %loss, %g : tensor<f32>, " + l + "\n}\n",
      {Tensor(logits, {rows, v}), Tensor(targets, {rows}), Tensor({1.0f}, {})});
  ASSERT_EQ(expected.size(), 2u);
  double loss = 0;
  std::vector<float> grad(rows * v);
  for (int r = 0; r < rows; ++r) {
    // Two "threads" fold halves of the row, then merge.
    RowState a = RowStart(), b = RowStart();
    RowFold(a, &logits[r * v], v / 2);
    RowFold(b, &logits[r * v + v / 2], v - v / 2);
    const float lse = RowLse(RowMerge(a, b));
    const int target = static_cast<int>(targets[r]);
    loss += lse - logits[r * v + target];
    CrossEntropyRowGrad(&logits[r * v], v, target, lse, 1.0f / rows, &grad[r * v]);
  }
  EXPECT_NEAR(loss / rows, expected[0].data[0], 1e-5 * std::fabs(expected[0].data[0]));
  EXPECT_LT(RelErr(grad, expected[1].data), 1e-5);
}

TEST(LayerNormRows, WelfordMergeAndGradientMatchTheInterpreter) {
  const int rows = 5, d = 48;
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(1.0f, 2.0f);
  auto draw = [&](int n) {
    std::vector<float> x(n);
    for (float& e : x) e = normal(rng);
    return x;
  };
  std::vector<float> x = draw(rows * d), w = draw(d), bias = draw(d), dy = draw(rows * d);
  const std::string X = "tensor<5x48xf32>", V = "tensor<48xf32>";
  auto expected = Interpret(
      "func.func @f(%x: " + X + ", %w: " + V + ", %b: " + V + ", %dy: " + X + ") -> (" + X +
      ", " + X + ", " + V + ", " + V + ") {\n"
      "  %y = step.layer_norm %x, %w, %b : (" + X + ", " + V + ", " + V + ") -> " + X + "\n"
      "  %g:3 = step.layer_norm_grad %dy, %x, %w : (" + X + ", " + X + ", " + V + ") -> (" + X +
      ", " + V + ", " + V + ")\n"
      "  return %y, %g#0, %g#1, %g#2 : " + X + ", " + X + ", " + V + ", " + V + "\n}\n",
      {Tensor(x, {rows, d}), Tensor(w, {d}), Tensor(bias, {d}), Tensor(dy, {rows, d})});
  ASSERT_EQ(expected.size(), 4u);
  std::vector<float> y(rows * d), dx(rows * d), dw(d, 0.0f), db(d, 0.0f);
  for (int r = 0; r < rows; ++r) {
    // Eight "lanes" of six values each, merged as a shuffle tree would.
    Welford lanes[8];
    for (int lane = 0; lane < 8; ++lane) {
      lanes[lane] = WelfordStart();
      for (int i = lane * 6; i < lane * 6 + 6; ++i) WelfordAdd(lanes[lane], x[r * d + i]);
    }
    for (int stride = 4; stride >= 1; stride /= 2)
      for (int lane = 0; lane < stride; ++lane)
        lanes[lane] = WelfordMerge(lanes[lane], lanes[lane + stride]);
    const float rstd = LayerNormRow(&x[r * d], w.data(), bias.data(), d, 1e-5f, lanes[0], &y[r * d]);
    LayerNormRowGrad(&dy[r * d], &x[r * d], w.data(), d, lanes[0].mean, rstd, &dx[r * d],
                     dw.data(), db.data());
  }
  EXPECT_LT(RelErr(y, expected[0].data), 1e-5);
  EXPECT_LT(RelErr(dx, expected[1].data), 1e-5);
  EXPECT_LT(RelErr(dw, expected[2].data), 1e-5);
  EXPECT_LT(RelErr(db, expected[3].data), 1e-5);
}

}  // namespace
}  // namespace stepc::tile
