/* stepc_abi.h - the C ABI between a compiled step.so and the runtime.
 *
 * step.so exports `stepc_module_info` (what it holds), `stepc_train_step`
 * (one training step), `stepc_eval_step` (the loss alone: no gradient,
 * no update) and, optionally, `stepc_sample_step` (the forward of one row,
 * for a sampler). The runtime checks `abi_version` before anything else:
 * a step.so from another ABI is refused with a status, never called.
 */
#ifndef STEPC_ABI_H_
#define STEPC_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STEPC_ABI_VERSION 12

/* id_ignored when every id of an input must be in [0, id_bound). */
#define STEPC_NO_IGNORED_ID INT64_MIN

/* What an argument of the training step is. */
enum stepc_arg_kind {
  STEPC_ARG_PARAM = 0,      /* trainable parameter, updated in place */
  STEPC_ARG_EXP_AVG = 1,    /* AdamW first moment, updated in place */
  STEPC_ARG_EXP_AVG_SQ = 2, /* AdamW second moment, updated in place */
  STEPC_ARG_INPUT = 3,      /* batch input (token ids, targets) */
  STEPC_ARG_LR = 4,         /* learning rate, a scalar */
  STEPC_ARG_STEP = 5,       /* step number from 1, a scalar */
  STEPC_ARG_SEED = 6        /* the run's seed (its low 32 bits), an i32 scalar: keys dropout */
};

enum stepc_dtype { STEPC_F32 = 0, STEPC_F64 = 1, STEPC_BF16 = 2, STEPC_I32 = 3, STEPC_I64 = 4 };

/* Parameter initialisers (std is the effective standard deviation). */
enum stepc_init { STEPC_INIT_ZEROS = 0, STEPC_INIT_ONES = 1, STEPC_INIT_NORMAL = 2 };

typedef struct {
  const char *name; /* parameter name, input name, or state name */
  int32_t kind;     /* stepc_arg_kind */
  int32_t dtype;    /* stepc_dtype */
  int32_t rank;
  const int64_t *shape;
  int32_t init;     /* stepc_init, parameters only */
  double init_std;  /* parameters only */
  int64_t id_bound; /* integer inputs: ids must be in [0, id_bound) */
  /* Sharded along dim 0 (fsdp, hsdp): the unsharded dim 0; shape[0] is the
   * shard's rows, the rank at shard index i (its position along the shard
   * axis) holding global rows [i·shape[0], (i+1)·shape[0]) ∩ [0, global_dim0),
   * the rest zero padding. Equal to shape[0] if unsharded. */
  int64_t global_dim0;
  /* Split over the tensor-parallel ranks (tp_parts > 1; 0 or 1: not split):
   * along dim tp_dim, whose global extent is tp_num_segments segments of
   * tp_segments[k] elements; the rank at tp index t holds part t of
   * tp_parts equal parts of each segment, side by side, so shape[tp_dim]
   * (before any fsdp split of dim 0) is the global extent / tp_parts. The
   * fsdp shard (global_dim0) is taken of this tp part. */
  int32_t tp_parts;
  int32_t tp_dim;
  int32_t tp_num_segments;
  const int64_t *tp_segments;
  /* Integer inputs: an id the step does not count (a cross-entropy's
   * ignore_index, allowed beside [0, id_bound)), or STEPC_NO_IGNORED_ID. */
  int64_t id_ignored;
  /* The mesh axis the tp_parts lie along: -1 for the tensor-parallel axis;
   * an expert-parallel weight (ep:E) names the ep axis, whose ranks hold
   * E/ep experts each as tp_parts parts of dim 0. ABI 11. */
  int32_t tp_axis;
} stepc_arg_info;

/* Collectives over the ranks of a data-parallel step, provided by the
 * runtime (MPI on CPUs). The ranks form a mesh of 1 or 2 axes (hsdp: axis 0
 * the R replica groups, axis 1 the S ranks sharing a shard); `axes` is a
 * bit mask of the mesh axes a collective spans (1: axis 0, 2: axis 1,
 * 3: both). `count` is the number of floats per rank.
 *
 * Collectives are asynchronous: a start call returns a request id, and
 * `wait` completes it; step.so issues each collective where the schedule
 * places it and waits just before the first use of its result, keeping the
 * buffers involved untouched in between, so communication overlaps the
 * compute in between. Each returns 0, or nonzero on failure. */
