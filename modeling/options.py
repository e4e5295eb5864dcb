"""ComputeOptions: what a model's layers compute in and how its encoder
runs, given to them when they are made (BertModel's options argument),
never read from a global.

The default is the original's arithmetic through TensorFlow's own ops:
float32 matmuls, no fused kernel, every position computed. runner_lib.core.
training.precision turns --precision and --fused_kernels into the options
of a run, resolved once: a fused kernel is in `kernels` only where the
library is built and loaded here.
"""

import dataclasses

import tensorflow as tf

from modeling import fused_kernels

# The fused CPU kernels by name (modeling/fused_kernels.py), each used
# where a layer's arithmetic is its: "bias_gelu", a Dense layer's bias add
# and GELU; "bias_add", a bias add between two bfloat16 matmuls (the
# attention's projections); "attention_softmax", the attention's scale,
# mask, softmax and dropout; "add_layer_norm", a residual add and
# LayerNorm; "dropout", every other dropout; "adam_weight_decay", the
# original optimizer's update (runner_lib.core.training.optimization).
KERNELS = ("bias_gelu", "bias_add", "attention_softmax", "add_layer_norm",
           "dropout", "adam_weight_decay")


@dataclasses.dataclass(frozen=True)
class ComputeOptions:
  """What a model's layers compute in.

  Attributes:
    matmul_dtype: tf.float32 (the original's arithmetic), or tf.bfloat16:
      every matmul (dense layers, attention scores and contexts, output
      layers, the masked LM's logits) and its gradients over bfloat16
      copies of the operands, each product back in float32 (or bfloat16
      where it only feeds another matmul and a fused kernel rounds it
      once). Weights and everything elementwise stay float32.
    kernels: frozenset of names from KERNELS, the fused CPU kernels the
      layers (and the optimizer) use; empty: TensorFlow's own ops only.
      Resolved when the options are made: where the library is not built
      (fused_kernels.available, which warns once), none. For training on
      CPUs without XLA; never in an exported graph (it must load where
      the library is absent).
    keras_policy: str, the Keras dtype policy the model is built under
      (Task.model_builder scopes it): "float32", or on GPUs and TPUs
      "mixed_bfloat16" or "mixed_float16" (every layer's compute in that
      type, Keras' own casts).
    skip_padding: bool, BertModel's: the encoder computes on real tokens
      only.
    gradient_checkpointing: bool, BertModel's: each Transformer layer
      recomputes its activations for the backward pass.
  """

  matmul_dtype: tf.DType = tf.float32
  kernels: frozenset = frozenset()
  keras_policy: str = "float32"
  skip_padding: bool = False
  gradient_checkpointing: bool = False

  def __post_init__(self):
    object.__setattr__(self, "matmul_dtype", tf.as_dtype(self.matmul_dtype))
    object.__setattr__(self, "kernels", frozenset(self.kernels))
    unknown = self.kernels.difference(KERNELS)
    if unknown:
      raise ValueError("Unknown fused kernels %s (expected some of %s)" %
                       (sorted(unknown), ", ".join(KERNELS)))
    if self.kernels and not fused_kernels.available():
      object.__setattr__(self, "kernels", frozenset())

  def uses(self, kernel):
    """Whether the layers (or the optimizer) use the fused kernel named
    kernel."""
    return kernel in self.kernels

  def without_kernels(self):
    """These options with no fused kernel (TensorFlow's own ops)."""
    return dataclasses.replace(self, kernels=frozenset())


def resolve(options):
  """options, or the default ComputeOptions() where None."""
  return ComputeOptions() if options is None else options
