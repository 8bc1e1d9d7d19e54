/* A module whose step writes one float past its planned arena: the guard
 * page after every session's arena must stop it at once. */
#include "stepc_abi.h"

static const int64_t kShape[] = {1, 4};
static const stepc_arg_info kArgs[] = {
    {"tokens", STEPC_ARG_INPUT, STEPC_I32, 2, kShape, 0, 0.0, 8},
    {"targets", STEPC_ARG_INPUT, STEPC_I32, 2, kShape, 0, 0.0, 8},
};
static const stepc_module_info kInfo = {STEPC_ABI_VERSION, "cpu", 2, kArgs, 64, 0, 0, 4, "{}",
                                         1, "none", 1, {1, 1}, 0, 0, 0, 0, "fp32", 0};
const stepc_module_info *stepc_module_info_v12(void) { return &kInfo; }
int stepc_train_step_v12(void *const *args, char *arena, const stepc_collectives *c,
                        const stepc_device *device, float *loss, float *grad_norm,
                        float *metrics, char *error, size_t error_len) {
  volatile float *slots = (volatile float *)arena;
  slots[15] = 1.0f; /* the last float of the 64-byte arena: fine */
  slots[16] = 1.0f; /* one past the end: the guard page */
  *loss = 0;
  *grad_norm = 0;
  return 0;
}
int stepc_eval_step_v12(void *const *args, char *arena, const stepc_collectives *c,
                       const stepc_device *device, float *loss, float *logits,
                       float *const *outputs, char *error, size_t error_len) {
  return 1;
}
