// Whether the engine's quantizer loops use their AVX-512 forms (the same bits as the scalar
// code, lane by lane): where the build targets AVX-512 (-march=native on such machines); scalar
// code otherwise. Private to the engine.
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#define KVLAB_QUANT_AVX512 1
#include <immintrin.h>
#else
#define KVLAB_QUANT_AVX512 0
#endif
