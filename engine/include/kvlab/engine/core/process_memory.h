// This process's resident memory, as the kernel counts it (/proc/self/status), for runs that
// report what they held at their peak.
#pragma once

#include <cstdint>

namespace kvlab {

struct ProcessMemory {
  std::uint64_t resident_bytes = 0;       // VmRSS: now
  std::uint64_t peak_resident_bytes = 0;  // VmHWM: the most since the process began, or since
                                          // reset_peak_resident()
};

// Zeros where the kernel does not say (not Linux).
ProcessMemory process_memory();

// Memory the kernel says can be had now without swapping (/proc/meminfo MemAvailable); 0 where
// it does not say.
std::uint64_t available_memory_bytes();

// Starts the peak over from the memory resident now (Linux: writes 5 to /proc/self/clear_refs).
// False when the kernel refuses; the peak then counts from the process's start.
bool reset_peak_resident();

// From now on every allocation of 256 KiB or more gets pages of its own that go back to the
// system when it is freed (glibc: mallopt M_MMAP_THRESHOLD). glibc's own threshold rises to the
// largest block freed so far, after which a layer's transient buffers (a prompt's attention
// scratch, a quantizer's pass over the prompt) come from the heap and stay resident around what
// is still held: the resident memory a run then reports is what it once held, and two runs that
// hold different caches differ by less than their caches do. The command line and the app call
// it at start. Nothing where the C library is not glibc.
void release_large_buffers_when_freed();

}  // namespace kvlab
