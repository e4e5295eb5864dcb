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

if __name__ == "__main__":
  # TensorFlow would import Keras 3 as it starts (~1.2 s); Keras here is
  # tf_keras, so tf.keras may be too (docs/contributing.md, Keras).
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# pylint: disable=g-import-not-at-top

from absl import flags
from absl import logging
import numpy as np

from runner_lib.core.cli import flags as runner_flags
from runner_lib.core.cli import runner
from runner_lib.core.training import distribute
from runner_lib.ner import data
from runner_lib.ner import evaluation
from runner_lib.ner import features
from runner_lib.ner import options as ner_options

FLAGS = flags.FLAGS

flags.DEFINE_string("data_dir", None, "Required. The input data dir: "
                    "CoNLL-format train.txt, dev.txt and test.txt (or "
                    "CoNLL-2003's eng.train, eng.testa and eng.testb).")
flags.DEFINE_bool("document_context", False,
                  "Fill each sequence with the sentences around it in its "
                  "document, as much as fits (the paper's maximal document "
                  "context); only the sentence's own words are labelled.")
ner_options.define_model_flags()
runner_flags.define_model_flags()
runner_flags.define_finetuning_flags()
runner_flags.define_tpu_flags()


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
  outputs = runner.predict_on_records(trainer, task, path, count,
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
  task = ner_options.make_task(config)
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
  trainer = runner.finetuning_trainer(strategy, task,
                                      len(train_features))

  if FLAGS.do_train:
    train_file = os.path.join(FLAGS.output_dir, "train.tf_record")
    features.write_features(train_features, train_file)
    logging.info("  Num sentences = %d", len(sentences["train"]))
    runner.train_on_records(trainer, task, train_file,
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
      runner.write_eval_results(trainer, task.eval_results({
          "gold": [s.tags for s in sentences[split]], "predicted": tags,
          "eval_loss": loss}))

if __name__ == "__main__":
  flags.mark_flags_as_required(["data_dir", "vocab_file", "bert_config_file",
                                "output_dir"])
  runner.run(main)
