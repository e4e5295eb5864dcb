// What the fused CPU kernels (modeling/fused_kernels.py) share: the CPU
// clones their loops are compiled as, and sharding over TensorFlow's CPU
// threads.

#ifndef BERT_MODELING_KERNELS_COMMON_H_
#define BERT_MODELING_KERNELS_COMMON_H_

#include <cstdint>

#include "tensorflow/core/framework/op_kernel.h"

// The loops are compiled for AVX-512, AVX2 and the baseline, chosen when
// the library loads, so one build runs on any x86-64 CPU.
#if defined(__x86_64__)
#define CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
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

}  // namespace bert_kernels

#endif  // BERT_MODELING_KERNELS_COMMON_H_
