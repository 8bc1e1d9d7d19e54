/* stepc_runtime.h - the C API for embedding the stepc runtime in a host
 * trainer (any language with a C FFI). Every call returns 0 on success or a
 * nonzero status code (absl::StatusCode) with a message in `error` (if
 * `error` is not NULL and `error_len` > 0). Nothing throws or exits: a NULL
 * argument, a destroyed session or a pointer stepc_session_create never
 * returned is an error code; destroying NULL, twice or an unknown pointer
 * does nothing. A session must have its parameters initialised and every
 * input set before its first step. */
#ifndef STEPC_RUNTIME_H_
#define STEPC_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stepc_session stepc_session;

/* The whole training job stepc-run runs (data, schedule, the ranks'
 * agreement, resume, streamed metrics, plot, evaluation, checkpoints,
 * sampling, output files) on the step.so at `module_path`, with options
 * given as a JSON object keyed by stepc-run's option names
 * ({"steps": 100, "metrics": "m.jsonl", "checkpoint-dir": "ckpt"}; "{}" or
 * NULL: the defaults). Under an MPI launcher every rank calls it, over the
 * world. Progress goes to stdout on rank 0. */
int stepc_train_run(const char *module_path, const char *options_json, char *error,
                    size_t error_len);

/* Loads step.so and creates a session; NULL on failure. Started by an MPI
 * launcher (mpirun, srun), or in a host that initialised MPI itself, the
 * session runs over the MPI world (initialising MPI if the host has not). */
stepc_session *stepc_session_create(const char *module_path, char *error, size_t error_len);
/* The same over a host's own communicator: `mpi_comm` points to an MPI_Comm
 * of the MPI the runtime links (`MPI_Comm comm; ... &comm`) whose ranks run
 * the step; the runtime duplicates it (its collectives never match the
 * host's messages) and bootstraps NCCL from it on GPUs. The host
 * initialises and finalises MPI. */
stepc_session *stepc_session_create_mpi(const char *module_path, const void *mpi_comm,
                                        char *error, size_t error_len);
void stepc_session_destroy(stepc_session *session);

int stepc_session_init_params(stepc_session *session, uint64_t seed, char *error,
                              size_t error_len);
/* Sets an integer input ("tokens", "targets") of `count` values. */
int stepc_session_set_input(stepc_session *session, const char *name, const int32_t *values,
                            size_t count, char *error, size_t error_len);
/* Sets a float input (features of any rank) of `count` values. */
int stepc_session_set_input_f32(stepc_session *session, const char *name, const float *values,
                                size_t count, char *error, size_t error_len);
/* The inputs: how many, the i-th's name (valid while the session lives),
 * and an input's dtype (STEPC_F32 or STEPC_I32 of stepc_abi.h), rank and
 * shape (up to 8 dims). */
int stepc_session_num_inputs(stepc_session *session, int32_t *count, char *error,
                             size_t error_len);
int stepc_session_input_name(stepc_session *session, int32_t index, const char **name,
                             char *error, size_t error_len);
int stepc_session_input_info(stepc_session *session, const char *name, int32_t *dtype,
                             int32_t *rank, int64_t shape[8], char *error, size_t error_len);
int stepc_session_step(stepc_session *session, float lr, float *loss, float *grad_norm,
                       char *error, size_t error_len);
/* The loss of the inputs set, by the forward-only step: no gradient, no
 * update (the parameters, moments and step count are unchanged). */
int stepc_session_eval(stepc_session *session, float *loss, char *error, size_t error_len);
/* The same, also copying the logits (`count` floats: the product of
 * stepc_session_logits_shape's dims) into `logits`: what a sampler reads. */
int stepc_session_eval_logits(stepc_session *session, float *loss, float *logits, size_t count,
                              char *error, size_t error_len);
/* The loss function's outputs besides the loss (`#step.result<output, "name">`): how
 * many, the i-th's name (valid while the session lives), rank and shape;
 * and an eval that also copies output i into outputs[i] (its elements, or
 * NULL to skip it). */
int stepc_session_num_outputs(stepc_session *session, int32_t *count, char *error,
                              size_t error_len);
int stepc_session_output_info(stepc_session *session, int32_t index, const char **name,
                              int32_t *rank, int64_t shape[8], char *error, size_t error_len);
