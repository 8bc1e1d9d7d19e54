/* A module built for a CPU with a feature no CPU has: the runtime must
 * refuse it before running any of its code (which would die of SIGILL). */
#include "stepc_abi.h"

static const int64_t kShape[] = {1, 4};
static const stepc_arg_info kArgs[] = {
    {"tokens", STEPC_ARG_INPUT, STEPC_I32, 2, kShape, 0, 0.0, 8},
    {"targets", STEPC_ARG_INPUT, STEPC_I32, 2, kShape, 0, 0.0, 8},
};
static const stepc_module_info kInfo = {
    .abi_version = STEPC_ABI_VERSION, .target = "cpu", .num_args = 2, .args = kArgs,
    .arena_bytes = 64, .tokens_per_step = 4, .report_json = "{}", .world_size = 1,
    .sharding = "none", .mesh_axes = 1, .mesh_shape = {1, 1, 1, 1}, .precision = "fp32",
    .cpu_isa = "native", .cpu_features = "avx2,not_a_real_feature,sse2"};
const stepc_module_info *stepc_module_info_v12(void) { return &kInfo; }
#include "failing_entry_points.h"
