/* A module of the first ABI: its entry points carry version 1 in their names. */
int stepc_module_info_v1(void) { return 0; }
int stepc_train_step_v1(void) { return 1; }
