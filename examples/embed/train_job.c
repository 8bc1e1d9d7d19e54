/* The whole training job from C: stepc_train_run runs what stepc-run runs
 * (data, schedule, evaluation, checkpoints, streamed metrics, sampling) with
 * its options as JSON, keyed by stepc-run's flag names.
 *
 *   stepc examples/gpt-small/model.mlir -o step.so --target=cpu --shard=fsdp:2
 *   mpirun -np 2 build/bin/embed_train_job step.so '{"steps": 50, "metrics": "m.jsonl"}'
 *
 * Under mpirun every rank calls it: the job runs over the MPI world. */
#include <stdio.h>

#include "runtime/stepc_runtime.h"

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s step.so ['{\"steps\": N, ...}']\n", argv[0]);
    return 2;
  }
  char error[1024];
  if (stepc_train_run(argv[1], argc > 2 ? argv[2] : "{}", error, sizeof(error))) {
    fprintf(stderr, "error: %s\n", error);
    return 1;
  }
  return 0;
}
