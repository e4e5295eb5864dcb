#!/usr/bin/env bash
# make demo: the embedded default, end to end on a laptop's CPU, nothing
# downloaded. Python's own documentation -> a WordPiece vocab ->
# pre-training records -> pre-training a tiny BERT -> fine-tuning it on
# SQuAD-format questions about the same documentation -> eval results.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=.venv/bin/python
OUT=${DEMO_OUTPUT:-demo/output}
export TF_CPP_MIN_LOG_LEVEL=2
mkdir -p "$OUT"

echo "== 1/5 corpus: standard-library docstrings =="
$PYTHON demo/make_corpus.py "$OUT/corpus.txt"

echo "== 2/5 vocab: learn_vocab.py =="
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

echo "== 3/5 records: create_pretraining_data.py =="
$PYTHON create_pretraining_data.py --input_file="$OUT/corpus.txt" \
  --output_file="$OUT/tf_examples.tfrecord" --vocab_file="$OUT/vocab.txt" \
  --do_lower_case=True --max_seq_length=64 --max_predictions_per_seq=10 \
  --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=3 2>&1 \
  | grep "Wrote" || true

echo "== 4/5 pre-training: run_pretraining.py =="
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

echo "== 5/5 fine-tuning: run_squad.py on 'What does NAME return?' =="
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
