"""The original BERT optimizer: AdamWeightDecay, warm-up, linear decay, clip.

Written as a plain tf.Module rather than a Keras optimizer so its slots keep
the original checkpoint layout: `<variable name>/adam_m` and `/adam_v` beside
each weight. tf-models-official's AdamWeightDecay applies Adam's bias
correction; the original does not, and neither does this one, exactly as
BERT was trained. Without it the early updates are larger than
bias-corrected Adam's: m / sqrt(v) is (1 - b1^t) / sqrt(1 - b2^t) times
m_hat / sqrt(v_hat), 3.2x at the first step, 6.5x at step 10, 2.9x at step
125. AdamWeightDecayCorrected (--optimizer=adamw_corrected) is the same
update with the correction, as PyTorch's AdamW (and so HuggingFace's
recipes) computes it; Zhang et al. 2021 ("Revisiting Few-sample BERT
Fine-tuning") recommend it against unstable short runs. From the same
learning rate it moves the weights less: on benchmarks/quality.py's short
NER recipe (125 steps at 5e-5) it reached F1 0.44-0.48 where the original
reaches 0.72-0.76.
"""

import re

import tensorflow as tf

from modeling import fused_kernels

# Names (original checkpoint names) that get no weight decay.
EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")

# AdamWeightDecay's ways to update a weight (its update argument).
UPDATES = ("exact", "kernel", "fused")


def _scaled(grad, grad_scale):
  """grad in float32, times grad_scale where there is one (the multiply of
  tf.clip_by_global_norm, rounded as it rounds it)."""
  grad = tf.cast(grad, tf.float32)
  return grad if grad_scale is None else grad * grad_scale


def learning_rate_at(step, init_lr, num_train_steps, num_warmup_steps):
  """The original schedule: linear warm-up, then linear decay to 0.

  lr = init_lr * step / num_warmup_steps while step < num_warmup_steps,
  else init_lr * (1 - min(step, num_train_steps) / num_train_steps).

  Args:
    step: int Tensor, the global step before this update (0 first).
    init_lr: float.
    num_train_steps: int > 0.
    num_warmup_steps: int >= 0.

  Returns:
    float32 scalar Tensor.
  """
  step = tf.cast(step, tf.float32)
  decayed = init_lr * (1.0 - tf.minimum(step, num_train_steps) /
                       float(num_train_steps))
  if not num_warmup_steps:
    return decayed
  warmup = init_lr * step / float(num_warmup_steps)
  return tf.where(step < num_warmup_steps, warmup, decayed)


def finetuning_steps(num_examples, train_batch_size, num_train_epochs,
                     warmup_proportion):
  """The original fine-tuning runners' step counts.

  Args:
    num_examples: int, training examples.
    train_batch_size: int > 0, the global batch size.
    num_train_epochs: float.
    warmup_proportion: float, share of the steps spent warming up.

  Returns:
    (num_train_steps, num_warmup_steps): int(num_examples /
    train_batch_size * num_train_epochs), at least 1, and that times
    warmup_proportion, rounded down.
  """
  num_train_steps = max(1, int(num_examples / train_batch_size *
                               num_train_epochs))
  return num_train_steps, int(num_train_steps * warmup_proportion)


