"""BertModel: the original BERT encoder as a Keras model."""

import random

import tensorflow as tf
import tf_keras as keras

from modeling import layers
from modeling import options as options_lib


class BertModel(keras.Model):
  """BERT ("Bidirectional Encoder Representations from Transformers").

  Computes what the original modeling.BertModel computes, with Keras layers
  whose weights map one-to-one onto Google's checkpoint variables (see
  modeling/checkpoint.py). Dropout follows Keras' `training` argument.

  The original called the segment ids `token_type_ids`; here they are
  `segment_ids` everywhere, as in the feature files.

  Example:

  ```python
  config = modeling.BertConfig.from_json_file("bert_config.json")
  model = modeling.BertModel(config)
  modeling.load_checkpoint(model, "uncased_L-12_H-768_A-12/bert_model.ckpt")
  outputs = model({"input_ids": input_ids,      # int32 [B, T]
                   "input_mask": input_mask,    # int32 [B, T]
                   "segment_ids": segment_ids}) # int32 [B, T]
  outputs["pooled_output"]  # float32 [B, H]
  ```
  """

  def __init__(self, config, use_one_hot_embeddings=False, seed=None,
               causal_attention=False, skip_padding=None,
               gradient_checkpointing=None, name="bert", options=None,
               **kwargs):
    """Creates the model and all its weights.

    Args:
      config: a BertConfig.
      use_one_hot_embeddings: bool, one-hot matmul word lookup (for TPUs).
      seed: int or None, seeds the dropout masks (None: drawn from Python's
        random module, which tf_keras.utils.set_random_seed seeds).
      causal_attention: bool; each position attends only to itself and
        earlier ones (the paper's left-to-right LM ablation), not both ways.
      skip_padding: bool, or None for options.skip_padding; the layers'
        dense parts (projections, feed-forward, LayerNorm) run on the real
        tokens' rows only and every output is zero at padding positions,
        where the original's outputs are values of no use. The real
        positions' outputs are the same to float32 rounding. Not for XLA
        or TPUs (the number of real tokens is known only at run time).
      gradient_checkpointing: bool, or None for
        options.gradient_checkpointing; in training, each Transformer
        layer keeps only its input for the backward pass and computes the
        rest again there (TransformerLayer's recompute): less memory, about
        a third more arithmetic, the same numbers.
      name: Keras name.
      options: a modeling.ComputeOptions (what the layers compute in), or
        None for the default, the original's float32 arithmetic through
        TensorFlow's own ops. Task heads take the same (self.options).
      **kwargs: passed to keras.Model.
    """
    super().__init__(name=name, **kwargs)
    self.config = config
    self.causal_attention = causal_attention
    self.options = options_lib.resolve(options)
    self.skip_padding = (self.options.skip_padding if skip_padding is None
                         else skip_padding)
    self.gradient_checkpointing = (
        self.options.gradient_checkpointing
        if gradient_checkpointing is None else gradient_checkpointing)
    if seed is None:
      seed = random.getrandbits(30)
    # The embeddings' and layers' dropouts take seed .. seed + 2L; a task
    # head's dropout takes this one, so that it too follows --seed.
    self.head_seed = seed + 7919
    self.embeddings = layers.Embeddings(
        vocab_size=config.vocab_size,
        hidden_size=config.hidden_size,
        type_vocab_size=config.type_vocab_size,
        max_position_embeddings=config.max_position_embeddings,
        initializer_range=config.initializer_range,
        dropout_rate=config.hidden_dropout_prob,
        dropout_seed=seed,
        use_one_hot_embeddings=use_one_hot_embeddings,
        options=self.options)
    activation = layers.get_activation(config.hidden_act)
    self.encoder_layers = [
        layers.TransformerLayer(
            hidden_size=config.hidden_size,
            num_attention_heads=config.num_attention_heads,
            intermediate_size=config.intermediate_size,
            intermediate_activation=activation,
            hidden_dropout_prob=config.hidden_dropout_prob,
            attention_probs_dropout_prob=config.attention_probs_dropout_prob,
            initializer_range=config.initializer_range,
            name="layer_%d" % i,
            dropout_seed=seed + 2 * i + 1,
            options=self.options)
        for i in range(config.num_hidden_layers)
    ]
    self.pooler = layers.Pooler(config.hidden_size, config.initializer_range,
                                options=self.options)
    # Create every weight now, so a checkpoint can be loaded before the first
    # real call. `call` (not `__call__`) leaves Keras' input spec unset.
    self.call({"input_ids": tf.zeros([1, 1], tf.int32)}, training=False)

  @property
  def embedding_table(self):
    """The word embedding variable, float32 [V, H]; the masked LM ties to it."""
    return self.embeddings.word_embeddings

  def call(self, inputs, training=None):
    """Encodes a batch.

    Args:
      inputs: dict with
        "input_ids": int32 [B, T] WordPiece ids;
        "input_mask": optional int32 [B, T], 1 for real tokens, 0 for
          padding (default all 1);
        "segment_ids": optional int32 [B, T], 0 for sentence A, 1 for B
          (default all 0).
      training: bool, whether dropout is active.

    Returns:
      dict with
        "sequence_output": float [B, T, H], the last layer;
        "pooled_output": float [B, H], the pooler on [CLS];
        "all_encoder_layers": list of L float [B, T, H], every layer;
          with skip_padding, zero at padding positions;
        "embedding_output": float [B, T, H], the input of layer 0.
    """
    input_ids = tf.convert_to_tensor(inputs["input_ids"])
    if input_ids.shape.rank != 2:
      raise ValueError("input_ids must have rank 2 [batch_size, seq_length], "
                       "got shape %s" % input_ids.shape)
    input_mask = inputs.get("input_mask")
    if input_mask is None:
      input_mask = tf.ones_like(input_ids)
    segment_ids = inputs.get("segment_ids")
    if segment_ids is None:
      segment_ids = tf.zeros_like(input_ids)

    embedding_output = self.embeddings(input_ids, segment_ids,
                                       training=training)
    # [B, 1, T]: the original's [B, F, T] mask has F identical rows, so one
    # row broadcast over the from-positions gives the same scores.
    attention_mask = tf.cast(input_mask, embedding_output.dtype)[:, tf.newaxis]
    if self.causal_attention:
      length = tf.shape(input_ids)[1]
      # [B, T, T]: row f may attend to columns t <= f.
      attention_mask *= tf.linalg.band_part(
          tf.ones([length, length], attention_mask.dtype), -1, 0)
    real_tokens = layers.RealTokens(input_mask) if self.skip_padding else None
    hidden_states = (embedding_output if real_tokens is None else
                     real_tokens.gather(embedding_output))
    all_encoder_layers = []
    for layer in self.encoder_layers:
      hidden_states = layer(hidden_states, attention_mask, training=training,
                            real_tokens=real_tokens,
                            recompute=self.gradient_checkpointing)
      all_encoder_layers.append(hidden_states if real_tokens is None else
                                real_tokens.scatter(hidden_states))
    sequence_output = (all_encoder_layers[-1] if all_encoder_layers else
                       embedding_output)
    return {
        "sequence_output": sequence_output,
        "pooled_output": self.pooler(sequence_output),
        "all_encoder_layers": all_encoder_layers,
        "embedding_output": embedding_output,
    }
