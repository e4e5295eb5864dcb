"""Serving modules: tf.Modules whose signatures take raw strings.

Each holds a BertPreprocessor (FullTokenizer's output and the original
runners' truncation and [CLS] A [SEP] B [SEP] layout, in TensorFlow ops),
the task's Keras model and the post-processing, so a loaded SavedModel
needs TensorFlow and TensorFlow Text only.
"""

import functools

import tensorflow as tf

from modeling import layers
from runner_lib.classifier import windows as windows_lib
from runner_lib.core.inputs import input_pipeline
import tokenization


# The signatures' tf.function: AutoGraph off, as none has tensor-dependent
# Python control flow, so an export does not spend seconds converting the
# model's code (the graph is the same).
function = functools.partial(tf.function, autograph=False)


def string_spec(name, shape=(None,)):
  """A string [batch] (or shape) input signature entry named name."""
  return tf.TensorSpec(list(shape), tf.string, name=name)


# Trimmed batches are cut to a multiple of this many positions.
TRIM_MULTIPLE = 8


def trim_padding(inputs):
  """input_pipeline.trim_batch on every input, to a multiple of
  TRIM_MULTIPLE: a batch of short sentences costs its own length, with the
  outputs of the full-length batch (attention masks the padding).

  Args:
    inputs: dict of int32 [..., T]: input_ids, input_mask, segment_ids.

  Returns:
    dict of int32 [..., T'], T' <= T.
  """
  return input_pipeline.trim_batch(inputs, tuple(inputs), TRIM_MULTIPLE)


class _Untracked(object):
  """Attributes a tf.Module does not save (not a Trackable)."""

  def __init__(self, **attributes):
    self.__dict__.update(attributes)


class HoldsModel(object):
  """A Keras model and its BertPreprocessor, held untracked: saving a
  tracked Keras layer traces every layer's call for Keras' own metadata,
  several times the export time, which serving never uses. Subclasses
  track the model's state directly."""

  def _hold(self, model, vocab_file, do_lower_case, seq_length):
    self._keras = _Untracked(
        model=model,
        preprocessor=tokenization.BertPreprocessor(vocab_file, do_lower_case,
                                                   seq_length))
    self.tokenizer = self.preprocessor.tokenizer

  @property
  def model(self):
    return self._keras.model

  @property
  def preprocessor(self):
    return self._keras.preprocessor

  # serving_default in three stages, so that another runtime can compute
  # the model between the first and the last (openvino_model.py):
  # _prepare(*texts) -> (inputs, state), the model's inputs (dict of int32
  # [B, T], [B, C, T] for SWAG) and whatever _finish needs; _core(inputs)
  # -> dict of float32 tensors, the model's outputs; _finish(outputs,
  # state) -> the signature's outputs. Each subclass defines the three.

  def _serve(self, *texts):
    """serving_default: _prepare, _core and _finish in one graph."""
    inputs, state = self._prepare(*texts)
    return self._finish(self._core(inputs), state)

  def add_stages(self, computes=None):
    """Saves serving_default's first and last stages with the module:
    prepare(*texts) and finish(outputs, state), as tf.functions.

    Args:
      computes: the module of the same task whose _core the returned
        function is (default self), e.g. a float32 twin of a bfloat16
        module for a runtime that converts no bfloat16 cast.

    Returns:
      the core's concrete function (inputs: a dict of int32 [None, ...]
      specs named as the model's inputs), not saved with the module.
    """
    serve = self.signatures()["serving_default"]
    self.prepare = function(self._prepare,
                            input_signature=serve.input_signature)
    inputs, state = tf.nest.map_structure(
        tf.type_spec_from_value,
        self.prepare.get_concrete_function().structured_outputs)
    inputs = {name: tf.TensorSpec(spec.shape, spec.dtype, name=name)
              for name, spec in inputs.items()}
    # Not saved: the SavedModel's signatures compute the model already.
    core = function((computes or self)._core,
                    input_signature=[inputs]).get_concrete_function()
    outputs = tf.nest.map_structure(tf.type_spec_from_value,
                                    core.structured_outputs)
    self.finish = function(self._finish, input_signature=[outputs, state])
    return core

  def store_kernels(self, dtype):
    """Stores every layers.Dense kernel whose matmul computes in dtype as a
    dtype variable, so that a served call casts no weight (the float32
    copies leave the module).

    Args:
      dtype: tf.bfloat16, the options' matmul_dtype.
    """
    replaced = set()
    for layer in self.model.submodules:
      if (isinstance(layer, layers.Dense) and layer.matmul_dtype == dtype
          and layer.kernel.dtype != dtype):
        replaced.add(id(layer.kernel))
        # The matmul casts its operand to dtype: the same value.
        layer.kernel = tf.Variable(tf.cast(layer.kernel, dtype),
                                   trainable=False,
                                   name=layer.kernel.name.split(":")[0])
    self._track(lambda v: id(v) not in replaced)

  def _track(self, keep):
    """Tracks the model's variables for which keep(variable) is true."""
    raise NotImplementedError


