// Programmatic dependent launch (sm_90): a kernel launched with the programmatic-serialization
// attribute may start while the kernel before it in the stream is still running, so its launch
// latency hides behind that kernel's tail. It must call pdl_wait() before it reads anything the
// earlier kernel (or any earlier work) wrote; pdl_wait() returns at once when the launch had no
// such dependency. pdl_launch_dependents() lets the next kernel's CTAs start before this one ends.
#pragma once

#include <cuda_runtime.h>

namespace smla::cuda {

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }

// The launch attribute that makes a kernel a programmatic dependent of the previous one.
inline cudaLaunchAttribute pdl_attribute() {
  cudaLaunchAttribute a{};
  a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a.val.programmaticStreamSerializationAllowed = 1;
  return a;
}

}  // namespace smla::cuda
