"""Keras layers of the original BERT encoder, one per variable scope.

Shape letters used below: B batch size, T sequence length (F attending from,
T attended to), H hidden size, N attention heads, D = H / N head size,
I intermediate size, V vocabulary size.
"""

import math

import numpy as np
import tensorflow as tf
import tf_keras as keras

from modeling import fused_kernels
from modeling.options import resolve

# The original uses tf.contrib.layers.layer_norm, whose variance epsilon is
# 1e-12 (Keras' default 1e-3 would change every output noticeably).
LAYER_NORM_EPSILON = 1e-12

# Added to the attention scores of masked positions before the softmax. The
# original uses -10000 rather than -inf: exp(-10000) is exactly 0 in float32,
# and the value is safe in float16 too.
MASK_ADDER = -10000.0


def gelu(x):
  """The original BERT GELU: the tanh approximation of x * Phi(x).

  0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))). Google's
  checkpoints were trained with this form, not the exact erf form.

  Args:
    x: float Tensor of any shape.

  Returns:
    Tensor of the same shape and dtype.
  """
  x = tf.convert_to_tensor(x)
  cdf = 0.5 * (1.0 + tf.tanh(
      np.sqrt(2.0 / np.pi).astype(np.float32) * (x + 0.044715 * tf.pow(x, 3))))
  return x * cdf


def gelu_exact(x):
  """The exact GELU, x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2))).

  Not in the original release: HuggingFace's "gelu" is this form, and
  models trained with it (all-MiniLM-L6-v2, most HuggingFace BERTs)
  converted by convert_checkpoint.py name it hidden_act "gelu_exact" so
  that the function they were trained with is the one computed. It
  differs from the tanh form by up to 4.7e-4 (near |x| = 2.7).

  Args:
    x: float Tensor of any shape.

  Returns:
    Tensor of the same shape and dtype.
  """
  x = tf.convert_to_tensor(x)
  return 0.5 * x * (1.0 + tf.math.erf(x * np.float32(1.0 / np.sqrt(2.0))))


def get_activation(activation_string):
  """Maps a bert_config.json hidden_act to a function, as the original does.

  Args:
    activation_string: one of "gelu" (the original's tanh form),
      "gelu_exact" (the erf form, see gelu_exact), "relu", "tanh",
      "linear" (any case).

  Returns:
    A function Tensor -> Tensor, or None for "linear" (Keras' identity).

  Raises:
    ValueError: unknown name.
  """
  act = activation_string.lower()
  activations = {"gelu": gelu, "gelu_exact": gelu_exact, "relu": tf.nn.relu,
                 "tanh": tf.tanh, "linear": None}
  if act not in activations:
    raise ValueError("Unsupported activation: %r (expected one of %s)" %
                     (activation_string, ", ".join(activations)))
  return activations[act]


def matmul(a, b, dtype=tf.float32, output_dtype=None, **kwargs):
  """tf.matmul(a, b, **kwargs) computed in dtype (a layer's matmul_dtype):
  the one way every matmul here takes its type. Each operand is cast to
  dtype where it is not in it; float32 means a's own type (under a Keras
  mixed policy a is already in the compute type). The product comes back
  in output_dtype, None: a's dtype (a bfloat16 product that only feeds
  another matmul or a fused kernel stays bfloat16 with output_dtype=dtype).
  """
  if dtype == tf.float32:
    dtype = a.dtype
  product = tf.matmul(tf.cast(a, dtype), tf.cast(b, dtype), **kwargs)
  return tf.cast(product, output_dtype or a.dtype)