typedef struct {
  void *ctx;
  int32_t rank, size;
  /* data[0..count) = Σ over the ranks of the axes, in place. */
  int (*all_reduce_sum)(void *ctx, int32_t axes, float *data, int64_t count,
                        int32_t *request);
  /* recv[i·count .. (i+1)·count) = send of the i-th rank along the axes. */
  int (*all_gather)(void *ctx, int32_t axes, const float *send, float *recv, int64_t count,
                    int32_t *request);
  /* recv[0..count) = Σ over the ranks of block i of their send, i this rank's index. */
  int (*reduce_scatter_sum)(void *ctx, int32_t axes, const float *send, float *recv,
                            int64_t count, int32_t *request);
  /* recv[i·count .. (i+1)·count) = block j of the i-th rank's send along the
   * axes, j this rank's index: every rank sends block i to rank i. */
  int (*all_to_all)(void *ctx, int32_t axes, const float *send, float *recv, int64_t count,
                    int32_t *request);
  int (*wait)(void *ctx, int32_t request);
  /* Point-to-point transfers between pipeline stages: `bytes` bytes to or
   * from world rank `peer`, matched by `tag` (a transfer's number in the
   * step, the same on both ranks); started and waited for as above. */
  int (*send)(void *ctx, int32_t peer, int32_t tag, const void *data, int64_t bytes,
              int32_t *request);
  int (*recv)(void *ctx, int32_t peer, int32_t tag, void *data, int64_t bytes,
              int32_t *request);
} stepc_collectives;

/* One collective of the step, in execution order. */
enum stepc_collective_kind {
  STEPC_ALL_REDUCE = 0,
  STEPC_ALL_GATHER = 1,
  STEPC_REDUCE_SCATTER = 2,
  STEPC_ALL_TO_ALL = 3
};
typedef struct {
  int32_t kind;
  int32_t axes;  /* mesh-axis bit mask */
  int64_t count; /* floats per rank (all_to_all: per pair of ranks) */
} stepc_collective_info;

/* An output of the loss function besides the loss (f32; this rank's). */
typedef struct {
  const char *name;
  int32_t rank;
  const int64_t *shape;
} stepc_output_info;

typedef struct {
  int32_t abi_version; /* STEPC_ABI_VERSION */
  const char *target;  /* "cpu" or "cuda" */
  int32_t num_args;
  const stepc_arg_info *args;
  int64_t arena_bytes;          /* the transient arena the step needs */
  int64_t model_flops_per_step; /* 6·P_matmul + 12·L·T·d per token, times tokens */
  int64_t executed_flops_per_step;
  int64_t tokens_per_step;
  const char *report_json; /* the compiler's report (stepc --report) */
  int32_t world_size;      /* ranks the step was compiled for (1: unsharded) */
  const char *sharding;    /* "none", "ddp:N", "fsdp:N" or "hsdp:RxS" */
  int32_t mesh_axes;       /* 1, 2 (hsdp or data + tp) or 3 (hsdp + tp) */
  int32_t mesh_shape[4];   /* ranks along each axis (1 past mesh_axes) */
  int32_t num_collectives;
  const stepc_collective_info *collectives; /* per-rank sequence, in order */
  /* CUDA: the ops whose ids the device checks ("file:line:col: 'op' target"),
   * indexed by the site a failed check reports (1-based). */
  int32_t num_check_sites;
  const char *const *check_sites;
  const char *precision; /* "fp32" or "bf16" */
  /* The arena stepc_eval_step needs (its own plan, at the same base). */
  int64_t eval_arena_bytes;
  /* The logits stepc_eval_step can return (this rank's rows, f32; rank 0:
   * the model's loss is not one cross-entropy, and there are none). */
  int32_t logits_rank;
  const int64_t *logits_shape;
  /* The loss function's other outputs, which stepc_eval_step returns. */
  int32_t num_outputs;
  const stepc_output_info *outputs;
  /* Tensor-parallel ranks M (0 or 1: none): the last mesh axis, so a tp
   * group is M consecutive ranks. */
  int32_t tensor_parallel;
  /* CPU target: the ISA step.so was built for ("x86-64-v3" or "native")
   * and the CPU features it needs, comma-separated in /proc/cpuinfo's
   * names; the runtime refuses it on a CPU lacking one. Empty for CUDA. */
  const char *cpu_isa;
  const char *cpu_features;
  /* Pipeline stages P (0 or 1: none; pp:P): the step.so holds one step per
   * stage, stage 0's under the plain names above and stage r's under
   * `<name>_stage<r>`; the rank at pipeline index r runs stage r (every
   * stage reads the whole batch). */
  int32_t pipeline_stages;
  /* The mesh axis of the stages (data axes before it, tp after). */
  int32_t pipeline_axis;
  /* The arena stepc_sample_step needs (0: step.so has none; a sampler then
   * runs stepc_eval_step). ABI 10. */
  int64_t sample_arena_bytes;
  /* The loss function's metrics (f32; the batch's, reduced over the ranks
   * as the loss is), which each training step writes one after another to
   * its `metrics` buffer. ABI 12. */
  int32_t num_metrics;
  const stepc_output_info *metrics;
} stepc_module_info;

/* What a CUDA step runs on (NULL for the CPU target). The step enqueues
 * everything on `stream` without synchronising (so the runtime can capture
 * it as a CUDA graph): at its end it copies the loss and gradient norm to
 * the `loss`/`grad_norm` pointers (pinned host memory) and the device
 * status to `host_status` (pinned, 4 ints: 0, or the check site, position,
 * id and bound of the first id out of range). The arena then holds the
 * scratch, the status word and the cuBLASLt workspace after the planned
 * buffers; it is 256-byte aligned. */
