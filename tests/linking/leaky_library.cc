// A shared library that exports what none of pinpool's libraries may: a pinpool::internal function
// and the members of a standard-library template instance (built with default visibility and no
// version script). linking.exports_leak_control runs check-exports.sh on it under an provider's
// rules and passes only when both are reported: proof that the check can fail on them.
// Never installed, never linked into anything. No state; nothing here runs.
#include <vector>

namespace pinpool::internal {

int LeakedHelper(int x) { return x + 1; }

}  // namespace pinpool::internal

// An explicit instantiation definition exports every member of std::vector<int>.
template class std::vector<int>;