class Dense(keras.layers.Dense):
  """Keras' Dense whose matmul computes in its options' matmul_dtype, and
  whose bias add and GELU may be a fused kernel; Keras' own call where
  neither applies.

  Its paths, chosen once when it is made (self.epilogue):
  - None: Keras' Dense.call (float32 matmuls, or a Keras mixed policy).
  - bias_activation: the matmul in bfloat16 over the flattened rows, the
    product cast to float32, the bias added and the activation applied by
    TensorFlow's ops.
  - fused_bias_gelu: the matmul (in either type), then the bias add and
    GELU in one pass (fused_kernels.bias_gelu), bfloat16 out where
    bfloat16_output, else float32.
  - fused_bias_add: a bfloat16 matmul whose product only feeds other
    matmuls, the bias added in one pass, bfloat16 out
    (fused_kernels.bias_add).
  """

  def __init__(self, *args, output_feeds_matmul=False, options=None,
               **kwargs):
    """Creates the layer.

    Args:
      *args: passed to keras.layers.Dense.
      output_feeds_matmul: bool, whether the output only feeds other
        matmuls (the feed-forward's intermediate layer, the attention's
        query, key and value with its fused softmax). With bfloat16
        matmuls and a fused kernel for its bias add (and GELU), the output
        is then bfloat16, rounded once where the next matmul would round
        it: no float32 copy either way.
      options: modeling.ComputeOptions, or None for the default.
      **kwargs: passed to keras.layers.Dense.
    """
    super().__init__(*args, **kwargs)
    options = resolve(options)
    self.matmul_dtype = options.matmul_dtype
    keras_matmul = self.matmul_dtype in (tf.float32, self.compute_dtype)
    bfloat16 = self.matmul_dtype == tf.bfloat16 and not keras_matmul
    self.bfloat16_output = False
    if (self.use_bias and self.activation in (gelu, gelu_exact) and
        options.uses("bias_gelu")):
      self.epilogue = self.fused_bias_gelu
      self.bfloat16_output = bfloat16 and output_feeds_matmul
    elif (bfloat16 and output_feeds_matmul and
          self.activation is keras.activations.linear and
          options.uses("bias_add")):
      self.epilogue = self.fused_bias_add
      self.bfloat16_output = True
    elif bfloat16:
      self.epilogue = self.bias_activation
    else:
      self.epilogue = None
    if bfloat16:
      # Inputs as they come, bfloat16 ones (from a bfloat16_output layer)
      # included: Keras would cast them to float32, a pass for nothing.
      # (Under a Keras mixed policy, matmul_dtype float32, Keras' own
      # autocasting stays.)
      self._autocast = False

  def call(self, inputs):
    """[..., in] -> [..., units], float32 (or bfloat16, see __init__)."""
    if self.epilogue is None:
      return super().call(inputs)
    rows = tf.reshape(inputs, [-1, inputs.shape[-1]])
    outputs = self.epilogue(self.product(rows))
    outputs = tf.reshape(outputs, tf.concat(
        [tf.shape(inputs)[:-1], [self.units]], 0))
    outputs.set_shape(inputs.shape[:-1].concatenate([self.units]))
    return outputs

  def product(self, rows):
    """[N, in] -> [N, units] in matmul_dtype, without the bias."""
    return matmul(rows, self.kernel, self.matmul_dtype,
                  output_dtype=self.matmul_dtype)

  def bias_activation(self, product):
    """The product in float32, the bias added, the activation applied."""
    outputs = tf.cast(product, tf.float32)
    if self.use_bias:
      outputs = tf.nn.bias_add(outputs, self.bias)
    return self.activation(outputs)

  def fused_bias_gelu(self, product):
    """gelu(product + bias) in one pass, bfloat16 where bfloat16_output."""
    if not self.bfloat16_output:
      product = tf.cast(product, tf.float32)
    return fused_kernels.bias_gelu(product, self.bias,
                                   exact=self.activation is gelu_exact)

  def fused_bias_add(self, product):
    """product + bias in one pass, bfloat16 (product's type)."""
    if not self.use_bias:
      return product
    return fused_kernels.bias_add(product, self.bias)


def create_initializer(initializer_range=0.02):
  """Truncated normal (cut at 2 stddev) with stddev initializer_range.

  Make one per weight: tf_keras gives an unseeded initializer instance the
  same values on every call, so a shared one would make weights equal.
  """
  return keras.initializers.TruncatedNormal(stddev=initializer_range)


