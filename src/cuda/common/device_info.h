// Properties of the current device, read once per device (never on the hot path).
#pragma once

#include <cstddef>

namespace smla::cuda {

struct DeviceInfo {
  int sm_count = 0;
  size_t smem_per_sm = 0;
  int major = 0, minor = 0;
  // Peak memory bandwidth over the SMs, GB/s an SM (bus width x the memory clock's two edges;
  // 0 where the device does not report them): H100 SXM ~25, H200 ~36.
  double mem_gbps_per_sm = 0.0;
};

const DeviceInfo& current_device_info();

}  // namespace smla::cuda
