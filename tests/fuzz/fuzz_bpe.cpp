// libFuzzer target: the BPE tokenizer's text format (BpeTokenizer::deserialize, the parser load()
// uses) on arbitrary text. Every input must parse or raise CheckpointError, and what parses must be
// a working tokenizer: the format is canonical (serialize() gives the text back) and encode/decode
// round-trip any bytes. ASan and UBSan check the memory the parser and the tokenizer touch.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "rtx/error.h"
#include "rtx/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const rtx::text::BpeTokenizer tokenizer = rtx::text::BpeTokenizer::deserialize(text);
    if (tokenizer.serialize() != text) std::abort();
    const std::string sample = "In the beginning God created the heaven and the earth.\n 123 \xc3\xa9\xff";
    if (tokenizer.decode(tokenizer.encode(sample)) != sample) std::abort();
    if (tokenizer.decode(tokenizer.encode(text)) != text) std::abort();
  } catch (const rtx::CheckpointError&) {
  }
  return 0;
}