class LayerNorm(keras.layers.LayerNormalization):
  """Keras' LayerNormalization over the last axis of inputs of any rank,
  with the residual added first where one is given.

  Keras turns axis=-1 into a positive axis for the rank of the first
  input, so a layer built on [B, T, H] could not take the [N, H] rows of
  BertModel.skip_padding. The arithmetic is Keras' own (its non-fused
  path: the original's epsilon is below what the fused one allows), or
  with the options' "add_layer_norm" kernel the add and the normalization
  in one pass each way (fused_kernels.add_layer_norm; rounding differs by
  ~1e-7).
  """

  def __init__(self, *args, options=None, **kwargs):
    """Args: as keras.layers.LayerNormalization's; options: a
    modeling.ComputeOptions, or None for the default."""
    super().__init__(*args, **kwargs)
    self.fused_kernel = resolve(options).uses("add_layer_norm")

  def build(self, input_shape):
    super().build(input_shape)
    assert not self._fused, "the fused path would be rank-specific"
    self.axis = [-1]

  def call(self, inputs, residual=None):
    """Normalizes inputs + residual.

    Args:
      inputs: float [..., H].
      residual: float like inputs, or None.

    Returns:
      float like inputs.
    """
    if self.fused_kernel and inputs.dtype == tf.float32:
      return fused_kernels.add_layer_norm(inputs, residual, self.gamma,
                                          self.beta, self.epsilon)
    if residual is not None:
      inputs += residual
    return super().call(inputs)


def layer_norm(name="LayerNorm", options=None):
  """A LayerNorm over the last axis with the original's epsilon (options:
  a modeling.ComputeOptions, or None for the default)."""
  return LayerNorm(axis=-1, epsilon=LAYER_NORM_EPSILON, name=name,
                   options=options)


class Dropout(keras.layers.Layer):
  """Inverted dropout drawing from its own tf.random.Generator.

  The generator's state is a variable, so a training checkpoint can hold it
  and a resumed run draws the same masks as one never interrupted (Keras'
  Dropout draws from op-level random state that a restart resets).
  """

  def __init__(self, rate, seed, options=None, **kwargs):
    """Args: rate: float in [0, 1), share dropped; seed: int, for the
    masks; options: a modeling.ComputeOptions, or None for the default."""
    super().__init__(**kwargs)
    self.rate = rate
    self.seed = seed
    # The fused kernel draws the same masks in one pass.
    self.fused_kernel = resolve(options).uses("dropout")

  def build(self, input_shape):
    if self.rate:
      self.generator = tf.random.Generator.from_seed(self.seed)
    super().build(input_shape)

  def draw_seed(self):
    """The op seed of the next mask: int64 [2], drawn from the generator
    (advancing it), or None where nothing is dropped (rate 0)."""
    if not self.rate:
      return None
    return self.generator.make_seeds(1)[:, 0]

  def mask_seed(self, training, seed=None):
    """The op seed of this call's mask: seed (from draw_seed), or one drawn
    now; None where nothing is dropped (not training, or rate 0)."""
    if not training or not self.rate:
      return None
    return self.draw_seed() if seed is None else seed

  def call(self, inputs, training=None, real_tokens=None, seed=None):
    """Drops with probability rate and scales up the rest, when training.

    Args:
      inputs: float Tensor; with real_tokens, the [N, H] rows it gathered.
      training: bool, whether to drop.
      real_tokens: a RealTokens or None.
      seed: int64 [2] from draw_seed, or None to draw one now. A layer
        whose forward pass is recomputed for the backward pass draws its
        seeds once, before, so that both passes drop the same positions.

    Returns:
      Tensor like inputs.
    """
    # A fresh op seed from the generator each call; the fused stateless op
    # draws the mask.
    seed = self.mask_seed(training, seed)
    if seed is None:
      return inputs
    if self.fused_kernel and inputs.dtype == tf.float32:
      return fused_kernels.dropout(
          inputs, self.rate, seed,
          None if real_tokens is None else real_tokens.flat_rows)
    if real_tokens is None:
      return tf.nn.experimental.stateless_dropout(inputs, self.rate, seed)
    # Rows gathered from [B, T, H]: the mask is drawn in that layout and
    # gathered too, so each real position is dropped exactly where the
    # padded batch drops it (stateless_dropout's arithmetic: keep where
    # uniform >= rate, scale by 1 / (1 - rate)). Drawn on [N, H], the masks
    # would be other (equally likely) ones, and training with the padding
    # skipped would follow another path than the same batch padded.
    uniform = tf.random.stateless_uniform(
        tf.concat([real_tokens.batch_shape,
                   tf.shape(inputs, out_type=tf.int64)[1:]], 0),
        seed, dtype=inputs.dtype)
    return dropped_where(inputs, real_tokens.gather(uniform), self.rate)


