#include "kvlab/engine/core/process_memory.h"

#include <fstream>
#include <string>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace kvlab {

ProcessMemory process_memory() {
  ProcessMemory m;
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    // "VmRSS:\t  123456 kB"
    const auto kib = [&] { return std::stoull(line.substr(line.find(':') + 1)) * 1024; };
    if (line.starts_with("VmRSS:")) m.resident_bytes = kib();
    if (line.starts_with("VmHWM:")) m.peak_resident_bytes = kib();
  }
  return m;
}

std::uint64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    // "MemAvailable:   12345678 kB"
    if (line.starts_with("MemAvailable:")) {
      return std::stoull(line.substr(line.find(':') + 1)) * 1024;
    }
  }
  return 0;
}

bool reset_peak_resident() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

void release_large_buffers_when_freed() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
#endif
}

}  // namespace kvlab