class ServingModule(HoldsModel, tf.Module):
  """A task model and its preprocessing; subclasses define signatures()."""

  def __init__(self, model, vocab_file, do_lower_case, seq_length):
    """Args:
      model: the task's Keras model, weights loaded.
      vocab_file: str.
      do_lower_case: bool.
      seq_length: int, the packed length (the runner's max_seq_length).
    """
    super().__init__()
    self._hold(model, vocab_file, do_lower_case, seq_length)
    self._track(lambda v: True)

  def _track(self, keep):
    self.model_variables = [v for v in self.model.variables if keep(v)]

  def signatures(self):
    """dict signature name -> tf.function with an input signature, for
    tf.saved_model.save.

    The functions, not their concrete functions: save traces a function
    again inside its save context unless that trace was made there, so a
    concrete function made before save costs a second trace (about 4 s of
    an export's 8 on a small model)."""
    raise NotImplementedError


class ClassifierModule(ServingModule):
  """run_classifier's model: text_a (and text_b for pair tasks) in;
  probabilities, logits and the label out (a score for regression). With
  windows (--long_text=windows), a long text_a is cut into windows as
  run_classifier cuts it and each example's logits are the mean of its
  windows' (classifier/windows.py): still one result per example."""

  def __init__(self, model, vocab_file, do_lower_case, seq_length,
               label_list, pair, windows=None):
    """Args: as ServingModule, and label_list: list of str (None for
    regression); pair: bool, whether the task takes text_b; windows: a
    classifier.windows.Windows, or None to truncate as the original."""
    super().__init__(model, vocab_file, do_lower_case, seq_length)
    self.labels = tf.constant(label_list) if label_list else None
    self.pair = pair
    self.windows = windows
    inputs = [string_spec("text_a")] + (
        [string_spec("text_b")] if pair else [])
    self.serve = function(self._serve, input_signature=inputs)
    self.serve_examples = function(
        self._serve_examples, input_signature=[string_spec("examples")])

  def _prepare(self, text_a, text_b=None):
    """text_a: string [B]; text_b: string [B], pair tasks only. Returns
    the trimmed model inputs (int32 [B, T], or with windows [B, W, T] and
    window_mask [B, W]) and no state."""
    segments = [text_a] if text_b is None else [text_a, text_b]
    if self.windows is None:
      return trim_padding(self.preprocessor(segments)), {}
    ids = [self.tokenizer.tokenize_ids(segment) for segment in segments]
    inputs, window_mask = windows_lib.graph_window_inputs(
        ids[0], ids[1] if len(ids) > 1 else None,
        self.preprocessor.seq_length, self.windows, self.preprocessor.cls_id,
        self.preprocessor.sep_id)
    return dict(trim_padding(inputs), window_mask=window_mask), {}

  def _core(self, inputs):
    return {"logits": tf.cast(self.model(inputs, training=False),
                              tf.float32)}

  def _finish(self, outputs, state):
    """The batch's classes.

    Returns:
      dict: "probabilities" float32 [B, num_labels], "logits" float32 [B,
      num_labels], "label" string [B]; for regression "score" float32 [B].
    """
    del state  # None needed.
    logits = outputs["logits"]
    if self.labels is None:
      return {"score": logits[:, 0]}
    return {"probabilities": tf.nn.softmax(logits, axis=-1),
            "logits": logits,
            "label": tf.gather(self.labels, tf.argmax(logits, axis=-1))}

  def _serve_examples(self, examples):
    """Like serve, from serialized tf.Examples [B] with bytes features
    text_a (and text_b)."""
    names = ["text_a", "text_b"] if self.pair else ["text_a"]
    parsed = tf.io.parse_example(
        examples, {name: tf.io.FixedLenFeature([], tf.string)
                   for name in names})
    return self._serve(*[parsed[name] for name in names])

  def signatures(self):
    return {"serving_default": self.serve,
            "serve_examples": self.serve_examples}