def dropped_where(inputs, uniform, rate):
  """stateless_dropout's arithmetic on given uniforms: inputs scaled by
  1 / (1 - rate) where uniform >= rate, else 0 (uniform: like inputs, the
  values that op would draw for these elements)."""
  scaled = inputs * tf.constant(1.0 / (1.0 - rate), inputs.dtype)
  return tf.where(uniform >= rate, scaled, tf.zeros([], inputs.dtype))


class Embeddings(keras.layers.Layer):
  """Scope bert/embeddings: word + segment + position, LayerNorm, dropout."""

  def __init__(self, vocab_size, hidden_size, type_vocab_size,
               max_position_embeddings, initializer_range, dropout_rate,
               dropout_seed=0, use_one_hot_embeddings=False,
               name="embeddings", options=None, **kwargs):
    """Creates the layer.

    Args:
      vocab_size: int V, rows of the word embedding table.
      hidden_size: int H, embedding width.
      type_vocab_size: int, rows of the segment table.
      max_position_embeddings: int, rows of the position table; the longest
        sequence the layer accepts.
      initializer_range: float, stddev of the truncated-normal initializer.
      dropout_rate: float, dropout after the LayerNorm.
      dropout_seed: int, seed of the dropout masks.
      use_one_hot_embeddings: bool; look words up with a one-hot matmul (fast
        on TPU) instead of a gather. Both give the same numbers.
      name: Keras name.
      options: a modeling.ComputeOptions, or None for the default.
      **kwargs: passed to keras.layers.Layer.
    """
    super().__init__(name=name, **kwargs)
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.type_vocab_size = type_vocab_size
    self.max_position_embeddings = max_position_embeddings
    self.initializer_range = initializer_range
    self.use_one_hot_embeddings = use_one_hot_embeddings
    self.layer_norm = layer_norm(options=options)
    self.dropout = Dropout(dropout_rate, dropout_seed, options)

  def build(self, input_shape):
    self.word_embeddings = self.add_weight(
        "word_embeddings", shape=[self.vocab_size, self.hidden_size],
        initializer=create_initializer(self.initializer_range))
    self.token_type_embeddings = self.add_weight(
        "token_type_embeddings", shape=[self.type_vocab_size, self.hidden_size],
        initializer=create_initializer(self.initializer_range))
    self.position_embeddings = self.add_weight(
        "position_embeddings",
        shape=[self.max_position_embeddings, self.hidden_size],
        initializer=create_initializer(self.initializer_range))
    self.layer_norm.build([None, None, self.hidden_size])
    super().build(input_shape)

  @staticmethod
  def _one_hot_lookup(table, ids, depth):
    return tf.einsum("btv,vh->bth", tf.one_hot(ids, depth, dtype=table.dtype),
                     table)

  def call(self, input_ids, segment_ids, training=None):
    """Embeds a batch.

    Args:
      input_ids: int32 [B, T] word ids.
      segment_ids: int32 [B, T] segment ids (0 for A, 1 for B).
      training: bool, whether dropout is active.

    Returns:
      float [B, T, H], the embedding output.
    """
    seq_length = tf.shape(input_ids)[1]
    static_length = input_ids.shape[1]
    if (static_length is not None and
        static_length > self.max_position_embeddings):
      raise ValueError(
          "Sequence length %d exceeds max_position_embeddings %d." %
          (static_length, self.max_position_embeddings))
    tf.debugging.assert_less_equal(
        seq_length, self.max_position_embeddings,
        message="sequence length exceeds max_position_embeddings")
    # As the original: words by a gather unless use_one_hot_embeddings,
    # segments always by a one-hot matmul. The values are the same either
    # way; the gradients' form is not (a gather's is an IndexedSlices,
    # whose rows the original's gradient clipping counts one by one: see
    # runner_lib/core/training/step.py, clip_gradients).
    if self.use_one_hot_embeddings:
      output = self._one_hot_lookup(self.word_embeddings, input_ids,
                                    self.vocab_size)
    else:
      output = tf.gather(self.word_embeddings, input_ids)
    output += self._one_hot_lookup(self.token_type_embeddings, segment_ids,
                                   self.type_vocab_size)
    # [T, H], broadcast over the batch.
    output += self.position_embeddings[:seq_length]
    output = self.layer_norm(output)
    return self.dropout(output, training=training)


