/* A module whose parameter claims to be split in 2 parts along mesh axis 3
 * of a one-axis mesh of one rank: the runtime must refuse it at load, not
 * index past the mesh when it places the parts. */
#include "stepc_abi.h"

static const int64_t kShape[] = {4, 4};
static const int64_t kSegments[] = {8};
static const stepc_arg_info kArgs[] = {
    {.name = "w", .kind = STEPC_ARG_PARAM, .dtype = STEPC_F32, .rank = 2, .shape = kShape,
     .global_dim0 = 4, .tp_parts = 2, .tp_dim = 0, .tp_num_segments = 1,
     .tp_segments = kSegments, .tp_axis = 3},
};
static const stepc_module_info kInfo = {
    .abi_version = STEPC_ABI_VERSION, .target = "cpu", .num_args = 1, .args = kArgs,
    .arena_bytes = 64, .report_json = "{}", .world_size = 1, .sharding = "none",
    .mesh_axes = 1, .mesh_shape = {1, 1, 1, 1}, .precision = "fp32"};
const stepc_module_info *stepc_module_info_v12(void) { return &kInfo; }
#include "failing_entry_points.h"
