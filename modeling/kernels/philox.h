// TensorFlow's stateless random uniform floats (StatelessRandomUniformV2
// with Philox-4x32-10, as tf.random.stateless_uniform and
// tf.nn.experimental.stateless_dropout draw them), computed from each
// element's index: element i of the drawn tensor is lane i % 4 of the
// Philox block for counter + i / 4 (a 128-bit addition), its low 23 bits
// the mantissa of a float in [1, 2), minus 1 (PhiloxRandom and
// UniformDistribution<float>). Used by the kernels that drop as
// stateless_dropout drops (dropout.cc, attention_softmax.cc).

#ifndef BERT_KERNELS_PHILOX_H_
#define BERT_KERNELS_PHILOX_H_

#include <cstdint>
#include <cstring>

#include "tensorflow/core/framework/op_kernel.h"
#include "common.h"

namespace bert_kernels {
// Internal to each kernel's file, as the x86 clones of Uniforms must be.
namespace {

constexpr uint32_t kPhiloxW32A = 0x9E3779B9;
constexpr uint32_t kPhiloxW32B = 0xBB67AE85;
constexpr uint32_t kPhiloxM4x32A = 0xD2511F53;
constexpr uint32_t kPhiloxM4x32B = 0xCD9E8D57;

struct Philox {
  uint32_t key[2];
  uint32_t counter[4];
};

inline float Uint32ToFloat(uint32_t bits) {
  const uint32_t value = (127u << 23) | (bits & 0x7fffffu);
  float result;
  std::memcpy(&result, &value, sizeof(value));
  return result - 1.0f;
}

// The uniforms of blocks first .. first + blocks - 1 into out[4 * blocks].
CPU_CLONES void Uniforms(const Philox& philox, uint64_t first, int64_t blocks,
                         float* out) {
  const uint32_t c0 = philox.counter[0], c1 = philox.counter[1];
  const uint32_t c2 = philox.counter[2], c3 = philox.counter[3];
  const uint32_t key0 = philox.key[0], key1 = philox.key[1];
#pragma omp simd
  for (int64_t j = 0; j < blocks; ++j) {
    // counter + block, as PhiloxRandom::Skip adds it.
    const uint64_t block = first + static_cast<uint64_t>(j);
    const uint32_t low = static_cast<uint32_t>(block);
    uint32_t high = static_cast<uint32_t>(block >> 32);
    uint32_t x0 = c0 + low;
    high += x0 < low ? 1u : 0u;
    uint32_t x1 = c1 + high;
    const uint32_t carry = x1 < high ? 1u : 0u;
    uint32_t x2 = c2 + carry;
    uint32_t x3 = c3 + ((carry != 0u && x2 == 0u) ? 1u : 0u);
    uint32_t k0 = key0, k1 = key1;
    for (int round = 0; round < 10; ++round) {
      const uint64_t p0 = static_cast<uint64_t>(kPhiloxM4x32A) * x0;
      const uint64_t p1 = static_cast<uint64_t>(kPhiloxM4x32B) * x2;
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ x1 ^ k0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ x3 ^ k1;
      x1 = static_cast<uint32_t>(p1);
      x3 = static_cast<uint32_t>(p0);
      x0 = n0;
      x2 = n2;
      k0 += kPhiloxW32A;
      k1 += kPhiloxW32B;
    }
    out[4 * j] = Uint32ToFloat(x0);
    out[4 * j + 1] = Uint32ToFloat(x1);
    out[4 * j + 2] = Uint32ToFloat(x2);
    out[4 * j + 3] = Uint32ToFloat(x3);
  }
}

// The Philox key and counter of StatelessRandomGetKeyCounter's outputs
// (key: uint64 [1], counter: uint64 [2]), or an error naming them.
inline tensorflow::Status ReadPhilox(const tensorflow::Tensor& key,
                                     const tensorflow::Tensor& counter,
                                     Philox* philox) {
  if (key.NumElements() != 1 || counter.NumElements() != 2) {
    return tensorflow::errors::InvalidArgument(
        "key must have 1 element and counter 2 (Philox), not ",
        key.NumElements(), " and ", counter.NumElements());
  }
  const uint64_t key_value = key.flat<tensorflow::uint64>()(0);
  philox->key[0] = static_cast<uint32_t>(key_value);
  philox->key[1] = static_cast<uint32_t>(key_value >> 32);
  for (int i = 0; i < 2; ++i) {
    const uint64_t value = counter.flat<tensorflow::uint64>()(i);
    philox->counter[2 * i] = static_cast<uint32_t>(value);
    philox->counter[2 * i + 1] = static_cast<uint32_t>(value >> 32);
  }
  return tensorflow::OkStatus();
}

// The uniforms of elements index .. index + n - 1: computed into
// scratch[n + 8], returned from where element index lies there.
inline const float* UniformsAt(const Philox& philox, uint64_t index,
                               int64_t n, float* scratch) {
  const int64_t skip = static_cast<int64_t>(index % 4);
  Uniforms(philox, index / 4, (skip + n + 3) / 4, scratch);
  return scratch + skip;
}

}  // namespace
}  // namespace bert_kernels

#endif  // BERT_KERNELS_PHILOX_H_