class RealTokens:
  """Where a batch's real tokens are, to compute on them alone.

  Gathers [B, T, H] to [N, H], the N unmasked positions' rows in batch
  then position order, and scatters them back with zeros at masked
  positions. The dense parts of a Transformer layer (projections,
  feed-forward, LayerNorm, dropout) treat each position on its own, so on
  the gathered rows they compute what the padded batch computes at real
  positions, skipping the padding. Attention runs on each example's rows
  where the batch size is static (split_examples), else in the [B, T]
  layout, its scores at padding positions masked out as before.
  """

  def __init__(self, input_mask):
    """Args: input_mask: int or bool [B, T], nonzero at real tokens."""
    self.positions = tf.where(tf.cast(input_mask, tf.bool))  # [N, 2] int64
    self.batch_shape = tf.shape(input_mask, out_type=tf.int64)  # [B, T]
    # int or None: the batch size where the graph knows it, and with it
    # each example's rows (attention on real tokens, split_examples).
    self.static_batch_size = input_mask.shape[0]
    # int64 [B]: each example's real tokens, its rows among the N.
    self.lengths = tf.reduce_sum(
        tf.cast(tf.cast(input_mask, tf.bool), tf.int64), axis=1)
    # int64 [N]: b * T + t of each real position (b, t), its row in the
    # [B * T, H] layout (the fused dropout's indices; once for every layer).
    self.flat_rows = (self.positions[:, 0] * self.batch_shape[1] +
                      self.positions[:, 1])

  def gather(self, x):
    """[B, T, H] -> [N, H], the real positions' rows."""
    return tf.gather_nd(x, self.positions)

  def scatter(self, x):
    """[N, H] -> [B, T, H], zeros at masked positions."""
    return tf.scatter_nd(self.positions, x, tf.concat(
        [self.batch_shape, tf.shape(x, out_type=tf.int64)[1:]], 0))

  def split_examples(self, x):
    """[N, ...] -> a list of static_batch_size Tensors [L_b, ...], example
    b's rows (its L_b real tokens in position order)."""
    return tf.split(x, self.lengths, num=self.static_batch_size)


