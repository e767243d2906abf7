// The fused attention SIMD loops as this build compiles them (AVX-512 where the machine has it).
#define KVLAB_KERNEL_SUITE FusedKernels
#include "fused_kernels_cases.h"
