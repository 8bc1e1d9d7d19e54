/* The entry points of a test module that must never run: each fails. */
int stepc_train_step_v12(void *const *args, char *arena, const stepc_collectives *c,
                        const stepc_device *device, float *loss, float *grad_norm,
                        float *metrics, char *error, size_t error_len) {
  return 1;
}
int stepc_eval_step_v12(void *const *args, char *arena, const stepc_collectives *c,
                       const stepc_device *device, float *loss, float *logits,
                       float *const *outputs, char *error, size_t error_len) {
  return 1;
}