class SelfAttention(keras.layers.Layer):
  """Scope attention/self: multi-head scaled dot-product self-attention."""

  def __init__(self, num_attention_heads, size_per_head, initializer_range,
               attention_probs_dropout_prob, dropout_seed=0, name="self",
               options=None, **kwargs):
    """Creates the layer.

    Args:
      num_attention_heads: int N.
      size_per_head: int D; N * D is the projection width H.
      initializer_range: float, stddev of the truncated-normal initializer.
      attention_probs_dropout_prob: float, dropout on attention probabilities.
      dropout_seed: int, seed of the dropout masks.
      name: Keras name.
      options: a modeling.ComputeOptions, or None for the default.
      **kwargs: passed to keras.layers.Layer.
    """
    super().__init__(name=name, **kwargs)
    options = resolve(options)
    self.num_attention_heads = num_attention_heads
    self.size_per_head = size_per_head
    self.matmul_dtype = options.matmul_dtype
    # Between the scores' and the context's matmuls, scale, mask, softmax
    # and dropout in one kernel (fused_kernels.attention_softmax). With
    # bfloat16 matmuls the projections then hand the scores' and context's
    # matmuls their operands in bfloat16, and the context reaches the
    # output's matmul in bfloat16: the values of the composite's casts,
    # without them.
    self.fused_softmax = options.uses("attention_softmax")
    width = num_attention_heads * size_per_head
    self.query, self.key, self.value = [
        Dense(
            width, kernel_initializer=create_initializer(initializer_range),
            output_feeds_matmul=self.fused_softmax, name=name,
            options=options)
        for name in ("query", "key", "value")]
    self.dropout = Dropout(attention_probs_dropout_prob, dropout_seed,
                           options)

  def build(self, input_shape):
    # The fused softmax draws the dropout's seeds without calling it.
    if not self.dropout.built:
      self.dropout.build(None)
    super().build(input_shape)

  def _split_heads(self, x, batch_size, seq_length):
    x = tf.reshape(x, [batch_size, seq_length, self.num_attention_heads,
                       self.size_per_head])  # [B, T, N, D]
    return tf.transpose(x, [0, 2, 1, 3])  # [B, N, T, D]

  def call(self, hidden_states, attention_mask, training=None, real_tokens=None,
           dropout_seed=None):
    """Attends every position to every unmasked position.

    Args:
      hidden_states: float [B, T, H], or [N, H] rows gathered by real_tokens.
      attention_mask: float [B, 1 or F, T]; 1 where attending is allowed,
        0 where not (padding). Rows broadcast over the from-positions.
      training: bool, whether dropout is active.
      real_tokens: a RealTokens, or None when hidden_states is [B, T, H].
      dropout_seed: the attention dropout's seed (Dropout.draw_seed), or
        None to draw it now.

    Returns:
      float [B, T, N * D] (or [N, N * D] when gathered), the per-head
      contexts, heads concatenated; bfloat16 with the fused softmax and
      bfloat16 matmuls. Gathered rows of a batch of static size attend
      per example (_attend_by_example).
    """
    if real_tokens is not None and real_tokens.static_batch_size:
      return self._attend_by_example(
          hidden_states, attention_mask, real_tokens,
          self.dropout.mask_seed(training, dropout_seed))

    def projected(dense):
      output = dense(hidden_states)
      return output if real_tokens is None else real_tokens.scatter(output)

    query, key, value = [projected(dense)
                         for dense in (self.query, self.key, self.value)]
    batch_size = query.shape[0] or tf.shape(query)[0]
    seq_length = query.shape[1] or tf.shape(query)[1]
    query, key, value = [self._split_heads(x, batch_size, seq_length)
                         for x in (query, key, value)]
    scale = 1.0 / math.sqrt(float(self.size_per_head))
    if self.fused_softmax:
      dtype = self.matmul_dtype
      scores = matmul(query, key, dtype, output_dtype=dtype,
                      transpose_b=True)  # [B, N, F, T], matmul_dtype
      probs = fused_kernels.attention_softmax(
          scores, attention_mask, scale, self.dropout.rate,
          self.dropout.mask_seed(training, dropout_seed))
      # [B, N, F, D], matmul_dtype: the attention output's matmul operand.
      context = matmul(probs, value, dtype, output_dtype=dtype)
    else:
      # [B, N, F, T]. Scaled after the product, in the original's order.
      scores = matmul(query, key, self.matmul_dtype, transpose_b=True)
      adder = (1.0 - tf.cast(attention_mask, scores.dtype)) * MASK_ADDER
      adder = adder[:, tf.newaxis, :, :]  # [B, 1, F or 1, T]
      scores *= scale
      scores += adder
      probs = tf.nn.softmax(scores)
      probs = self.dropout(probs, training=training, seed=dropout_seed)
      context = matmul(probs, value, self.matmul_dtype)  # [B, N, F, D]
    context = tf.transpose(context, [0, 2, 1, 3])  # [B, F, N, D]
    context = tf.reshape(context, [
        batch_size, seq_length, self.num_attention_heads * self.size_per_head])
    return context if real_tokens is None else real_tokens.gather(context)

  def _attend_by_example(self, hidden_states, attention_mask, real_tokens,
                         seed):
    """call's arithmetic on each example's real tokens alone.

    The padded batch's scores at masked keys get -10000 before the
    softmax, so their probabilities are exactly 0 and they add nothing to
    a context: attending over an example's L_b real tokens gives the
    padded batch's contexts at those rows (to float32 rounding: sums of
    other lengths), computing L_b^2 scores instead of T^2. The dropout
    drops what it drops in the padded batch: each probability's uniform
    is the one at its place in [B, N, T, T].

    Args:
      hidden_states: float [N_real, H], rows gathered by real_tokens.
      attention_mask: float [B, 1 or T, T], as call's.
      real_tokens: a RealTokens with a static batch size.
      seed: the dropout's op seed (Dropout.mask_seed), or None.

    Returns:
      float [N_real, N * D], as call's with real_tokens.
    """
    heads, size = self.num_attention_heads, self.size_per_head
    width = heads * size
    scale = 1.0 / math.sqrt(float(size))
    padded_length = real_tokens.batch_shape[1]
    rate = self.dropout.rate
    uniform = None
    if seed is not None and not self.fused_softmax:
      # The padded batch's uniforms, each example's taken from them.
      uniform = tf.random.stateless_uniform(
          [real_tokens.batch_shape[0], heads, padded_length, padded_length],
          seed, dtype=hidden_states.dtype)
    rows = [real_tokens.split_examples(dense(hidden_states))
            for dense in (self.query, self.key, self.value)]
    columns = real_tokens.split_examples(real_tokens.positions[:, 1])
    contexts = []
    for b, positions in enumerate(columns):
      length = tf.shape(positions)[0]
      # [1, N, L, D] each.
      query, key, value = [
          tf.transpose(tf.reshape(x[b], [1, length, heads, size]),
                       [0, 2, 1, 3]) for x in rows]
      mask = tf.gather(attention_mask[b:b + 1], positions, axis=2)
      if attention_mask.shape[1] != 1:  # [B, T, T]: rows differ.
        mask = tf.gather(mask, positions, axis=1)
      if self.fused_softmax:
        dtype = self.matmul_dtype
        scores = matmul(query, key, dtype, output_dtype=dtype,
                        transpose_b=True)  # [1, N, L, L]
        # Element ((b * N + n) * T + row) * T + column of [B, N, T, T].
        row_starts = ((b * heads + tf.range(heads, dtype=tf.int64)[:, None])
                      * padded_length + positions[None, :]) * padded_length
        probs = fused_kernels.attention_softmax(
            scores, mask, scale, rate, seed,
            uniform_layout=(tf.reshape(row_starts, [-1]), positions))
        context = matmul(probs, value, dtype, output_dtype=dtype)
      else:
        scores = matmul(query, key, self.matmul_dtype, transpose_b=True)
        adder = (1.0 - tf.cast(mask, scores.dtype)) * MASK_ADDER
        scores *= scale
        scores += adder[:, tf.newaxis, :, :]
        probs = tf.nn.softmax(scores)
        if uniform is not None:
          # stateless_dropout's arithmetic on the padded batch's uniforms.
          probs = dropped_where(probs, tf.gather(
              tf.gather(uniform[b:b + 1], positions, axis=2), positions,
              axis=3), rate)
        context = matmul(probs, value, self.matmul_dtype)
      # [1, N, L, D] -> [L, N * D].
      contexts.append(tf.reshape(tf.transpose(context, [0, 2, 1, 3]),
                                 [length, width]))
    return tf.concat(contexts, 0)


