#include "runtime/train/resident_memory.h"

#include <algorithm>
#include <fstream>
#include <string>

namespace stepc {

ResidentMemory ReadResidentMemory() {
  ResidentMemory m;
  std::ifstream status("/proc/self/status");
  std::string line;
  // "VmHWM:     12052 kB"
  auto kib = [&line](const char* key, int64_t& out) {
    const std::string k(key);
    if (line.rfind(k, 0) == 0) out = std::stoll(line.substr(k.size())) * 1024;
  };
  int64_t anon = 0, shmem = 0;
  while (std::getline(status, line)) {
    kib("VmHWM:", m.peak_bytes);
    kib("RssFile:", m.file_bytes);
    kib("RssAnon:", anon);
    kib("RssShmem:", shmem);
  }
  m.data_bytes = anon + shmem;
  return m;
}

void ResetResidentPeak() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
}

int64_t DataPeakAbove(const ResidentMemory& before, const ResidentMemory& now) {
  return now.peak_bytes - before.peak_bytes -
         std::max<int64_t>(0, now.file_bytes - before.file_bytes);
}

}  // namespace stepc