class AdamWeightDecay(tf.Module):
  """Adam with decoupled weight decay and no bias correction (the original).

  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
  w -= lr * (m / (sqrt(v) + eps) + weight_decay_rate * w), where the decay
  term is left out for LayerNorm and bias weights.
  """

  def __init__(self, named_variables, weight_decay_rate=0.01, beta_1=0.9,
               beta_2=0.999, epsilon=1e-6,
               exclude_from_weight_decay=EXCLUDE_FROM_WEIGHT_DECAY,
               update="exact"):
    """Creates the slots.

    Args:
      named_variables: dict original name -> trainable tf.Variable.
      weight_decay_rate: float.
      beta_1: float.
      beta_2: float.
      epsilon: float.
      exclude_from_weight_decay: regexes; matching names get no decay.
      update: one of UPDATES: "exact", the original's op-by-op float32
        arithmetic; "kernel", modeling/fused_kernels.py's CPU kernel, the
        same arithmetic bit for bit in one pass over each weight and its
        slots ("exact" where the library is not built); "fused", the same
        formula in two passes (_fused_step), rounded otherwise.
        Subclasses ignore it.
    """
    super().__init__(name=type(self).__name__)
    if update not in UPDATES:
      raise ValueError("update=%r: one of %s." % (update, ", ".join(UPDATES)))
    if update == "kernel" and not fused_kernels.available():
      update = "exact"  # the same numbers
    self.update = update
    self.names = list(named_variables)
    self.variables_by_name = dict(named_variables)
    self.weight_decay_rate = weight_decay_rate
    self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
    self.decay = {
        name: bool(weight_decay_rate) and not any(
            re.search(r, name) for r in exclude_from_weight_decay)
        for name in self.names}
    self.m, self.v = {}, {}
    for name in self.names:
      variable = self.variables_by_name[name]
      self.m[name] = tf.Variable(tf.zeros(variable.shape, tf.float32),
                                 trainable=False)
      self.v[name] = tf.Variable(tf.zeros(variable.shape, tf.float32),
                                 trainable=False)

  SLOT_NAMES = ("adam_m", "adam_v")

  def slot_variables(self):
    """dict checkpoint name -> slot variable, in the original layout."""
    slots = {}
    m_name, v_name = self.SLOT_NAMES
    for name in self.names:
      slots[name + "/" + m_name] = self.m[name]
      slots[name + "/" + v_name] = self.v[name]
    return slots

  def apply_gradients(self, grads, learning_rate, step=None, apply=None,
                      grad_scales=None):
    """Applies one update; call in a replica context (or outside strategies).

    Args:
      grads: list of Tensors, one per name in self.names (same order), the
        same on every replica (already all-reduced); None skips a weight
        (no slot update, no decay), as the original does.
      learning_rate: float32 scalar Tensor.
      step: int Tensor, the global step before this update (used by LAMB's
        bias correction; the original Adam has none).
      apply: bool Tensor or None; False skips the whole update (slots
        included), e.g. on an overflow under float16 loss scaling.
      grad_scales: None, or a list like grads of float32 scalar Tensors
        (or None): each gradient is multiplied by its scale first, the
        multiply of tf.clip_by_global_norm left to the update
        (runner_lib/core/training/step.py, clip_gradients), which the fused
        kernel does as it reads the gradient instead of in a pass of its
        own. The same numbers as scaling the gradients beforehand.
    """
    if grad_scales is None:
      grad_scales = [None] * len(grads)
    tf.distribute.get_replica_context().merge_call(
        self._distributed_apply,
        args=(grads, learning_rate, step, apply, grad_scales))

  def _distributed_apply(self, strategy, grads, learning_rate, step, apply,
                         grad_scales):
    # One weight after another: each update's temporaries (a few tensors
    # the weight's size) are freed before the next update starts. Run side
    # by side, the updates of every weight could hold them all at once, up
    # to several times the model's size (1 GB more peak memory for
    # BERT-Base, benchmarks/speed/bench_memory.py). The same arithmetic in
    # another order: the same numbers.
    previous = []
    for name, grad, grad_scale in zip(self.names, grads, grad_scales):
      if grad is None:
        continue
      with tf.control_dependencies(previous):
        done = strategy.extended.update(
            self.variables_by_name[name], self._update,
            args=(grad, self.m[name], self.v[name], learning_rate, step,
                  apply, self.decay[name], grad_scale), group=False)
      previous = [tf.group(strategy.experimental_local_results(done))]

  def _update(self, variable, grad, m, v, learning_rate, step, apply, decay,
              grad_scale):
    if apply is None:
      return self._step(variable, grad, m, v, learning_rate, step, decay,
                        grad_scale)

    def update():
      self._step(variable, grad, m, v, learning_rate, step, decay,
                 grad_scale)
      return tf.constant(True)

    return tf.cond(apply, update, lambda: tf.constant(False))

  def _step(self, variable, grad, m, v, learning_rate, step, decay,
            grad_scale=None):
    del step  # no bias correction
    if self.update == "kernel":
      update = fused_kernels.adam_weight_decay(
          variable, m, v, tf.cast(grad, tf.float32), learning_rate,
          self.beta_1, self.beta_2, self.epsilon,
          self.weight_decay_rate if decay else None, grad_scale)
      with tf.control_dependencies([] if update is None else [update]):
        return tf.constant(True)
    grad = _scaled(grad, grad_scale)
    if self.update == "fused":
      return self._fused_step(variable, grad, m, v, learning_rate, decay)
    # The original's float32 arithmetic, op for op (a fused kernel rounds
    # differently).
    m = m.assign(self.beta_1 * m + (1.0 - self.beta_1) * grad)
    v = v.assign(self.beta_2 * v + (1.0 - self.beta_2) * tf.square(grad))
    update = m / (tf.sqrt(v) + self.epsilon)
    if decay:
      update += self.weight_decay_rate * variable
    return variable.assign_sub(learning_rate * update)

  def _fused_step(self, variable, grad, m, v, learning_rate, decay):
    """The same update as _step in two passes over the weight, not a dozen.

    The decay first, w' = w - lr * weight_decay_rate * w, then TensorFlow's
    fused ApplyAdam on w' with its bias correction cancelled (beta powers 0
    make its lr_t = lr): m += (g - m)(1 - b1), v += (g^2 - v)(1 - b2),
    w' -= lr * m / (sqrt(v) + eps). Together
    w - lr * (m / (sqrt(v) + eps) + weight_decay_rate * w), the original's
    update, but rounded otherwise, and the kernel takes 1 - b2 in float32
    from b2 (0.000999987 for 0.999, 1.3e-5 off), which moves each update by
    up to 6.4e-6 of itself. About 2.5x faster than _step (BERT-Base's 110M
    weights on 2 cores: 0.30 s against 0.75 s a step, measured while
    another job ran).
    """
    if decay:
      variable.assign_sub(learning_rate * self.weight_decay_rate * variable)
    zero = tf.constant(0.0)
    tf.raw_ops.ResourceApplyAdam(
        var=variable.handle, m=m.handle, v=v.handle, beta1_power=zero,
        beta2_power=zero, lr=tf.cast(learning_rate, tf.float32),
        beta1=tf.constant(self.beta_1), beta2=tf.constant(self.beta_2),
        epsilon=tf.constant(self.epsilon), grad=grad)
    return tf.constant(True)


