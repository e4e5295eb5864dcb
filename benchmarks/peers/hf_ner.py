"""HuggingFace's PyTorch BertForTokenClassification on the NER recipe.

The peer side of quality.py's NER runs, run in .venv-hf (PyTorch and
transformers; `make .venv-hf`), never in the project's venv. It reads the
sentences quality.py wrote with the project's CoNLL reader (a JSON file of
{"train": [[words, tags], ...], "dev": [...]}, tags in IOB2), so that both
sides see the same words and tags, and fine-tunes as HuggingFace's
run_ner.py example does: BertTokenizerFast on the words
(is_split_into_words), each word's tag on its first piece and -100
elsewhere, sentences cut at --max_seq_length pieces, the mean cross-entropy
over the labelled pieces. Optimizer and schedule are the original's
settings (weight decay 0.01 except LayerNorm and biases, epsilon 1e-6, 10%
linear warm-up then linear decay, global norm clipped at 1.0) in PyTorch's
AdamW (with Adam's bias correction); --optimizer=original takes the
original's update instead (no bias correction), to tell the two apart.
Batches are reshuffled each epoch (--keep_order: in the sentences'
order) and the last partial batch is kept (HuggingFace Trainer's
defaults). Writes the dev tags predicted (a word
cut off by truncation gets "O") as JSON to --output for quality.py to
score with the project's seqeval scorer.

  .venv-hf/bin/python benchmarks/peers/hf_ner.py --sentences=S.json
      --model_dir=HF_FOLDER --output=PRED.json [--seed=1]
"""

import argparse
import json
import math
import os
import random
import time

import numpy as np
import torch
import transformers


def encode(tokenizer, sentences, label_index, max_seq_length):
  """Tokenized sentences with labels on first pieces.

  Returns:
    list of dicts (input_ids, token_type_ids, attention_mask, labels) and,
    per sentence, each word's first-piece position (None where cut off).
  """
  encoded = tokenizer([words for words, _ in sentences],
                      is_split_into_words=True, truncation=True,
                      max_length=max_seq_length)
  features, positions = [], []
  for i, (_, tags) in enumerate(sentences):
    word_ids = encoded.word_ids(i)
    labels, first = [], [None] * len(tags)
    previous = None
    for position, word in enumerate(word_ids):
      if word is not None and word != previous:
        labels.append(label_index[tags[word]])
        first[word] = position
      else:
        labels.append(-100)
      previous = word
    features.append({key: encoded[key][i] for key in
                     ("input_ids", "token_type_ids", "attention_mask")})
    features[-1]["labels"] = labels
    positions.append(first)
  return features, positions


def collate(features):
  """Pads a list of features to the longest: a dict of LongTensors."""
  length = max(len(f["input_ids"]) for f in features)
  batch = {}
  for key, pad in (("input_ids", 0), ("token_type_ids", 0),
                   ("attention_mask", 0), ("labels", -100)):
    batch[key] = torch.tensor([f[key] + [pad] * (length - len(f[key]))
                               for f in features])
  return batch


