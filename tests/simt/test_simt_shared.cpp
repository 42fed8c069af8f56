// tests/simt/test_simt_shared.cpp -- dynamic shared memory above 48 KiB (cuda/simt/detail/func_attributes.hpp):
// a launch past 48 KiB without cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)
// is refused naming the kernel and the sizes (the planted launch: what a GPU refuses too), the same kernel's twin
// with the opt-in runs and sees all of it, and the emulated sm_80's opt-in limit (166912 bytes per block) holds.
#include <doctest/doctest.h>
#include <simt.hpp>

#include <stdexcept>
#include <string>

#include "kernels.hpp"

namespace {

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no exception";
}

unsigned long long words_sum(std::size_t bytes) {
  const unsigned long long w = bytes / 4;
  return w * (w - 1) / 2;
}

}  // namespace

TEST_CASE("dynamic shared memory: 48 KiB without the opt-in, a launch past it refused naming the kernel") {
  CHECK(simt_tests::shared_sum_plain(48 * 1024) == words_sum(48 * 1024));  // the default limit itself
  // Planted: 64 KiB without cudaFuncSetAttribute, as a kernel tuned on a GPU that forgot its opt-in.
  const std::string e = error_of([] { simt_tests::shared_sum_plain(64 * 1024); });
  INFO(e);
  CHECK(e.starts_with("simt::launch: smem = 65536 bytes violates smem <= 49152 (without the opt-in; up to 166912 on "
                      "the emulated sm_80 after cudaFuncSetAttribute(kernel, "
                      "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes))"));
  // The kernel by name (the test binary's symbol table), and the launch's line.
  CHECK(e.find(" for kernel void simt_tests::(anonymous namespace)::fill_shared<0>(unsigned int, unsigned long long*), "
               "launched at ") != std::string::npos);
  CHECK(e.find("kernels_shared.cu:") != std::string::npos);
}

TEST_CASE("dynamic shared memory: with cudaFuncSetAttribute up to sm_80's 166912 bytes, not past the attribute") {
  CHECK(simt_tests::shared_sum_optin(64 * 1024, 64 * 1024) == words_sum(64 * 1024));
  CHECK(simt_tests::shared_sum_optin(166912, 166912) == words_sum(166912));  // the whole opt-in: 163 KiB
  // Past the kernel's own attribute: refused, naming it as the limit.
  const std::string past = error_of([] { simt_tests::shared_sum_optin(64 * 1024 + 4, 64 * 1024); });
  INFO(past);
  CHECK(past.starts_with("simt::launch: smem = 65540 bytes violates smem <= 65536 (the kernel's "
                         "cudaFuncAttributeMaxDynamicSharedMemorySize) for kernel void "
                         "simt_tests::(anonymous namespace)::fill_shared<1>("));
  // Past the device's opt-in limit (sm_90's 227 KiB is more: the emulated device is the smaller sm_80).
  const std::string big = error_of([] { simt_tests::shared_sum_optin(1024, 166912 + 1); });
  INFO(big);
  CHECK(big.starts_with("cudaFuncSetAttribute: cudaFuncAttributeMaxDynamicSharedMemorySize = 166913 bytes violates "
                        "0 <= bytes <= 166912 (the emulated sm_80's opt-in limit per block) for kernel "));
  CHECK(error_of([] { simt_tests::shared_sum_optin(1024, 232448); }).find("violates 0 <= bytes <= 166912") !=
        std::string::npos);
  CHECK(error_of([] { simt_tests::shared_sum_optin(1024, -1); }).find("= -1 bytes violates") != std::string::npos);
}
