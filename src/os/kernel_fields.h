// The "Key:   value" lines of /proc files (/proc/self/status, /proc/meminfo, the fields of a
// /proc/self/smaps entry): the one parser of them in pinpool (the library, pinpool-info and the
// tests all use it). Pure functions of the text, plus one reader of this process's status.
// Thread-safe.
#ifndef PINPOOL_OS_KERNEL_FIELDS_H_
#define PINPOOL_OS_KERNEL_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace pinpool::internal::os {

// The value of the line "`key`: value" in `text` (a whole file, or one line), leading blanks
// removed, up to the end of its line; nullopt when no line has that key.
std::optional<std::string_view> KernelField(std::string_view text, std::string_view key);

// The number at the start of a field's value, in `base` (16 for CapEff); nullopt when the key is
// absent or its value does not start with a number.
std::optional<std::uint64_t> KernelFieldNumber(std::string_view text, std::string_view key,
                                               int base = 10);

// A field whose value is "N kB" (VmPin, MemTotal, AnonHugePages, ...), in bytes.
std::optional<std::uint64_t> KernelFieldBytes(std::string_view text, std::string_view key);

// `key` of /proc/self/status in bytes ("VmLck", "VmPin", "VmSize", ...); nullopt if absent.
std::optional<std::uint64_t> ProcStatusBytes(std::string_view key);

}  // namespace pinpool::internal::os

#endif  // PINPOOL_OS_KERNEL_FIELDS_H_