# TF Hub's names of the encoder inputs -> BertModel's.
class SwagModule(ServingModule):
  """run_swag's model: a context, the start of the next sentence and four
  endings in; the choice probabilities and the chosen ending out."""

  def __init__(self, model, vocab_file, do_lower_case, seq_length,
               num_choices=4):
    super().__init__(model, vocab_file, do_lower_case, seq_length)
    self.num_choices = num_choices
    self.serve = function(self._serve, input_signature=[
        string_spec("context"), string_spec("start"),
        string_spec("endings", (None, num_choices))])

  def _prepare(self, context, start, endings):
    """The model's inputs, int32 [B, C, T], and no state.

    Args:
      context: string [B], sent1.
      start: string [B], sent2.
      endings: string [B, C].
    """
    # [B*C] pairs: sent1, and sent2 + " " + ending, as run_swag packs them.
    contexts = tf.reshape(tf.repeat(context, self.num_choices), [-1])
    seconds = tf.reshape(tf.strings.join(
        [tf.repeat(start[:, tf.newaxis], self.num_choices, axis=1), endings],
        separator=" "), [-1])
    inputs = self.preprocessor([contexts, seconds])
    length = tf.shape(inputs["input_ids"])[-1]
    inputs = trim_padding({
        key: tf.reshape(value, [-1, self.num_choices, length])
        for key, value in inputs.items()})  # [B, C, T]
    return inputs, {}

  def _core(self, inputs):
    return {"logits": tf.cast(self.model(inputs, training=False),
                              tf.float32)}

  def _finish(self, outputs, state):
    """Returns dict: "probabilities" float32 [B, C], "label" int32 [B]."""
    del state  # None needed.
    logits = outputs["logits"]
    return {"probabilities": tf.nn.softmax(logits, axis=-1),
            "label": tf.argmax(logits, axis=-1, output_type=tf.int32)}

  def signatures(self):
    return {"serving_default": self.serve}


def _greedy_chunks(counts, max_pieces):
  """run_ner's split of long sentences, in the graph: each word's run.

  Words go into runs of at most max_pieces pieces, a new run starting where
  the next word would not fit (features.chunk_words).

  Args:
    counts: int64 RaggedTensor [B, (words)], pieces per word.
    max_pieces: int.

  Returns:
    int64 RaggedTensor [B, (words)]: each word's run within its sentence.
  """
  padded = counts.to_tensor(0)  # [B, W]

  def step(state, count):
    length, run = state
    new_run = (length > 0) & (length + count > max_pieces) & (count > 0)
    length = tf.where(new_run, tf.zeros_like(length), length) + count
    return length, run + tf.cast(new_run, tf.int64)

  zeros = tf.zeros_like(padded[:, 0])
  _, runs = tf.scan(step, tf.transpose(padded), (zeros, zeros))  # [W, B]
  return tf.RaggedTensor.from_tensor(tf.transpose(runs), counts.row_lengths())


