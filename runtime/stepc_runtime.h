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

/* Loads step.so and creates a session; NULL on failure. */
stepc_session *stepc_session_create(const char *module_path, char *error, size_t error_len);
void stepc_session_destroy(stepc_session *session);

int stepc_session_init_params(stepc_session *session, uint64_t seed, char *error,
                              size_t error_len);
/* Sets an integer input ("tokens", "targets") of `count` values. */
int stepc_session_set_input(stepc_session *session, const char *name, const int32_t *values,
                            size_t count, char *error, size_t error_len);
int stepc_session_step(stepc_session *session, float lr, float *loss, float *grad_norm,
                       char *error, size_t error_len);
/* Copies the float tensor `name` (a parameter or moment) into `out`. */
int stepc_session_read_param(stepc_session *session, const char *name, float *out,
                             size_t count, char *error, size_t error_len);
/* Batch shape [batch, seq] of input `name`. */
int stepc_session_input_shape(stepc_session *session, const char *name, int64_t *batch,
                              int64_t *seq, char *error, size_t error_len);

#ifdef __cplusplus
}
#endif

#endif /* STEPC_RUNTIME_H_ */
