// What the fused CPU kernels (modeling/fused_kernels.py) share: the CPU
// clones their loops are compiled as, and sharding over TensorFlow's CPU
// threads.

#ifndef BERT_MODELING_KERNELS_COMMON_H_
#define BERT_MODELING_KERNELS_COMMON_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

// The loops are compiled for AVX-512, AVX2 and the baseline, chosen when
// the library loads, so one build runs on any x86-64 CPU.
#if defined(__x86_64__)
#define CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define CPU_CLONES
#endif

namespace bert_kernels {

// Runs body(begin, end) over [0, n) on the op's CPU threads; cost: rough
// cycles per unit of n.
template <typename Body>
void Shard(tensorflow::OpKernelContext* context, int64_t n, int64_t cost,
           Body body) {
  context->device()->tensorflow_cpu_worker_threads()->workers->ParallelFor(
      n, cost, body);
}

// x's rows and width (its last axis), checked against vector, a float
// [width] (gamma, bias) called name.
inline tensorflow::Status RowsAndWidth(const tensorflow::Tensor& x,
                                       const tensorflow::Tensor& vector,
                                       const char* name, int64_t* rows,
                                       int64_t* width) {
  if (x.dims() < 1 || vector.dims() != 1 ||
      vector.dim_size(0) != x.dim_size(x.dims() - 1)) {
    return tensorflow::errors::InvalidArgument(
        name, " must be [width], width the last axis of x: x is ",
        x.shape().DebugString(), ", ", name, " ", vector.shape().DebugString());
  }
  *width = x.dim_size(x.dims() - 1);
  *rows = *width == 0 ? 0 : x.NumElements() / *width;
  return tensorflow::OkStatus();
}

// The residual input's data, or null where it is empty (no residual).
inline tensorflow::Status Residual(const tensorflow::Tensor& x,
                                   const tensorflow::Tensor& residual,
                                   const float** data) {
  *data = nullptr;
  if (residual.NumElements() == 0) return tensorflow::OkStatus();
  if (residual.shape() != x.shape()) {
    return tensorflow::errors::InvalidArgument(
        "x and residual differ in shape: ", x.shape().DebugString(), " and ",
        residual.shape().DebugString());
  }
  *data = residual.flat<float>().data();
  return tensorflow::OkStatus();
}

// The (x, bias) -> y ops' output allocated like x, after x's rows and
// width are checked against bias.
inline tensorflow::Status BiasOpOutput(tensorflow::OpKernelContext* context,
                                       int64_t* rows, int64_t* width,
                                       tensorflow::Tensor** y) {
  const tensorflow::Tensor& x = context->input(0);
  TF_RETURN_IF_ERROR(
      RowsAndWidth(x, context->input(1), "bias", rows, width));
  return context->allocate_output(0, x.shape(), y);
}

// The (dy, x, bias) -> (dx, dbias) gradient ops' outputs allocated like x
// and bias, after dy, x and bias are checked.
inline tensorflow::Status BiasGradOutputs(
    tensorflow::OpKernelContext* context, int64_t* rows, int64_t* width,
    tensorflow::Tensor** dx, tensorflow::Tensor** dbias) {
  const tensorflow::Tensor& dy = context->input(0);
  const tensorflow::Tensor& x = context->input(1);
  const tensorflow::Tensor& bias = context->input(2);
  TF_RETURN_IF_ERROR(RowsAndWidth(x, bias, "bias", rows, width));
  if (dy.shape() != x.shape()) {
    return tensorflow::errors::InvalidArgument(
        "dy and x differ in shape: ", dy.shape().DebugString(), " and ",
        x.shape().DebugString());
  }
  TF_RETURN_IF_ERROR(context->allocate_output(0, x.shape(), dx));
  return context->allocate_output(1, bias.shape(), dbias);
}

// Their shape function: dx shaped as x, dbias as bias.
inline tensorflow::Status BiasGradShapes(
    tensorflow::shape_inference::InferenceContext* c) {
  c->set_output(0, c->input(1));
  c->set_output(1, c->input(2));
  return tensorflow::OkStatus();
}

// Blocks of rows whose column sums are kept apart, then added: each
// block runs on one thread.
constexpr int64_t kMaxBlocks = 64;

// Runs row(r, partial, scratch) for each r in [0, rows) on the op's CPU
// threads, where partial is the float [count * width] column sums of r's
// block of rows (zeroed first) and scratch a float [width] buffer of the
// block's; then sums the blocks' partials into sums[count * width].
// cost: rough cycles per row.
template <typename Row>
void RowsWithColumnSums(tensorflow::OpKernelContext* context, int64_t rows,
                        int64_t width, int count, int64_t cost, Row row,
                        float* sums) {
  const int64_t blocks = std::max<int64_t>(1, std::min(rows, kMaxBlocks));
  const int64_t size = count * width;
  std::vector<float> partials(blocks * size, 0.f);
  float* data = partials.data();
  Shard(context, blocks, cost * (rows / blocks + 1),
        [=, &row](int64_t begin, int64_t end) {
          std::vector<float> scratch(width);
          for (int64_t b = begin; b < end; ++b) {
            for (int64_t r = rows * b / blocks; r < rows * (b + 1) / blocks;
                 ++r) {
              row(r, data + b * size, scratch.data());
            }
          }
        });
  std::fill(sums, sums + size, 0.f);
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t i = 0; i < size; ++i) sums[i] += data[b * size + i];
  }
}

