"""run_ner.py's model flags, shared with export_saved_model.py --task=ner so
both build the same tagger."""

from absl import flags

from modeling import token_classifier
from runner_lib.core import errors
from runner_lib.ner import data
from runner_lib.ner import task as ner_task

FLAGS = flags.FLAGS


def define_model_flags():
  """--label_list, --feature_based and the feature-based tagger's flags."""
  flags.DEFINE_list("label_list", list(data.LABELS),
                    "The IOB2 tags, comma-separated, in the order of the "
                    "output layer's rows.")
  flags.DEFINE_bool("feature_based", False,
                    "Keep BERT frozen and train a 2-layer BiLSTM tagger on "
                    "its layers (the paper's feature-based approach).")
  flags.DEFINE_list("feature_layers", ["-1", "-2", "-3", "-4"],
                    "With --feature_based: the layers it reads, as "
                    "extract_features.py's --layers (-1 the last) or "
                    "`embeddings`, or `all` for every encoder layer.")
  flags.DEFINE_enum("feature_combination", "concat",
                    ["concat", "weighted_sum"],
                    "With --feature_based: concatenate the layers, or mix "
                    "them by learned weights.")
  flags.DEFINE_integer("lstm_units", 768, "With --feature_based: units per "
                       "direction of each LSTM layer.")


def make_task(config):
  """The NER task the flags ask for.

  Raises:
    errors.InputError: a bad --label_list or --feature_layers.
  """
  labels = FLAGS.label_list
  bad = [t for t in labels if t != "O" and t[:2] not in ("B-", "I-")]
  if "O" not in labels or bad or len(set(labels)) != len(labels):
    raise errors.InputError(
        "--label_list must hold O and B-/I- tags, each once; got %s." %
        ",".join(labels))
  if not FLAGS.feature_based:
    return ner_task.NerTask(config, FLAGS.max_seq_length, labels)
  try:
    if FLAGS.feature_layers == ["all"]:
      layers = list(range(config.num_hidden_layers))
    else:
      layers = [l if l == token_classifier.EMBEDDINGS else int(l)
                for l in FLAGS.feature_layers]
    token_classifier.resolve_layers(layers, config.num_hidden_layers)
  except ValueError as e:
    raise errors.InputError("--feature_layers=%s: %s" %
                            (",".join(FLAGS.feature_layers), e)) from None
  return ner_task.FeatureBasedNerTask(
      config, FLAGS.max_seq_length, labels, layers,
      FLAGS.feature_combination == "weighted_sum", FLAGS.lstm_units)
