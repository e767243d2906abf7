// The size of a VarWidth stream (docs/FORMAT.md, "VarWidth streams") of device codes, counted on
// the GPU without writing it: what encoded_bytes() gives for the same codes, for the codec
// comparison a run reports beside the codec it uses.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_check.cuh"

namespace kvlab::cuda {

// Bytes of the VarWidth encoding of codes [tokens][heads][dim] in blocks of block_size tokens:
// payload (each block's vector bits rounded up to bytes), header, block offsets and vector bit
// counts. `scratch` is reused between calls. Waits for the stream.
Result<std::uint64_t> varwidth_bytes(const std::uint8_t* codes, int tokens, int heads, int dim,
                                     int block_size, DeviceArray<unsigned long long>& scratch,
                                     cudaStream_t stream);

}  // namespace kvlab::cuda
