// Pieces the tokenizer's files share: the hash key of a token pair and the merge learner.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "rtx/text.h"

namespace rtx::text::detail {

// (left, right) as one integer; for non-negative ids, key order is (left, right) order.
inline uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// The merges training on corpus learns, at most max_merges of them (see BpeTokenizer::train).
std::vector<Merge> learn_merges(std::string_view corpus, int64_t max_merges);

}  // namespace rtx::text::detail
