// Output files that appear whole or not at all: written to a temporary file
// beside the target, flushed to disk and renamed over it on Commit. An
// AtomicFile destroyed without a successful Commit removes its temporary
// file, so a failed run never truncates or half-writes an existing output.

#ifndef STEPC_RUNTIME_ATOMIC_FILE_H_
#define STEPC_RUNTIME_ATOMIC_FILE_H_

#include <fstream>
#include <string>

namespace stepc {

class AtomicFile {
 public:
  AtomicFile() = default;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  // Creates the temporary file for `path` (through a symlink: beside its
  // target, which the rename replaces); false with a message naming `path`
  // if its directory is missing or not writable, or `path` is a directory,
  // a FIFO or a socket. A character or block device is written in place.
  bool Open(const std::string& path, std::string& error);
  std::ostream& stream() { return out_; }
  bool is_open() const { return out_.is_open(); }
  // Flushes, fsyncs and renames over the target; false (target untouched)
  // with a message if any write failed.
  bool Commit(std::string& error);

 private:
  std::string path_, temp_;
  std::ofstream out_;
  bool committed_ = false;
  // The target is a device (/dev/null, /dev/full): written in place, never
  // replaced by a regular file.
  bool in_place_ = false;
};

}  // namespace stepc

#endif  // STEPC_RUNTIME_ATOMIC_FILE_H_
