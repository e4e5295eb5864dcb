"""BERT named-entity recognition on CoNLL-2003, fine-tuned or feature-based.

The original release had no NER runner; this one takes run_classifier.py's
flags (without --task_name) and adds the paper's two set-ups:

  python run_ner.py --do_train=true --do_eval=true --do_predict=true \
    --data_dir=$CONLL_DIR --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --do_lower_case=false \
    --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5 \
    --num_train_epochs=3.0 --output_dir=/tmp/ner_output/

--document_context fills each sequence with the sentence's neighbours in
its document (the paper's "maximal document context"); --feature_based
freezes BERT and trains a 2-layer BiLSTM on its layers (--feature_layers,
--feature_combination; by default the last four, concatenated).
"""

import os

from absl import flags
from absl import logging
import numpy as np

from modeling import token_classifier
from runner_lib.core import distribute
from runner_lib.core import errors
from runner_lib.core import flags as runner_flags
from runner_lib.ner import data
from runner_lib.ner import evaluation
from runner_lib.ner import features
from runner_lib.ner import task as ner_task

FLAGS = flags.FLAGS

flags.DEFINE_string("data_dir", None, "Required. The input data dir: "
                    "CoNLL-format train.txt, dev.txt and test.txt (or "
                    "CoNLL-2003's eng.train, eng.testa and eng.testb).")
flags.DEFINE_list("label_list", list(data.LABELS),
                  "The IOB2 tags, comma-separated, in the order of the "
                  "output layer's rows.")
flags.DEFINE_bool("document_context", False,
                  "Fill each sequence with the sentences around it in its "
                  "document, as much as fits (the paper's maximal document "
                  "context); only the sentence's own words are labelled.")
flags.DEFINE_bool("feature_based", False,
                  "Keep BERT frozen and train a 2-layer BiLSTM tagger on its "
                  "layers (the paper's feature-based approach).")
flags.DEFINE_list("feature_layers", ["-1", "-2", "-3", "-4"],
                  "With --feature_based: the layers it reads, as "
                  "extract_features.py's --layers (-1 the last) or "
                  "`embeddings`, or `all` for every encoder layer.")
flags.DEFINE_enum("feature_combination", "concat", ["concat", "weighted_sum"],
                  "With --feature_based: concatenate the layers, or mix them "
                  "by learned weights.")
flags.DEFINE_integer("lstm_units", 768, "With --feature_based: units per "
                     "direction of each LSTM layer.")
runner_flags.define_model_flags()
runner_flags.define_finetuning_flags()
runner_flags.define_tpu_flags()


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


def to_features(sentences, task, tokenizer):
  return features.convert_sentences(sentences, task.label_list,
                                    task.max_seq_length, tokenizer,
                                    FLAGS.document_context)


def predict_tags(trainer, task, sentences, tokenizer, path, batch_size,
                 mode):
  """Writes sentences to path as records and tags them.

  Returns:
    (tags, eval_loss): list (per sentence) of lists of predicted tags, and
    the mean loss over the labelled pieces.
  """
  logging.info("  Num sentences = %d", len(sentences))
  sequence_features, spans = to_features(sentences, task, tokenizer)
  count = features.write_features(sequence_features, path)
  outputs = runner_flags.predict_on_records(trainer, task, path, count,
                                            batch_size, mode)
  words = features.word_predictions(sentences, spans, outputs["predictions"])
  tags = [[task.label_list[i] for i in sentence] for sentence in words]
  loss = float(np.sum(outputs["loss_sum"]) /
               max(np.sum(outputs["label_count"]), 1.0))
  return tags, loss


def main(_):
  strategy = distribute.get_strategy(**runner_flags.tpu_flag_values())
  per_replica = runner_flags.check_finetuning_flags(strategy)
  config, tokenizer = runner_flags.config_and_tokenizer()
  task = make_task(config)
  # Read every input before the first output, so that bad data stops the
  # run before it writes anything.
  splits = [("train", FLAGS.do_train), ("dev", FLAGS.do_eval),
            ("test", FLAGS.do_predict)]
  sentences = {split: data.get_examples(FLAGS.data_dir, split,
                                        task.label_list)
               for split, wanted in splits if wanted}
  train_features = []
  if FLAGS.do_train:
    train_features, _ = to_features(sentences["train"], task, tokenizer)
  trainer = runner_flags.finetuning_trainer(strategy, task,
                                            len(train_features))

  if FLAGS.do_train:
    train_file = os.path.join(FLAGS.output_dir, "train.tf_record")
    features.write_features(train_features, train_file)
    logging.info("  Num sentences = %d", len(sentences["train"]))
    runner_flags.train_on_records(trainer, task, train_file,
                                  len(train_features), per_replica)

  for split, record_name, batch_size, output_name in (
      ("dev", "eval.tf_record", FLAGS.eval_batch_size,
       "eval_predictions.txt"),
      ("test", "predict.tf_record", FLAGS.predict_batch_size,
       "test_predictions.txt")):
    if split not in sentences:
      continue
    tags, loss = predict_tags(
        trainer, task, sentences[split], tokenizer,
        os.path.join(FLAGS.output_dir, record_name), batch_size,
        "evaluation" if split == "dev" else "prediction")
    if trainer.chief:
      evaluation.write_conll(os.path.join(FLAGS.output_dir, output_name),
                             sentences[split], tags)
    if split == "dev":
      results = evaluation.eval_results(
          [s.tags for s in sentences[split]], tags, task.label_list)
      results["eval_loss"] = loss
      runner_flags.write_eval_results(trainer, results)

if __name__ == "__main__":
  flags.mark_flags_as_required(["data_dir", "vocab_file", "bert_config_file",
                                "output_dir"])
  errors.run(main)
