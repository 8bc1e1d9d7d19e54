// A host trainer embedding the stepc runtime through its C API
// (runtime/stepc_runtime.h): load a compiled step.so, initialise, feed
// batches, step. Any language with a C FFI can do the same.
//
//   stepc examples/gpt-small/model.mlir -o step.so --target=cpu
//   build/bin/embed_train step.so [steps]
//
// The batches here are a toy task (predict the next id of a counting
// sequence) so that the example needs no data file.

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "runtime/stepc_runtime.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s step.so [steps]\n", argv[0]);
    return 2;
  }
  const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  char error[512];
  stepc_session* session = stepc_session_create(argv[1], error, sizeof(error));
  if (!session) {
    std::fprintf(stderr, "error: %s\n", error);
    return 1;
  }
  int64_t batch = 0, seq = 0;
  if (stepc_session_input_shape(session, "tokens", &batch, &seq, error, sizeof(error)) ||
      stepc_session_init_params(session, /*seed=*/42, error, sizeof(error))) {
    std::fprintf(stderr, "error: %s\n", error);
    stepc_session_destroy(session);
    return 1;
  }
  std::vector<int32_t> tokens(batch * seq), targets(batch * seq);
  float first = 0, loss = 0, norm = 0;
  for (int step = 1; step <= steps; ++step) {
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < seq; ++t) {
        tokens[b * seq + t] = static_cast<int32_t>((b * 7 + t + step) % 64);
        targets[b * seq + t] = static_cast<int32_t>((b * 7 + t + step + 1) % 64);
      }
    if (stepc_session_set_input(session, "tokens", tokens.data(), tokens.size(), error,
                                sizeof(error)) ||
        stepc_session_set_input(session, "targets", targets.data(), targets.size(), error,
                                sizeof(error)) ||
        stepc_session_step(session, 3e-3f, &loss, &norm, error, sizeof(error))) {
      std::fprintf(stderr, "error: %s\n", error);
      stepc_session_destroy(session);
      return 1;
    }
    if (step == 1) first = loss;
    std::printf("step %d loss %.4f grad_norm %.4f\n", step, loss, norm);
  }
  std::printf("loss %.4f -> %.4f\n", first, loss);
  stepc_session_destroy(session);
  return loss < first ? 0 : 1;
}
