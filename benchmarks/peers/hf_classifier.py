"""HuggingFace's PyTorch BertForSequenceClassification on the MRPC recipe.

The other side of bench_hf_classifier.py, run in .venv-hf (PyTorch and
transformers; `make .venv-hf`), never in the project's venv. One process,
timed from start to exit by the caller as run_classifier.py is: read the
GLUE TSVs, tokenize with BertTokenizerFast on the same vocab, load the same
initial encoder weights (an .npz of the original's variable names), train
one epoch as run_classifier.py does (batch 32, AdamW with weight decay 0.01
except LayerNorm and biases, 10% linear warm-up then linear decay, global
norm clipped at 1.0, dropout 0.1, the last partial batch dropped), then
evaluate dev at batch 8. --padding=longest pads each batch to its longest
sequence (DataCollatorWithPadding's default); --padding=max_length pads
to 128 as the original's records do. --bf16 runs the forward passes
(training and dev) under torch.autocast("cpu", dtype=torch.bfloat16),
PyTorch's own mixed precision: float32 weights and optimizer. Prints one
JSON line.

  .venv-hf/bin/python benchmarks/peers/hf_classifier.py --data_dir=DIR
      --vocab_file=VOCAB --config=CONFIG.json --weights=INIT.npz
      [--padding=longest] [--learning_rate=2e-5] [--bf16]
"""

import argparse
import csv
import json
import os
import random
import time

import numpy as np
import torch
import transformers

SEQ = 128
TRAIN_BATCH = 32
EVAL_BATCH = 8


def read_mrpc(path):
  """[(text_a, text_b, label)] of an MRPC TSV (header skipped)."""
  with open(path, encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quotechar=None))[1:]
  return [(row[3], row[4], int(row[0])) for row in rows]


def hf_state_dict(weights, num_layers):
  """torch tensors under HF's names from the original's variable names
  (dense kernels [in, out] become Linear weights [out, in])."""
  state = {}

  def dense(original, hf):
    state[hf + ".weight"] = weights[original + "/kernel"].T
    state[hf + ".bias"] = weights[original + "/bias"]

  def norm(original, hf):
    state[hf + ".weight"] = weights[original + "/gamma"]
    state[hf + ".bias"] = weights[original + "/beta"]

  for name in ("word", "position", "token_type"):
    state["bert.embeddings.%s_embeddings.weight" % name] = weights[
        "bert/embeddings/%s_embeddings" % name]
  norm("bert/embeddings/LayerNorm", "bert.embeddings.LayerNorm")
  for i in range(num_layers):
    ours, theirs = "bert/encoder/layer_%d/" % i, "bert.encoder.layer.%d." % i
    for part in ("query", "key", "value"):
      dense(ours + "attention/self/" + part, theirs + "attention.self." + part)
    dense(ours + "attention/output/dense", theirs + "attention.output.dense")
    norm(ours + "attention/output/LayerNorm",
         theirs + "attention.output.LayerNorm")
    dense(ours + "intermediate/dense", theirs + "intermediate.dense")
    dense(ours + "output/dense", theirs + "output.dense")
    norm(ours + "output/LayerNorm", theirs + "output.LayerNorm")
  dense("bert/pooler/dense", "bert.pooler.dense")
  return {name: torch.from_numpy(np.ascontiguousarray(value))
          for name, value in state.items()}


