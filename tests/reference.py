"""Independent references for the tests: a NumPy BERT, checkpoint writers and
the original's extract_features JSON formatting.

Everything here is written from the 2018 modeling.py's math, in float64,
from weights keyed by the original checkpoint names, and shares no code with
modeling/.
"""

import collections
import json
import math
import os

import numpy as np
import tensorflow as tf
import tf_keras

from official.modeling import tf_utils
from official.nlp.modeling import networks


def np_gelu(x):
  return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) *
                                  (x + 0.044715 * x ** 3)))


def np_gelu_exact(x):
  erf = np.vectorize(math.erf, otypes=[np.float64])
  return 0.5 * x * (1.0 + erf(np.asarray(x, np.float64) / math.sqrt(2.0)))


NP_ACTIVATIONS = {"gelu": np_gelu, "gelu_exact": np_gelu_exact, "relu": lambda x: np.maximum(x, 0.0),
                  "tanh": np.tanh, "linear": lambda x: x}


def np_layer_norm(x, gamma, beta, epsilon=1e-12):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + epsilon) * gamma + beta


def np_softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def np_attention(x, mask, w, prefix, num_heads):
  """Self-attention of the original, [B, T, H] -> [B, T, H]."""
  b, t, h = x.shape
  d = h // num_heads

  def proj(name):
    y = x @ w[prefix + name + "/kernel"] + w[prefix + name + "/bias"]
    return y.reshape(b, t, num_heads, d).transpose(0, 2, 1, 3)

  q, k, v = proj("query"), proj("key"), proj("value")
  scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)
  # The original's 3D mask: [B, F, T] with identical rows, then [B, 1, F, T].
  mask3d = np.ones([b, t, 1]) * mask[:, None, :]
  scores = scores + (1.0 - mask3d[:, None]) * -10000.0
  context = np_softmax(scores) @ v
  return context.transpose(0, 2, 1, 3).reshape(b, t, h)


def np_bert(w, config, input_ids, input_mask, segment_ids):
  """The original BertModel forward pass (inference), in float64.

  Args:
    w: dict original name -> array.
    config: BertConfig-like object with the JSON fields.
    input_ids, input_mask, segment_ids: int arrays [B, T].

  Returns:
    dict with sequence_output, pooled_output, all_encoder_layers,
    embedding_output.
  """
  w = {k: np.asarray(v, np.float64) for k, v in w.items()}
  act = NP_ACTIVATIONS[config.hidden_act]
  t = input_ids.shape[1]
  x = (w["bert/embeddings/word_embeddings"][input_ids] +
       np.eye(config.type_vocab_size)[segment_ids] @
       w["bert/embeddings/token_type_embeddings"] +
       w["bert/embeddings/position_embeddings"][:t][None])
  x = np_layer_norm(x, w["bert/embeddings/LayerNorm/gamma"],
                    w["bert/embeddings/LayerNorm/beta"])
  embedding_output = x
  mask = np.asarray(input_mask, np.float64)
  layers = []
  for n in range(config.num_hidden_layers):
    p = "bert/encoder/layer_%d/" % n
    a = np_attention(x, mask, w, p + "attention/self/",
                     config.num_attention_heads)
    a = a @ w[p + "attention/output/dense/kernel"] + w[
        p + "attention/output/dense/bias"]
    a = np_layer_norm(a + x, w[p + "attention/output/LayerNorm/gamma"],
                      w[p + "attention/output/LayerNorm/beta"])
    i = act(a @ w[p + "intermediate/dense/kernel"] +
            w[p + "intermediate/dense/bias"])
    o = i @ w[p + "output/dense/kernel"] + w[p + "output/dense/bias"]
    x = np_layer_norm(o + a, w[p + "output/LayerNorm/gamma"],
                      w[p + "output/LayerNorm/beta"])
    layers.append(x)
  pooled = np.tanh(x[:, 0] @ w["bert/pooler/dense/kernel"] +
                   w["bert/pooler/dense/bias"])
  return {"sequence_output": x, "pooled_output": pooled,
          "all_encoder_layers": layers, "embedding_output": embedding_output}


def np_masked_lm(w, config, sequence_output, positions):
  """cls/predictions logits [B, P, V] from the original's math."""
  w = {k: np.asarray(v, np.float64) for k, v in w.items()}
  gathered = np.take_along_axis(sequence_output, positions[:, :, None], 1)
  h = NP_ACTIVATIONS[config.hidden_act](
      gathered @ w["cls/predictions/transform/dense/kernel"] +
      w["cls/predictions/transform/dense/bias"])
  h = np_layer_norm(h, w["cls/predictions/transform/LayerNorm/gamma"],
                    w["cls/predictions/transform/LayerNorm/beta"])
  return (h @ w["bert/embeddings/word_embeddings"].T +
          w["cls/predictions/output_bias"])


def np_next_sentence(w, pooled_output):
  """cls/seq_relationship logits [B, 2]."""
  return (pooled_output @ np.asarray(
      w["cls/seq_relationship/output_weights"], np.float64).T +
          w["cls/seq_relationship/output_bias"])


def original_json_line(feature, layer_indexes, layer_outputs):
  """The original's formatting, float by float: json.dumps of round(x, 6)."""
  return json.dumps(collections.OrderedDict([
      ("linex_index", feature.unique_id),
      ("features", [collections.OrderedDict([
          ("token", token),
          ("layers", [collections.OrderedDict([
              ("index", index),
              ("values", [round(x, 6) for x in output[i].tolist()])])
                      for index, output in zip(layer_indexes, layer_outputs)])
      ]) for i, token in enumerate(feature.tokens)])])) + "\n"


