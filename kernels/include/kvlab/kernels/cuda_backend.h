// The CUDA Backend (kvlab/engine/backend.h): the engine's ops on the GPU (gpu_kv.h), offered to
// make_backend("cuda" | "auto") once registered. No CUDA headers leak from here.
#pragma once

namespace kvlab::cuda {

// Registers the CUDA backend's factory with the engine (kvlab::register_cuda_backend). The
// factory returns an Error with the driver's reason when no GPU is usable. Call once at start-up.
void register_backend();

}  // namespace kvlab::cuda