class NerModule(ServingModule):
  """run_ner's model: sentences of space-separated words in; each word's
  tag (from its first word-piece) out. A sentence longer than one sequence
  is cut at words into several, as run_ner.py cuts it, so every word is
  tagged."""

  def __init__(self, model, vocab_file, do_lower_case, seq_length,
               label_list):
    """Args: as ServingModule, and label_list: list of str, the tags in the
    model's order."""
    super().__init__(model, vocab_file, do_lower_case, seq_length)
    self.labels = tf.constant(label_list)
    self.unk_id = tokenization.read_vocab_tokens(vocab_file).index("[UNK]")
    self.serve = function(self._serve, input_signature=[string_spec("text")])

  def _prepare(self, text):
    """The model's inputs, int32 [R, T] (R >= B: a sentence longer than
    a sequence takes several), and the state: "words", string RaggedTensor
    [B, (W)]; each word's sequence "rows" and first piece's "positions"
    in it, int64 [sum W].

    Args:
      text: string [B], words separated by whitespace.
    """
    seq_length = self.preprocessor.seq_length
    max_pieces = seq_length - 2
    words = tf.strings.split(text)  # [B, (W)]
    pieces = self.preprocessor.tokenizer.tokenize_ids(words.flat_values)
    # A word with no pieces (only control characters) is [UNK], as run_ner;
    # one longer than a sequence keeps its first max_pieces (its first,
    # labelled, piece among them).
    unknown = tf.RaggedTensor.from_tensor(
        tf.fill([tf.shape(words.flat_values)[0], 1],
                tf.constant(self.unk_id, tf.int64)))
    counts = tf.minimum(tf.maximum(pieces.row_lengths(), 1), max_pieces)
    pieces = tf.concat([pieces, unknown], axis=1)
    pieces = tf.ragged.boolean_mask(
        pieces, tf.ragged.range(pieces.row_lengths()) < counts[:, tf.newaxis])
    # Every word's sequence: its sentence's runs, numbered over the batch.
    runs = _greedy_chunks(words.with_flat_values(counts), max_pieces)
    runs_per_sentence = tf.reduce_max(runs, axis=1) + 1  # 0 words: 0 runs
    first_run = tf.math.cumsum(tf.maximum(runs_per_sentence, 0),
                               exclusive=True)
    rows = tf.gather(first_run, words.value_rowids()) + runs.flat_values
    num_rows = tf.reduce_sum(tf.maximum(runs_per_sentence, 0))
    totals = tf.math.unsorted_segment_sum(counts, rows, num_rows)  # [R]
    # Each word's first piece in its sequence, after [CLS].
    positions = 1 + tf.math.cumsum(counts, exclusive=True) - tf.gather(
        tf.math.cumsum(totals, exclusive=True), rows)
    sequence_pieces = tf.RaggedTensor.from_row_lengths(pieces.flat_values,
                                                       totals)
    ids = tf.concat([
        tf.fill([num_rows, 1], tf.constant(self.preprocessor.cls_id,
                                           tf.int64)),
        sequence_pieces,
        tf.fill([num_rows, 1], tf.constant(self.preprocessor.sep_id,
                                           tf.int64))], axis=1)
    input_ids = ids.to_tensor(0, shape=[None, seq_length])
    input_mask = tf.ones_like(ids).to_tensor(0, shape=[None, seq_length])
    inputs = trim_padding({
        "input_ids": tf.cast(input_ids, tf.int32),
        "input_mask": tf.cast(input_mask, tf.int32),
        "segment_ids": tf.zeros_like(input_ids, tf.int32)})
    return inputs, {"words": words, "rows": rows, "positions": positions}

  def _core(self, inputs):
    return {"logits": tf.cast(self.model(inputs, training=False),
                              tf.float32)}

  def _finish(self, outputs, state):
    """Returns dict: "tags" and "words", string [B, max_words] ("" past
    each sentence's end)."""
    words = state["words"]
    predicted = tf.argmax(outputs["logits"], axis=-1)  # [R, T]
    tags = tf.gather(self.labels, tf.gather_nd(
        predicted, tf.stack([state["rows"], state["positions"]], axis=1)))
    return {"tags": words.with_flat_values(tags).to_tensor(""),
            "words": words.to_tensor("")}

  def signatures(self):
    return {"serving_default": self.serve}