// bfloat16 <-> float32 on the bits, as TensorFlow's Cast: bfloat16 is the
// high half of a float32; rounding to nearest, ties to even, NaN kept NaN
// (tested on the integer bits: -ffast-math would drop a float test).
inline float Bfloat16ToFloat(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

inline uint16_t FloatToBfloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// The element types the kernels that take either precision read and
// write (a matmul's products and operands): float32 as it is, bfloat16 as
// its 16-bit pattern; their arithmetic is float32 either way.
template <typename T>
struct Storage {
  using type = T;
};
template <>
struct Storage<tensorflow::bfloat16> {
  using type = uint16_t;
};

inline float ToFloat(float value) { return value; }
inline float ToFloat(uint16_t bits) { return Bfloat16ToFloat(bits); }

// value stored as S: itself, or rounded to bfloat16.
template <typename S>
S FromFloat(float value);
template <>
inline float FromFloat<float>(float value) {
  return value;
}
template <>
inline uint16_t FromFloat<uint16_t>(float value) {
  return FloatToBfloat16(value);
}

// A T tensor's data as Storage<T>.
template <typename T>
const typename Storage<T>::type* Data(const tensorflow::Tensor& tensor) {
  return reinterpret_cast<const typename Storage<T>::type*>(
      tensor.flat<T>().data());
}

template <typename T>
typename Storage<T>::type* Data(tensorflow::Tensor* tensor) {
  return reinterpret_cast<typename Storage<T>::type*>(
      tensor->flat<T>().data());
}

}  // namespace bert_kernels

// Registers kernel template CLASS for T float32 and bfloat16 as op NAME's.
#define REGISTER_FLOAT_AND_BFLOAT16(NAME, CLASS)                          \
  REGISTER_KERNEL_BUILDER(Name(NAME)                                       \
                              .Device(tensorflow::DEVICE_CPU)              \
                              .TypeConstraint<float>("T"),                 \
                          CLASS<float>);                                   \
  REGISTER_KERNEL_BUILDER(Name(NAME)                                       \
                              .Device(tensorflow::DEVICE_CPU)              \
                              .TypeConstraint<tensorflow::bfloat16>("T"),  \
                          CLASS<tensorflow::bfloat16>)

#endif  // BERT_MODELING_KERNELS_COMMON_H_
