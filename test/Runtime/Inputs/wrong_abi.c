/* A shared object that claims to be a stepc module of another ABI version. */
#include "stepc_abi.h"

static const stepc_module_info kInfo = {999, "cpu", 0, 0, 0, 0, 0, 0, ""};
const stepc_module_info *stepc_module_info_v1(void) { return &kInfo; }
int stepc_train_step_v1(void *const *args, char *arena, float *loss, float *grad_norm,
                        char *error, size_t error_len) {
  return 1;
}