def batches(features, batch_size, collator, drop_last):
  """Collated batches of features in their order."""
  stop = (len(features) // batch_size * batch_size if drop_last
          else len(features))
  for start in range(0, stop, batch_size):
    yield collator(features[start:start + batch_size])


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--data_dir", required=True)
  parser.add_argument("--vocab_file", required=True)
  parser.add_argument("--config", required=True)
  parser.add_argument("--weights", required=True)
  parser.add_argument("--padding", choices=("longest", "max_length"),
                      default="longest")
  parser.add_argument("--learning_rate", type=float, default=2e-5)
  parser.add_argument("--seed", type=int, default=12345)
  parser.add_argument("--bf16", action="store_true")
  args = parser.parse_args()
  started = time.perf_counter()
  torch.manual_seed(args.seed)
  random.seed(args.seed)
  torch.set_num_threads(os.cpu_count())

  tokenizer = transformers.BertTokenizerFast(args.vocab_file,
                                             do_lower_case=True)

  def features(rows):
    encoded = tokenizer([a for a, _, _ in rows], [b for _, b, _ in rows],
                        truncation=True, max_length=SEQ)
    return [dict({key: encoded[key][i] for key in encoded},
                 labels=rows[i][2]) for i in range(len(rows))]

  train = features(read_mrpc(os.path.join(args.data_dir, "train.tsv")))
  dev = features(read_mrpc(os.path.join(args.data_dir, "dev.tsv")))
  collator = transformers.DataCollatorWithPadding(
      tokenizer, padding=args.padding, max_length=SEQ, return_tensors="pt")

  with open(args.config, encoding="utf-8") as f:
    config = json.load(f)
  model = transformers.BertForSequenceClassification(transformers.BertConfig(
      vocab_size=config["vocab_size"], hidden_size=config["hidden_size"],
      num_hidden_layers=config["num_hidden_layers"],
      num_attention_heads=config["num_attention_heads"],
      intermediate_size=config["intermediate_size"],
      # The original's tanh-approximated GELU is HuggingFace's gelu_new;
      # the erf form (convert_checkpoint.py's gelu_exact) its gelu.
      hidden_act={"gelu": "gelu_new", "gelu_exact": "gelu"}[
          config["hidden_act"]],
      hidden_dropout_prob=config["hidden_dropout_prob"],
      attention_probs_dropout_prob=config["attention_probs_dropout_prob"],
      max_position_embeddings=config["max_position_embeddings"],
      type_vocab_size=config["type_vocab_size"],
      initializer_range=config["initializer_range"],
      layer_norm_eps=1e-12, num_labels=2))
  weights = dict(np.load(args.weights))
  missing = model.load_state_dict(hf_state_dict(
      weights, config["num_hidden_layers"]), strict=False).missing_keys
  assert set(missing) <= {"classifier.weight", "classifier.bias",
                          "bert.embeddings.position_ids"}, missing

  steps = len(train) // TRAIN_BATCH
  decay = [p for n, p in model.named_parameters()
           if not ("LayerNorm" in n or n.endswith("bias"))]
  no_decay = [p for n, p in model.named_parameters()
              if "LayerNorm" in n or n.endswith("bias")]
  optimizer = torch.optim.AdamW(
      [{"params": decay, "weight_decay": 0.01},
       {"params": no_decay, "weight_decay": 0.0}],
      lr=args.learning_rate, eps=1e-6)
  scheduler = transformers.get_linear_schedule_with_warmup(
      optimizer, int(0.1 * steps), steps)
  order = list(range(len(train)))
  random.shuffle(order)
  autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16,
                                    enabled=args.bf16)
  model.train()
  for batch in batches([train[i] for i in order], TRAIN_BATCH, collator,
                       drop_last=True):
    with autocast():
      loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()

  model.eval()
  correct = 0
  with torch.inference_mode(), autocast():
    for batch in batches(dev, EVAL_BATCH, collator, drop_last=False):
      logits = model(**{k: v for k, v in batch.items() if k != "labels"}
                     ).logits
      correct += int((logits.argmax(-1) == batch["labels"]).sum())
  print(json.dumps({"eval_accuracy": correct / len(dev), "train_steps": steps,
                    "seconds_in_process": time.perf_counter() - started,
                    "torch": torch.__version__,
                    "transformers": transformers.__version__,
                    "last_loss": float(loss)}))


if __name__ == "__main__":
  main()