int stepc_session_eval_outputs(stepc_session *session, float *loss, float *const *outputs,
                               char *error, size_t error_len);
/* The loss function's metrics (`#step.result<metric, "name">`, e.g. an MoE
 * layer's expert loads): how many, the i-th's name (valid while the
 * session lives), rank and shape; and the last training step's values
 * (`count` floats: every metric's elements one after another, as reduced
 * over the ranks; zeros before the first step). */
int stepc_session_num_metrics(stepc_session *session, int32_t *count, char *error,
                              size_t error_len);
int stepc_session_metric_info(stepc_session *session, int32_t index, const char **name,
                              int32_t *rank, int64_t shape[8], char *error, size_t error_len);
int stepc_session_last_metrics(stepc_session *session, float *values, size_t count, char *error,
                               size_t error_len);
/* The logits of one row (`count` floats: [seq, vocab] for a language model,
 * the logits' elements over their first dimension): those the forward gives
 * a batch of one row whose integer input `input` is `row` (`row_len` ids,
 * one row of that input; the other inputs zero), what a sampler draws
 * from. By step.so's sampling step where it has one (1/batch of the eval
 * step's work), else by the eval step over a batch whose first row it is
 * (replacing the inputs set). */
int stepc_session_row_logits(stepc_session *session, const char *input, const int32_t *row,
                             size_t row_len, float *logits, size_t count, char *error,
                             size_t error_len);
/* The logits' shape ([batch, seq, vocab] for a language model); rank 0 if
 * the model's loss is not one f32 cross-entropy (no logits). */
int stepc_session_logits_shape(stepc_session *session, int32_t *rank, int64_t shape[8],
                               char *error, size_t error_len);
/* Copies the float tensor `name` (a parameter or moment) into `out`. */
int stepc_session_read_param(stepc_session *session, const char *name, float *out,
                             size_t count, char *error, size_t error_len);
/* Writes the whole float tensor `name` (a parameter or moment) from
 * `values` (count must be its number of elements). */
int stepc_session_write_param(stepc_session *session, const char *name, const float *values,
                              size_t count, char *error, size_t error_len);

/* The state tensors (parameters, then their AdamW moments): how many, and
 * the i-th's name (valid while the session lives), role (0 parameter,
 * 1 exp_avg, 2 exp_avg_sq), rank and whole shape (up to 8 dimensions are
 * written to `shape`). */
int stepc_session_num_tensors(stepc_session *session, int32_t *count, char *error,
                              size_t error_len);
int stepc_session_tensor_info(stepc_session *session, int32_t index, const char **name,
                              int32_t *role, int32_t *rank, int64_t shape[8], char *error,
                              size_t error_len);
/* This session's rank, the world it runs in and the step's tensor-parallel
 * degree: ranks r and r' with r / tensor_parallel equal read the same batch
 * rows (those of data rank r / tensor_parallel). */
int stepc_session_ranks(stepc_session *session, int32_t *rank, int32_t *world_size,
                        int32_t *tensor_parallel, char *error, size_t error_len);
/* Steps taken (or loaded from a checkpoint) so far. */
int stepc_session_steps_done(stepc_session *session, int64_t *steps, char *error,
                             size_t error_len);

/* Checkpoints (docs/training.md): parameters, moments and the step count,
 * with `trainer_json` (a JSON object of the host's own state, or NULL)
 * kept verbatim; written to `dir` atomically and checksummed. Loading
 * accepts a checkpoint of the same model from any sharding, verifies every
 * checksum and leaves the session unchanged on any error; `step` (may be
 * NULL) receives its step count and `trainer_json` (may be NULL) its
 * trainer state, which must fit in `trainer_json_len` bytes with its NUL. */
int stepc_session_save_checkpoint(stepc_session *session, const char *dir,
                                  const char *trainer_json, char *error, size_t error_len);
int stepc_session_load_checkpoint(stepc_session *session, const char *dir, int64_t *step,
                                  char *trainer_json, size_t trainer_json_len, char *error,
                                  size_t error_len);

/* Batch shape [batch, seq] of input `name`. */
int stepc_session_input_shape(stepc_session *session, const char *name, int64_t *batch,
                              int64_t *seq, char *error, size_t error_len);

#ifdef __cplusplus
}
#endif

#endif /* STEPC_RUNTIME_H_ */
