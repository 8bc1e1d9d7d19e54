// Experiment record (not built): gpt-capstone's bf16 GEMM shapes on the AMX
// GEMM (gemm_amx.cc) and on oneDNN (STEPC_GEMM=onednn), interleaved in one
// process, warm and after a 256 MB sweep; medians in ms.
//   c++ -std=c++17 -O2 -fopenmp -I. bench/cpu_step/gemm_shapes.cc -o /tmp/gs \
//     -Lbuild/lib -lstepc_kernels_cpu_native -Wl,-rpath,$PWD/build/lib && /tmp/gs 20
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include "runtime/kernels/cpu/cpu_kernels.h"
struct S { int m,n,k,ta,tb,cf32,bias; };
int main(int argc, char** argv) {
  S shapes[] = {{4096,384,128,0,1,0,1},{4096,512,128,0,1,0,1},{4096,128,512,0,1,0,1},{4096,128,128,0,1,0,1},
                {4096,128,384,0,0,1,0},{4096,128,512,0,0,1,0},{4096,512,128,0,0,0,0},{4096,128,128,0,0,0,0},
                {128,384,4096,1,0,1,0},{512,128,4096,1,0,1,0},{128,512,4096,1,0,1,0},{128,128,4096,1,0,1,0}};
  std::vector<char> sweep(256<<20);
  int reps = argc > 1 ? atoi(argv[1]) : 30;
  double tot[2][2] = {};
  for (auto s : shapes) {
    std::vector<stepc_bf16> a((size_t)s.m*s.k, 0x3f00), b((size_t)s.k*s.n, 0x3e80);
    std::vector<float> c((size_t)s.m*s.n), bias(s.n, 1.0f);
    std::vector<double> t[2][2];
    for (int r = 0; r < reps; ++r) for (int cold = 0; cold < 2; ++cold) for (int which = 0; which < 2; ++which) {
      if (which) setenv("STEPC_GEMM", "onednn", 1); else unsetenv("STEPC_GEMM");
      stepc_cpu_matmul_bf16(a.data(), b.data(), c.data(), s.cf32, 1, s.m, s.n, s.k, s.ta, s.tb, 0, s.bias ? bias.data() : nullptr);
      if (cold) { for (size_t i = 0; i < sweep.size(); i += 64) sweep[i]++; }
      auto t0 = std::chrono::steady_clock::now();
      stepc_cpu_matmul_bf16(a.data(), b.data(), c.data(), s.cf32, 1, s.m, s.n, s.k, s.ta, s.tb, 0, s.bias ? bias.data() : nullptr);
      t[which][cold].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now()-t0).count()*1e3);
    }
    auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size()/2]; };
    printf("%5d %4d %5d ta%d tb%d f32%d bias%d  amx warm %.3f cold %.3f | onednn warm %.3f cold %.3f\n", s.m,s.n,s.k,s.ta,s.tb,s.cf32,s.bias,
      med(t[0][0]), med(t[0][1]), med(t[1][0]), med(t[1][1]));
    for (int w = 0; w < 2; ++w) for (int c2 = 0; c2 < 2; ++c2) tot[w][c2] += med(t[w][c2]);
  }
  printf("total amx warm %.3f cold %.3f | onednn warm %.3f cold %.3f\n", tot[0][0], tot[0][1], tot[1][0], tot[1][1]);
}
