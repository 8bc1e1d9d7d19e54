// The process's resident memory as Linux counts it (/proc/self/status),
// split so that what the memory plan predicts can be compared with what the
// process holds: data (anonymous and shared memory the process wrote) apart
// from file-backed pages (the code of the libraries, paged in as it first
// runs: clean, shared with other processes and dropped under pressure).

#ifndef STEPC_RUNTIME_TRAIN_RESIDENT_MEMORY_H_
#define STEPC_RUNTIME_TRAIN_RESIDENT_MEMORY_H_

#include <cstdint>

namespace stepc {

struct ResidentMemory {
  int64_t peak_bytes = 0;  // VmHWM: the high-water mark of all resident pages
  int64_t file_bytes = 0;  // RssFile: file-backed pages resident now
  int64_t data_bytes = 0;  // RssAnon + RssShmem: the data resident now
};

ResidentMemory ReadResidentMemory();

// Resets the high-water mark to the resident size now (Linux 4.0+), so
// that memory already freed (a probe's buffers) stops counting.
void ResetResidentPeak();

// The peak of the process's data pages since `before` (taken after a
// reset), above what it held then: the high-water mark's growth less the
// file-backed pages paged in meanwhile (those stay resident once read, so
// their growth now is their growth at the peak).
int64_t DataPeakAbove(const ResidentMemory& before, const ResidentMemory& now);

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_RESIDENT_MEMORY_H_