def original_shapes(config, heads=True):
  """Name -> shape of every variable of an original pre-training checkpoint."""
  h, i = config.hidden_size, config.intermediate_size
  shapes = {
      "bert/embeddings/word_embeddings": [config.vocab_size, h],
      "bert/embeddings/token_type_embeddings": [config.type_vocab_size, h],
      "bert/embeddings/position_embeddings": [config.max_position_embeddings,
                                              h],
      "bert/embeddings/LayerNorm/gamma": [h],
      "bert/embeddings/LayerNorm/beta": [h],
      "bert/pooler/dense/kernel": [h, h],
      "bert/pooler/dense/bias": [h],
  }
  for n in range(config.num_hidden_layers):
    p = "bert/encoder/layer_%d/" % n
    for name in ("query", "key", "value"):
      shapes[p + "attention/self/%s/kernel" % name] = [h, h]
      shapes[p + "attention/self/%s/bias" % name] = [h]
    shapes[p + "attention/output/dense/kernel"] = [h, h]
    shapes[p + "attention/output/dense/bias"] = [h]
    shapes[p + "intermediate/dense/kernel"] = [h, i]
    shapes[p + "intermediate/dense/bias"] = [i]
    shapes[p + "output/dense/kernel"] = [i, h]
    shapes[p + "output/dense/bias"] = [h]
    for scope in ("attention/output/", "output/"):
      shapes[p + scope + "LayerNorm/gamma"] = [h]
      shapes[p + scope + "LayerNorm/beta"] = [h]
  if heads:
    shapes.update({
        "cls/predictions/transform/dense/kernel": [h, h],
        "cls/predictions/transform/dense/bias": [h],
        "cls/predictions/transform/LayerNorm/gamma": [h],
        "cls/predictions/transform/LayerNorm/beta": [h],
        "cls/predictions/output_bias": [config.vocab_size],
        "cls/seq_relationship/output_weights": [2, h],
        "cls/seq_relationship/output_bias": [2],
    })
  return shapes


def random_weights(config, seed=0, heads=True, scale=0.2):
  """Random float32 weights for every original name.

  Larger than BERT's init (scale 0.2, LayerNorm gamma around 1) so that a
  wrong op shows up in the outputs rather than vanishing in the noise.
  """
  rng = np.random.RandomState(seed)
  weights = {}
  for name, shape in sorted(original_shapes(config, heads).items()):
    if name.endswith("gamma"):
      value = 1.0 + 0.1 * rng.randn(*shape)
    else:
      value = scale * rng.randn(*shape)
    weights[name] = value.astype(np.float32)
  return weights


# The fine-tuning runners' output layers: variable prefix -> rows.
TASK_HEADS = {"output": 2, "cls/swag/output": 1, "cls/ner/output": 9,
              "cls/squad/output": 2}


def task_weights(config, seed=6):
  """random_weights with every task runner's output layer (TASK_HEADS:
  the classifier's 2 labels, SWAG's score, NER's 9 tags, SQuAD's start and
  end), as a fine-tuned checkpoint of each task holds it."""
  weights = random_weights(config, seed=seed)
  rng = np.random.RandomState(seed + 1)
  for name, rows in TASK_HEADS.items():
    weights[name + "_weights"] = rng.randn(
        rows, config.hidden_size).astype(np.float32)
    weights[name + "_bias"] = (0.1 * rng.randn(rows)).astype(np.float32)
  return weights


def write_task_checkpoint(directory, config):
  """A fine-tuned-looking model folder for the export and runner tests:
  directory/bert_config.json and the checkpoint directory/finetuned/
  model.ckpt-9 of task_weights(config).

  Returns:
    (config file path, checkpoint prefix, the weights dict).
  """
  config_file = os.path.join(str(directory), "bert_config.json")
  with open(config_file, "w") as f:
    f.write(config.to_json_string())
  weights = task_weights(config)
  prefix = write_tf1_checkpoint(
      os.path.join(str(directory), "finetuned", "model.ckpt-9"), weights)
  return config_file, prefix, weights


def write_tf1_checkpoint(prefix, weights):
  """Writes weights as a TF1 checkpoint with a graph-mode tf.compat.v1 Saver.

  The way the original scripts wrote theirs; independent of modeling/.
  """
  with tf.Graph().as_default():
    variables = {name: tf.compat.v1.Variable(value, name=name)
                 for name, value in weights.items()}
    variables["global_step"] = tf.compat.v1.Variable(
        np.int64(7), name="global_step")
    saver = tf.compat.v1.train.Saver(variables)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      saver.save(session, prefix, write_meta_graph=False,
                 write_state=False)
  return prefix


def model_garden_activation(hidden_act):
  """Model Garden's activation for a BertConfig's hidden_act: its "gelu"
  is the original's tanh form; our "gelu_exact" (HuggingFace's "gelu",
  all-MiniLM-L6-v2's) is the erf form, which it has no name for."""
  if hidden_act == "gelu_exact":
    return lambda x: tf.nn.gelu(x, approximate=False)
  return tf_utils.get_activation(hidden_act)


def model_garden_encoder(config):
  """tf-models-official's BertEncoder built from a BertConfig."""
  return networks.BertEncoder(
      vocab_size=config.vocab_size,
      hidden_size=config.hidden_size,
      num_layers=config.num_hidden_layers,
      num_attention_heads=config.num_attention_heads,
      intermediate_size=config.intermediate_size,
      activation=model_garden_activation(config.hidden_act),
      dropout_rate=config.hidden_dropout_prob,
      attention_dropout_rate=config.attention_probs_dropout_prob,
      max_sequence_length=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size,
      initializer=tf_keras.initializers.TruncatedNormal(
          stddev=config.initializer_range),
      dict_outputs=True)