typedef struct {
  void *stream; /* cudaStream_t */
  int32_t *host_status;
} stepc_device;

/* Exported by step.so; the names carry the ABI version. */
const stepc_module_info *stepc_module_info_v12(void);

/* Runs one step. `args[i]` points to argument i's buffer (see
 * stepc_module_info.args; device memory for the CUDA target); parameters
 * and moments are updated in place. `arena` holds arena_bytes, 64-byte
 * aligned. `collectives` serves a sharded step (may be NULL for world_size
 * 1); `device` a CUDA step (NULL on the CPU). Writes the loss (the global
 * mean), the pre-clip gradient norm and, unless `metrics` is NULL, the
 * metrics (host memory, pinned for CUDA, Σ of the metrics' sizes floats;
 * CUDA: enqueues their copies). Returns 0, or nonzero with a message in
 * `error` (for instance a token id outside the vocabulary, a failed
 * collective or kernel launch). ABI 12 added `metrics`. */
int stepc_train_step_v12(void *const *args, char *arena, const stepc_collectives *collectives,
                        const stepc_device *device, float *loss, float *grad_norm, float *metrics,
                        char *error, size_t error_len);

/* The forward-only step on the same arguments: writes the loss (the global
 * mean, as the training step's) and, if `logits` is not NULL and the module
 * has logits (logits_rank > 0), copies them there (host memory, this
 * rank's rows), and output i of the table to outputs[i] unless `outputs`
 * or it is NULL (host memory); changes no argument. `arena` holds eval_arena_bytes. Under
 * sharding it runs its own collectives (fsdp's parameter gathers, the
 * loss's all-reduce) on every rank; a CUDA eval has completed on return
 * only after the stream is synchronised. */
int stepc_eval_step_v12(void *const *args, char *arena, const stepc_collectives *collectives,
                       const stepc_device *device, float *loss, float *logits,
                       float *const *outputs, char *error, size_t error_len);

/* Optional (sample_arena_bytes > 0; CPU): the sampling step, the forward of
 * one row. As stepc_eval_step, but each input argument points to one row
 * ([1, ...]: the input's shape with dimension 0 = 1), the loss is that
 * row's and the logits [1, seq, vocab] are the row's logits as the eval step
 * computes them for a row of its batch. `arena` holds sample_arena_bytes. */
int stepc_sample_step_v12(void *const *args, char *arena, const stepc_collectives *collectives,
                          const stepc_device *device, float *loss, float *logits,
                          float *const *outputs, char *error, size_t error_len);

/* Optional, in step.so built with `stepc --profile` (CPU): a timeline of the
 * training step's kernels. Every kernel of the step is a site, numbered in
 * execution order (the step is straight-line code; a block outlined into a
 * function runs its sites in order), with its kind, op, source location,
 * the FLOPs and bytes the compiler counts, the memory plan's live arena
 * bytes while it runs, and its block. Version 2: live_bytes and block added. */
typedef struct stepc_trace_site {
  const char *kind;     /* the profile's kind ("step.matmul NT", "fused elementwise") */
  const char *op;       /* the op's name */
  const char *location; /* file:line:col of the op, or "" */
  long long flops, bytes;
  long long live_bytes; /* the plan's buffers live at this op */
  const char *block;    /* the repeated block it computes ("block 3"), or "" */
} stepc_trace_site;

/* One kernel of a recorded step: its site and CLOCK_MONOTONIC seconds. */
typedef struct stepc_trace_event {
  int site;
  double start_s, end_s;
} stepc_trace_event;

/* record = 1: forget what was recorded and record the following steps;
 * record = 0: stop. Either way returns the events recorded since the last
 * record = 1 (none right after one; valid until the next call) and the
 * site table. Returns nonzero if events were lost: 1 out of memory, 2 CUDA events
 * that could not be read. */
int stepc_profile_trace_v2(int record, const stepc_trace_event **events, size_t *count,
                           const stepc_trace_site **sites, size_t *site_count);

/* A `stepc --profile` build's per-kind table, written now to $STEPC_PROFILE
 * (or stderr) instead of when the library is unloaded (once either way). */
void stepc_profile_write_v1(void);

/* Optional, in CUDA step.so files: called once by the runtime before the
 * first step, on the session's device (its stream), it builds what the
 * steps' library calls would otherwise build in their first step (cuDNN's
 * attention graphs for every attention shape of the training, eval and
 * sampling steps); it runs no kernel and touches no buffer. Returns nonzero
 * with a message in `error` if a call that must succeed cannot
 * (STEPC_ATTENTION=cudnn and cuDNN declines a shape). */
int stepc_prepare_v1(const stepc_device *device, char *error, size_t error_len);

#ifdef __cplusplus
}
#endif

#endif /* STEPC_ABI_H_ */
