// A host trainer embedding the stepc runtime through its C API
// (runtime/stepc_runtime.h): load a compiled step.so, initialise, feed
// batches, step, checkpoint and resume. Any language with a C FFI can do
// the same.
//
//   stepc examples/gpt-small/model.mlir -o step.so --target=cpu
//   build/bin/embed_train step.so [steps] [checkpoint-dir]
//
// Before training it evaluates step 1's batch with the forward-only step,
// which must give the loss step 1 reports. With a checkpoint directory it
// also trains the first half, saves, loads
// the checkpoint into a fresh session, trains the second half, and checks
// that every tensor equals the straight run's bit for bit.
//
// The batches here are a toy task (predict the next id of a counting
// sequence) so that the example needs no data file.
//
// Under mpirun with a sharded step.so (`stepc ... --shard=fsdp:2`,
// `mpirun -np 2 embed_train step.so`) every rank is a process of this
// program: the runtime joins the MPI world, each rank feeds its rows of the
// global batch (those of data rank rank / tensor_parallel), and rank 0
// prints.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "runtime/stepc_runtime.h"

namespace {

char error[512];
// This rank's first row of the global batch, and whether it prints.
int64_t first_row = 0;
bool lead = true;

// Prints the last error, destroys the sessions given; the exit status.
int Fail(stepc_session* session, stepc_session* other = nullptr) {
  std::fprintf(stderr, "error: %s\n", error);
  stepc_session_destroy(session);
  stepc_session_destroy(other);
  return 1;
}

// Sets the toy task's batch of `step`.
bool SetBatch(stepc_session* session, int step) {
  int64_t batch = 0, seq = 0;
  if (stepc_session_input_shape(session, "tokens", &batch, &seq, error, sizeof(error)))
    return false;
  std::vector<int32_t> tokens(batch * seq), targets(batch * seq);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t) {
      tokens[b * seq + t] = static_cast<int32_t>(((first_row + b) * 7 + t + step) % 64);
      targets[b * seq + t] = static_cast<int32_t>(((first_row + b) * 7 + t + step + 1) % 64);
    }
  return !stepc_session_set_input(session, "tokens", tokens.data(), tokens.size(), error,
                                  sizeof(error)) &&
         !stepc_session_set_input(session, "targets", targets.data(), targets.size(), error,
                                  sizeof(error));
}

// Steps [first, last] of the toy task; prints each loss.
bool Train(stepc_session* session, int first, int last, float* first_loss, float* loss) {
  float norm = 0;
  for (int step = first; step <= last; ++step) {
    if (!SetBatch(session, step) ||
        stepc_session_step(session, 3e-3f, loss, &norm, error, sizeof(error)))
      return false;
    if (step == 1) *first_loss = *loss;
    if (lead) std::printf("step %d loss %.4f grad_norm %.4f\n", step, *loss, norm);
  }
  return true;
}

