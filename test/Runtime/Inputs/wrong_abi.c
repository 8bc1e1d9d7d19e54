/* A shared object that claims to be a stepc module of another ABI version. */
#include "stepc_abi.h"

static const stepc_module_info kInfo = {999, "cpu", 0, 0, 0, 0, 0, 0, "", 1, "none", 1, {1, 1}, 0, 0, 0, 0, "fp32", 0};
const stepc_module_info *stepc_module_info_v5(void) { return &kInfo; }
int stepc_train_step_v5(void *const *args, char *arena, const stepc_collectives *c,
                        const stepc_device *device, float *loss, float *grad_norm, char *error,
                        size_t error_len) {
  return 1;
}
int stepc_eval_step_v5(void *const *args, char *arena, const stepc_collectives *c,
                       const stepc_device *device, float *loss, float *logits,
                       float *const *outputs, char *error, size_t error_len) {
  return 1;
}
