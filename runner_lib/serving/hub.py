"""The TF Hub interface: BertModel as a reusable encoder SavedModel, and a
preprocessor SavedModel that turns raw strings into its inputs, each
called as TF Hub's BERT models are."""

import tensorflow as tf

import modeling
from runner_lib.serving import modules
import tokenization


HUB_INPUTS = {"input_word_ids": "input_ids", "input_mask": "input_mask",
              "input_type_ids": "segment_ids"}


class EncoderModule(modules.HoldsModel,
                    tf.__internal__.tracking.AutoTrackable):
  """BertModel as a TF Hub BERT encoder: a reusable SavedModel.

  Called on the dict of int32 [B, T] input_word_ids, input_mask and
  input_type_ids (what TF Hub's preprocessors and our PreprocessorModule
  return; T up to max_position_embeddings), with `training` turning
  dropout on, it returns pooled_output [B, H], sequence_output [B, T, H],
  encoder_outputs (list of L [B, T, H]) and default (= pooled_output), all
  float32. Its variables, trainable_variables and regularization_losses
  let `hub.KerasLayer(path, trainable=True)` fine-tune it inside a Keras
  model, as TF Hub's BERT encoders are. The raw-text signatures stay:
  serving_default (text_a) and serve_pair (text_a, text_b), whose
  encoder_outputs are stacked [B, L, T, H] (a signature returns tensors).
  """

  def __init__(self, model, vocab_file, do_lower_case, seq_length):
    """Args: as ServingModule; model: a BertModel, weights loaded."""
    super().__init__()
    # The model's state is tracked through the lists _track makes.
    self._hold(model, vocab_file, do_lower_case, seq_length)
    self._track(lambda v: True)
    self.regularization_losses = []
    spec = {name: tf.TensorSpec([None, None], tf.int32, name=name)
            for name in HUB_INPUTS}
    for training in (False, True):
      self.__call__.get_concrete_function(spec, training=training)
    self.serve = modules.function(self._serve, input_signature=[
        modules.string_spec("text_a")])
    self.serve_pair = modules.function(self._serve, input_signature=[
        modules.string_spec("text_a"), modules.string_spec("text_b")])

  def _track(self, keep):
    # The dropout generators' states too, which training=True updates.
    known = {id(v) for v in self.model.variables}
    self.variables = [v for v in self.model.variables if keep(v)] + [
        v for v in modeling.dropout_state_variables(self.model).values()
        if id(v) not in known]
    self.trainable_variables = [v for v in self.model.trainable_variables
                                if keep(v)]

  @modules.function
  def __call__(self, inputs, training=False):
    """TF Hub's encoder call.

    Args:
      inputs: dict of int32 [B, T]: input_word_ids, input_mask,
        input_type_ids.
      training: Python bool; dropout on where True.

    Returns:
      dict: "pooled_output" and "default" float32 [B, H],
      "sequence_output" float32 [B, T, H], "encoder_outputs" list of L
      float32 [B, T, H].
    """
    outputs = self.model({ours: inputs[hub] for hub, ours in
                          HUB_INPUTS.items()}, training=training)
    pooled = tf.cast(outputs["pooled_output"], tf.float32)
    return {"pooled_output": pooled, "default": pooled,
            "sequence_output": tf.cast(outputs["sequence_output"],
                                       tf.float32),
            "encoder_outputs": [tf.cast(layer, tf.float32) for layer in
                                outputs["all_encoder_layers"]]}

  def _prepare(self, text_a, text_b=None):
    """The packed inputs, seq_length long; the state: their input_mask."""
    segments = [text_a] if text_b is None else [text_a, text_b]
    inputs = self.preprocessor(segments)
    return inputs, {"input_mask": inputs["input_mask"]}

  def _core(self, inputs):
    outputs = self.model(inputs, training=False)
    return {"pooled_output": tf.cast(outputs["pooled_output"], tf.float32),
            "sequence_output": tf.cast(outputs["sequence_output"],
                                       tf.float32),
            "encoder_outputs": tf.cast(
                tf.stack(outputs["all_encoder_layers"], axis=1), tf.float32)}

  def _finish(self, outputs, state):
    """A batch of raw text's encodings.

    Returns:
      dict: "pooled_output" float32 [B, H], "sequence_output" float32
      [B, T, H], "encoder_outputs" float32 [B, L, T, H] (every layer),
      "input_mask" int32 [B, T].
    """
    return dict(outputs, input_mask=state["input_mask"])

  def signatures(self):
    return {"serving_default": self.serve,
            "serve_pair": self.serve_pair}


class PreprocessorModule(tf.Module):
  """TF Hub's BERT preprocessing interface, so Hub-style code can use ours.

  Called on string [B] it returns the encoder inputs; .tokenize and
  .bert_pack_inputs are its two steps (for sentence pairs):

  ```python
  preprocessor = tf.saved_model.load(path)
  inputs = preprocessor(tf.constant(["hello world"]))
  a, b = preprocessor.tokenize(texts_a), preprocessor.tokenize(texts_b)
  inputs = preprocessor.bert_pack_inputs([a, b], tf.constant(128))
  ```
  Keys are Hub's: input_word_ids, input_mask, input_type_ids (int32
  [B, seq_length]).
  """

  def __init__(self, vocab_file, do_lower_case, seq_length):
    """Args: vocab_file: str; do_lower_case: bool; seq_length: int, the
    length of the default call's outputs."""
    super().__init__()
    tokens = tokenization.read_vocab_tokens(vocab_file)
    tokenization.check_vocab_tokens(tokens, vocab_file)
    self.tokenizer = tokenization.GraphTokenizer(tokens, do_lower_case)
    self.cls_id = tokens.index("[CLS]")
    self.sep_id = tokens.index("[SEP]")
    self.seq_length = seq_length
    pieces = tf.RaggedTensorSpec([None, None, None], tf.int32)
    length = tf.TensorSpec([], tf.int32, name="seq_length")
    for segments in ([pieces], [pieces, pieces]):
      self.bert_pack_inputs.get_concrete_function(segments, length)

  @modules.function(input_signature=[modules.string_spec("text")])
  def tokenize(self, text):
    """int32 RaggedTensor [B, (words), (wordpieces)] of string [B]."""
    return tf.cast(self.tokenizer.tokenize_word_ids(text), tf.int32)

  @modules.function
  def bert_pack_inputs(self, segments, seq_length):
    """Packs one or two tokenized segments (tokenize's outputs) as
    [CLS] A [SEP] B [SEP], truncated as the original, padded to
    seq_length."""
    packed = tokenization.pack_inputs(
        [segment.merge_dims(-2, -1) for segment in segments], seq_length,
        self.cls_id, self.sep_id)
    return {"input_word_ids": packed["input_ids"],
            "input_mask": packed["input_mask"],
            "input_type_ids": packed["segment_ids"]}

  @modules.function(input_signature=[modules.string_spec("text")])
  def __call__(self, text):
    """The encoder inputs of single sentences, seq_length long."""
    return self.bert_pack_inputs([self.tokenize(text)],
                                 tf.constant(self.seq_length, tf.int32))

  def signatures(self):
    return {"serving_default": self.__call__}
