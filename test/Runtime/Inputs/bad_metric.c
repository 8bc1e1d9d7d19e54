/* A module whose metric table names a shape with a negative dimension: the
 * runtime must refuse it at load, not size the step's metrics buffer by it. */
#include "stepc_abi.h"

static const int64_t kShape[] = {4, 4};
static const int64_t kMetricShape[] = {8, -3};
static const stepc_arg_info kArgs[] = {
    {.name = "w", .kind = STEPC_ARG_PARAM, .dtype = STEPC_F32, .rank = 2, .shape = kShape,
     .global_dim0 = 4},
};
static const stepc_output_info kMetrics[] = {{"load", 2, kMetricShape}};
static const stepc_module_info kInfo = {
    .abi_version = STEPC_ABI_VERSION, .target = "cpu", .num_args = 1, .args = kArgs,
    .arena_bytes = 64, .report_json = "{}", .world_size = 1, .sharding = "none",
    .mesh_axes = 1, .mesh_shape = {1, 1, 1, 1}, .precision = "fp32", .num_metrics = 1,
    .metrics = kMetrics};
const stepc_module_info *stepc_module_info_v12(void) { return &kInfo; }
#include "failing_entry_points.h"