class TransformerLayer(keras.layers.Layer):
  """Scope encoder/layer_N: post-LayerNorm Transformer block."""

  def __init__(self, hidden_size, num_attention_heads, intermediate_size,
               intermediate_activation, hidden_dropout_prob,
               attention_probs_dropout_prob, initializer_range, name,
               dropout_seed=0, options=None, **kwargs):
    """Creates the layer.

    Args:
      hidden_size: int H.
      num_attention_heads: int N; must divide H.
      intermediate_size: int I.
      intermediate_activation: function or None, feed-forward activation.
      hidden_dropout_prob: float, dropout on both sub-layer outputs.
      attention_probs_dropout_prob: float, dropout on attention probabilities.
      initializer_range: float, stddev of the truncated-normal initializer.
      name: Keras name, "layer_N".
      dropout_seed: int; the two dropouts use this seed and the next.
      options: a modeling.ComputeOptions, or None for the default.
      **kwargs: passed to keras.layers.Layer.
    """
    super().__init__(name=name, **kwargs)
    self.attention = SelfAttention(
        num_attention_heads, hidden_size // num_attention_heads,
        initializer_range, attention_probs_dropout_prob, dropout_seed,
        options=options)
    self.attention_output = Dense(
        hidden_size, kernel_initializer=create_initializer(initializer_range),
        name="attention_output", options=options)
    self.attention_layer_norm = layer_norm("attention_LayerNorm", options)
    self.intermediate = Dense(
        intermediate_size, activation=intermediate_activation,
        kernel_initializer=create_initializer(initializer_range),
        name="intermediate", output_feeds_matmul=True, options=options)
    self.output_dense = Dense(
        hidden_size, kernel_initializer=create_initializer(initializer_range),
        name="output", options=options)
    self.output_layer_norm = layer_norm("output_LayerNorm", options)
    self.dropout = Dropout(hidden_dropout_prob, dropout_seed + 1, options)

  def call(self, hidden_states, attention_mask, training=None, real_tokens=None,
           recompute=False):
    """Runs one block.

    Args:
      hidden_states: float [B, T, H], the previous layer's output, or its
        [N, H] real positions gathered by real_tokens.
      attention_mask: float [B, 1 or F, T], 1 = may attend.
      training: bool, whether dropout is active.
      real_tokens: a RealTokens, or None for [B, T, H] hidden states.
      recompute: bool; when training, keep only hidden_states for the
        backward pass and compute the block again there
        (tf.recompute_grad), instead of keeping its activations. The
        same numbers either way: the dropout seeds are drawn once, before
        the block, and both passes use them.

    Returns:
      float, the shape of hidden_states.
    """
    if not (recompute and training):
      return self._block(hidden_states, attention_mask, training, real_tokens)
    # In the order the block itself would draw them: the generators then
    # stand where they would without recomputation.
    seeds = (self.attention.dropout.draw_seed(), self.dropout.draw_seed(),
             self.dropout.draw_seed())
    # Only hidden_states is an argument (the one input with a gradient);
    # the mask, positions and seeds are captured: graph-mode custom
    # gradients take no keyword arguments.
    block = tf.recompute_grad(lambda x: self._block(
        x, attention_mask, training, real_tokens, seeds))
    return block(hidden_states)

  def _block(self, hidden_states, attention_mask, training, real_tokens,
             seeds=(None, None, None)):
    """The block's arithmetic (see call); seeds: the attention dropout's
    and the two output dropouts' (Dropout.draw_seed), None to draw."""
    attention = self.attention(hidden_states, attention_mask,
                               training=training, real_tokens=real_tokens,
                               dropout_seed=seeds[0])
    attention = self.dropout(self.attention_output(attention),
                             training=training, real_tokens=real_tokens,
                             seed=seeds[1])
    attention = self.attention_layer_norm(attention, residual=hidden_states)
    output = self.output_dense(self.intermediate(attention))
    output = self.dropout(output, training=training, real_tokens=real_tokens,
                          seed=seeds[2])
    return self.output_layer_norm(output, residual=attention)


class Pooler(keras.layers.Layer):
  """Scope bert/pooler: dense + tanh on the first ([CLS]) token."""

  def __init__(self, hidden_size, initializer_range, name="pooler",
               options=None, **kwargs):
    """Creates the layer.

    Args:
      hidden_size: int H.
      initializer_range: float, stddev of the truncated-normal initializer.
      name: Keras name.
      options: a modeling.ComputeOptions, or None for the default.
      **kwargs: passed to keras.layers.Layer.
    """
    super().__init__(name=name, **kwargs)
    self.dense = Dense(
        hidden_size, activation=tf.tanh,
        kernel_initializer=create_initializer(initializer_range), name="dense",
        options=options)

  def call(self, sequence_output):
    """Pools [B, T, H] to [B, H] from position 0."""
    return self.dense(sequence_output[:, 0, :])
