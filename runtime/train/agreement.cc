#include "runtime/train/agreement.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/status_macros.h"

namespace stepc {

absl::Status AgreeOnRun(Communicator& comm, const TrainOptions& o, const Schedule& schedule,
                        const TokenData& data, const std::string& resume_dir) {
  auto text_hash = [](const std::string& text) {
    uint64_t hash = 0xCBF29CE484222325ull;
    for (unsigned char c : text) hash = (hash ^ c) * 0x100000001B3ull;
    return hash;
  };
  auto bits = [](double v) {
    uint64_t b;
    std::memcpy(&b, &v, sizeof(b));
    return b;
  };
  uint64_t tokens = 0xCBF29CE484222325ull;
  tokens = (tokens ^ static_cast<uint64_t>(data.size())) * 0x100000001B3ull;
  for (int64_t i = 0; i < data.size(); i += std::max<int64_t>(1, data.size() / 4096))
    tokens = (tokens ^ static_cast<uint64_t>(data.token(i))) * 0x100000001B3ull;
  // (flag, its value as 64 bits, whether those bits are the number itself
  // (an integer, or a double's bits) rather than a text's hash)
  struct Entry {
    const char* flag;
    uint64_t value;
    enum { kInt, kDouble, kText } kind;
  };
  const std::vector<Entry> entries = {
      {"--steps", static_cast<uint64_t>(schedule.steps), Entry::kInt},
      {"--warmup", static_cast<uint64_t>(schedule.warmup), Entry::kInt},
      {"--seed", schedule.seed, Entry::kInt},
      {"--lr", bits(schedule.lr), Entry::kDouble},
      {"--min-lr-ratio", bits(schedule.min_lr_ratio), Entry::kDouble},
      {"--init-npy", text_hash(o.init_npy), Entry::kText},
      {"--init-safetensors", text_hash(o.init_safetensors), Entry::kText},
      {"--init-missing", static_cast<uint64_t>(o.init_missing), Entry::kInt},
      {"--save-safetensors", text_hash(o.save_safetensors), Entry::kText},
      {"--resume", text_hash(resume_dir), Entry::kText},
      {"--checkpoint-dir", text_hash(o.checkpoint_dir), Entry::kText},
      {"--save-every", static_cast<uint64_t>(o.save_every), Entry::kInt},
      {"--batch-npy", text_hash(o.batch_npy), Entry::kText},
      {"--val-data", text_hash(o.val_data), Entry::kText},
      {"--val-batch-npy", text_hash(o.val_batch_npy), Entry::kText},
      {"--val-fraction", bits(o.val_fraction), Entry::kDouble},
      {"--eval-every", static_cast<uint64_t>(o.eval_every), Entry::kInt},
      {"--eval-batches", static_cast<uint64_t>(o.eval_batches), Entry::kInt},
      {"--sample", static_cast<uint64_t>(o.sample), Entry::kInt},
      {"--sample-every", static_cast<uint64_t>(o.sample_every), Entry::kInt},
      {"--prompt", text_hash(o.prompt), Entry::kText},
      {"--vocab", text_hash(o.vocab), Entry::kText},
      {"--temperature", bits(o.temperature), Entry::kDouble},
      {"--top-k", static_cast<uint64_t>(o.top_k), Entry::kInt},
      {"--save-outputs", text_hash(o.save_outputs), Entry::kText},
      {"--save-npy", text_hash(o.save_npy), Entry::kText},
      {"the training tokens (--data, --corpus)", tokens, Entry::kText},
  };
  for (const Entry& e : entries) {
    STEPC_ASSIGN_OR_RETURN(const std::vector<uint64_t> all, comm.AllGather(e.value));
    for (size_t r = 0; r < all.size(); ++r) {
      if (all[r] == e.value) continue;
      std::string values;
      if (e.kind == Entry::kInt) {
        values = absl::StrCat(": ", static_cast<int64_t>(all[r]), " there, ",
                              static_cast<int64_t>(e.value), " here");
      } else if (e.kind == Entry::kDouble) {
        double there, here;
        std::memcpy(&there, &all[r], sizeof(there));
        std::memcpy(&here, &e.value, sizeof(here));
        values = absl::StrCat(": ", there, " there, ", here, " here");
      } else {
        values = " (it differs)";
      }
      return absl::FailedPreconditionError(
          absl::StrCat("rank ", r, " was started with other training flags or data than rank ",
                       comm.rank(), ": ", e.flag, values, "; every rank must be given the same"));
    }
  }
  return absl::OkStatus();
}

}  // namespace stepc