// Whether every state tensor of `a` and `b` is bit-identical; counts them.
bool SameTensors(stepc_session* a, stepc_session* b, int32_t* count) {
  if (stepc_session_num_tensors(a, count, error, sizeof(error))) return false;
  for (int32_t i = 0; i < *count; ++i) {
    const char* name = nullptr;
    int32_t role = 0, rank = 0;
    int64_t shape[8];
    if (stepc_session_tensor_info(a, i, &name, &role, &rank, shape, error, sizeof(error)))
      return false;
    size_t n = 1;
    for (int d = 0; d < rank; ++d) n *= static_cast<size_t>(shape[d]);
    std::vector<float> x(n), y(n);
    if (stepc_session_read_param(a, name, x.data(), n, error, sizeof(error)) ||
        stepc_session_read_param(b, name, y.data(), n, error, sizeof(error)))
      return false;
    if (std::memcmp(x.data(), y.data(), n * sizeof(float)) != 0) {
      std::snprintf(error, sizeof(error), "'%s' differs after the resume", name);
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s step.so [steps] [checkpoint-dir]\n", argv[0]);
    return 2;
  }
  const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  const char* checkpoint = argc > 3 ? argv[3] : nullptr;
  stepc_session* session = stepc_session_create(argv[1], error, sizeof(error));
  if (!session) {
    std::fprintf(stderr, "error: %s\n", error);
    return 1;
  }
  int32_t world_rank = 0, world = 1, tp = 1;
  int64_t rows = 0, seq = 0;
  if (stepc_session_ranks(session, &world_rank, &world, &tp, error, sizeof(error)) ||
      stepc_session_input_shape(session, "tokens", &rows, &seq, error, sizeof(error)))
    return Fail(session);
  first_row = (world_rank / tp) * rows;
  lead = world_rank == 0;
  float first = 0, loss = 0, evaluated = 0;
  // The forward-only step on step 1's batch: the loss step 1 then reports.
  if (stepc_session_init_params(session, /*seed=*/42, error, sizeof(error)) ||
      !SetBatch(session, 1) || stepc_session_eval(session, &evaluated, error, sizeof(error)) ||
      !Train(session, 1, steps, &first, &loss))
    return Fail(session);
  if (lead)
    std::printf("eval before step 1: loss %.4f, %s step 1's\n", evaluated,
                evaluated == first ? "bit-identical to" : "DIFFERENT from");
  // The logits of the same forward: their cross-entropy is the loss.
  int32_t rank = 0;
  int64_t shape[8];
  if (stepc_session_logits_shape(session, &rank, shape, error, sizeof(error)) || rank != 3)
    return Fail(session);
  std::vector<float> logits(shape[0] * shape[1] * shape[2]);
  float again = 0;
  if (!SetBatch(session, 1) ||
      stepc_session_eval_logits(session, &again, logits.data(), logits.size(), error,
                                sizeof(error)))
    return Fail(session);
  double total = 0;
  for (int64_t b = 0; b < shape[0]; ++b)
    for (int64_t t = 0; t < shape[1]; ++t) {
      const float* row = logits.data() + (b * shape[1] + t) * shape[2];
      double top = row[0], sum = 0;
      for (int64_t v = 0; v < shape[2]; ++v) top = std::max<double>(top, row[v]);
      for (int64_t v = 0; v < shape[2]; ++v) sum += std::exp(row[v] - top);
      const int64_t target = ((first_row + b) * 7 + t + 1 + 1) % 64;  // step 1's targets
      total += std::log(sum) + top - row[target];
    }
  const double recomputed = total / double(shape[0] * shape[1]);
  // (Sharded, the logits are this rank's rows and the loss the global mean.)
  if (lead && world == 1)
    std::printf("logits [%lld, %lld, %lld]: their cross-entropy %.6f, the loss %.6f (%s)\n",
              static_cast<long long>(shape[0]), static_cast<long long>(shape[1]),
              static_cast<long long>(shape[2]), recomputed, again,
              std::fabs(recomputed - again) <= 1e-5 * std::fabs(again) ? "agree" : "DIFFER");
  if (lead) std::printf("loss %.4f -> %.4f\n", first, loss);
  if (checkpoint) {
    // Half, save, a new session from the checkpoint, the other half.
    stepc_session* half = stepc_session_create(argv[1], error, sizeof(error));
    float ignored = 0, resumed_loss = 0;
    int64_t step = 0;
    char trainer[256];
    if (!half || stepc_session_init_params(half, 42, error, sizeof(error)) ||
        !Train(half, 1, steps / 2, &ignored, &resumed_loss) ||
        stepc_session_save_checkpoint(half, checkpoint, "{\"host\": \"embed_train\"}", error,
                                      sizeof(error)))
      return Fail(half, session);
    stepc_session_destroy(half);
    stepc_session* resumed = stepc_session_create(argv[1], error, sizeof(error));
    int32_t tensors = 0;
    if (!resumed ||
        stepc_session_load_checkpoint(resumed, checkpoint, &step, trainer, sizeof(trainer),
                                      error, sizeof(error)) ||
        !Train(resumed, static_cast<int>(step) + 1, steps, &ignored, &resumed_loss) ||
        !SameTensors(session, resumed, &tensors))
      return Fail(resumed, session);
    if (lead)
      std::printf("resumed at step %lld (%s): %d tensors bit-identical to the straight run\n",
                  static_cast<long long>(step), trainer, tensors);
    stepc_session_destroy(resumed);
  }
  stepc_session_destroy(session);
  return loss < first && evaluated == first ? 0 : 1;
}
