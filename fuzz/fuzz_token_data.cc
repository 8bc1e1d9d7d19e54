// libFuzzer target: token files (nanoGPT's flat uint16, llm.c's headered
// format) on arbitrary bytes, then validation and batch sampling as
// stepc-run does them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/formats/data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<stepc::TokenData> tokens = stepc::TokenData::FromTokenBytes(
      std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.bin");
  if (!tokens.ok()) return 0;
  const int64_t batch = 2, seq = 8;
  if (!tokens->Validate(/*vocab=*/50304, batch, seq).ok()) return 0;
  std::vector<int32_t> x, y;
  tokens->Sample(/*seed=*/1, /*step=*/1, batch, seq, x, y);
  return 0;
}
