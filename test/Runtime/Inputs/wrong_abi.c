/* A shared object that claims to be a stepc module of another ABI version. */
#include "stepc_abi.h"

static const stepc_module_info kInfo = {999, "cpu", 0, 0, 0, 0, 0, 0, "", 1, "none", 1, {1, 1}, 0, 0, 0, 0, "fp32", 0};
const stepc_module_info *stepc_module_info_v12(void) { return &kInfo; }
#include "failing_entry_points.h"
