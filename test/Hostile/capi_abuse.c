/* Abuses the C API (stepc_runtime.h) the ways a host program can get it
 * wrong: NULLs everywhere, calls out of order, destroyed and foreign handles,
 * wrong sizes. Each case must return an error code with a message (or, for
 * destroy, do nothing): prints "ok CASE" or "FAIL CASE: why" per case and
 * exits 1 if any failed. A crash is the failure this exists to catch.
 *
 *   capi_abuse STEP.so DIRECTORY TEXT_FILE */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/stepc_runtime.h"

static int failures = 0;
static char error[256];

/* `rc` must be nonzero with a message naming `expect` (NULL: any message). */
static void expect_error(const char *name, int rc, const char *expect) {
  if (rc == 0) {
    printf("FAIL %s: returned 0\n", name);
    ++failures;
  } else if (error[0] == '\0' || (expect && !strstr(error, expect))) {
    printf("FAIL %s: rc %d, message '%s' (expected it to mention '%s')\n", name, rc, error,
           expect ? expect : "anything");
    ++failures;
  } else {
    printf("ok %s: %s\n", name, error);
  }
  error[0] = '\0';
}

static void expect_ok(const char *name, int rc) {
  if (rc != 0) {
    printf("FAIL %s: rc %d: %s\n", name, rc, error);
    ++failures;
  } else {
    printf("ok %s\n", name);
  }
  error[0] = '\0';
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: capi_abuse STEP.so DIRECTORY TEXT_FILE\n");
    return 2;
  }
  const char *so = argv[1];
  float loss = 0, norm = 0, out[4];
  int64_t batch = 0, seq = 0;
  int32_t ids[4] = {0, 1, 2, 3};

  expect_error("create-null-path", stepc_session_create(NULL, error, sizeof error) ? 0 : 1, "NULL");
  expect_error("create-missing", stepc_session_create("no/such/step.so", error, sizeof error) ? 0 : 1,
               "no/such/step.so");
  expect_error("create-directory", stepc_session_create(argv[2], error, sizeof error) ? 0 : 1, argv[2]);
  expect_error("create-text-file", stepc_session_create(argv[3], error, sizeof error) ? 0 : 1, argv[3]);
  /* A host communicator: NULL, or one with MPI never initialised (this
   * process runs no MPI; the pointer is never read). */
  expect_error("create-mpi-null-comm", stepc_session_create_mpi(so, NULL, error, sizeof error) ? 0 : 1,
               "NULL");
  long not_a_comm = 12345;
  expect_error("create-mpi-uninitialised",
               stepc_session_create_mpi(so, &not_a_comm, error, sizeof error) ? 0 : 1,
               "needs MPI initialised");
  /* No error buffer at all: still no crash. */
  if (stepc_session_create("no/such/step.so", NULL, 0) != NULL) {
    printf("FAIL create-no-error-buffer: returned a session\n");
    ++failures;
  } else {
    printf("ok create-no-error-buffer\n");
  }
  /* A one-byte buffer holds only the terminator. */
  char tiny[1] = {'x'};
  stepc_session_create("no/such/step.so", tiny, 1);
  if (tiny[0] != '\0') {
    printf("FAIL create-tiny-error-buffer: not terminated\n");
    ++failures;
  } else {
    printf("ok create-tiny-error-buffer\n");
  }

  stepc_session *s = stepc_session_create(so, error, sizeof error);
  if (!s) {
    printf("FAIL create: %s\n", error);
    return 1;
  }
  expect_error("step-before-init", stepc_session_step(s, 1e-3f, &loss, &norm, error, sizeof error),
               "InitParams");
  expect_ok("init", stepc_session_init_params(s, 0, error, sizeof error));
  expect_error("step-before-inputs", stepc_session_step(s, 1e-3f, &loss, &norm, error, sizeof error),
               "never set");
  expect_error("init-null-session", stepc_session_init_params(NULL, 0, error, sizeof error), "NULL");
  expect_error("set-input-null-session", stepc_session_set_input(NULL, "tokens", ids, 4, error, sizeof error),
               "NULL");
  expect_error("set-input-null-name", stepc_session_set_input(s, NULL, ids, 4, error, sizeof error), "NULL");
  expect_error("set-input-null-values", stepc_session_set_input(s, "tokens", NULL, 4, error, sizeof error),
               "NULL");
  expect_error("set-input-wrong-count", stepc_session_set_input(s, "tokens", ids, 4, error, sizeof error),
               "tokens");
  expect_error("set-input-unknown", stepc_session_set_input(s, "tokenz", ids, 4, error, sizeof error),
               "tokenz");
  expect_error("set-input-empty", stepc_session_set_input(s, "tokens", NULL, 0, error, sizeof error),
               "tokens");
  expect_error("input-shape-null-batch", stepc_session_input_shape(s, "tokens", NULL, &seq, error, sizeof error),
               "NULL");
  expect_error("input-shape-unknown", stepc_session_input_shape(s, "nope", &batch, &seq, error, sizeof error),
               "nope");
  /* A parameter is not an input, whatever its shape. */
  expect_error("input-shape-of-param", stepc_session_input_shape(s, "wpe", &batch, &seq, error, sizeof error),
               "no input named 'wpe'");
  int32_t r = 0, w = 0, tp = 0;
  expect_error("ranks-null", stepc_session_ranks(s, NULL, &w, &tp, error, sizeof error), "NULL");
  expect_ok("ranks", stepc_session_ranks(s, &r, &w, &tp, error, sizeof error));
  expect_ok("input-shape", stepc_session_input_shape(s, "tokens", &batch, &seq, error, sizeof error));
  /* A whole batch of an out-of-range id. */
  static int32_t big[1 << 20];
  size_t n = (size_t)(batch * seq);
  if (n > sizeof big / sizeof big[0]) n = sizeof big / sizeof big[0];
  for (size_t i = 0; i < n; ++i) big[i] = 1 << 30;
  expect_error("set-input-id-out-of-range", stepc_session_set_input(s, "tokens", big, n, error, sizeof error),
               "outside");
  for (size_t i = 0; i < n; ++i) big[i] = -1;
  expect_error("set-input-negative-id", stepc_session_set_input(s, "targets", big, n, error, sizeof error),
               "outside");
  for (size_t i = 0; i < n; ++i) big[i] = 1;
  expect_ok("set-tokens", stepc_session_set_input(s, "tokens", big, n, error, sizeof error));
  expect_ok("set-targets", stepc_session_set_input(s, "targets", big, n, error, sizeof error));
  expect_error("step-null-loss", stepc_session_step(s, 1e-3f, NULL, &norm, error, sizeof error), "NULL");
  expect_error("step-nan-lr", stepc_session_step(s, NAN, &loss, &norm, error, sizeof error), "learning rate");
  expect_error("step-negative-lr", stepc_session_step(s, -1.0f, &loss, &norm, error, sizeof error),
               "learning rate");
  expect_error("step-infinite-lr", stepc_session_step(s, INFINITY, &loss, &norm, error, sizeof error),
               "learning rate");
  expect_ok("step", stepc_session_step(s, 1e-3f, &loss, &norm, error, sizeof error));
  expect_error("read-param-unknown", stepc_session_read_param(s, "nope", out, 4, error, sizeof error), "nope");
  expect_error("read-param-null-name", stepc_session_read_param(s, NULL, out, 4, error, sizeof error), "NULL");
  expect_error("read-param-wrong-count", stepc_session_read_param(s, "wte", out, 4, error, sizeof error),
               "wte");
  expect_error("read-param-null-out", stepc_session_read_param(s, "wte", NULL, 4, error, sizeof error), NULL);

  /* The forward-only step and its logits. */
  expect_error("eval-null-loss", stepc_session_eval(s, NULL, error, sizeof error), "NULL");
  expect_ok("eval", stepc_session_eval(s, &loss, error, sizeof error));
  int32_t rank = 0, count = 0, dtype = 0;
  int64_t shape[8];
  expect_error("logits-shape-null", stepc_session_logits_shape(s, NULL, shape, error, sizeof error), "NULL");
  expect_ok("logits-shape", stepc_session_logits_shape(s, &rank, shape, error, sizeof error));
  expect_error("eval-logits-wrong-count", stepc_session_eval_logits(s, &loss, out, 4, error, sizeof error),
               "logits");
  expect_error("eval-logits-null", stepc_session_eval_logits(s, &loss, NULL, 4, error, sizeof error), "NULL");
  /* One row's logits (gpt-small: 64 tokens, 512 logits each; the sampling
   * step): NULLs, the wrong count, an unknown input, a short row, an id
   * outside the vocabulary are errors; a good row is not. */
  static int32_t row[64];
  static float row_logits[64 * 512];
  const size_t row_count = 64 * 512;
  expect_error("row-logits-null", stepc_session_row_logits(s, "tokens", NULL, 64, row_logits, row_count,
                                                           error, sizeof error), "NULL");
  expect_error("row-logits-wrong-count", stepc_session_row_logits(s, "tokens", row, 64, row_logits, 4,
                                                                  error, sizeof error), "count is 4");
  expect_error("row-logits-unknown-input", stepc_session_row_logits(s, "nope", row, 64, row_logits,
                                                                    row_count, error, sizeof error), "nope");
  expect_error("row-logits-short-row", stepc_session_row_logits(s, "tokens", row, 3, row_logits, row_count,
                                                                error, sizeof error), "got 3");
  row[5] = 100000;
  expect_error("row-logits-bad-id", stepc_session_row_logits(s, "tokens", row, 64, row_logits, row_count,
                                                             error, sizeof error), "outside [0, 512)");
  row[5] = 7;
  expect_ok("row-logits", stepc_session_row_logits(s, "tokens", row, 64, row_logits, row_count, error,
                                                   sizeof error));
  /* The loss function's outputs (gpt-small has none). */
  expect_error("num-outputs-null", stepc_session_num_outputs(s, NULL, error, sizeof error), "NULL");
  expect_ok("num-outputs", stepc_session_num_outputs(s, &count, error, sizeof error));
  if (count != 0) {
    printf("FAIL num-outputs-count: %d, expected 0\n", count);
    ++failures;
  }
  const char *output_name = NULL;
  expect_error("output-info-out-of-range", stepc_session_output_info(s, 0, &output_name, &rank, shape, error,
                                                                      sizeof error), "no output 0");
  expect_error("eval-outputs-null", stepc_session_eval_outputs(s, &loss, NULL, error, sizeof error), "NULL");
  /* Float inputs and the input listing. */
  float features[4] = {0, 1, 2, 3};
  expect_error("set-input-f32-on-ids", stepc_session_set_input_f32(s, "tokens", features, 4, error, sizeof error),
               "not a float input");
  expect_error("set-input-f32-null-values", stepc_session_set_input_f32(s, "tokens", NULL, 4, error, sizeof error),
               "NULL");
  expect_error("num-inputs-null", stepc_session_num_inputs(s, NULL, error, sizeof error), "NULL");
  expect_ok("num-inputs", stepc_session_num_inputs(s, &count, error, sizeof error));
  const char *name = NULL;
  expect_error("input-name-out-of-range", stepc_session_input_name(s, count, &name, error, sizeof error),
               "no input");
  expect_error("input-info-unknown", stepc_session_input_info(s, "nope", &dtype, &rank, shape, error, sizeof error),
               "nope");
  expect_error("input-info-null", stepc_session_input_info(s, "tokens", NULL, &rank, shape, error, sizeof error),
               "NULL");
  /* State tensors: listing, writing. */
  expect_error("num-tensors-null", stepc_session_num_tensors(s, NULL, error, sizeof error), "NULL");
  expect_error("tensor-info-out-of-range", stepc_session_tensor_info(s, 100000, &name, &rank, &rank, shape,
                                                                      error, sizeof error), "no state tensor");
  expect_error("tensor-info-negative", stepc_session_tensor_info(s, -1, &name, &rank, &rank, shape, error,
                                                                  sizeof error), "no state tensor");
  expect_error("write-param-wrong-count", stepc_session_write_param(s, "wte", out, 4, error, sizeof error),
               "wte");
  expect_error("write-param-unknown", stepc_session_write_param(s, "nope", out, 4, error, sizeof error), "nope");
  expect_error("write-param-null-values", stepc_session_write_param(s, "wte", NULL, 4, error, sizeof error),
               "NULL");
  /* Checkpoints: bad paths, a missing one, a trainer buffer too small. */
  char ckpt[512], under_file[512];
  snprintf(ckpt, sizeof ckpt, "%s/capi-ckpt", argv[2]);
  snprintf(under_file, sizeof under_file, "%s/ckpt", argv[3]);
  expect_error("save-null-dir", stepc_session_save_checkpoint(s, NULL, NULL, error, sizeof error), "NULL");
  expect_error("save-bad-trainer-json", stepc_session_save_checkpoint(s, ckpt, "[1, 2", error, sizeof error),
               "JSON object");
  expect_error("save-under-a-file", stepc_session_save_checkpoint(s, under_file, NULL, error, sizeof error),
               argv[3]);
  expect_ok("save", stepc_session_save_checkpoint(s, ckpt, "{\"epoch\": 3}", error, sizeof error));
  int64_t steps = -1;
  char trainer[4];
  expect_error("load-missing", stepc_session_load_checkpoint(s, "no/such/ckpt", &steps, NULL, 0, error,
                                                             sizeof error), "no/such/ckpt");
  expect_error("load-null-dir", stepc_session_load_checkpoint(s, NULL, &steps, NULL, 0, error, sizeof error),
               "NULL");
  expect_error("load-trainer-buffer-too-small",
               stepc_session_load_checkpoint(s, ckpt, &steps, trainer, sizeof trainer, error, sizeof error),
               "trainer_json_len");
  expect_ok("load", stepc_session_load_checkpoint(s, ckpt, &steps, NULL, 0, error, sizeof error));
  expect_ok("steps-done", stepc_session_steps_done(s, &steps, error, sizeof error));
  if (steps != 1) {
    printf("FAIL steps-after-load: %lld, expected 1\n", (long long)steps);
    ++failures;
  }

  /* A pointer the library never returned. */
  struct { void *p[8]; } foreign = {{0}};
  stepc_session *fake = (stepc_session *)&foreign;
  expect_error("step-foreign-handle", stepc_session_step(fake, 1e-3f, &loss, &norm, error, sizeof error),
               "not a session");
  stepc_session_destroy(fake);
  printf("ok destroy-foreign-handle\n");

  stepc_session_destroy(s);
  expect_error("step-after-destroy", stepc_session_step(s, 1e-3f, &loss, &norm, error, sizeof error),
               "destroyed");
  expect_error("init-after-destroy", stepc_session_init_params(s, 0, error, sizeof error), "destroyed");
  expect_error("read-after-destroy", stepc_session_read_param(s, "wte", out, 4, error, sizeof error),
               "destroyed");
  expect_error("eval-after-destroy", stepc_session_eval(s, &loss, error, sizeof error), "destroyed");
  expect_error("save-after-destroy", stepc_session_save_checkpoint(s, ckpt, NULL, error, sizeof error),
               "destroyed");
  stepc_session_destroy(s);
  printf("ok destroy-twice\n");
  stepc_session_destroy(NULL);
  printf("ok destroy-null\n");
  /* A second session after the first was destroyed works normally. */
  stepc_session *again = stepc_session_create(so, error, sizeof error);
  expect_ok("create-after-destroy", again ? 0 : 1);
  if (again) {
    expect_ok("init-again", stepc_session_init_params(again, 0, error, sizeof error));
    expect_error("old-handle-stays-dead", stepc_session_init_params(s, 0, error, sizeof error), "destroyed");
    stepc_session_destroy(again);
  }
  return failures ? 1 : 0;
}