class AdamWeightDecayCorrected(AdamWeightDecay):
  """AdamWeightDecay with Adam's bias correction: the update of PyTorch's
  AdamW (and so HuggingFace's fine-tuning), tf-models-official's
  AdamWeightDecay and Adam's paper, with the original's epsilon, weight
  decay and slots.

  m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t) at update t = step + 1;
  w -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay_rate * w).
  """

  def _step(self, variable, grad, m, v, learning_rate, step, decay,
            grad_scale=None):
    grad = _scaled(grad, grad_scale)
    # 1 - b^t in float64, as PyTorch computes it in Python: in float32,
    # 1 - 0.999^2 is off by 3e-5 of itself.
    t = tf.cast(step, tf.float64) + 1.0
    correction_1, correction_2 = [
        tf.cast(1.0 - tf.pow(tf.constant(beta, tf.float64), t), tf.float32)
        for beta in (self.beta_1, self.beta_2)]
    m = m.assign(self.beta_1 * m + (1.0 - self.beta_1) * grad)
    v = v.assign(self.beta_2 * v + (1.0 - self.beta_2) * tf.square(grad))
    m_hat = m / correction_1
    v_hat = v / correction_2
    update = m_hat / (tf.sqrt(v_hat) + self.epsilon)
    if decay:
      update += self.weight_decay_rate * variable
    return variable.assign_sub(learning_rate * update)


class Lamb(AdamWeightDecay):
  """LAMB (You et al. 2019), for large batches: Adam with bias correction
  and a per-weight trust ratio ||w|| / ||update||.

  The same update as tf-models-official's LAMB (tests compare the two),
  with slots in the original layout, named `lamb_m` / `lamb_v`. Weights
  excluded from weight decay are also excluded from the trust ratio.
  """

  SLOT_NAMES = ("lamb_m", "lamb_v")

  def _step(self, variable, grad, m, v, learning_rate, step, decay,
            grad_scale=None):
    grad = _scaled(grad, grad_scale)
    t = tf.cast(step, tf.float32) + 1.0
    m = m.assign(m * self.beta_1 + grad * (1.0 - self.beta_1))
    v = v.assign(v * self.beta_2 + (grad * grad) * (1.0 - self.beta_2))
    m_hat = m / (1.0 - tf.pow(self.beta_1, t))
    v_hat = v / (1.0 - tf.pow(self.beta_2, t))
    update = m_hat / (tf.sqrt(v_hat) + self.epsilon)
    ratio = 1.0
    if decay:
      update += self.weight_decay_rate * variable
      w_norm = tf.norm(variable, ord=2)
      u_norm = tf.norm(update, ord=2)
      ratio = tf.where(w_norm > 0,
                       tf.where(u_norm > 0, w_norm / u_norm, 1.0), 1.0)
    return variable.assign(variable - ratio * learning_rate * update)


OPTIMIZERS = {"adamw": AdamWeightDecay,
              "adamw_corrected": AdamWeightDecayCorrected, "lamb": Lamb}
