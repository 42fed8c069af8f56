// ladder/core/error.hpp -- the one exception type of the project.
//
// Every precondition failure (bad shape, non-divisible parameter, NaN where forbidden, corrupt file)
// throws ladder::Error whose message names the parameter, the value seen and the constraint, e.g.
//   "softmax: x.cols = 0 violates cols >= 1".
// Nothing in ladder asserts out on user input; the CLI turns an Error into one line and exit code 2.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace ladder {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// require(cond, "fmt", args...) -- throw Error with the formatted message when cond is false.
template <class... A>
inline void require(bool cond, fmt::format_string<A...> f, A&&... a) {
  if (!cond) throw Error(fmt::format(f, std::forward<A>(a)...));
}

}  // namespace ladder
