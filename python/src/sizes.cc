// Size arguments (sizes.h).
#include "sizes.h"

#include <cctype>
#include <cstdint>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "errors.h"

namespace pinpool::python {

namespace {

constexpr const char* kForms =
    "a size is an int or a string such as \"4096\", \"64KiB\", \"1GiB\" or \"1.5GiB\" "
    "(K, M, G, T: powers of 1024)";

std::string_view Strip(std::string_view s) {
  while (!s.empty() && absl::ascii_isspace(s.front())) s.remove_prefix(1);
  while (!s.empty() && absl::ascii_isspace(s.back())) s.remove_suffix(1);
  return s;
}

absl::Status Bad(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrFormat("size \"%s\": %s; %s", text, why, kForms));
}

// The multiplier of a unit, as a power of 1024 (0 for bytes); -1 when it is not one.
int UnitShift(std::string unit) {
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.empty() || unit == "B") return 0;
  static constexpr std::string_view kLetters = "KMGT";
  const std::size_t at = kLetters.find(unit[0]);
  if (at == std::string_view::npos) return -1;
  const std::string_view rest = std::string_view(unit).substr(1);
  if (rest.empty() || rest == "I" || rest == "IB") return static_cast<int>(at + 1) * 10;
  return -1;
}

}  // namespace

absl::StatusOr<std::size_t> ParseSizeString(std::string_view text) {
  const std::string_view s = Strip(text);
  std::size_t i = 0;
  unsigned __int128 whole = 0;
  while (i < s.size() && absl::ascii_isdigit(s[i])) {
    whole = whole * 10 + static_cast<unsigned>(s[i] - '0');
    if (whole > UINT64_MAX) return Bad(text, "larger than 2^64 - 1 bytes");
    ++i;
  }
  if (i == 0) return Bad(text, !s.empty() && s[0] == '-' ? "negative" : "no number");
  // A fraction: digits after a point, kept as numerator / 10^digits.
  unsigned __int128 fraction = 0;
  unsigned __int128 scale = 1;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && absl::ascii_isdigit(s[i])) {
      if (scale > UINT64_MAX) return Bad(text, "too many decimals");
      fraction = fraction * 10 + static_cast<unsigned>(s[i] - '0');
      scale *= 10;
      ++i;
    }
  }
  const std::string unit(Strip(s.substr(i)));
  const int shift = UnitShift(unit);
  if (shift < 0) {
    const bool decimal =
        unit.size() == 2 && (unit[1] == 'B' || unit[1] == 'b') && UnitShift(unit.substr(0, 1)) > 0;
    return Bad(text, decimal ? "\"" + unit + "\" could mean powers of 1000 or 1024: write \"" +
                                   unit.substr(0, 1) + "iB\" (1024) or the number of bytes"
                             : "unknown unit \"" + unit + "\"");
  }
  const unsigned __int128 bytes = whole << shift;
  const unsigned __int128 fraction_bytes = (fraction << shift) / scale;
  if ((fraction << shift) % scale != 0) return Bad(text, "not a whole number of bytes");
  if ((whole != 0 && (bytes >> shift) != whole) || bytes + fraction_bytes > UINT64_MAX) {
    return Bad(text, "larger than 2^64 - 1 bytes");
  }
  return static_cast<std::size_t>(bytes + fraction_bytes);
}

bool ToSize(PyObject* value, const char* what, std::size_t* out) {
  if (PyLong_CheckExact(value)) {
    const std::size_t v = PyLong_AsSize_t(value);
    if (v != static_cast<std::size_t>(-1) || !PyErr_Occurred()) {
      *out = v;
      return true;
    }
    PyErr_Clear();
    const bool negative = PyObject_RichCompareBool(value, py::int_(0).ptr(), Py_LT) == 1;
    SetError(absl::StatusCode::kInvalidArgument,
             absl::StrFormat("%s %s: %s", what,
                             negative ? "is negative" : "is larger than 2^64 - 1 bytes", kForms));
    return false;
  }
  if (PyUnicode_Check(value)) {
    Py_ssize_t length = 0;
    const char* text = PyUnicode_AsUTF8AndSize(value, &length);
    if (text == nullptr) return false;
    absl::StatusOr<std::size_t> v = ParseSizeString(std::string_view(text, length));
    if (!v.ok()) {
      SetError(v.status().code(), absl::StrFormat("%s: %s", what, v.status().message()));
      return false;
    }
    *out = *v;
    return true;
  }
  if (PyBool_Check(value) || PyFloat_Check(value) || !PyIndex_Check(value)) {
    PyErr_Format(PyExc_TypeError, "%s: %s, not %s", what, kForms, Py_TYPE(value)->tp_name);
    return false;
  }
  // numpy integers and other __index__ types.
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(value));
  if (!index) return false;
  return ToSize(index.ptr(), what, out);
}

std::size_t ToSize(pybind11::handle value, const char* what) {
  std::size_t out = 0;
  if (!ToSize(value.ptr(), what, &out)) throw py::error_already_set();
  return out;
}

std::size_t ToCount(pybind11::handle value, const char* what) {
  if (PyUnicode_Check(value.ptr())) {
    throw py::type_error(absl::StrFormat("%s: an int, not a string", what));
  }
  return ToSize(value, what);
}

}  // namespace pinpool::python
