/* A C host that owns MPI and hands the runtime its own communicator
 * (stepc_session_create_mpi), as a trainer that already runs MPI does.
 *
 *   stepc examples/gpt-small/model.mlir -o step.so --target=cpu --shard=fsdp:2
 *   mpirun -np 4 build/bin/embed_own_communicator step.so [steps] [group]
 *
 * The host initialises MPI, splits its world into jobs of `group` ranks
 * (default 2) and each job trains the same sharded step.so over its job's
 * communicator: two independent fsdp:2 runs in one launch. Between steps the
 * host keeps using MPI itself (an allreduce of the losses over the whole
 * world), which the runtime's collectives must never disturb. Each job's
 * lead rank prints its losses ("job J step S loss L"); the batches are
 * embed_train's toy task, so one job's losses are embed_train's. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/stepc_runtime.h"

static char error[512];

/* Sets the toy task's batch of `step` (embed_train's): rows from `first_row`. */
static int set_batch(stepc_session *session, int64_t first_row, int step) {
  int64_t batch = 0, seq = 0;
  if (stepc_session_input_shape(session, "tokens", &batch, &seq, error, sizeof(error))) return 0;
  int32_t *tokens = malloc(sizeof(int32_t) * batch * seq);
  int32_t *targets = malloc(sizeof(int32_t) * batch * seq);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t) {
      tokens[b * seq + t] = (int32_t)(((first_row + b) * 7 + t + step) % 64);
      targets[b * seq + t] = (int32_t)(((first_row + b) * 7 + t + step + 1) % 64);
    }
  int ok = !stepc_session_set_input(session, "tokens", tokens, batch * seq, error,
                                    sizeof(error)) &&
           !stepc_session_set_input(session, "targets", targets, batch * seq, error,
                                    sizeof(error));
  free(tokens);
  free(targets);
  return ok;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s step.so [steps] [group]\n", argv[0]);
    return 2;
  }
  const int steps = argc > 2 ? atoi(argv[2]) : 6;
  const int group = argc > 3 ? atoi(argv[3]) : 2;
  MPI_Init(&argc, &argv);
  int world_rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm job;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank / group, world_rank, &job);

  stepc_session *session = stepc_session_create_mpi(argv[1], &job, error, sizeof(error));
  if (!session) {
    fprintf(stderr, "rank %d: error: %s\n", world_rank, error);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int32_t rank = 0, ranks = 1, tp = 1;
  int64_t rows = 0, seq = 0;
  float loss = 0, norm = 0;
  int status = stepc_session_ranks(session, &rank, &ranks, &tp, error, sizeof(error)) ||
               stepc_session_input_shape(session, "tokens", &rows, &seq, error, sizeof(error)) ||
               stepc_session_init_params(session, /*seed=*/42, error, sizeof(error));
  const int64_t first_row = (rank / tp) * rows;
  for (int step = 1; !status && step <= steps; ++step) {
    status = !set_batch(session, first_row, step) ||
             stepc_session_step(session, 3e-3f, &loss, &norm, error, sizeof(error));
    /* The host's own collective between steps, on its own communicator. */
    float total = 0;
    if (!status) MPI_Allreduce(&loss, &total, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (!status && rank == 0)
      printf("job %d step %d loss %.4f grad_norm %.4f (world %d, job ranks %d, host sum %.4f)\n",
             world_rank / group, step, loss, norm, world, ranks, total);
  }
  if (status) fprintf(stderr, "rank %d: error: %s\n", world_rank, error);
  stepc_session_destroy(session);
  MPI_Comm_free(&job);
  MPI_Finalize();
  return status;
}
