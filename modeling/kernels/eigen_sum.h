// TensorFlow's float32 Sum (and Mean) over the last axis as its x86-64
// build computes it, for the kernels that must round as the composite
// does (layer_norm_float32.cc, softmax_float32.cc).

#ifndef BERT_MODELING_KERNELS_EIGEN_SUM_H_
#define BERT_MODELING_KERNELS_EIGEN_SUM_H_

#include <cstdint>

namespace bert_kernels {

constexpr int kLanes = 8;  // floats in an AVX packet

// The sum of v[0, n) as Eigen's InnerMostDimReducer sums a row (n at most
// 8 * 1024, past which it splits the row in two): four 8-lane
// accumulators over blocks of 32, added together, then single packets,
// then the scalar tail, plus the lanes added pairwise (Eigen's predux).
inline float EigenSum(const float* v, int64_t n) {
  float acc[4][kLanes] = {};
  int64_t start = 0;
  if (n >= 4 * kLanes) {
    start = n / (4 * kLanes) * (4 * kLanes);
    for (int64_t j = 0; j < start; j += 4 * kLanes) {
      for (int k = 0; k < 4; ++k) {
        for (int l = 0; l < kLanes; ++l) acc[k][l] += v[j + k * kLanes + l];
      }
    }
    for (int l = 0; l < kLanes; ++l) {
      acc[0][l] = ((acc[0][l] + acc[1][l]) + acc[2][l]) + acc[3][l];
    }
  }
  if (start <= n - kLanes) {
    const int64_t packets = n / kLanes * kLanes;
    for (int64_t j = start; j < packets; j += kLanes) {
      for (int l = 0; l < kLanes; ++l) acc[0][l] += v[j + l];
    }
    start = packets;
  }
  float tail = 0.f;
  for (int64_t j = start; j < n; ++j) tail += v[j];
  const float* p = acc[0];
  return tail + (((p[0] + p[4]) + (p[2] + p[6])) +
                 ((p[1] + p[5]) + (p[3] + p[7])));
}

}  // namespace bert_kernels

#endif  // BERT_MODELING_KERNELS_EIGEN_SUM_H_