class OriginalAdamWeightDecay(torch.optim.Optimizer):
  """The original's AdamWeightDecayOptimizer: Adam without bias correction,
  decoupled weight decay added to the update before the learning rate."""

  def __init__(self, groups, lr, betas=(0.9, 0.999), eps=1e-6):
    super().__init__(groups, dict(lr=lr, betas=betas, eps=eps,
                                  weight_decay=0.0))

  @torch.no_grad()
  def step(self):
    for group in self.param_groups:
      beta1, beta2 = group["betas"]
      for p in group["params"]:
        if p.grad is None:
          continue
        state = self.state[p]
        if not state:
          state["m"] = torch.zeros_like(p)
          state["v"] = torch.zeros_like(p)
        m, v = state["m"], state["v"]
        m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
        v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
        update = m / (v.sqrt() + group["eps"])
        if group["weight_decay"]:
          update.add_(p, alpha=group["weight_decay"])
        p.add_(update, alpha=-group["lr"])


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--sentences", required=True)
  parser.add_argument("--model_dir", required=True)
  parser.add_argument("--output", required=True)
  parser.add_argument("--labels", default="O,B-PER,I-PER,B-ORG,I-ORG,B-LOC,"
                      "I-LOC,B-MISC,I-MISC")
  parser.add_argument("--max_seq_length", type=int, default=128)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--learning_rate", type=float, default=5e-5)
  parser.add_argument("--epochs", type=float, default=2.0)
  parser.add_argument("--optimizer", choices=("adamw", "original"),
                      default="adamw")
  parser.add_argument("--seed", type=int, default=1)
  parser.add_argument(
      "--schedule", choices=("huggingface", "original"),
      default="original",
      help="huggingface: get_linear_schedule_with_warmup, which decays "
      "from the peak at the end of warm-up to 0; original: the original's "
      "polynomial decay over the whole run, cut by the warm-up (after "
      "warm-up its rate is (steps - warmup) / steps of HuggingFace's: 0.9x "
      "at 10% warm-up).")
  parser.add_argument("--clip_norm", type=float, default=1.0,
                      help="Global gradient norm clipped at (the original's "
                      "1.0).")
  parser.add_argument("--dropout", type=float, default=0.1,
                      help="Dropout rate everywhere (the original's 0.1).")
  parser.add_argument(
      "--classifier_init", choices=("normal", "truncated_normal"),
      default="normal",
      help="normal: HuggingFace's normal(0, initializer_range); "
      "truncated_normal: the original's (run_ner.py's) tf.truncated_normal "
      "with that stddev, cut at two of them (its spread is 0.88x).")
  parser.add_argument(
      "--classifier_weights",
      help="An .npz of weight [num_labels, H] and bias [num_labels] to "
      "start the classifier layer from (run_ner.py's output_weights and "
      "output_bias), for runs paired with ours.")
  parser.add_argument(
      "--keep_order", action="store_true",
      help="Batches in the order of the train sentences, not reshuffled "
      "(for runs paired with run_ner.py reading the same order).")
  parser.add_argument(
      "--deterministic", action="store_true",
      help="For a step-by-step comparison with run_ner.py run the same "
      "way: no dropout, the classifier layer starting at zero, batches in "
      "file order cycling through the sentences (the original's repeated "
      "stream, int(n / batch * epochs) steps).")
  args = parser.parse_args()
  started = time.perf_counter()
  transformers.set_seed(args.seed)
  torch.set_num_threads(os.cpu_count())

  labels = args.labels.split(",")
  label_index = {label: i for i, label in enumerate(labels)}
  with open(args.sentences, encoding="utf-8") as f:
    sentences = json.load(f)
  tokenizer = transformers.BertTokenizerFast.from_pretrained(args.model_dir)
  train, _ = encode(tokenizer, sentences["train"], label_index,
                    args.max_seq_length)
  dev, dev_positions = encode(tokenizer, sentences["dev"], label_index,
                              args.max_seq_length)

  dropout = 0.0 if args.deterministic else args.dropout
  model = transformers.BertForTokenClassification.from_pretrained(
      args.model_dir, num_labels=len(labels), hidden_dropout_prob=dropout,
      attention_probs_dropout_prob=dropout)
  if args.classifier_init == "truncated_normal":
    std = model.config.initializer_range
    with torch.no_grad():
      torch.nn.init.trunc_normal_(model.classifier.weight, std=std,
                                  a=-2 * std, b=2 * std)
  if args.classifier_weights:
    initial = dict(np.load(args.classifier_weights))
    for name, shape in (("weight", model.classifier.weight.shape),
                        ("bias", model.classifier.bias.shape)):
      if name not in initial or initial[name].shape != tuple(shape):
        parser.error("--classifier_weights=%s: needs %s of shape %s (has %s)"
                     % (args.classifier_weights, name, tuple(shape),
                        {k: v.shape for k, v in initial.items()}))
    with torch.no_grad():
      model.classifier.weight.copy_(torch.from_numpy(initial["weight"]))
      model.classifier.bias.copy_(torch.from_numpy(initial["bias"]))
  if args.deterministic:
    with torch.no_grad():
      model.classifier.weight.zero_()
      model.classifier.bias.zero_()
  decay = [p for n, p in model.named_parameters()
           if not ("LayerNorm" in n or n.endswith("bias"))]
  no_decay = [p for n, p in model.named_parameters()
              if "LayerNorm" in n or n.endswith("bias")]
  groups = [{"params": decay, "weight_decay": 0.01},
            {"params": no_decay, "weight_decay": 0.0}]
  if args.optimizer == "adamw":
    optimizer = torch.optim.AdamW(groups, lr=args.learning_rate, eps=1e-6)
  else:
    optimizer = OriginalAdamWeightDecay(groups, lr=args.learning_rate)
  batches_per_epoch = math.ceil(len(train) / args.batch_size)
  steps = int(batches_per_epoch * args.epochs)
  if args.deterministic:
    steps = int(len(train) / args.batch_size * args.epochs)
  warmup = int(0.1 * steps)
  if args.schedule == "huggingface":
    scheduler = transformers.get_linear_schedule_with_warmup(
        optimizer, warmup, steps)
  else:
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: step / warmup if step < warmup else
        1.0 - step / steps)

  model.train()
  step, losses = 0, []
  while step < steps:
    order = list(range(len(train)))
    if args.deterministic:
      order = [(step * args.batch_size + i) % len(train)
               for i in range(args.batch_size)]
    elif not args.keep_order:
      random.shuffle(order)
    for start in range(0, len(order), args.batch_size):
      if step == steps:
        break
      batch = collate([train[i] for i in order[start:start +
                                              args.batch_size]])
      loss = model(**batch).loss
      loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_norm)
      optimizer.step()
      scheduler.step()
      optimizer.zero_grad()
      losses.append(float(loss.detach()))
      step += 1

  model.eval()
  predicted = []
  with torch.inference_mode():
    for start in range(0, len(dev), 64):
      batch = collate(dev[start:start + 64])
      labels_out = model(**{k: v for k, v in batch.items() if k != "labels"}
                         ).logits.argmax(-1).numpy()
      for row, first in zip(labels_out, dev_positions[start:start + 64]):
        predicted.append([labels[int(row[p])] if p is not None else "O"
                          for p in first])
  with open(args.output, "w", encoding="utf-8") as f:
    json.dump({"predicted": predicted, "train_steps": steps,
               "losses": losses,
               "seconds_in_process": time.perf_counter() - started,
               "torch": torch.__version__,
               "transformers": transformers.__version__}, f)


if __name__ == "__main__":
  main()
