// Splits text into the words BPE merges stay within (the rule is spelled out in rtx/text.h): a
// single leading space plus a run of letters, digits or other non-space bytes, or a whitespace run.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace rtx::text::detail {

enum class ByteClass : unsigned char { Letter, Digit, Space, Other };

constexpr ByteClass classify_byte(unsigned char c) {
  if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c >= 0x80) return ByteClass::Letter;
  if (c >= '0' && c <= '9') return ByteClass::Digit;
  if (c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r') return ByteClass::Space;
  return ByteClass::Other;
}

constexpr std::array<ByteClass, 256> make_byte_classes() {
  std::array<ByteClass, 256> table{};
  for (int c = 0; c < 256; ++c) table[c] = classify_byte(static_cast<unsigned char>(c));
  return table;
}

inline constexpr std::array<ByteClass, 256> kByteClasses = make_byte_classes();

inline ByteClass byte_class(char c) { return kByteClasses[static_cast<unsigned char>(c)]; }

// The end of the word that starts at text[start] (start < text.size()).
inline size_t word_end(std::string_view text, size_t start) {
  const size_t n = text.size();
  size_t i = start;
  if (text[i] == ' ' && i + 1 < n && byte_class(text[i + 1]) != ByteClass::Space) ++i;
  const ByteClass cls = byte_class(text[i]);
  while (i < n && byte_class(text[i]) == cls) ++i;
  // A whitespace run leaves its final space to the word that follows.
  if (cls == ByteClass::Space && i < n && i - start > 1 && text[i - 1] == ' ') --i;
  return i;
}

// Calls visit(word) for each word of text, in order; the words concatenate to text.
template <typename Visit>
void for_each_word(std::string_view text, Visit&& visit) {
  for (size_t start = 0; start < text.size();) {
    const size_t end = word_end(text, start);
    visit(text.substr(start, end - start));
    start = end;
  }
}

}  // namespace rtx::text::detail
