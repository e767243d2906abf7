// The fused attention SIMD loops built for AVX2 only (CMakeLists.txt turns AVX-512 off for this
// file), whatever the machine: the 8-lane loops that machines without AVX-512 run.
#define KVLAB_KERNEL_SUITE FusedKernelsAvx2
#include "fused_kernels_cases.h"
