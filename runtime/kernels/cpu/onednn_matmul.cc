#include "runtime/kernels/cpu/onednn_matmul.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include <dnnl.hpp>

namespace stepc::onednn {
namespace {

using Key = std::tuple<std::vector<int64_t>, bool>;

struct Primitive {
  dnnl::memory::desc a, b, c, bias;
  std::unique_ptr<dnnl::matmul> matmul;  // null: none on this CPU
};

dnnl::engine& Engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::memory::desc Desc(const Operand& x) {
  return dnnl::memory::desc(x.dims, x.type == Type::kBf16 ? dnnl::memory::data_type::bf16
                                                          : dnnl::memory::data_type::f32,
                            x.strides);
}

void Append(std::vector<int64_t>& key, const Operand& x) {
  key.push_back(static_cast<int64_t>(x.type));
  key.push_back(static_cast<int64_t>(x.dims.size()));
  key.insert(key.end(), x.dims.begin(), x.dims.end());
  key.insert(key.end(), x.strides.begin(), x.strides.end());
}

// An f32 bias along c's last dim: [1, .., 1, N].
dnnl::memory::desc BiasDesc(const Operand& c) {
  dnnl::memory::dims dims(c.dims.size(), 1);
  dims.back() = c.dims.back();
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, dnnl::memory::format_tag::abc);
}

// accumulate: c += the product (a sum post-op), else c = it.
dnnl::primitive_attr SumAttr(bool accumulate) {
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  return attr;
}

const Primitive& PrimitiveFor(const Operand& a, const Operand& b, const Operand& c,
                              bool accumulate, bool bias) {
  static std::mutex mutex;
  static std::map<Key, Primitive> cache;
  std::vector<int64_t> layout;
  Append(layout, a);
  Append(layout, b);
  Append(layout, c);
  layout.push_back(bias);
  Key key{std::move(layout), accumulate};
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Primitive p{Desc(a), Desc(b), Desc(c), bias ? BiasDesc(c) : dnnl::memory::desc(), nullptr};
  try {
    dnnl::primitive_attr attr = SumAttr(accumulate);
    dnnl::matmul::desc desc = bias ? dnnl::matmul::desc(p.a, p.b, p.bias, p.c)
                                   : dnnl::matmul::desc(p.a, p.b, p.c);
    p.matmul = std::make_unique<dnnl::matmul>(dnnl::matmul::primitive_desc(desc, attr, Engine()));
  } catch (const dnnl::error&) {
    p.matmul.reset();
  }
  return cache.emplace(std::move(key), std::move(p)).first->second;
}

}  // namespace

bool Matmul(const Operand& a, const void* a_data, const Operand& b, const void* b_data,
            const Operand& c, void* c_data, bool accumulate, const float* bias) {
  if (bias && c.dims.size() != 3) return false;  // BiasDesc's format tag
  const Primitive& p = PrimitiveFor(a, b, c, accumulate, bias != nullptr);
  if (!p.matmul) return false;
  dnnl::stream stream(Engine());
  dnnl::memory am(p.a, Engine(), const_cast<void*>(a_data));
  dnnl::memory bm(p.b, Engine(), const_cast<void*>(b_data));
  dnnl::memory cm(p.c, Engine(), c_data);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
  if (bias) args[DNNL_ARG_BIAS] = dnnl::memory(p.bias, Engine(), const_cast<float*>(bias));
  p.matmul->execute(stream, args);
  stream.wait();
  return true;
}

bool SplitKMatmul(Type type, const void* a, const void* b, float* c, int64_t m, int64_t n,
                  int64_t k, bool transpose_a, bool transpose_b) {
  const int64_t parts = omp_get_max_threads();
  if (parts < 2 || omp_in_parallel() || k < 8 * std::max(m, n) || k % (2 * parts) != 0 ||
      m * n > 512 * 512)
    return false;
  const int64_t kc = k / parts;
  // Part p reads columns [p·kc, (p+1)·kc) of A (rows of Aᵀ) and rows of B.
  Operand pa{{parts, m, kc},
             transpose_a ? std::vector<int64_t>{kc * m, 1, m} : std::vector<int64_t>{kc, k, 1},
             type};
  Operand pb{{parts, kc, n},
             transpose_b ? std::vector<int64_t>{kc, 1, k} : std::vector<int64_t>{kc * n, n, 1},
             type};
  thread_local std::vector<float> partial;
  partial.resize(parts * m * n);
  if (!Matmul(pa, a, pb, b, Matrices(parts, m, n, false, Type::kF32), partial.data(),
              /*accumulate=*/false))
    return false;
  const float* sums = partial.data();
  const int64_t count = m * n;
#pragma omp parallel for simd
  for (int64_t i = 0; i < count; ++i) {
    float s = sums[i];
    for (int64_t p = 1; p < parts; ++p) s += sums[p * count + i];
    c[i] = s;
  }
  return true;
}

bool VariableMatmul(const float* a, bool transpose_a, const float* b, bool transpose_b, float* c,
                    int64_t m, int64_t n, int64_t k, bool runtime_m, bool accumulate) {
  using dnnl::memory;
  using Tag = memory::format_tag;
  const Tag a_tag = transpose_a ? Tag::ba : Tag::ab, b_tag = transpose_b ? Tag::ba : Tag::ab;
  auto descs = [&](int64_t rows, int64_t depth) {
    return std::array<memory::desc, 3>{memory::desc({rows, depth}, memory::data_type::f32, a_tag),
                                       memory::desc({depth, n}, memory::data_type::f32, b_tag),
                                       memory::desc({rows, n}, memory::data_type::f32, Tag::ab)};
  };
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, bool, bool, bool, bool>,
                  std::unique_ptr<dnnl::matmul>> cache;
  const int64_t fixed = runtime_m ? k : m;
  std::unique_ptr<dnnl::matmul>* matmul;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto [it, made] = cache.try_emplace({fixed, n, transpose_a, transpose_b, runtime_m, accumulate});
    matmul = &it->second;
    if (made) {
      const int64_t any = DNNL_RUNTIME_DIM_VAL;
      auto d = runtime_m ? descs(any, k) : descs(m, any);
      try {
        *matmul = std::make_unique<dnnl::matmul>(dnnl::matmul::primitive_desc(
            dnnl::matmul::desc(d[0], d[1], d[2]), SumAttr(accumulate), Engine()));
      } catch (const dnnl::error&) {
        matmul->reset();
      }
    }
  }
  if (!*matmul) return false;
  auto d = descs(m, k);
  dnnl::stream stream(Engine());
  dnnl::memory am(d[0], Engine(), const_cast<float*>(a));
  dnnl::memory bm(d[1], Engine(), const_cast<float*>(b));
  dnnl::memory cm(d[2], Engine(), c);
  (*matmul)->execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  stream.wait();
  return true;
}

bool HasF32Brgemm() {
  using dnnl::cpu_isa;
  static const cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == cpu_isa::avx512_core || isa == cpu_isa::avx512_core_vnni ||
         isa == cpu_isa::avx512_core_bf16 || isa == cpu_isa::avx512_core_amx;
}

Operand Matrices(int64_t batch, int64_t rows, int64_t cols, bool transposed, Type type) {
  return {{batch, rows, cols},
          transposed ? std::vector<int64_t>{rows * cols, 1, rows}
                     : std::vector<int64_t>{rows * cols, cols, 1},
          type};
}

}  // namespace stepc::onednn
